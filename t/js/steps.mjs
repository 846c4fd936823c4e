// What the step scripts against the gateway share (t/js/cache.mjs, media.mjs,
// responses.mjs, translate.mjs): the environment they read, a failed step's
// report, and the run of the steps.
//
//   GW_URL=http://127.0.0.1:PORT GW_KEY=sk-... STEPS='[...]' node t/js/<script>.mjs
//
// Each step runs on its own (a failure is reported and the next still runs);
// the script prints one JSON object: {"steps": {name: {...}}}, a failed step
// being {"ok": false, "status", "name", "message", "error"}.

// {base, key, steps}; without GW_URL the script prints {"fatal"} and exits 2.
export function stepEnv() {
  const base = (process.env.GW_URL ?? '').replace(/\/+$/, '');
  if (!base) {
    process.stdout.write(JSON.stringify({ fatal: 'GW_URL is not set' }) + '\n');
    process.exit(2);
  }
  return { base, key: process.env.GW_KEY ?? 'sk-missing', steps: JSON.parse(process.env.STEPS ?? '[]') };
}

export function failure(err) {
  return {
    ok: false,
    status: err?.status ?? null,
    name: err?.constructor?.name ?? err?.name ?? null,
    message: String(err?.message ?? err),
    error: err?.error ?? null,
  };
}

// Runs run(step) for each step and prints the report.
export async function runSteps(steps, run) {
  const out = {};
  for (const s of steps) {
    try {
      out[s.name] = await run(s);
    } catch (err) {
      out[s.name] = failure(err);
    }
  }
  process.stdout.write(JSON.stringify({ steps: out }) + '\n');
}
