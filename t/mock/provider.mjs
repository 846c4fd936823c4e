#!/usr/bin/env node
// Mock LLM provider for the integration tests (plain Node, no dependencies).
//
// Listens on 127.0.0.1, port 0 (or $MOCK_PORT), and prints {"port":N} as its
// first stdout line; nothing else is printed on stdout. It exits when its
// stdin reaches EOF (the Perl harness holds the other end of that pipe), when
// its parent goes away, on SIGTERM/SIGINT, or after $MOCK_MAX_LIFETIME_S
// seconds (default 1800) as a last-resort bound. MOCK_IGNORE_STDIN=1 disables
// the stdin watch (for running it by hand in the background). That life is
// serve() of t/js/mock_server.mjs, which the SDK-built test servers share
// (a plain module: no npm package is needed).
//
// It speaks real-shaped wire formats:
//   OpenAI     POST /v1/chat/completions (JSON or SSE), POST /v1/embeddings,
//              GET /v1/models, GET /v1/models/{id}
//              POST /v1/responses (JSON or SSE with the typed events), and for
//              the responses it made: GET and DELETE /v1/responses/{id},
//              POST /v1/responses/{id}/cancel
//   Anthropic  POST /v1/messages (JSON or SSE with the real event names)
//   Media      POST /v1/images/generations, POST /v1/audio/speech (audio/mpeg
//              bytes: speechBytes(input), sent in pieces), POST /v1/audio/transcriptions
//              (multipart/form-data: exactly one model part required)
//   Gemini     POST /v1beta/models/{model}:generateContent
//              POST /v1beta/models/{model}:streamGenerateContent[?alt=sse]
//              POST /v1beta/models/{model}:embedContent, :batchEmbedContents
//
// Control API (never recorded):
//   GET    /__mock/requests  -> JSON array of recorded requests
//   DELETE /__mock/requests  -> forget them
//   POST   /__mock/script    -> append scripted responses (JSON array or one object)
//   GET    /__mock/script    -> the scripted responses not consumed yet
//   DELETE /__mock/script    -> drop them
//   GET    /__mock/stats     -> {connections, open_connections, requests}
//   POST   /__mock/reset     -> forget requests, scripts and counters
// See docs/testing.md for the script format.

import crypto from 'node:crypto';
import http from 'node:http';
import { URL } from 'node:url';

import { sendJson, serve } from '../js/mock_server.mjs';

const DEFAULT_STREAM_DELAY_MS = Number(process.env.MOCK_STREAM_DELAY_MS ?? 20);

let requests = [];      // recorded non-control requests
let script = [];        // scripted responses, consumed FIFO
let reqSeq = 0;
let connSeq = 0;
let openConns = 0;

const nowS = () => Date.now() / 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const created = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------- helpers

const openaiError = (message, type = 'invalid_request_error', code = null, param = null) =>
  ({ error: { message, type, param, code } });
const anthropicError = (message, type = 'invalid_request_error') =>
  ({ type: 'error', error: { type, message } });
const geminiError = (code, message, status) => ({ error: { code, message, status } });

const LINE_ENDS = { lf: '\n', cr: '\r', crlf: '\r\n' };

// One SSE event -> wire text. An entry is a string (its lines, separated by
// "\n", are re-joined with the chosen line end), an object {event, data, id}
// (data: string or JSON value) or {raw: "..."} (written verbatim, no
// terminator added: for splitting events across writes).
function sseEventText(entry, eol) {
  if (entry !== null && typeof entry === 'object') {
    if (typeof entry.raw === 'string') return entry.raw;
    const lines = [];
    if (entry.id !== undefined) lines.push(`id: ${entry.id}`);
    if (entry.event !== undefined) lines.push(`event: ${entry.event}`);
    if (entry.data !== undefined) {
      const d = typeof entry.data === 'string' ? entry.data : JSON.stringify(entry.data);
      for (const l of d.split('\n')) lines.push(`data: ${l}`);
    }
    return lines.join(eol) + eol + eol;
  }
  return String(entry).split('\n').join(eol) + eol + eol;
}

