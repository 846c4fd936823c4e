#!/usr/bin/env node
// MCP fixture server for the official conformance suite
// (@modelcontextprotocol/conformance 0.1.16, `conformance server --url ...`).
//
// Built with the official TypeScript SDK (McpServer + StreamableHTTPServerTransport)
// over plain node:http.  It provides every tool, resource and prompt that the
// suite's server scenarios call (modelled on the suite's own
// examples/servers/typescript/everything-server.ts at tag v0.1.16).
//
// Endpoint: /mcp   (anything else: 404)
//
// Modes (FIXTURE_MODE env, or --session / --stateless argument):
//   stateless (default)  a fresh McpServer + transport per POST,
//                        sessionIdGenerator undefined; GET and DELETE answer 405.
//   session              Mcp-Session-Id sessions, in-memory event store
//                        (resumability), standalone GET SSE stream, DELETE.
//
// Conventions:
//   listens on 127.0.0.1, port $PORT or 0 (ephemeral); HOST overrides the address
//   first stdout line is exactly {"port":N}; everything else goes to stderr
//   exits on stdin EOF (unless MOCK_IGNORE_STDIN=1), on SIGTERM/SIGINT,
//   or after FIXTURE_MAX_LIFETIME_S seconds (default 1800)
//
// Other knobs:
//   FIXTURE_HOST_CHECK=0            disable Host/Origin (DNS-rebinding) validation
//   FIXTURE_CLIENT_REQUEST_TIMEOUT_MS  timeout of server->client requests
//                                   (sampling/elicitation); default 60000 in
//                                   session mode, 5000 in stateless mode
//   FIXTURE_RETRY_MS                SSE retry hint in session mode (default 1000)
//   FIXTURE_VERBOSE=1               log each HTTP request to stderr
//   FIXTURE_REQUIRE_BEARER=KEY      answer 401 unless `Authorization: Bearer KEY`
//                                   (to exercise run.sh -H / auth_proxy.mjs)

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListToolsRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const argv = process.argv.slice(2);
const MODE = argv.includes('--session')
  ? 'session'
  : argv.includes('--stateless')
    ? 'stateless'
    : (process.env.FIXTURE_MODE || 'stateless');
if (MODE !== 'session' && MODE !== 'stateless') {
  process.stderr.write(`fixture: unknown mode ${MODE}\n`);
  process.exit(2);
}
const SESSION = MODE === 'session';
const HOST_CHECK = process.env.FIXTURE_HOST_CHECK !== '0';
const VERBOSE = process.env.FIXTURE_VERBOSE === '1';
const CLIENT_REQ_TIMEOUT_MS = Number(
  process.env.FIXTURE_CLIENT_REQUEST_TIMEOUT_MS || (SESSION ? 60000 : 5000));
const RETRY_MS = Number(process.env.FIXTURE_RETRY_MS || 1000);
const MAX_LIFETIME_S = Number(process.env.FIXTURE_MAX_LIFETIME_S || 1800);
const MAX_BODY = 4 * 1024 * 1024;
const REQUIRE_BEARER = process.env.FIXTURE_REQUIRE_BEARER || '';

const log = (...a) => process.stderr.write(`[fixture ${MODE}] ${a.join(' ')}\n`);

// 1x1 PNG and a minimal WAV (same payloads as the suite's everything-server)
const PNG_B64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV_B64 = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

// SEP-1613: raw JSON Schema 2020-12 advertised for json_schema_2020_12_tool
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
  },
  additionalProperties: false,
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const subscriptions = new Set();

