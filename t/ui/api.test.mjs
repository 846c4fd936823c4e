// What the dashboard tells a person about a failed read, and where it keeps
// the key (src/admin-ui/api.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { clearKey, describeFailure, getKey, setKey } from '../../src/admin-ui/api.js';

const err = (message) => ({ error: { message, type: 'x', code: 'y' } });

test('each failure is named for what it is', () => {
  assert.equal(describeFailure(401, err('Incorrect API key provided.')).kind, 'auth');
  assert.match(describeFailure(401, err('Incorrect API key provided.')).text, /did not accept this key \(401: Incorrect API key provided\.\)/);
  assert.equal(describeFailure(403, err('this key is not an admin key')).kind, 'forbidden');
  assert.match(describeFailure(403, null).text, /not an admin key \(403\)/);
  const outage = describeFailure(503, err('the limit store could not be read'));
  assert.equal(outage.kind, 'outage');
  assert.equal(outage.text, 'Store outage: the limit store could not be read (503). Counters are unavailable, not zero.');
  assert.equal(describeFailure(503, null).kind, 'outage');
  assert.equal(describeFailure(429, err('rate limit exceeded')).kind, 'limited');
  assert.equal(describeFailure(0, null).kind, 'gone');
  assert.equal(describeFailure(500, 'junk').text, 'The gateway answered 500.');
  assert.equal(describeFailure(400, { error: { message: 42 } }).text, 'The gateway answered 400.');
  assert.equal(describeFailure(404, { error: 'x' }).kind, 'error');
});

function memory() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k), m };
}

test('the key is kept in the storage given (session storage) and removed on sign-out', () => {
  const s = memory();
  assert.equal(getKey(s), '');
  setKey('sk-abc', s);
  assert.equal(getKey(s), 'sk-abc');
  assert.equal(s.m.size, 1);
  clearKey(s);
  assert.equal(getKey(s), '');
  assert.equal(s.m.size, 0);
});

test('a storage that throws keeps nothing and breaks nothing', () => {
  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); }, removeItem() { throw new Error('denied'); } };
  assert.equal(getKey(broken), '');
  setKey('k', broken);
  clearKey(broken);
});