// Writes SSE events with a delay between them. Resolves false when the
// client went away before the end.
async function writeSse(res, events, { eol = '\n', delayMs = 0 } = {}) {
  for (let i = 0; i < events.length; i++) {
    if (i > 0 && delayMs > 0) await sleep(delayMs);
    if (res.destroyed || res.writableEnded) return false;
    res.write(sseEventText(events[i], eol));
  }
  return !res.destroyed;
}

function sseHead(res, status = 200, headers = {}) {
  res.writeHead(status, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    ...headers,
  });
  res.flushHeaders();
}

// ------------------------------------------------------- scripted replies

function modelOf(rec) {
  if (rec.json && typeof rec.json === 'object' && typeof rec.json.model === 'string') return rec.json.model;
  const m = /^\/v1beta\/models\/([^/:]+):/.exec(rec.path);
  return m ? decodeURIComponent(m[1]) : undefined;
}

function matches(entry, rec) {
  const m = entry.match;
  if (!m) return true;
  if (m.method !== undefined && m.method.toUpperCase() !== rec.method) return false;
  if (m.path !== undefined && m.path !== rec.path) return false;
  if (m.query !== undefined && m.query !== rec.query) return false;
  if (m.model !== undefined && m.model !== modelOf(rec)) return false;
  if (m.headers) {
    for (const [k, v] of Object.entries(m.headers)) {
      if (rec.headers[k.toLowerCase()] !== v) return false;
    }
  }
  return true;
}

function takeScripted(rec) {
  const i = script.findIndex((e) => matches(e, rec));
  if (i < 0) return undefined;
  const entry = script[i];
  if (entry.times !== undefined && entry.times > 1) entry.times -= 1;
  else script.splice(i, 1);
  return entry;
}

async function playScripted(entry, req, res) {
  if (entry.hang) return; // never answer; the socket stays open until the client closes it
  if (entry.wire !== undefined) return playWire(entry, res);
  const status = entry.status ?? 200;
  const headers = { ...(entry.headers ?? {}) };
  const hasHeader = (name) => Object.keys(headers).some((k) => k.toLowerCase() === name);

  if (Array.isArray(entry.sse)) {
    if (entry.header_delay_ms) await sleep(entry.header_delay_ms);
    if (res.destroyed) return;
    if (!hasHeader('content-type')) headers['content-type'] = 'text/event-stream';
    res.writeHead(status, headers);
    res.flushHeaders();
    const eol = LINE_ENDS[entry.line_end ?? 'lf'];
    if (eol === undefined) throw new Error(`bad line_end ${entry.line_end}`);
    if (entry.delay_ms && entry.sse.length) await sleep(entry.delay_ms);
    const ok = await writeSse(res, entry.sse, { eol, delayMs: entry.delay_ms ?? 0 });
    if (!ok) return;
    if (entry.truncate) {
      // Let the last write reach the wire, then cut the connection without
      // the terminating chunk.
      await sleep(10);
      res.socket?.destroy();
      return;
    }
    if (entry.stall) return; // events sent, response never finished
    res.end();
    return;
  }

  if (entry.delay_ms) await sleep(entry.delay_ms);
  if (res.destroyed) return;
  let body;
  if (entry.json !== undefined) {
    body = Buffer.from(JSON.stringify(entry.json));
    if (!hasHeader('content-type')) headers['content-type'] = 'application/json';
  } else {
    body = Buffer.from(entry.body ?? '', 'utf8');
  }
  if (!hasHeader('content-length') && !entry.chunked) headers['content-length'] = body.length;
  res.writeHead(status, headers);
  if (entry.truncate) {
    // Send half of the body, then cut the connection.
    res.write(body.subarray(0, Math.floor(body.length / 2)));
    await sleep(10);
    res.socket?.destroy();
    return;
  }
  res.end(body);
}