// ---------------------------------------------------------------- MCP server
// ctx: { transport } (stateless: the per-POST transport; session: filled in later)
function createMcpServer(ctx) {
  const mcp = new McpServer(
    { name: 'mcp-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );

  // Server->client request (sampling / elicitation) on the tools/call stream.
  // On failure the tool returns isError with EMPTY content so that the suite's
  // "Tool did not return content" check fails instead of passing hollowly
  // (a stateless server cannot receive the client's answer: it arrives in a
  // new POST, at a new server instance).
  async function askClient(extra, request, schema) {
    return extra.sendRequest(request, schema, { timeout: CLIENT_REQ_TIMEOUT_MS });
  }
  const clientRequestFailed = (what, err) => {
    const msg = `${what} round trip failed (${SESSION ? 'session' : 'stateless'} mode): ${err?.message ?? err}`;
    log(msg);
    return { content: [], isError: true, _meta: { 'fixture/error': msg } };
  };

  // ===== tools
  mcp.registerTool('test_simple_text',
    { description: 'Tests simple text content response' },
    async () => ({
      content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
    }));

  mcp.registerTool('test_image_content',
    { description: 'Tests image content response' },
    async () => ({ content: [{ type: 'image', data: PNG_B64, mimeType: 'image/png' }] }));

  mcp.registerTool('test_audio_content',
    { description: 'Tests audio content response' },
    async () => ({ content: [{ type: 'audio', data: WAV_B64, mimeType: 'audio/wav' }] }));

  mcp.registerTool('test_embedded_resource',
    { description: 'Tests embedded resource content response' },
    async () => ({
      content: [{
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      }],
    }));

  mcp.registerTool('test_multiple_content_types',
    { description: 'Tests response with multiple content types (text, image, resource)' },
    async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG_B64, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }));

  mcp.registerTool('test_tool_with_logging',
    { description: 'Tests tool that emits log messages during execution', inputSchema: {} },
    async (_args, extra) => {
      const note = (data) => extra.sendNotification({
        method: 'notifications/message',
        params: { level: 'info', logger: 'conformance-fixture', data },
      });
      await note('Tool execution started');
      await sleep(50);
      await note('Tool processing data');
      await sleep(50);
      await note('Tool execution completed');
      return { content: [{ type: 'text', text: 'Tool with logging executed successfully' }] };
    });

  mcp.registerTool('test_tool_with_progress',
    { description: 'Tests tool that reports progress notifications', inputSchema: {} },
    async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (const p of [0, 50, 100]) {
        if (p > 0) await sleep(50);
        if (token !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: p, total: 100, message: `Completed step ${p} of 100` },
          });
        }
      }
      return { content: [{ type: 'text', text: `Progress tool completed (token ${String(token)})` }] };
    });

  mcp.registerTool('test_error_handling',
    { description: 'Tests error response handling' },
    async () => {
      throw new Error('This tool intentionally returns an error for testing');
    });

  // SEP-1699: closes the POST SSE stream mid-call; the result is then
  // delivered on the client's GET reconnection (Last-Event-ID).  Only
  // meaningful in session mode (needs the event store); in stateless mode the
  // stream is left open and the result arrives on it.
  mcp.registerTool('test_reconnection',
    {
      description: 'Tests SSE stream disconnection and client reconnection (SEP-1699)',
      inputSchema: {},
    },
    async (_args, extra) => {
      if (SESSION && ctx.transport && extra.requestId !== undefined) {
        ctx.transport.closeSSEStream(extra.requestId);
      }
      await sleep(100);
      return {
        content: [{ type: 'text', text: 'Reconnection test completed successfully.' }],
      };
    });

  mcp.registerTool('test_sampling',
    {
      description: 'Tests server-initiated sampling (LLM completion request)',
      inputSchema: { prompt: z.string().describe('The prompt to send to the LLM') },
    },
    async ({ prompt }, extra) => {
      try {
        const r = await askClient(extra, {
          method: 'sampling/createMessage',
          params: {
            messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
            maxTokens: 100,
          },
        }, CreateMessageResultSchema);
        const text = r?.content?.text ?? JSON.stringify(r?.content);
        return { content: [{ type: 'text', text: `LLM response: ${text}` }] };
      } catch (err) {
        return clientRequestFailed('sampling', err);
      }
    });

  mcp.registerTool('test_elicitation',
    {
      description: 'Tests server-initiated elicitation (user input request)',
      inputSchema: { message: z.string().describe('The message to show the user') },
    },
    async ({ message }, extra) => {
      try {
        const r = await askClient(extra, {
          method: 'elicitation/create',
          params: {
            message,
            requestedSchema: {
              type: 'object',
              properties: {
                username: { type: 'string', description: "User's response" },
                email: { type: 'string', description: "User's email address" },
              },
              required: ['username', 'email'],
            },
          },
        }, ElicitResultSchema);
        return {
          content: [{
            type: 'text',
            text: `User response: action=${r.action}, content=${JSON.stringify(r.content || {})}`,
          }],
        };
      } catch (err) {
        return clientRequestFailed('elicitation', err);
      }
    });

  mcp.registerTool('test_elicitation_sep1034_defaults',
    { description: 'Tests elicitation with default values per SEP-1034', inputSchema: {} },
    async (_args, extra) => {
      try {
        const r = await askClient(extra, {
          method: 'elicitation/create',
          params: {
            message: 'Please review and update the form fields with defaults',
            requestedSchema: {
              type: 'object',
              properties: {
                name: { type: 'string', description: 'User name', default: 'John Doe' },
                age: { type: 'integer', description: 'User age', default: 30 },
                score: { type: 'number', description: 'User score', default: 95.5 },
                status: {
                  type: 'string', description: 'User status',
                  enum: ['active', 'inactive', 'pending'], default: 'active',
                },
                verified: { type: 'boolean', description: 'Verification status', default: true },
              },
              required: [],
            },
          },
        }, ElicitResultSchema);
        return {
          content: [{
            type: 'text',
            text: `Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content || {})}`,
          }],
        };
      } catch (err) {
        return clientRequestFailed('elicitation', err);
      }
    });

  mcp.registerTool('test_elicitation_sep1330_enums',
    { description: 'Tests elicitation with enum schema improvements per SEP-1330', inputSchema: {} },
    async (_args, extra) => {
      try {
        const r = await askClient(extra, {
          method: 'elicitation/create',
          params: {
            message: 'Please select options from the enum fields',
            requestedSchema: {
              type: 'object',
              properties: {
                untitledSingle: {
                  type: 'string', description: 'Select one option',
                  enum: ['option1', 'option2', 'option3'],
                },
                titledSingle: {
                  type: 'string', description: 'Select one option with titles',
                  oneOf: [
                    { const: 'value1', title: 'First Option' },
                    { const: 'value2', title: 'Second Option' },
                    { const: 'value3', title: 'Third Option' },
                  ],
                },
                legacyEnum: {
                  type: 'string', description: 'Select one option (legacy)',
                  enum: ['opt1', 'opt2', 'opt3'],
                  enumNames: ['Option One', 'Option Two', 'Option Three'],
                },
                untitledMulti: {
                  type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3,
                  items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
                },
                titledMulti: {
                  type: 'array', description: 'Select multiple options with titles', minItems: 1, maxItems: 3,
                  items: {
                    anyOf: [
                      { const: 'value1', title: 'First Choice' },
                      { const: 'value2', title: 'Second Choice' },
                      { const: 'value3', title: 'Third Choice' },
                    ],
                  },
                },
              },
              required: [],
            },
          },
        }, ElicitResultSchema);
        return {
          content: [{
            type: 'text',
            text: `Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content || {})}`,
          }],
        };
      } catch (err) {
        return clientRequestFailed('elicitation', err);
      }
    });

  // SEP-1613: validated with a zod schema for tools/call; tools/list (wrapped
  // below) advertises the raw JSON Schema 2020-12 document instead.
  mcp.registerTool('json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)',
      inputSchema: {
        name: z.string().optional(),
        address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional(),
      },
    },
    async (args) => ({
      content: [{ type: 'text', text: `JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}` }],
    }));

  // ===== resources
  mcp.registerResource('static-text', 'test://static-text',
    { title: 'Static Text Resource', description: 'A static text resource for testing', mimeType: 'text/plain' },
    async () => ({
      contents: [{
        uri: 'test://static-text', mimeType: 'text/plain',
        text: 'This is the content of the static text resource.',
      }],
    }));

  mcp.registerResource('static-binary', 'test://static-binary',
    { title: 'Static Binary Resource', description: 'A static binary resource (image) for testing', mimeType: 'image/png' },
    async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG_B64 }] }));

  mcp.registerResource('template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', description: 'A resource template with parameter substitution', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [{
        uri: uri.toString(), mimeType: 'application/json',
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
      }],
    }));

  mcp.registerResource('watched-resource', 'test://watched-resource',
    { title: 'Watched Resource', description: 'A resource clients can subscribe to', mimeType: 'text/plain' },
    async () => ({
      contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }],
    }));

  mcp.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  mcp.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });

  // ===== prompts
  mcp.registerPrompt('test_simple_prompt',
    { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
    async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
    }));

  const COMPLETIONS = ['paris', 'park', 'party', 'test', 'testing'];
  mcp.registerPrompt('test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with required arguments',
      argsSchema: {
        // completable(): McpServer answers completion/complete for arg1
        arg1: completable(z.string().describe('First test argument'),
          (value) => COMPLETIONS.filter((c) => c.startsWith(value ?? ''))),
        arg2: z.string().describe('Second test argument'),
      },
    },
    async ({ arg1, arg2 }) => ({
      messages: [{
        role: 'user',
        content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
      }],
    }));

  mcp.registerPrompt('test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that includes an embedded resource',
      argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') },
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }));

  mcp.registerPrompt('test_prompt_with_image',
    { title: 'Prompt With Image', description: 'A prompt that includes image content' },
    async () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG_B64, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }));

  // ===== tools/list: keep McpServer's listing, but advertise the raw
  // JSON Schema 2020-12 for json_schema_2020_12_tool (the SDK's zod->JSON
  // Schema conversion drops $schema/$defs).
  const sdkListTools = mcp.server._requestHandlers?.get('tools/list');
  if (sdkListTools) {
    mcp.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
      const res = await sdkListTools(request, extra);
      for (const t of res.tools ?? []) {
        if (t.name === 'json_schema_2020_12_tool') t.inputSchema = JSON_SCHEMA_2020_12;
      }
      return res;
    });
  } else {
    log('warning: could not wrap tools/list (SDK internals changed); json-schema-2020-12 will fail');
  }

  return mcp;
}

