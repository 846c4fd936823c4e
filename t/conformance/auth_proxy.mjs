#!/usr/bin/env node
// Tiny loopback forwarding proxy that adds HTTP headers (e.g. Authorization)
// to every request.  The MCP conformance suite (0.1.16) has no option to send
// custom headers in `conformance server` mode, so to test a server behind a
// gateway that requires `Authorization: Bearer <key>`, point the suite at this
// proxy instead:
//
//   node auth_proxy.mjs --upstream http://127.0.0.1:8080 -H 'Authorization: Bearer KEY'
//   -> first stdout line {"port":N}; then use http://127.0.0.1:N/<same path>
//
// Options / env:
//   --upstream URL        (or AUTH_PROXY_UPSTREAM) scheme://host:port of the target;
//                         a path in URL is ignored: request paths pass through
//   -H, --header 'N: v'   header to set on each forwarded request (repeatable)
//   --bearer KEY          shorthand for -H 'Authorization: Bearer KEY'
//                         (env AUTH_BEARER does the same)
//   --rewrite-host        send Host = upstream host:port.  Default: the client's
//                         Host header is forwarded unchanged, so the suite's
//                         dns-rebinding-protection scenario tests the upstream's
//                         Host/Origin validation rather than the proxy's.
//   PORT / HOST           listen address (default 127.0.0.1:0)
// Streams bodies both ways (SSE-safe), no timeouts; a client disconnect aborts
// the upstream request.  Exits on stdin EOF (unless MOCK_IGNORE_STDIN=1), on
// SIGTERM/SIGINT, or after 1800 s.

import http from 'node:http';
import https from 'node:https';

const args = process.argv.slice(2);
let upstream = process.env.AUTH_PROXY_UPSTREAM;
let rewriteHost = false;
const extra = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--upstream') upstream = args[++i];
  else if (a === '-H' || a === '--header') extra.push(args[++i]);
  else if (a === '--bearer') extra.push(`Authorization: Bearer ${args[++i]}`);
  else if (a === '--rewrite-host') rewriteHost = true;
  else { process.stderr.write(`auth_proxy: unknown argument ${a}\n`); process.exit(2); }
}
if (process.env.AUTH_BEARER) extra.push(`Authorization: Bearer ${process.env.AUTH_BEARER}`);
if (!upstream) { process.stderr.write('auth_proxy: --upstream URL is required\n'); process.exit(2); }
const up = new URL(upstream);
const client = up.protocol === 'https:' ? https : http;

const setHeaders = {};
for (const h of extra) {
  const i = h.indexOf(':');
  if (i <= 0) { process.stderr.write(`auth_proxy: bad header ${JSON.stringify(h)}\n`); process.exit(2); }
  setHeaders[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
}

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding',
  'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate']);
const strip = (headers) => {
  const out = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP.has(k.toLowerCase())) out[k] = v;
  return out;
};

const server = http.createServer((req, res) => {
  const headers = { ...strip(req.headers), ...setHeaders };
  if (rewriteHost || !headers.host) headers.host = up.host;
  const preq = client.request({
    protocol: up.protocol, hostname: up.hostname, port: up.port || undefined,
    method: req.method, path: req.url, headers,
  }, (pres) => {
    res.writeHead(pres.statusCode ?? 502, pres.statusMessage, strip(pres.headers));
    res.flushHeaders();
    pres.pipe(res);
    pres.on('error', () => res.destroy());
  });
  preq.on('error', (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: `auth_proxy: upstream error: ${err.message}` }, id: null }));
    } else res.destroy();
  });
  res.on('close', () => { if (!res.writableFinished) preq.destroy(); });
  req.pipe(preq);
});
server.requestTimeout = 0;
server.headersTimeout = 0;
server.keepAliveTimeout = 5000;

let stopping = false;
function shutdown(why) {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`[auth_proxy] exiting: ${why}\n`);
  server.close();
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 50);
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
setTimeout(() => shutdown('max lifetime'), 1800 * 1000).unref();
if (process.env.MOCK_IGNORE_STDIN !== '1') {
  process.stdin.on('end', () => shutdown('stdin EOF'));
  process.stdin.on('error', () => shutdown('stdin error'));
  process.stdin.resume();
}
server.listen(Number(process.env.PORT || 0), process.env.HOST || '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
  process.stderr.write(`[auth_proxy] 127.0.0.1:${server.address().port} -> ${up.origin} adding [${Object.keys(setHeaders).join(', ')}]\n`);
});
