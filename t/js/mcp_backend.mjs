#!/usr/bin/env node
// MCP tool server for the integration tests, built with the official SDK
// (@modelcontextprotocol/sdk: McpServer + StreamableHTTPServerTransport on
// plain node:http, no express).
//
// Lifecycle (same conventions as t/mock/provider.mjs and Gw::Mock): listens
// on 127.0.0.1, port 0 (or $MOCK_PORT), prints {"port":N} as its first and
// only stdout line. It exits when its stdin reaches EOF (the Perl harness
// holds the other end of that pipe), when its parent goes away, on
// SIGTERM/SIGINT, or after $MOCK_MAX_LIFETIME_S seconds (default 1800).
// MOCK_IGNORE_STDIN=1 disables the stdin watch (for running it by hand).
//
// Environment:
//   MCP_NAME   server name (serverInfo.name; default "backend")
//   MCP_MODE   "stateless" (default): a fresh McpServer + transport
//                (sessionIdGenerator undefined) per POST; GET and DELETE
//                answer 405 (the SDK's "Method not allowed." JSON-RPC body).
//              "session": sessionIdGenerator randomUUID, one transport per
//                session kept in a map by id. A non-initialize request
//                without Mcp-Session-Id: 400 {"jsonrpc":"2.0","error":
//                {"code":-32000,"message":"Bad Request: Mcp-Session-Id header
//                is required"},"id":null}; with an unknown id: 404 {...
//                {"code":-32001,"message":"Session not found"}...} (the SDK
//                transport's own texts). DELETE with the id closes the
//                session and answers 200. GET with the id opens the SDK's
//                standalone SSE stream.
//   MCP_JSON   "1": enableJsonResponse (application/json replies);
//              otherwise replies are SSE (text/event-stream), the SDK default.
//   MCP_TOOLS  comma-separated tool names (default "echo"). Each takes
//              {text?: string} and returns content
//              [{type:"text", text:`${MCP_NAME}:${tool}:${text ?? ""}`}].
//   MCP_PATH   the MCP endpoint path (default "/mcp"). Other paths: 404 JSON,
//              except GET on any path ending in "/sse": 200 text/event-stream
//              "event: endpoint\ndata: /messages?sessionId=legacy\n\n", then
//              the response ends (a legacy SSE server's first event).
//   MCP_FAULT  unset: normal.
//              "hang": read the request, never answer (socket left open).
//              "500": every request on MCP_PATH -> 500 {"error":"boom"}.
//              "bad": every JSON-RPC request on MCP_PATH -> 200
//                application/json {"jsonrpc":"2.0","id":<its id>} (neither
//                result nor error); notifications -> 202, no body.
//              "fail-once": the first tools/list -> 503 {"error":"unavailable"},
//                later ones normal.
//              "big-pages": not an SDK server: tools/list answers (JSON)
//                page k (cursor "p<k>", the first without one) with one
//                tool "<MCP_NAME>_t<k>" whose description is MCP_PAGE_BYTES
//                (default 1048576) bytes of "x", and nextCursor "p<k+1>"
//                while k + 1 < MCP_PAGES (default 4); other requests ->
//                JSON-RPC error -32601; notifications -> 202.
//
// The SDK server transport answers 406 to a POST whose Accept lacks either
// application/json or text/event-stream (GET: lacks text/event-stream), and
// 415 to a POST whose Content-Type is not application/json.
//
// Control API (never recorded):
//   GET    /__mock/requests  -> JSON array of recorded requests
//   DELETE /__mock/requests  -> forget them
//   POST   /__mock/reset     -> forget everything (requests, sessions, the
//                               fail-once state)
//   GET    /__mock/sessions  -> JSON array of the live session ids
// Recorded request: {id, method, path, query, headers (lowercased names),
//   body (raw string), json (parsed body or null), rpc_method (JSON-RPC
//   "method" of the body, or null; a batch: the first one's), session (the
//   mcp-session-id request header or null), status (the status answered,
//   filled when the response is sent; null while none), completed, aborted}.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { URL } from 'node:url';

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

import { sendJson, serve } from './mock_server.mjs';

// stdout carries only our JSON line: anything the SDKs log goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);