// ---------------------------------------------------------------- HTTP layer
function sendJson(res, status, obj, headers = {}) {
  if (res.headersSent) return;
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body);
}
const rpcError = (code, message) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

const LOCAL_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
function hostnameOf(hostHeader) {
  try { return new URL(`http://${hostHeader}`).hostname.toLowerCase(); } catch { return null; }
}
// DNS-rebinding protection: Host (and Origin, when present) must be loopback.
function hostAllowed(req) {
  if (!HOST_CHECK) return true;
  const h = hostnameOf(req.headers.host ?? '');
  if (!h || !LOCAL_HOSTNAMES.has(h)) return false;
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let oh;
    try { oh = new URL(origin).hostname.toLowerCase(); } catch { return false; }
    if (!LOCAL_HOSTNAMES.has(oh)) return false;
  }
  return true;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) { reject(Object.assign(new Error('body too large'), { status: 413 })); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const isInitialize = (body) =>
  (Array.isArray(body) ? body : [body]).some((m) => m && m.method === 'initialize');

// session mode state
const sessions = new Map(); // sessionId -> { transport, mcp }
const events = new Map();   // eventId -> { streamId, message }
let eventSeq = 0;
const eventStore = {
  async storeEvent(streamId, message) {
    const eventId = `${streamId}::${String(++eventSeq).padStart(12, '0')}`;
    events.set(eventId, { streamId, message });
    return eventId;
  },
  async getStreamIdForEventId(eventId) {
    return events.get(eventId)?.streamId ?? eventId.split('::')[0];
  },
  async replayEventsAfter(lastEventId, { send }) {
    const streamId = events.get(lastEventId)?.streamId ?? lastEventId.split('::')[0];
    const later = [...events.entries()]
      .filter(([id, e]) => e.streamId === streamId && id > lastEventId)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [id, e] of later) {
      if (e.message && Object.keys(e.message).length > 0) await send(id, e.message);
    }
    return streamId;
  },
};