// {wire: "..." or ["...", ...]}: bytes written to the socket as they are
// (latin1, so any byte can be scripted), HTTP framing and all, delay_ms
// between the pieces; then the connection is closed unless keep_open is set.
async function playWire(entry, res) {
  const sock = res.socket;
  if (!sock) return;
  const parts = Array.isArray(entry.wire) ? entry.wire : [entry.wire];
  for (let i = 0; i < parts.length; i++) {
    if (i > 0 && entry.delay_ms) await sleep(entry.delay_ms);
    if (sock.destroyed) return;
    sock.write(Buffer.from(parts[i], 'latin1'));
  }
  if (entry.keep_open) return;
  await sleep(10);
  sock.end();
  setTimeout(() => sock.destroy(), 50);
}

// ------------------------------------------------------ default: OpenAI

function chatChunk(id, model, delta, finish, includeUsage) {
  const c = {
    id, object: 'chat.completion.chunk', created: created(), model,
    system_fingerprint: 'fp_mock',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  };
  if (includeUsage) c.usage = null;
  return c;
}

async function openaiChat(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || body.model === '')
    return sendJson(res, 400, openaiError('you must provide a model parameter'));
  if (!Array.isArray(body.messages))
    return sendJson(res, 400, openaiError("Missing required parameter: 'messages'.", 'invalid_request_error', 'missing_required_parameter', 'messages'));
  const model = body.model;
  const id = `chatcmpl-mock${rec.id}`;
  const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };
  const hdrs = { 'x-request-id': `req_mock_${rec.id}` };
  if (body.stream === true) {
    const inc = body.stream_options?.include_usage === true;
    const events = [
      chatChunk(id, model, { role: 'assistant', content: '', refusal: null }, null, inc),
      chatChunk(id, model, { content: 'Hello' }, null, inc),
      chatChunk(id, model, { content: ' world' }, 'stop', inc),
    ];
    if (inc) {
      events.push({ id, object: 'chat.completion.chunk', created: created(), model,
        system_fingerprint: 'fp_mock', choices: [], usage });
    }
    const wire = events.map((e) => `data: ${JSON.stringify(e)}`);
    wire.push('data: [DONE]');
    sseHead(res, 200, hdrs);
    if (await writeSse(res, wire, { delayMs: DEFAULT_STREAM_DELAY_MS })) res.end();
    return;
  }
  sendJson(res, 200, {
    id, object: 'chat.completion', created: created(), model,
    system_fingerprint: 'fp_mock',
    choices: [{
      index: 0,
      message: { role: 'assistant', content: 'Hello world', refusal: null },
      logprobs: null, finish_reason: 'stop',
    }],
    usage,
  }, hdrs);
}

function fakeEmbedding(i) {
  const v = [];
  for (let k = 0; k < 8; k++) v.push(Math.round(Math.sin(i * 8 + k + 1) * 1e6) / 1e6);
  return v;
}

function openaiEmbeddings(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || body.model === '')
    return sendJson(res, 400, openaiError('you must provide a model parameter'));
  let inputs = body.input;
  if (inputs === undefined)
    return sendJson(res, 400, openaiError("Missing required parameter: 'input'.", 'invalid_request_error', 'missing_required_parameter', 'input'));
  // A string, or an array of numbers (one tokenised input), is one item.
  if (!Array.isArray(inputs) || inputs.every((x) => typeof x === 'number')) inputs = [inputs];
  const b64 = body.encoding_format === 'base64';
  const data = inputs.map((_, i) => {
    const v = fakeEmbedding(i);
    const embedding = b64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
    return { object: 'embedding', index: i, embedding };
  });
  sendJson(res, 200, { object: 'list', data, model: body.model,
    usage: { prompt_tokens: 5, total_tokens: 5 } });
}

const MODELS = ['gpt-4o-mini', 'gpt-4o', 'text-embedding-3-small'];

function openaiModels(res) {
  sendJson(res, 200, { object: 'list',
    data: MODELS.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'mock' })) });
}

// --------------------------------------------- default: OpenAI Responses

const stored = new Map();   // responses made, by id (GET / DELETE / cancel)

