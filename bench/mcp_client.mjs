#!/usr/bin/env node
// bench/mcp-latency's client: alternating rounds of sequential JSON-RPC
// tools/list POSTs (one keep-alive connection per target) to each URL given,
// and the latency percentiles of each (ms). Usage:
//   node mcp_client.mjs ROUNDS REQUESTS_PER_ROUND label=url[,key] ...
import http from 'node:http';

const [rounds, perRound, ...targets] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });

function post(url, key) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
                 'content-length': Buffer.byteLength(body), ...(key ? { authorization: `Bearer ${key}` } : {}) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 200 || !text.includes('"tools"')) reject(new Error(`${url}: ${res.statusCode} ${text.slice(0, 200)}`));
        else resolve({ ms, tools: JSON.parse(text).result.tools.length });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const runs = targets.map((t) => {
  const [label, rest] = t.split('=');
  const [url, key] = rest.split(',');
  return { label, url, key, ms: [], tools: 0 };
});
for (const r of runs) for (let i = 0; i < 20; i++) r.tools = (await post(r.url, r.key)).tools;   // warm-up
for (let round = 0; round < Number(rounds); round++) {
  for (const r of runs) {
    for (let i = 0; i < Number(perRound); i++) r.ms.push((await post(r.url, r.key)).ms);
  }
}
const pct = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];
const out = runs.map((r) => {
  const a = [...r.ms].sort((x, y) => x - y);
  return { label: r.label, n: a.length, tools: r.tools, p50: pct(a, 0.5), p90: pct(a, 0.9), p99: pct(a, 0.99),
           mean: a.reduce((s, x) => s + x, 0) / a.length };
});
console.log(JSON.stringify(out));
agent.destroy();
