#!/usr/bin/env node
// summarize.mjs OUT_DIR SUITE_LOG
// Reads the per-scenario checks.json files that `conformance server -o OUT_DIR`
// wrote (OUT_DIR/server-<scenario>-<timestamp>/checks.json) and the suite's
// stdout log (for the order of the scenarios it started), then prints
//   PASS <scenario>
//   FAIL <scenario>: <reason>
// and a summary.  A scenario passes when none of its checks has status
// FAILURE (the suite's own rule; WARNING and INFO checks do not fail it).
// Exit status: 0 when at least one scenario result was found, 3 otherwise.

import fs from 'node:fs';
import path from 'node:path';

const [outDir, logFile] = process.argv.slice(2);
const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';

// scenario order as started by the suite
const started = [];
for (const m of log.matchAll(/Running client scenario '([^']+)' against server/g)) started.push(m[1]);

const results = new Map();
for (const d of fs.existsSync(outDir) ? fs.readdirSync(outDir) : []) {
  const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(d);
  const f = path.join(outDir, d, 'checks.json');
  if (!m || !fs.existsSync(f)) continue;
  try { results.set(m[1], JSON.parse(fs.readFileSync(f, 'utf8'))); } catch { /* ignore */ }
}

const names = [...started];
for (const n of results.keys()) if (!names.includes(n)) names.push(n);

const oneLine = (s) => String(s ?? '').replace(/\s+/g, ' ').trim();
let passed = 0, failed = 0;
const warned = [];
for (const name of names) {
  const checks = results.get(name);
  if (!checks) {
    failed++;
    console.log(`FAIL ${name}: no checks.json written (scenario threw or the run was cut short; see suite log)`);
    continue;
  }
  const fails = checks.filter((c) => c.status === 'FAILURE');
  const warns = checks.filter((c) => c.status === 'WARNING');
  if (fails.length === 0) {
    passed++;
    if (warns.length) warned.push(`${name} (${warns.map((w) => w.id).join(', ')})`);
    console.log(`PASS ${name}`);
  } else {
    failed++;
    let reason = fails.map((c) => `${c.id}: ${oneLine(c.errorMessage || c.description)}`).join('; ');
    if (reason.length > 400) reason = reason.slice(0, 397) + '...';
    console.log(`FAIL ${name}: ${reason}`);
  }
}
if (warned.length) console.log(`warnings (not failures): ${warned.join('; ')}`);
if (process.env.SUMMARY_NOTE) console.log(process.env.SUMMARY_NOTE);
console.log(`summary: ${passed} passed, ${failed} failed`);
process.exit(results.size > 0 ? 0 : 3);