async function openaiResponses(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || body.model === '')
    return sendJson(res, 400, openaiError('Missing required parameter: \'model\'.', 'invalid_request_error', 'missing_required_parameter', 'model'));
  const id = `resp_mock${rec.id}`;
  const msgId = `msg_mock${rec.id}`;
  const usage = { input_tokens: 11, input_tokens_details: { cached_tokens: 2 }, output_tokens: 7,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 18 };
  const base = { id, object: 'response', created_at: created(), status: 'in_progress', error: null,
    incomplete_details: null, instructions: body.instructions ?? null, model: body.model, output: [],
    parallel_tool_calls: true, previous_response_id: body.previous_response_id ?? null, store: body.store ?? true,
    temperature: 1, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], top_p: 1, usage: null };
  const part = (text) => ({ type: 'output_text', annotations: [], logprobs: [], text });
  const item = (status, text) => ({ id: msgId, type: 'message', status, role: 'assistant',
    content: text === null ? [] : [part(text)] });
  const done = { ...base, status: 'completed', output: [item('completed', 'Hello world')], usage };
  stored.set(id, done);
  const hdrs = { 'x-request-id': `req_mock_${rec.id}` };
  if (body.stream !== true) return sendJson(res, 200, done, hdrs);
  let seq = 0;
  const ev = (type, fields) => ({ event: type, data: { type, sequence_number: seq++, ...fields } });
  const events = [
    ev('response.created', { response: base }),
    ev('response.in_progress', { response: base }),
    ev('response.output_item.added', { output_index: 0, item: item('in_progress', null) }),
    ev('response.content_part.added', { item_id: msgId, output_index: 0, content_index: 0, part: part('') }),
    ev('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta: 'Hello', logprobs: [] }),
    ev('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta: ' world', logprobs: [] }),
    ev('response.output_text.done', { item_id: msgId, output_index: 0, content_index: 0, text: 'Hello world', logprobs: [] }),
    ev('response.content_part.done', { item_id: msgId, output_index: 0, content_index: 0, part: part('Hello world') }),
    ev('response.output_item.done', { output_index: 0, item: item('completed', 'Hello world') }),
    ev('response.completed', { response: done }),
  ];
  sseHead(res, 200, hdrs);
  if (await writeSse(res, events, { delayMs: DEFAULT_STREAM_DELAY_MS })) res.end();
}

function openaiStoredResponse(rec, res, id, action) {
  const r = stored.get(id);
  if (!r) return sendJson(res, 404, openaiError(`Response with id '${id}' not found.`, 'invalid_request_error', null, null));
  if (rec.method === 'DELETE' && !action) {
    stored.delete(id);
    return sendJson(res, 200, { id, object: 'response', deleted: true });
  }
  if (rec.method === 'POST' && action === 'cancel') return sendJson(res, 200, { ...r, status: 'cancelled' });
  if (rec.method === 'GET' && !action) return sendJson(res, 200, r);
  return sendJson(res, 405, openaiError('Method not allowed', 'invalid_request_error'));
}

// ---------------------------------------------------- default: Anthropic

async function anthropicMessages(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || body.model === '')
    return sendJson(res, 400, anthropicError('model: Field required'));
  if (typeof body.max_tokens !== 'number')
    return sendJson(res, 400, anthropicError('max_tokens: Field required'));
  if (!Array.isArray(body.messages))
    return sendJson(res, 400, anthropicError('messages: Field required'));
  const model = body.model;
  const id = `msg_mock${rec.id}`;
  const hdrs = { 'request-id': `req_mock_${rec.id}` };
  if (body.stream === true) {
    const ev = (event, data) => ({ event, data });
    const events = [
      ev('message_start', { type: 'message_start', message: {
        id, type: 'message', role: 'assistant', model, content: [],
        stop_reason: null, stop_sequence: null,
        usage: { input_tokens: 11, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } }),
      ev('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      ev('ping', { type: 'ping' }),
      ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } }),
      ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' world' } }),
      ev('content_block_stop', { type: 'content_block_stop', index: 0 }),
      ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: { output_tokens: 7 } }),
      ev('message_stop', { type: 'message_stop' }),
    ];
    sseHead(res, 200, hdrs);
    if (await writeSse(res, events, { delayMs: DEFAULT_STREAM_DELAY_MS })) res.end();
    return;
  }
  sendJson(res, 200, {
    id, type: 'message', role: 'assistant', model,
    content: [{ type: 'text', text: 'Hello world' }],
    stop_reason: 'end_turn', stop_sequence: null,
    usage: { input_tokens: 11, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 7 },
  }, hdrs);
}

