#!/usr/bin/env node
// A2A client CLI for the integration tests, around the official SDK client
// (@a2a-js/sdk 1.3.0: ClientFactory + DefaultAgentCardResolver +
// JsonRpcTransportFactory, the v0.3 compatibility layer enabled).
//
//   node t/js/a2a_client.mjs --card CARD_URL [--key KEY] [--timeout-ms N] op...
//
//   --card CARD_URL  the agent card's full URL (e.g.
//                    http://127.0.0.1:N/.well-known/agent-card.json). The
//                    client fetches it (the SDK's resolver sends
//                    A2A-Version: 1.0), then talks JSON-RPC to the URL the
//                    card names: a v0.3 card (top-level "url", no
//                    "supportedInterfaces") -> its "url" with v0.3 methods
//                    (message/send, message/stream); a 1.0 card -> the
//                    JSONRPC entry of "supportedInterfaces" (protocolVersion
//                    1.0 preferred) with 1.0 methods (SendMessage,
//                    SendStreamingMessage).
//   --key KEY        adds "Authorization: Bearer KEY" to every HTTP request
//                    the client makes (card fetch included): a fetch wrapper
//                    given to the resolver and the transport.
//   --timeout-ms N   per-op timeout (default 10000)
//
// ops, run in order:
//   card             GET the card again (raw JSON) -> {"op":"card","url":
//                    <its top-level url or null>,"name":..,"interfaces":[urls
//                    of additionalInterfaces / supportedInterfaces]}
//   send:<text>      message/send (SendMessage) with one user text part ->
//                    {"op":"send","kind":"message"|"task","text":<first text
//                    part of the reply (a task: of its status message or
//                    artifacts)>}
//   stream:<text>    message/stream (SendStreamingMessage) ->
//                    {"op":"stream","events":[<kind>...],"states":[<task
//                    state per task/statusUpdate event>...],"text":<the last
//                    text seen>}; kinds are the SDK's: task, statusUpdate,
//                    artifactUpdate, message
//
// Prints exactly one JSON line on stdout:
//   {"ok":true,"cardUrl":<the JSON-RPC URL the client uses>,
//    "protocolVersion":<"0.3" or "1.0", the transport's>,"results":[...]}
//   or {"ok":false,"error":{"name","message","code"},"cardUrl":..,
//       "protocolVersion":..,"results":[done so far]}
// and exits 0 either way (bad usage: exit 2).

import { randomUUID } from 'node:crypto';

import { Role, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

// stdout carries only our JSON line: anything the SDKs log goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);

function usage(msg) {
  process.stderr.write(`a2a_client: ${msg}\nusage: node a2a_client.mjs --card CARD_URL [--key KEY] [--timeout-ms N] op...\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const opts = { timeoutMs: 10000 };
const ops = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => { if (i + 1 >= args.length) usage(`${a} needs a value`); return args[++i]; };
  if (a === '--card') opts.card = val();
  else if (a === '--key') opts.key = val();
  else if (a === '--timeout-ms') opts.timeoutMs = Number(val());
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else ops.push(a);
}
if (!opts.card) usage('--card is required');
for (const op of ops) {
  if (op !== 'card' && !op.startsWith('send:') && !op.startsWith('stream:')) usage(`unknown op ${op}`);
}

// Every HTTP request the SDK makes goes through this.
function authFetch(input, init = {}) {
  if (opts.key === undefined) return fetch(input, init);
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set('Authorization', `Bearer ${opts.key}`);
  return fetch(input, { ...init, headers });
}

const legacyCompat = { enabled: true };
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch, legacyCompat })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch, legacyCompat }),
});

const userMessage = (text) => ({
  messageId: randomUUID(),
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const sendParams = (text) => ({ tenant: '', message: userMessage(text), configuration: undefined, metadata: undefined });

const textOfParts = (parts) => {
  const p = (parts ?? []).find((x) => x?.content?.$case === 'text');
  return p ? p.content.value : null;
};
const textOfMessage = (m) => (m ? textOfParts(m.parts) : null);
function textOfTask(t) {
  let text = textOfMessage(t?.status?.message);
  for (const a of t?.artifacts ?? []) text = text ?? textOfParts(a.parts);
  return text;
}
const isMessage = (r) => r && typeof r === 'object' && 'messageId' in r && 'role' in r;

const withTimeout = () => ({ signal: AbortSignal.timeout(opts.timeoutMs) });

const results = [];
const out = { ok: true, cardUrl: null, protocolVersion: null };
let client;
try {
  client = await factory.createFromUrl(opts.card, '');
  out.cardUrl = client.transport?.endpoint ?? null;
  out.protocolVersion = client.protocolVersion ?? null;
  for (const op of ops) {
    if (op === 'card') {
      const r = await authFetch(opts.card, withTimeout());
      if (!r.ok) throw Object.assign(new Error(`card fetch: HTTP ${r.status}`), { code: r.status });
      const raw = await r.json();
      const interfaces = [...(raw.additionalInterfaces ?? []), ...(raw.supportedInterfaces ?? [])].map((x) => x.url);
      results.push({ op: 'card', url: raw.url ?? null, name: raw.name ?? null, interfaces });
    } else if (op.startsWith('send:')) {
      const r = await client.sendMessage(sendParams(op.slice('send:'.length)), withTimeout());
      results.push(isMessage(r)
        ? { op: 'send', kind: 'message', text: textOfMessage(r) }
        : { op: 'send', kind: 'task', state: taskStateToJSON(r?.status?.state), text: textOfTask(r) });
    } else {
      const events = [];
      const states = [];
      let text = null;
      for await (const ev of client.sendMessageStream(sendParams(op.slice('stream:'.length)), withTimeout())) {
        const kind = ev?.payload?.$case ?? 'unknown';
        const v = ev?.payload?.value;
        events.push(kind);
        if (kind === 'task') { states.push(taskStateToJSON(v.status?.state)); text = textOfTask(v) ?? text; }
        else if (kind === 'statusUpdate') { states.push(taskStateToJSON(v.status?.state)); text = textOfMessage(v.status?.message) ?? text; }
        else if (kind === 'artifactUpdate') text = textOfParts(v.artifact?.parts) ?? text;
        else if (kind === 'message') text = textOfMessage(v) ?? text;
      }
      results.push({ op: 'stream', events, states, text });
    }
  }
} catch (e) {
  out.ok = false;
  out.error = { name: e?.name ?? 'Error', message: e?.message ?? String(e), code: e?.code ?? null };
}
out.results = results;
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
