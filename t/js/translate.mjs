// The official `openai` and `@anthropic-ai/sdk` clients against the gateway,
// for the translation tests (t/63-translate*.t).
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... STEPS='[...]' node t/js/translate.mjs
//
// STEPS is a JSON array of {name, client: "openai"|"anthropic", op, model,
// ...}. Ops:
//   openai:    chat, stream (include_usage: true|false), tools (one call
//              offering a tool), tool_result (the second turn of a tool
//              round trip: assistant tool call + tool result), embeddings
//              (input: string or array)
//   anthropic: messages, messages_stream, tools, tool_result
// Each step runs on its own (a failure is reported and the next step still
// runs). Prints one JSON object: {"steps": {name: {...}}}; a failed step is
// {"ok": false, "status", "name", "message", "error"}.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { stepEnv, runSteps } from './steps.mjs';

const { base, key, steps } = stepEnv();

const openai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 15_000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 15_000 });

const WEATHER_OPENAI = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const WEATHER_ANTHROPIC = {
  name: 'get_weather',
  description: 'Weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};


async function openaiStep(s) {
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }];
  if (s.op === 'chat') {
    const c = await openai.chat.completions.create({ model: s.model, messages, max_tokens: 64 });
    const m = c.choices[0].message;
    return { ok: true, id: c.id, object: c.object, model: c.model, content: m.content, refusal: m.refusal ?? null,
             tool_calls: m.tool_calls ?? null, finish_reason: c.choices[0].finish_reason, usage: c.usage };
  }
  if (s.op === 'stream') {
    const req = { model: s.model, messages, max_tokens: 64, stream: true };
    if (s.include_usage) req.stream_options = { include_usage: true };
    const stream = await openai.chat.completions.create(req);
    let content = '', finish = null, usage = null, chunks = 0, empty = 0, model = null, id = null;
    const tools = {};
    for await (const ch of stream) {
      chunks++;
      model = ch.model; id = ch.id;
      if (ch.usage) usage = ch.usage;
      if (!ch.choices.length) { empty++; continue; }
      const d = ch.choices[0].delta ?? {};
      if (d.content) content += d.content;
      for (const t of d.tool_calls ?? []) {
        tools[t.index] ??= { id: null, name: null, arguments: '' };
        if (t.id) tools[t.index].id = t.id;
        if (t.function?.name) tools[t.index].name = t.function.name;
        if (t.function?.arguments) tools[t.index].arguments += t.function.arguments;
      }
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    return { ok: true, id, model, content, finish_reason: finish, usage, chunks, empty_choice_chunks: empty,
             tool_calls: Object.values(tools) };
  }
  if (s.op === 'tools') {
    const c = await openai.chat.completions.create({
      model: s.model, max_tokens: 64, tools: [WEATHER_OPENAI], tool_choice: 'auto',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    const m = c.choices[0].message;
    return { ok: true, content: m.content, tool_calls: m.tool_calls ?? null, finish_reason: c.choices[0].finish_reason,
             usage: c.usage };
  }
  if (s.op === 'tool_result') {
    const c = await openai.chat.completions.create({
      model: s.model, max_tokens: 64, tools: [WEATHER_OPENAI],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: s.call_id, type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: s.call_id, content: 'Sunny, 21C' },
      ],
    });
    return { ok: true, content: c.choices[0].message.content, finish_reason: c.choices[0].finish_reason };
  }
  if (s.op === 'embeddings') {
    const e = await openai.embeddings.create({ model: s.model, input: s.input });
    return { ok: true, object: e.object, model: e.model, count: e.data.length, dims: e.data[0].embedding.length,
             first: e.data[0].embedding.slice(0, 2), usage: e.usage };
  }
  throw new Error(`unknown openai op ${s.op}`);
}

async function anthropicStep(s) {
  const base = { model: s.model, max_tokens: 64, system: 'Be brief.' };
  if (s.op === 'messages') {
    const m = await anthropic.messages.create({ ...base, messages: [{ role: 'user', content: 'Say hello' }] });
    return { ok: true, id: m.id, type: m.type, role: m.role, model: m.model, content: m.content,
             stop_reason: m.stop_reason, usage: m.usage };
  }
  if (s.op === 'messages_stream') {
    const stream = anthropic.messages.stream({ ...base, messages: [{ role: 'user', content: 'Say hello' }] });
    const types = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const m = await stream.finalMessage();
    return { ok: true, id: m.id, model: m.model, content: m.content, stop_reason: m.stop_reason, usage: m.usage,
             event_types: types };
  }
  if (s.op === 'tools') {
    const m = await anthropic.messages.create({
      ...base, tools: [WEATHER_ANTHROPIC], messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    return { ok: true, content: m.content, stop_reason: m.stop_reason, usage: m.usage };
  }
  if (s.op === 'tools_stream') {
    const stream = anthropic.messages.stream({
      ...base, tools: [WEATHER_ANTHROPIC], messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    const m = await stream.finalMessage();
    return { ok: true, content: m.content, stop_reason: m.stop_reason, usage: m.usage };
  }
  if (s.op === 'tool_result') {
    const m = await anthropic.messages.create({
      ...base, tools: [WEATHER_ANTHROPIC],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: s.call_id, name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: s.call_id, content: 'Sunny, 21C' }] },
      ],
    });
    return { ok: true, content: m.content, stop_reason: m.stop_reason };
  }
  throw new Error(`unknown anthropic op ${s.op}`);
}

await runSteps(steps, (s) => (s.client === 'anthropic' ? anthropicStep(s) : openaiStep(s)));