// ------------------------------------------------------- default: Gemini

async function gemini(rec, res, model, action) {
  const body = rec.json;
  if (!Array.isArray(body.contents))
    return sendJson(res, 400, geminiError(400, '* GenerateContentRequest.contents: contents is not specified', 'INVALID_ARGUMENT'));
  const responseId = `mockresp${rec.id}`;
  const cand = (text, finish) => {
    const c = { content: { parts: [{ text }], role: 'model' }, index: 0 };
    if (finish) c.finishReason = finish;
    return c;
  };
  const fullUsage = { promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 21, thoughtsTokenCount: 3 };
  if (action === 'generateContent') {
    return sendJson(res, 200, { candidates: [cand('Hello world', 'STOP')], usageMetadata: fullUsage,
      modelVersion: model, responseId });
  }
  // streamGenerateContent: usageMetadata is cumulative on every chunk.
  const chunks = [
    { candidates: [cand('Hello')], usageMetadata: { promptTokenCount: 11, candidatesTokenCount: 1, totalTokenCount: 15, thoughtsTokenCount: 3 },
      modelVersion: model, responseId },
    { candidates: [cand(' world', 'STOP')], usageMetadata: fullUsage, modelVersion: model, responseId },
  ];
  if (rec.query.split('&').includes('alt=sse')) {
    sseHead(res, 200);
    const wire = chunks.map((c) => `data: ${JSON.stringify(c)}`);
    if (await writeSse(res, wire, { eol: '\r\n', delayMs: DEFAULT_STREAM_DELAY_MS })) res.end();
    return;
  }
  // Without alt=sse Gemini streams one JSON array.
  sendJson(res, 200, chunks);
}

// embedContent: {embedding: {values}}; batchEmbedContents: {embeddings: [{values}]}.
function geminiEmbed(rec, res, action) {
  const body = rec.json;
  if (action === 'embedContent') {
    if (!body.content || !Array.isArray(body.content.parts))
      return sendJson(res, 400, geminiError(400, '* EmbedContentRequest.content: contents is not specified', 'INVALID_ARGUMENT'));
    return sendJson(res, 200, { embedding: { values: fakeEmbedding(0) } });
  }
  if (!Array.isArray(body.requests))
    return sendJson(res, 400, geminiError(400, '* BatchEmbedContentsRequest.requests: requests is not specified', 'INVALID_ARGUMENT'));
  sendJson(res, 200, { embeddings: body.requests.map((_, i) => ({ values: fakeEmbedding(i) })) });
}

// ------------------------------------------------------------ media

// The speech bytes for an input: every byte value occurs, CR and LF too, so
// a relay that altered any byte shows. t/js/media.mjs computes the same.
function speechBytes(input) {
  const n = 3000 + 97 * String(input).length;
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + 3) & 255;
  return b;
}

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

// multipart/form-data parts of a raw body: [{name, filename, content_type, size, sha256, value}]
// (value: the text of a part without a filename, up to 1 KiB); undefined when unparseable.
function formParts(raw, contentType) {
  const m = /^multipart\/form-data;.*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? '');
  if (!m) return undefined;
  const delim = Buffer.from('\r\n--' + (m[1] ?? m[2]));
  let pos = raw.indexOf(delim.subarray(2));
  if (pos !== 0) return undefined;
  pos += delim.length - 2;
  const parts = [];
  for (let guard = 0; guard < 10000; guard++) {
    if (raw.subarray(pos, pos + 2).toString() === '--') return parts;
    if (raw.subarray(pos, pos + 2).toString() !== '\r\n') return undefined;
    pos += 2;
    const hend = raw.indexOf('\r\n\r\n', pos);
    if (hend < 0) return undefined;
    const headers = raw.subarray(pos, hend).toString('latin1');
    const next = raw.indexOf(delim, hend + 4);
    if (next < 0) return undefined;
    const content = raw.subarray(hend + 4, next);
    const name = /name="([^"]*)"/i.exec(headers)?.[1];
    const filename = /filename="([^"]*)"/i.exec(headers)?.[1];
    const ct = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1];
    parts.push({ name, filename, content_type: ct, size: content.length, sha256: sha256(content),
                 value: filename === undefined && content.length <= 1024 ? content.toString('utf8') : undefined });
    pos = next + delim.length;
  }
  return undefined;
}

