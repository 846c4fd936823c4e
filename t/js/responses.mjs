// The official `openai` client's Responses API against the gateway
// (t/88-responses.t).
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... STEPS='[...]' node t/js/responses.mjs
//
// STEPS is a JSON array of {name, op, model, base?, extra?, id?}. Ops:
//   create       responses.create, not streamed (extra: more request members)
//   stream       responses.stream (the SDK's helper, which checks the event
//                sequence as it builds the response) and finalResponse()
//   raw_stream   responses.create({stream: true}): every event as it came
//   tools        one turn offering get_weather (stream: true|false)
//   tool_result  the second turn of the round trip: the call and its output
//   retrieve, delete, cancel   on id, against base (the passthrough prefix)
// Each step runs on its own (a failure is reported and the next still runs).
// Prints one JSON object: {"steps": {name: {...}}}; a failed step is
// {"ok": false, "status", "name", "message", "error"}.

import OpenAI from 'openai';
import { stepEnv, runSteps } from './steps.mjs';

const { base, key, steps } = stepEnv();

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'],
                additionalProperties: false },
  strict: true,
};


// What a test compares of a response object.
function summary(r) {
  return {
    ok: true, id: r.id, object: r.object, status: r.status, model: r.model,
    output_text: r.output_text,
    output: (r.output ?? []).map((o) => (o.type === 'function_call'
      ? { type: o.type, call_id: o.call_id, name: o.name, arguments: o.arguments, status: o.status ?? null }
      : o.type === 'reasoning'
        ? { type: o.type, summary: (o.summary ?? []).map((s) => s.text).join('') }
        : { type: o.type, role: o.role ?? null, status: o.status ?? null,
            content: (o.content ?? []).map((c) => c.text ?? c.refusal ?? null) })),
    usage: r.usage ?? null,
    incomplete_details: r.incomplete_details ?? null,
  };
}

async function runStep(s) {
  const client = new OpenAI({ baseURL: base + (s.base ?? '/v1'), apiKey: key, maxRetries: 0, timeout: 15_000 });
  const req = { model: s.model, instructions: 'Be brief.', input: 'Say hello', max_output_tokens: 64, ...(s.extra ?? {}) };
  if (s.op === 'create') return summary(await client.responses.create(req));
  if (s.op === 'stream') {
    const stream = client.responses.stream(req);
    const events = [];
    let text = '';
    for await (const e of stream) {
      events.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
    }
    const final = await stream.finalResponse();
    return { ...summary(final), events, streamed_text: text };
  }
  if (s.op === 'raw_stream') {
    const stream = await client.responses.create({ ...req, stream: true });
    const events = [];
    for await (const e of stream) events.push(e);
    return { ok: true, events };
  }
  if (s.op === 'tools') {
    const treq = { ...req, input: 'What is the weather in Oslo?', tools: [WEATHER], tool_choice: 'auto' };
    if (s.stream) {
      const stream = client.responses.stream(treq);
      const events = [];
      let args = '';
      for await (const e of stream) {
        events.push(e.type);
        if (e.type === 'response.function_call_arguments.delta') args += e.delta;
      }
      return { ...summary(await stream.finalResponse()), events, streamed_arguments: args };
    }
    return summary(await client.responses.create(treq));
  }
  if (s.op === 'tool_result') {
    const input = [
      { role: 'user', content: 'What is the weather in Oslo?' },
      { type: 'function_call', call_id: s.call_id, name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: s.call_id, output: 'Sunny, 21C' },
    ];
    return summary(await client.responses.create({ ...req, input, tools: [WEATHER] }));
  }
  if (s.op === 'retrieve') return summary(await client.responses.retrieve(s.id));
  if (s.op === 'delete') {
    await client.responses.delete(s.id);
    return { ok: true };
  }
  if (s.op === 'cancel') return summary(await client.responses.cancel(s.id));
  throw new Error(`unknown op ${s.op}`);
}

await runSteps(steps, runStep);
