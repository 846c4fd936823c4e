// The official clients against the gateway's media routes and its native
// passthrough (t/65-media.t, t/66-passthrough.t).
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... STEPS='[...]' node t/js/media.mjs
//
// STEPS is a JSON array of {name, op, model, ...}. Ops:
//   image          openai images.generate (prompt, n)
//   speech         openai audio.speech.create (input, voice): the bytes are
//                  compared with what the mock sends for that input
//   transcription  openai audio.transcriptions.create with a real file
//                  (file: a path; response_format optional)
//   pt_openai      openai chat.completions.create through the passthrough
//                  base <GW_URL>/passthrough/<provider> (stream optional)
//   pt_anthropic   @anthropic-ai/sdk messages.create through the passthrough
// Prints one JSON object: {"steps": {name: {...}}}; a failed step is
// {"ok": false, "status", "message", "error"}.

import fs from 'node:fs';
import crypto from 'node:crypto';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { stepEnv, runSteps } from './steps.mjs';

const { base, key, steps } = stepEnv();
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 30_000 });

// What the mock sends for a speech input (t/mock/provider.mjs speechBytes).
function speechBytes(input) {
  const n = 3000 + 97 * String(input).length;
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + 3) & 255;
  return b;
}

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');


async function step(s) {
  switch (s.op) {
  case 'image': {
    const r = await openai.images.generate({ model: s.model, prompt: s.prompt ?? 'a cat', n: s.n ?? 1 });
    return { ok: true, count: r.data.length, first: Buffer.from(r.data[0].b64_json, 'base64').toString() };
  }
  case 'speech': {
    const r = await openai.audio.speech.create({ model: s.model, input: s.input, voice: s.voice ?? 'alloy' });
    const got = Buffer.from(await r.arrayBuffer());
    const want = speechBytes(s.input);
    return { ok: true, content_type: r.headers.get('content-type'), size: got.length, identical: got.equals(want),
             transfer_encoding: r.headers.get('transfer-encoding') };
  }
  case 'transcription': {
    const args = { model: s.model, file: fs.createReadStream(s.file) };
    if (s.response_format) args.response_format = s.response_format;
    const r = await openai.audio.transcriptions.create(args);
    return { ok: true, text: typeof r === 'string' ? r : r.text, file_sha256: sha256(fs.readFileSync(s.file)) };
  }
  case 'pt_openai': {
    const c = new OpenAI({ baseURL: `${base}/passthrough/${s.provider}`, apiKey: key, maxRetries: 0, timeout: 15_000 });
    const messages = [{ role: 'user', content: 'Say hello' }];
    if (s.stream) {
      const st = await c.chat.completions.create({ model: s.model, messages, stream: true,
                                                   stream_options: { include_usage: true } });
      let text = '';
      let usage = null;
      for await (const ch of st) {
        text += ch.choices[0]?.delta?.content ?? '';
        if (ch.usage) usage = ch.usage;
      }
      return { ok: true, text, usage };
    }
    const r = await c.chat.completions.create({ model: s.model, messages });
    return { ok: true, text: r.choices[0].message.content, usage: r.usage, model: r.model };
  }
  case 'pt_anthropic': {
    const c = new Anthropic({ baseURL: `${base}/passthrough/${s.provider}`, apiKey: key, maxRetries: 0, timeout: 15_000 });
    const r = await c.messages.create({ model: s.model, max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] });
    return { ok: true, text: r.content[0]?.text, usage: r.usage, model: r.model };
  }
  default:
    throw new Error(`unknown op ${s.op}`);
  }
}

await runSteps(steps, step);