function openaiImages(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || body.model === '')
    return sendJson(res, 400, openaiError('you must provide a model parameter', 'invalid_request_error', null, 'model'));
  if (typeof body.prompt !== 'string')
    return sendJson(res, 400, openaiError("Missing required parameter: 'prompt'.", 'invalid_request_error', 'missing_required_parameter', 'prompt'));
  const n = typeof body.n === 'number' ? body.n : 1;
  const data = [];
  for (let i = 0; i < n; i++) data.push({ b64_json: Buffer.from(`image ${i} of ${body.prompt}`).toString('base64') });
  sendJson(res, 200, { created: created(), data,
                       usage: { input_tokens: 12, output_tokens: 4160, total_tokens: 4172 } });
}

async function openaiSpeech(rec, res) {
  const body = rec.json;
  if (typeof body.model !== 'string' || typeof body.input !== 'string' || typeof body.voice !== 'string')
    return sendJson(res, 400, openaiError('model, input and voice are required', 'invalid_request_error'));
  const audio = speechBytes(body.input);
  res.writeHead(200, { 'content-type': 'audio/mpeg' });
  for (let i = 0; i < audio.length; i += 1000) {
    if (res.destroyed) return;
    res.write(audio.subarray(i, i + 1000));
    await sleep(5);
  }
  res.end();
}

function openaiTranscription(rec, res) {
  const parts = rec.parts;
  if (parts === undefined)
    return sendJson(res, 400, openaiError('Could not parse multipart form', 'invalid_request_error'));
  const models = parts.filter((p) => p.name === 'model');
  const file = parts.find((p) => p.name === 'file');
  if (models.length !== 1 || !file)
    return sendJson(res, 400, openaiError('exactly one model and a file are required', 'invalid_request_error'));
  const format = parts.find((p) => p.name === 'response_format')?.value ?? 'json';
  const text = `transcribed ${file.size} bytes with ${models[0].value}`;
  if (format === 'text') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    return res.end(text);
  }
  sendJson(res, 200, { text, usage: { type: 'tokens', input_tokens: 20, output_tokens: 8, total_tokens: 28 } });
}

// ------------------------------------------------------------ dispatcher

