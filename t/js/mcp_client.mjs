#!/usr/bin/env node
// MCP client CLI for the integration tests, around the official SDK client
// (@modelcontextprotocol/sdk: Client + StreamableHTTPClientTransport).
//
//   node t/js/mcp_client.mjs --url URL [--key KEY] [--session SID]
//        [--protocol VERSION] [--timeout-ms N] op...
//
//   --url URL          the MCP endpoint (e.g. http://127.0.0.1:N/mcp)
//   --key KEY          adds "Authorization: Bearer KEY" to every request
//                      (requestInit.headers; the SDK merges them into each
//                      POST/GET/DELETE it makes)
//   --session SID      resume an existing session: the transport is created
//                      with sessionId SID. The SDK's Client.connect() then
//                      skips the initialize handshake entirely (no initialize
//                      request, no notifications/initialized, hence no
//                      standalone GET SSE stream either); every request
//                      carries Mcp-Session-Id: SID. serverInfo is then null
//                      (the client never learned it).
//   --protocol VERSION sets the transport's protocol version before connect,
//                      so requests carry MCP-Protocol-Version: VERSION until
//                      an initialize (if any) overrides it with the
//                      negotiated one.
//   --timeout-ms N     per-request timeout (default 10000)
//
// ops, run in order:
//   list               tools/list, following nextCursor through all pages
//   call:<tool>:<text> tools/call {name: tool, arguments: {text}}
//                      (text may contain ':'; everything after the second ':')
//   ping               ping
//
// Prints exactly one JSON line on stdout:
//   {"ok":true,"sessionId":..,"protocolVersion":..,"serverInfo":..,
//    "results":[{"op":"list","tools":[names]},
//               {"op":"call","tool":..,"isError":..,"text":<first text>},
//               {"op":"ping"}]}
//   or {"ok":false,"error":{"name","message","code"},"sessionId":..,
//       "protocolVersion":..,"serverInfo":..,"results":[done so far]}
// and exits 0 either way (bad usage: exit 2). The client is closed at the
// end with client.close() (no terminateSession: no DELETE is sent).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// stdout carries only our JSON line: anything the SDKs log goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);

function usage(msg) {
  process.stderr.write(`mcp_client: ${msg}\nusage: node mcp_client.mjs --url URL [--key KEY] [--session SID] [--protocol VERSION] [--timeout-ms N] op...\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const opts = { timeoutMs: 10000 };
const ops = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => { if (i + 1 >= args.length) usage(`${a} needs a value`); return args[++i]; };
  if (a === '--url') opts.url = val();
  else if (a === '--key') opts.key = val();
  else if (a === '--session') opts.session = val();
  else if (a === '--protocol') opts.protocol = val();
  else if (a === '--timeout-ms') opts.timeoutMs = Number(val());
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else ops.push(a);
}
if (!opts.url) usage('--url is required');
for (const op of ops) {
  if (op !== 'list' && op !== 'ping' && !/^call:[^:]+(:|$)/.test(op)) usage(`unknown op ${op}`);
}

const requestInit = {};
if (opts.key !== undefined) requestInit.headers = { Authorization: `Bearer ${opts.key}` };
const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
  requestInit,
  ...(opts.session !== undefined ? { sessionId: opts.session } : {}),
});
if (opts.protocol !== undefined) transport.setProtocolVersion(opts.protocol);
const client = new Client({ name: 'gw-test-mcp-client', version: '1.0.0' });
// The SDK reports transport errors (e.g. a refused standalone GET stream)
// through onerror as well as by rejecting the request; requests' own
// rejections are what we report, so keep onerror quiet.
client.onerror = () => {};

const reqOpts = { timeout: opts.timeoutMs };
const results = [];
const out = { ok: true };

function info() {
  return {
    sessionId: transport.sessionId ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion() ?? null,
  };
}

try {
  await client.connect(transport, reqOpts);
  for (const op of ops) {
    if (op === 'list') {
      const tools = [];
      let cursor;
      do {
        const r = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
        for (const t of r.tools) tools.push(t.name);
        cursor = r.nextCursor;
      } while (cursor);
      results.push({ op: 'list', tools });
    } else if (op === 'ping') {
      await client.ping(reqOpts);
      results.push({ op: 'ping' });
    } else {
      const rest = op.slice('call:'.length);
      const sep = rest.indexOf(':');
      const tool = sep < 0 ? rest : rest.slice(0, sep);
      const text = sep < 0 ? '' : rest.slice(sep + 1);
      const r = await client.callTool({ name: tool, arguments: { text } }, undefined, reqOpts);
      const first = (r.content ?? []).find((c) => c.type === 'text');
      results.push({ op: 'call', tool, isError: r.isError ?? false, text: first ? first.text : null });
    }
  }
  Object.assign(out, info(), { results });
} catch (e) {
  out.ok = false;
  out.error = { name: e?.name ?? 'Error', message: e?.message ?? String(e), code: e?.code ?? null };
  Object.assign(out, info(), { results });
}

try { await client.close(); } catch { /* closing is best effort */ }
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
