// Smoke test with the official `openai` client against the gateway (or any
// OpenAI-compatible base URL).
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-test node t/js/openai_smoke.mjs
//
// Optional: GW_MODEL (default gpt-4o-mini), GW_EMBED_MODEL
// (default text-embedding-3-small).
//
// Prints one JSON object on stdout:
//   {"ok":true,
//    "chat":   {"id","model","content","finish_reason","usage"},
//    "stream": {"content","chunks","usage_seen","usage","finish_reason"},
//    "embeddings": {"count","dims","model","usage"},
//    "models": ["id", ...]}
// On any exception it prints {"ok":false,"status":N|null,"name","message","error"}
// and exits 1.

import OpenAI from 'openai';

const base = process.env.GW_URL;
if (!base) {
  process.stdout.write(JSON.stringify({ ok: false, status: null, message: 'GW_URL is not set' }) + '\n');
  process.exit(2);
}
const model = process.env.GW_MODEL ?? 'gpt-4o-mini';
const embedModel = process.env.GW_EMBED_MODEL ?? 'text-embedding-3-small';

const client = new OpenAI({
  baseURL: base.replace(/\/+$/, '') + '/v1',
  apiKey: process.env.GW_KEY ?? 'sk-test',
  maxRetries: 0,
  timeout: 20_000,
});

async function main() {
  const out = { ok: true };

  const chat = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Say hello' }],
  });
  out.chat = {
    id: chat.id,
    model: chat.model,
    content: chat.choices[0]?.message?.content ?? null,
    finish_reason: chat.choices[0]?.finish_reason ?? null,
    usage: chat.usage ?? null,
  };

  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Say hello' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const s = { content: '', chunks: 0, usage_seen: false, usage: null, finish_reason: null };
  for await (const chunk of stream) {
    s.chunks++;
    const choice = chunk.choices?.[0];
    if (choice?.delta?.content) s.content += choice.delta.content;
    if (choice?.finish_reason) s.finish_reason = choice.finish_reason;
    if (chunk.usage) { s.usage_seen = true; s.usage = chunk.usage; }
  }
  out.stream = s;

  const emb = await client.embeddings.create({ model: embedModel, input: ['hello', 'world'] });
  out.embeddings = {
    count: emb.data.length,
    dims: emb.data[0]?.embedding?.length ?? 0,
    model: emb.model,
    usage: emb.usage ?? null,
  };

  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  out.models = models;

  return out;
}

try {
  const out = await main();
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (err) {
  process.stdout.write(JSON.stringify({
    ok: false,
    status: err?.status ?? null,
    name: err?.name ?? null,
    message: String(err?.message ?? err),
    error: err?.error ?? null,
  }) + '\n');
  process.exit(1);
}
