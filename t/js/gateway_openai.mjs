// The official `openai` client against the gateway, for t/15-sdk.t.
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... node t/js/gateway_openai.mjs [all|auth]
//
// Optional: GW_MODEL (default gpt-4o-mini), GW_EMBED_MODEL (default
// text-embedding-3-small).
//
// "all" (default) runs, each step on its own (a failing step is reported and
// the next one still runs):
//   chat          non-stream chat completion
//   stream        streamed chat without stream_options
//   stream_usage  streamed chat with stream_options.include_usage = true
//   embeddings    embeddings for two inputs (the SDK asks for base64)
//   models        models.list()
// "auth" makes one chat call and reports how the SDK failed.
//
// Prints one JSON object on stdout: {"mode", "steps": {name: {...}}}. A
// failed step is {"ok": false, "status", "name", "is_auth_error", "message",
// "error"}; a successful one has "ok": true plus its fields.

import OpenAI from 'openai';

const base = process.env.GW_URL;
if (!base) {
  process.stdout.write(JSON.stringify({ fatal: 'GW_URL is not set' }) + '\n');
  process.exit(2);
}
const mode = process.argv[2] ?? 'all';
const model = process.env.GW_MODEL ?? 'gpt-4o-mini';
const embedModel = process.env.GW_EMBED_MODEL ?? 'text-embedding-3-small';

const client = new OpenAI({
  baseURL: base.replace(/\/+$/, '') + '/v1',
  apiKey: process.env.GW_KEY ?? 'sk-missing',
  maxRetries: 0,
  timeout: 15_000,
});

function failure(err) {
  return {
    ok: false,
    status: err?.status ?? null,
    name: err?.constructor?.name ?? err?.name ?? null,
    is_auth_error: err instanceof OpenAI.AuthenticationError,
    is_api_error: err instanceof OpenAI.APIError,
    message: String(err?.message ?? err),
    error: err?.error ?? null,
    code: err?.code ?? null,
    type: err?.type ?? null,
  };
}

async function chat() {
  const c = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Say hello' }],
    temperature: 0,
  });
  return {
    ok: true,
    id: c.id,
    object: c.object,
    model: c.model,
    content: c.choices[0]?.message?.content ?? null,
    finish_reason: c.choices[0]?.finish_reason ?? null,
    usage: c.usage ?? null,
  };
}

async function stream(withUsage) {
  const params = { model, messages: [{ role: 'user', content: 'Say hello' }], stream: true };
  if (withUsage) params.stream_options = { include_usage: true };
  const s = await client.chat.completions.create(params);
  const out = { ok: true, content: '', chunks: 0, usage_seen: false, usage: null, finish_reason: null,
                empty_choice_chunks: 0 };
  for await (const chunk of s) {
    out.chunks++;
    const choice = chunk.choices?.[0];
    if (!chunk.choices?.length) out.empty_choice_chunks++;
    if (choice?.delta?.content) out.content += choice.delta.content;
    if (choice?.finish_reason) out.finish_reason = choice.finish_reason;
    if (chunk.usage) { out.usage_seen = true; out.usage = chunk.usage; }
  }
  return out;
}

async function embeddings() {
  const e = await client.embeddings.create({ model: embedModel, input: ['hello', 'world'] });
  return {
    ok: true,
    object: e.object,
    count: e.data.length,
    dims: e.data[0]?.embedding?.length ?? 0,
    first: (e.data[0]?.embedding ?? []).slice(0, 2),
    model: e.model,
    usage: e.usage ?? null,
  };
}

async function models() {
  const ids = [];
  const owners = [];
  for await (const m of client.models.list()) { ids.push(m.id); owners.push(m.owned_by); }
  return { ok: true, ids, owners };
}

async function step(fn) {
  try { return await fn(); } catch (err) { return failure(err); }
}

const out = { mode, steps: {} };
if (mode === 'auth') {
  out.steps.chat = await step(chat);
  out.steps.models = await step(models);
} else {
  out.steps.chat = await step(chat);
  out.steps.stream = await step(() => stream(false));
  out.steps.stream_usage = await step(() => stream(true));
  out.steps.embeddings = await step(embeddings);
  out.steps.models = await step(models);
}
process.stdout.write(JSON.stringify(out) + '\n');
