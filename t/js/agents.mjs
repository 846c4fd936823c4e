// One turn of an OpenAI Agents SDK (npm @openai/agents) agent with a tool,
// through the gateway's /v1/responses (t/88-responses.t).
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... MODEL=... [STREAM=1] node t/js/agents.mjs
//
// The SDK's default model class speaks the Responses API; its own OpenAI
// client is pointed at the gateway and tracing is off (nothing leaves the
// machine). STREAM=1 runs the agent streamed. Prints one JSON line: {ok, final_output, tool_calls: [args...],
// usage} or {ok: false, name, message, status}.

import { Agent, OpenAIProvider, Runner, tool, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true);
const base = (process.env.GW_URL ?? '').replace(/\/+$/, '');
const runner = new Runner({
  modelProvider: new OpenAIProvider({ baseURL: base + '/v1', apiKey: process.env.GW_KEY, useResponses: true }),
  tracingDisabled: true,
});

const calls = [];
const getWeather = tool({
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    calls.push(city);
    return `Sunny, 21C in ${city}`;
  },
});

const agent = new Agent({
  name: 'Weather',
  instructions: 'Answer with the weather.',
  model: process.env.MODEL,
  tools: [getWeather],
});

try {
  const stream = process.env.STREAM === '1';
  const result = await runner.run(agent, 'What is the weather in Oslo?', { stream });
  if (stream) {
    for await (const _ of result) { /* the events the SDK re-emits */ }
    await result.completed;
  }
  const u = result.state?.usage ?? null;
  process.stdout.write(JSON.stringify({
    ok: true, final_output: result.finalOutput, tool_calls: calls,
    usage: u ? { requests: u.requests, input_tokens: u.inputTokens, output_tokens: u.outputTokens } : null,
  }) + '\n');
} catch (err) {
  process.stdout.write(JSON.stringify({ ok: false, name: err?.constructor?.name ?? null,
    message: String(err?.message ?? err), status: err?.status ?? null }) + '\n');
}