const NAME = process.env.MCP_NAME || 'backend';
const MODE = process.env.MCP_MODE || 'stateless';
const JSON_REPLIES = process.env.MCP_JSON === '1';
const TOOLS = (process.env.MCP_TOOLS || 'echo').split(',').map((s) => s.trim()).filter(Boolean);
const MCP_PATH = process.env.MCP_PATH || '/mcp';
const FAULT = process.env.MCP_FAULT || '';
const PAGES = Number(process.env.MCP_PAGES || 4);
const PAGE_BYTES = Number(process.env.MCP_PAGE_BYTES || 1048576);

if (MODE !== 'stateless' && MODE !== 'session') {
  process.stderr.write(`mcp_backend: MCP_MODE must be "stateless" or "session", not "${MODE}"\n`);
  process.exit(2);
}
if (!['', 'hang', '500', 'bad', 'fail-once', 'big-pages'].includes(FAULT)) {
  process.stderr.write(`mcp_backend: unknown MCP_FAULT "${FAULT}"\n`);
  process.exit(2);
}

let requests = [];          // recorded non-control requests
let reqSeq = 0;
let failOnceDone = false;   // MCP_FAULT=fail-once: the 503 was given
const sessions = new Map(); // session mode: id -> {transport, server}

// ---------------------------------------------------------------- helpers

// The SDK transport's error body (createJsonErrorResponse).
const rpcError = (code, message) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

function rpcMethodOf(json) {
  const m = Array.isArray(json) ? json[0] : json;
  return m && typeof m === 'object' && typeof m.method === 'string' ? m.method : null;
}

const messagesOf = (json) => (Array.isArray(json) ? json : [json]);

// MCP_PROMPTS: prompt names (each answers one user message
// `${MCP_NAME}:${prompt}`); MCP_RESOURCES: resource names, served at
// test://${MCP_NAME}/${resource} with text `${MCP_NAME}:${resource}`;
// MCP_TEMPLATE=1: a template test://${MCP_NAME}/item/{id} read as
// `${MCP_NAME}:item:${id}`. None by default (no prompts or resources
// capability: those methods answer "method not found").
const listEnv = (v) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const PROMPTS = listEnv(process.env.MCP_PROMPTS);
const RESOURCES = listEnv(process.env.MCP_RESOURCES);
const TEMPLATE = process.env.MCP_TEMPLATE === '1';

// A fresh McpServer with the configured tools, prompts and resources.
function makeServer() {
  const server = new McpServer({ name: NAME, version: '1.0.0' });
  for (const prompt of PROMPTS) {
    server.registerPrompt(prompt, { description: `${NAME} prompt ${prompt}` }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: `${NAME}:${prompt}` } }],
    }));
  }
  for (const res of RESOURCES) {
    const uri = `test://${NAME}/${res}`;
    server.registerResource(res, uri, { mimeType: 'text/plain' }, async () => ({
      contents: [{ uri, mimeType: 'text/plain', text: `${NAME}:${res}` }],
    }));
  }
  if (TEMPLATE) {
    server.registerResource('item', new ResourceTemplate(`test://${NAME}/item/{id}`, { list: undefined }),
      { mimeType: 'text/plain' }, async (uri, { id }) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: `${NAME}:item:${id}` }],
      }));
  }
  for (const tool of TOOLS) {
    server.registerTool(tool, {
      description: `${NAME} test tool ${tool}: echoes its text`,
      inputSchema: { text: z.string().optional() },
    }, async ({ text }) => ({ content: [{ type: 'text', text: `${NAME}:${tool}:${text ?? ''}` }] }));
  }
  return server;
}

const transportOptions = (extra) => ({ enableJsonResponse: JSON_REPLIES, ...extra });

// ------------------------------------------------------------ MCP handling

async function handleStateless(req, res, parsed) {
  if (req.method !== 'POST') {
    return sendJson(res, 405, rpcError(-32000, 'Method not allowed.'), { allow: 'POST' });
  }
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport(transportOptions({ sessionIdGenerator: undefined }));
  res.on('close', () => { transport.close().catch(() => {}); server.close().catch(() => {}); });
  await server.connect(transport);
  await transport.handleRequest(req, res, parsed);
}

async function handleSession(req, res, parsed) {
  const sid = req.headers['mcp-session-id'];
  if (sid !== undefined) {
    const s = sessions.get(sid);
    if (!s) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
    return s.transport.handleRequest(req, res, parsed);
  }
  if (req.method === 'POST' && parsed !== undefined && messagesOf(parsed).some((m) => isInitializeRequest(m))) {
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport(transportOptions({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions.set(id, { transport, server }); },
      onsessionclosed: (id) => { sessions.delete(id); },
    }));
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return transport.handleRequest(req, res, parsed);
  }
  return sendJson(res, 400, rpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'));
}