async function handleStateless(req, res, body) {
  const ctx = {};
  const mcp = createMcpServer(ctx);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  ctx.transport = transport;
  res.on('close', () => {
    transport.close().catch(() => {});
    mcp.close().catch(() => {});
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, body);
}

async function handleSession(req, res, body) {
  const sid = req.headers['mcp-session-id'];
  if (sid !== undefined) {
    const s = sessions.get(sid);
    if (!s) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
    return s.transport.handleRequest(req, res, body);
  }
  if (req.method !== 'POST' || !isInitialize(body)) {
    return sendJson(res, 400, rpcError(-32000, 'Bad Request: missing Mcp-Session-Id (only initialize may omit it)'));
  }
  const ctx = {};
  const mcp = createMcpServer(ctx);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore,
    retryInterval: RETRY_MS,
    onsessioninitialized: (id) => { sessions.set(id, { transport, mcp }); },
    onsessionclosed: (id) => { sessions.delete(id); },
  });
  ctx.transport = transport;
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
    mcp.close().catch(() => {});
  };
  await mcp.connect(transport);
  await transport.handleRequest(req, res, body);
}

const httpServer = http.createServer(async (req, res) => {
  if (VERBOSE) log(req.method, req.url, `host=${req.headers.host}`, `sid=${req.headers['mcp-session-id'] ?? '-'}`);
  try {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path !== '/mcp') return sendJson(res, 404, rpcError(-32000, 'Not found'));
    if (REQUIRE_BEARER && req.headers.authorization !== `Bearer ${REQUIRE_BEARER}`) {
      return sendJson(res, 401, rpcError(-32000, 'Unauthorized'), { 'www-authenticate': 'Bearer' });
    }
    if (!hostAllowed(req)) {
      return sendJson(res, 403, rpcError(-32000, 'Forbidden: Host/Origin not allowed'));
    }
    if (req.method === 'POST') {
      let body;
      try {
        const text = await readBody(req);
        body = JSON.parse(text);
      } catch (err) {
        if (err.status === 413) return sendJson(res, 413, rpcError(-32600, 'Request body too large'));
        return sendJson(res, 400, rpcError(-32700, 'Parse error'));
      }
      return SESSION ? await handleSession(req, res, body) : await handleStateless(req, res, body);
    }
    if ((req.method === 'GET' || req.method === 'DELETE') && SESSION) {
      return await handleSession(req, res, undefined);
    }
    return sendJson(res, 405, rpcError(-32000, 'Method not allowed'), { allow: SESSION ? 'GET, POST, DELETE' : 'POST' });
  } catch (err) {
    log('error handling request:', err?.stack ?? err);
    sendJson(res, 500, rpcError(-32603, 'Internal server error'));
  }
});

// ---------------------------------------------------------------- lifecycle
let stopping = false;
function shutdown(why, code = 0) {
  if (stopping) return;
  stopping = true;
  log(`exiting: ${why}`);
  for (const { transport } of sessions.values()) transport.close().catch(() => {});
  httpServer.close();
  httpServer.closeAllConnections?.();
  setTimeout(() => process.exit(code), 50);
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
setTimeout(() => shutdown(`max lifetime ${MAX_LIFETIME_S}s`), MAX_LIFETIME_S * 1000).unref();
if (process.env.MOCK_IGNORE_STDIN !== '1') {
  process.stdin.on('end', () => shutdown('stdin EOF'));
  process.stdin.on('error', () => shutdown('stdin error'));
  process.stdin.resume();
}

const listenHost = process.env.HOST || '127.0.0.1';
const listenPort = Number(process.env.PORT || 0);
httpServer.listen(listenPort, listenHost, () => {
  process.stdout.write(JSON.stringify({ port: httpServer.address().port }) + '\n');
  log(`listening on http://${listenHost}:${httpServer.address().port}/mcp`);
});
