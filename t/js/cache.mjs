// The official clients against the gateway's response cache (t/92-cache.t):
// the same request made twice, each answer kept for the test to compare.
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... STEPS='[...]' node t/js/cache.mjs
//
// STEPS is a JSON array of {name, op, model, base?, extra?, headers?}. Ops:
//   chat            openai chat.completions.create, not streamed
//   chat_stream     openai chat.completions.create({stream: true}): the text and the chunks' ids
//   messages        @anthropic-ai/sdk messages.create, not streamed
//   messages_stream @anthropic-ai/sdk messages.stream and finalMessage()
//   responses       openai responses.create, not streamed
//   embeddings      openai embeddings.create
// Prints {"steps": {name: {...}}} (t/js/steps.mjs: a failed step is {"ok": false, "status", "name", "message", "error"}).

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { stepEnv, runSteps } from './steps.mjs';

const { base, key, steps } = stepEnv();


async function runStep(s) {
  const opts = { maxRetries: 0, timeout: 15_000, defaultHeaders: s.headers ?? {} };
  if (s.op.startsWith('messages')) {
    const client = new Anthropic({ baseURL: base + (s.base ?? ''), apiKey: key, ...opts });
    const req = { model: s.model, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }], ...(s.extra ?? {}) };
    if (s.op === 'messages') {
      const m = await client.messages.create(req);
      return { ok: true, id: m.id, text: m.content.map((c) => c.text ?? '').join(''), usage: m.usage, stop_reason: m.stop_reason };
    }
    const stream = client.messages.stream(req);
    let text = '';
    for await (const e of stream) {
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
    }
    const m = await stream.finalMessage();
    return { ok: true, id: m.id, text, usage: m.usage, stop_reason: m.stop_reason };
  }
  const client = new OpenAI({ baseURL: base + (s.base ?? '/v1'), apiKey: key, ...opts });
  if (s.op === 'chat') {
    const r = await client.chat.completions.create({
      model: s.model, messages: [{ role: 'user', content: 'Say hello' }], ...(s.extra ?? {}) });
    return { ok: true, id: r.id, text: r.choices[0].message.content, tool_calls: r.choices[0].message.tool_calls ?? null,
             usage: r.usage };
  }
  if (s.op === 'chat_stream') {
    const stream = await client.chat.completions.create({
      model: s.model, messages: [{ role: 'user', content: 'Say hello' }], stream: true,
      stream_options: { include_usage: true }, ...(s.extra ?? {}) });
    let text = '';
    let usage = null;
    const ids = new Set();
    let chunks = 0;
    for await (const c of stream) {
      chunks += 1;
      ids.add(c.id);
      if (c.choices[0]?.delta?.content) text += c.choices[0].delta.content;
      if (c.usage) usage = c.usage;
    }
    return { ok: true, ids: [...ids], text, usage, chunks };
  }
  if (s.op === 'responses') {
    const r = await client.responses.create({ model: s.model, input: 'Say hello', max_output_tokens: 64, ...(s.extra ?? {}) });
    return { ok: true, id: r.id, text: r.output_text, usage: r.usage };
  }
  if (s.op === 'embeddings') {
    const r = await client.embeddings.create({ model: s.model, input: 'hello' });
    return { ok: true, first: r.data[0].embedding.slice(0, 3), usage: r.usage };
  }
  throw new Error(`unknown op ${s.op}`);
}

await runSteps(steps, runStep);