// MCP_FAULT=big-pages: one page of a large paginated tools/list.
function bigPage(req, res, rec) {
  if (req.method !== 'POST') return sendJson(res, 405, rpcError(-32000, 'Method not allowed.'));
  const m = rec.json;
  if (!m || typeof m !== 'object' || Array.isArray(m) || m.id === undefined) { res.writeHead(202); return res.end(); }
  if (m.method !== 'tools/list') {
    return sendJson(res, 200, { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
  const cursor = m.params && typeof m.params.cursor === 'string' ? m.params.cursor : '';
  const k = cursor.startsWith('p') ? Number(cursor.slice(1)) : 0;
  const result = { tools: [{ name: `${NAME}_t${k}`, description: 'x'.repeat(PAGE_BYTES), inputSchema: { type: 'object' } }] };
  if (k + 1 < PAGES) result.nextCursor = `p${k + 1}`;
  return sendJson(res, 200, { jsonrpc: '2.0', id: m.id, result });
}

async function handleMcp(req, res, rec) {
  if (FAULT === 'hang') return; // never answer; the socket stays open
  if (FAULT === '500') return sendJson(res, 500, { error: 'boom' });
  if (FAULT === 'bad') {
    if (req.method !== 'POST') return sendJson(res, 405, rpcError(-32000, 'Method not allowed.'));
    const reqs = rec.json === null ? [] : messagesOf(rec.json).filter((m) => m && typeof m === 'object' && m.id !== undefined && typeof m.method === 'string');
    if (!reqs.length) { res.writeHead(202); return res.end(); }
    return sendJson(res, 200, { jsonrpc: '2.0', id: reqs[0].id });
  }
  if (FAULT === 'big-pages') return bigPage(req, res, rec);
  if (FAULT === 'fail-once' && !failOnceDone && rec.json !== null
      && messagesOf(rec.json).some((m) => m && m.method === 'tools/list')) {
    failOnceDone = true;
    return sendJson(res, 503, { error: 'unavailable' });
  }
  if (req.method === 'POST' && rec.body.length && rec.json === null) {
    return sendJson(res, 400, rpcError(-32700, 'Parse error: Invalid JSON'));
  }
  const parsed = rec.json === null ? undefined : rec.json;
  return MODE === 'session' ? handleSession(req, res, parsed) : handleStateless(req, res, parsed);
}

// ------------------------------------------------------------- control API

async function control(req, res, path) {
  if (path === '/__mock/requests' && req.method === 'GET') return sendJson(res, 200, requests);
  if (path === '/__mock/requests' && req.method === 'DELETE') { requests = []; return sendJson(res, 200, { cleared: true }); }
  if (path === '/__mock/sessions' && req.method === 'GET') return sendJson(res, 200, [...sessions.keys()]);
  if (path === '/__mock/reset' && req.method === 'POST') {
    requests = []; reqSeq = 0; failOnceDone = false;
    const all = [...sessions.values()];
    sessions.clear();
    await Promise.all(all.map((s) => s.transport.close().catch(() => {})));
    return sendJson(res, 200, { reset: true });
  }
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
    if (path.startsWith('/__mock/')) {
      control(req, res, path).catch((e) => { if (!res.headersSent) sendJson(res, 500, { error: e.message }); });
      return;
    }
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
      session: req.headers['mcp-session-id'] ?? null,
      status: null,
      completed: false,
      aborted: false,
    };
    requests.push(rec);
    res.on('finish', () => { rec.status = res.statusCode; rec.completed = true; });
    res.on('close', () => {
      if (!rec.completed) { rec.aborted = true; if (res.headersSent) rec.status = res.statusCode; }
    });

    let p;
    if (path === MCP_PATH) {
      p = handleMcp(req, res, rec);
    } else if (path.endsWith('/sse') && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end('event: endpoint\ndata: /messages?sessionId=legacy\n\n');
    } else {
      sendJson(res, 404, { error: `no such path ${path}` });
    }
    Promise.resolve(p).catch((e) => {
      process.stderr.write(`mcp_backend: error answering ${req.method} ${path}: ${e.stack}\n`);
      if (!res.headersSent) sendJson(res, 500, { error: `mcp_backend failure: ${e.message}` });
      else res.destroy();
    });
  });
});

serve(httpServer, 'mcp_backend');
