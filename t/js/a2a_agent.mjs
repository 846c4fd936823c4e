#!/usr/bin/env node
// A2A echo agent for the integration tests, built with the official SDK
// (@a2a-js/sdk 1.3.0 server: DefaultRequestHandler + InMemoryTaskStore +
// the express jsonRpcHandler/agentCardHandler, behind a plain node:http
// server that records requests).
//
// @a2a-js/sdk 1.3.0 implements A2A protocol 1.0 (JSON-RPC methods
// "SendMessage", "SendStreamingMessage", ...; cards list
// "supportedInterfaces" and have no top-level "url"). The JSON-RPC endpoint
// here also has the SDK's v0.3 compatibility layer on (legacyCompat), so it
// answers both v0.3 ("message/send", "message/stream", ...) and 1.0 methods.
// Which one a request gets is chosen by the SDK from its A2A-Version header:
// absent or "0.3" -> v0.3, "1.0" -> 1.0.
//
// Lifecycle (same conventions as t/mock/provider.mjs and Gw::Mock): listens
// on 127.0.0.1, port 0 (or $MOCK_PORT), prints {"port":N} as its first and
// only stdout line. It exits when its stdin reaches EOF, when its parent
// goes away, on SIGTERM/SIGINT, or after $MOCK_MAX_LIFETIME_S seconds
// (default 1800). MOCK_IGNORE_STDIN=1 disables the stdin watch.
//
// Endpoints:
//   GET  /.well-known/agent-card.json   the agent card (see A2A_CARD)
//   POST /a2a/jsonrpc                   JSON-RPC (v0.3 and 1.0 methods)
//   anything else                       404 JSON
//
// Environment:
//   A2A_NAME   the card's name (default "echo-agent")
//   A2A_CARD   the card's shape:
//              "v03" (default): a plain v0.3 card, the same whatever the
//                request headers: {name, description, version,
//                protocolVersion:"0.3.0", url:"http://127.0.0.1:N/a2a/jsonrpc",
//                preferredTransport:"JSONRPC", additionalInterfaces:[{url
//                (same), transport:"JSONRPC"}], capabilities:{streaming:true,
//                pushNotifications:false}, defaultInputModes,
//                defaultOutputModes, skills:[one "echo" skill]}
//              "sdk": the SDK's agentCardHandler with legacyCompat: a v0.3
//                card (url, preferredTransport, protocolVersion "0.3", plus
//                the 1.0 "supportedInterfaces" embedded) unless the request
//                has A2A-Version: 1.0, then the 1.0 card
//              "v1": the SDK's agentCardHandler without legacyCompat: the
//                1.0 card only (supportedInterfaces, no top-level url)
//   A2A_FAULT  unset: normal. "500": every POST to /a2a/jsonrpc -> HTTP 500
//              {"error":"boom"}. "hang": such POSTs are read and never
//              answered.
//
// Behaviour (the executor): the text T of the user message (its text parts
// joined) is echoed as "echo: T".
//   message/send (SendMessage): a Message, role agent, one text part
//     "echo: T" (no task).
//   message/stream (SendStreamingMessage): SSE events: a Task (state
//     submitted), a status-update (working), then a status-update
//     (completed, final:true on the v0.3 wire) whose status.message is the
//     agent Message with the text part "echo: T".
//
// Control API (never recorded):
//   GET    /__mock/requests  -> JSON array of recorded requests
//   DELETE /__mock/requests  -> forget them
//   POST   /__mock/reset     -> forget everything
// Recorded request: {id, method, path, query, headers (lowercased names),
//   body (raw string), json (parsed body or null), rpc_method (JSON-RPC
//   "method" of the body or null), status (filled when the response is sent;
//   null while none), completed, aborted}.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { URL } from 'node:url';

import express from 'express';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

import { sendJson, serve } from './mock_server.mjs';

// stdout carries only our JSON line: anything the SDKs log goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);

const NAME = process.env.A2A_NAME || 'echo-agent';
const CARD_MODE = process.env.A2A_CARD || 'v03';
const FAULT = process.env.A2A_FAULT || '';
const CARD_PATH = '/.well-known/agent-card.json';
const RPC_PATH = '/a2a/jsonrpc';

if (!['v03', 'sdk', 'v1'].includes(CARD_MODE)) {
  process.stderr.write(`a2a_agent: A2A_CARD must be v03, sdk or v1, not "${CARD_MODE}"\n`);
  process.exit(2);
}
if (!['', '500', 'hang'].includes(FAULT)) {
  process.stderr.write(`a2a_agent: unknown A2A_FAULT "${FAULT}"\n`);
  process.exit(2);
}

let requests = [];
let reqSeq = 0;
let app = null; // the express app, built once the port is known

// ---------------------------------------------------------------- helpers

function rpcMethodOf(json) {
  const m = Array.isArray(json) ? json[0] : json;
  return m && typeof m === 'object' && typeof m.method === 'string' ? m.method : null;
}

const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });

const agentMessage = (text, contextId, taskId = '') => ({
  messageId: randomUUID(),
  contextId,
  taskId,
  role: Role.ROLE_AGENT,
  parts: [textPart(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

const status = (state, message = undefined) => ({ state, message, timestamp: new Date().toISOString() });

// ------------------------------------------------------------ the agent

// ServerCallContexts of the streaming calls: the executor answers those with
// a task lifecycle and the others with a bare Message.
const streamingCalls = new WeakSet();

class EchoRequestHandler extends DefaultRequestHandler {
  sendMessageStream(params, context) {
    streamingCalls.add(context);
    return super.sendMessageStream(params, context);
  }
}

const echoExecutor = {
  async execute(ctx, bus) {
    const parts = ctx.userMessage?.parts ?? [];
    const text = parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');
    const reply = `echo: ${text}`;
    if (!streamingCalls.has(ctx.context)) {
      bus.publish(AgentEvent.message(agentMessage(reply, ctx.contextId)));
      bus.finished();
      return;
    }
    const { taskId, contextId } = ctx;
    bus.publish(AgentEvent.task({
      id: taskId,
      contextId,
      status: status(TaskState.TASK_STATE_SUBMITTED),
      artifacts: [],
      history: ctx.userMessage ? [ctx.userMessage] : [],
      metadata: undefined,
    }));
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }));
    bus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: status(TaskState.TASK_STATE_COMPLETED, agentMessage(reply, contextId, taskId)),
      metadata: undefined,
    }));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: status(TaskState.TASK_STATE_CANCELED), metadata: undefined }));
    bus.finished();
  },
};

const SKILL = {
  id: 'echo',
  name: 'Echo',
  description: 'Answers "echo: " followed by the text it was sent.',
  tags: ['echo', 'test'],
  examples: ['hello'],
  inputModes: ['text/plain'],
  outputModes: ['text/plain'],
};
const DESCRIPTION = 'Echo agent for the gateway integration tests';

// The SDK's (1.0) card: the one DefaultRequestHandler works from. Its v0.3
// JSONRPC interface is what lets legacyCompat accept v0.3 requests.
function coreCard(rpcUrl) {
  const iface = (protocolVersion) => ({ url: rpcUrl, protocolBinding: 'JSONRPC', tenant: '', protocolVersion });
  return {
    name: NAME,
    description: DESCRIPTION,
    supportedInterfaces: [iface('0.3'), iface('1.0')],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: undefined },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ ...SKILL, securityRequirements: [] }],
    signatures: [],
  };
}

// A plain v0.3 card (A2A_CARD=v03).
function v03Card(rpcUrl) {
  return {
    name: NAME,
    description: DESCRIPTION,
    version: '1.0.0',
    protocolVersion: '0.3.0',
    url: rpcUrl,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: rpcUrl, transport: 'JSONRPC' }],
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [SKILL],
  };
}

function buildApp(port) {
  const rpcUrl = `http://127.0.0.1:${port}${RPC_PATH}`;
  const card = coreCard(rpcUrl);
  const handler = new EchoRequestHandler(card, new InMemoryTaskStore(), echoExecutor);
  const a = express();
  if (CARD_MODE === 'v03') {
    const body = v03Card(rpcUrl);
    a.get(CARD_PATH, (_req, res) => res.json(body));
  } else {
    a.use(CARD_PATH, agentCardHandler({
      agentCardProvider: handler,
      cache: { maxAge: 0 },
      ...(CARD_MODE === 'sdk' ? { legacyCompat: { enabled: true } } : {}),
    }));
  }
  a.use(RPC_PATH, jsonRpcHandler({
    requestHandler: handler,
    userBuilder: UserBuilder.noAuthentication,
    legacyCompat: { enabled: true },
  }));
  a.use((req, res) => res.status(404).json({ error: `no such path ${req.path}` }));
  return a;
}

// ------------------------------------------------------------- control API

function control(req, res, path) {
  if (path === '/__mock/requests' && req.method === 'GET') return sendJson(res, 200, requests);
  if (path === '/__mock/requests' && req.method === 'DELETE') { requests = []; return sendJson(res, 200, { cleared: true }); }
  if (path === '/__mock/reset' && req.method === 'POST') { requests = []; reqSeq = 0; return sendJson(res, 200, { reset: true }); }
  return sendJson(res, 404, { error: `unknown control request ${req.method} ${path}` });
}

// ---------------------------------------------------------------- server

const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://mock');
  const path = url.pathname;
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    if (path.startsWith('/__mock/')) return control(req, res, path);
    const body = raw.toString('utf8');
    let json = null;
    if (raw.length) { try { json = JSON.parse(body); } catch { /* not JSON */ } }
    const rec = {
      id: ++reqSeq,
      method: req.method,
      path,
      query: url.search.startsWith('?') ? url.search.slice(1) : '',
      headers: { ...req.headers },
      body,
      json,
      rpc_method: rpcMethodOf(json),
      status: null,
      completed: false,
      aborted: false,
    };
    requests.push(rec);
    res.on('finish', () => { rec.status = res.statusCode; rec.completed = true; });
    res.on('close', () => {
      if (!rec.completed) { rec.aborted = true; if (res.headersSent) rec.status = res.statusCode; }
    });

    if (path === RPC_PATH && req.method === 'POST') {
      if (FAULT === 'hang') return;
      if (FAULT === '500') return sendJson(res, 500, { error: 'boom' });
      if (raw.length && json === null) {
        // What the SDK's own body parser answers to a body that is not JSON.
        return sendJson(res, 200, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Invalid JSON payload.' } });
      }
    }
    // The body has been read: express.json() sees a finished request and
    // keeps this req.body.
    req.body = json === null ? undefined : json;
    app(req, res);
  });
});

serve(httpServer, 'a2a_agent', (port) => { app = buildApp(port); });
