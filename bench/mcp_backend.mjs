#!/usr/bin/env node
// A minimal MCP tool server for bench/mcp-latency (plain Node, no SDK, so its
// own cost is small and steady): POST answers a JSON-RPC request after
// DELAY_MS (tools/list: TOOLS tools named <NAME>_tool_<i>; anything else: an
// empty result), echoing the request's id. Prints {"port":N}; exits on SIGTERM
// (bench/mcp-latency stops it) or after an hour.
import http from 'node:http';

const delay = Number(process.env.DELAY_MS ?? 0);
const name = process.env.NAME ?? 'b';
const tools = Array.from({ length: Number(process.env.TOOLS ?? 5) }, (_, i) => ({
  name: `${name}_tool_${i}`,
  description: `tool ${i} of ${name}`,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
}));

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let msg = {};
    try { msg = JSON.parse(Buffer.concat(chunks).toString()); } catch { /* answered below */ }
    const result = msg.method === 'tools/list' ? { tools } : {};
    const body = JSON.stringify({ jsonrpc: '2.0', id: msg.id ?? null, result });
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    }, delay);
  });
});
server.keepAliveTimeout = 300000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
process.on('SIGTERM', () => process.exit(0));
setTimeout(() => process.exit(0), 3600 * 1000).unref();