async function defaultReply(rec, res) {
  const { method, path } = rec;
  const isPost = method === 'POST';
  const rs = /^\/v1\/responses\/([^/]+)(?:\/(cancel))?$/.exec(path);   // cancel has no body
  if (rs) return openaiStoredResponse(rec, res, decodeURIComponent(rs[1]), rs[2]);
  if (isPost && rec.json === undefined && path !== '/v1/audio/transcriptions') {
    if (path.startsWith('/v1/messages'))
      return sendJson(res, 400, anthropicError('There was an error parsing the body of your request'));
    if (path.startsWith('/v1beta/'))
      return sendJson(res, 400, geminiError(400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT'));
    return sendJson(res, 400, openaiError(
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"));
  }
  if (isPost && path === '/v1/audio/transcriptions') return openaiTranscription(rec, res);
  if (isPost && path === '/v1/images/generations') return openaiImages(rec, res);
  if (isPost && path === '/v1/audio/speech') return openaiSpeech(rec, res);
  if (isPost && path === '/v1/chat/completions') return openaiChat(rec, res);
  if (isPost && path === '/v1/embeddings') return openaiEmbeddings(rec, res);
  if (isPost && path === '/v1/responses') return openaiResponses(rec, res);
  if (method === 'GET' && path === '/v1/models') return openaiModels(res);
  if (method === 'GET' && path.startsWith('/v1/models/')) {
    const id = decodeURIComponent(path.slice('/v1/models/'.length));
    if (!MODELS.includes(id))
      return sendJson(res, 404, openaiError(`The model '${id}' does not exist`, 'invalid_request_error', 'model_not_found', 'model'));
    return sendJson(res, 200, { id, object: 'model', created: 1700000000, owned_by: 'mock' });
  }
  if (isPost && path === '/v1/messages') return anthropicMessages(rec, res);
  const g = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path);
  if (isPost && g) return gemini(rec, res, decodeURIComponent(g[1]), g[2]);
  const ge = /^\/v1beta\/models\/([^/:]+):(embedContent|batchEmbedContents)$/.exec(path);
  if (isPost && ge) return geminiEmbed(rec, res, ge[2]);
  sendJson(res, 404, openaiError(`Unknown request URL: ${method} ${path}. Please check the URL for typos.`, 'invalid_request_error', 'unknown_url'));
}

// ----------------------------------------------------------- control API

function control(req, res, path, raw) {
  if (path === '/__mock/requests') {
    if (req.method === 'GET') return sendJson(res, 200, requests);
    if (req.method === 'DELETE') { requests = []; return sendJson(res, 200, { cleared: true }); }
  } else if (path === '/__mock/script') {
    if (req.method === 'GET') return sendJson(res, 200, script);
    if (req.method === 'DELETE') { script = []; return sendJson(res, 200, { cleared: true }); }
    if (req.method === 'POST') {
      let entries;
      try { entries = JSON.parse(raw.toString('utf8')); } catch (e) {
        return sendJson(res, 400, { error: `bad script JSON: ${e.message}` });
      }
      if (!Array.isArray(entries)) entries = [entries];
      for (const e of entries) {
        if (e === null || typeof e !== 'object' || Array.isArray(e))
          return sendJson(res, 400, { error: 'each script entry must be an object' });
        if (e.line_end !== undefined && LINE_ENDS[e.line_end] === undefined)
          return sendJson(res, 400, { error: `bad line_end: ${e.line_end}` });
      }
      script.push(...entries);
      return sendJson(res, 200, { queued: script.length });
    }
  } else if (path === '/__mock/stats' && req.method === 'GET') {
    return sendJson(res, 200, { connections: connSeq, open_connections: openConns, requests: reqSeq });
  } else if (path === '/__mock/reset' && req.method === 'POST') {
    requests = []; script = []; reqSeq = 0;
    return sendJson(res, 200, { reset: true });
  }
  sendJson(res, 404, { error: `unknown control request ${req.method} ${path}` });
}

// ---------------------------------------------------------------- server

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://mock');
  const path = url.pathname;
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    if (path.startsWith('/__mock/')) return control(req, res, path, raw);

    const rec = {
      id: ++reqSeq,
      conn: req.socket.mockConnId,
      time: nowS(),
      method: req.method,
      path,
      query: url.search.startsWith('?') ? url.search.slice(1) : '',
      headers: { ...req.headers },
      // Bodies over 1 MiB are recorded by size and digest only.
      body: raw.length <= 1048576 ? raw.toString('utf8') : '',
      body_size: raw.length,
      body_sha256: sha256(raw),
      json: undefined,
      completed: false,
      aborted: false,
    };
    if (raw.length && rec.body) { try { rec.json = JSON.parse(rec.body); } catch { /* not JSON */ } }
    if (/^multipart\/form-data/i.test(req.headers['content-type'] ?? '')) rec.parts = formParts(raw, req.headers['content-type']);
    requests.push(rec);
    res.on('finish', () => { rec.completed = true; });
    res.on('close', () => { if (!rec.completed) rec.aborted = true; });

    const entry = takeScripted(rec);
    if (entry) rec.scripted = true;
    const p = entry ? playScripted(entry, req, res) : defaultReply(rec, res);
    Promise.resolve(p).catch((e) => {
      process.stderr.write(`mock: error answering ${req.method} ${path}: ${e.stack}\n`);
      if (!res.headersSent) sendJson(res, 500, openaiError(`mock failure: ${e.message}`, 'server_error'));
      else res.destroy();
    });
  });
});

server.on('connection', (sock) => {
  sock.mockConnId = ++connSeq;
  openConns++;
  sock.on('close', () => { openConns--; });
});

serve(server, 'mock');
