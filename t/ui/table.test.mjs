// The dashboard's table sorting (src/admin-ui/table.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { sortRows } from '../../src/admin-ui/table.js';

const rows = [
  { name: 'bob', n: 10 }, { name: 'alice', n: 2 }, { name: 'Carol', n: null }, { name: 'dave', n: 2 }, { name: 'user10', n: 7 },
  { name: 'user9', n: 7 },
];

test('numbers sort as numbers, empty last either way, ties keep their order', () => {
  assert.deepEqual(sortRows(rows, (r) => r.n, 'asc').map((r) => r.name), ['alice', 'dave', 'user10', 'user9', 'bob', 'Carol']);
  assert.deepEqual(sortRows(rows, (r) => r.n, 'desc').map((r) => r.name), ['bob', 'user10', 'user9', 'alice', 'dave', 'Carol']);
});

test('text sorts by locale, digits as numbers', () => {
  assert.deepEqual(sortRows(rows, (r) => r.name, 'asc').map((r) => r.name), ['alice', 'bob', 'Carol', 'dave', 'user9', 'user10']);
  assert.deepEqual(sortRows(rows, (r) => r.name, 'desc').map((r) => r.name), ['user10', 'user9', 'dave', 'Carol', 'bob', 'alice']);
});

test('the input is not changed', () => {
  const copy = rows.map((r) => r.name);
  sortRows(rows, (r) => r.name, 'desc');
  assert.deepEqual(rows.map((r) => r.name), copy);
  assert.deepEqual(sortRows([], (r) => r), []);
});

test('ISO times sort in time order', () => {
  const t = [{ t: '2026-11-25T10:00:00Z' }, { t: '2026-11-24T23:00:00Z' }, { t: undefined }, { t: '2026-11-25T09:59:59.5Z' }];
  assert.deepEqual(sortRows(t, (r) => r.t, 'desc').map((r) => r.t),
    ['2026-11-25T10:00:00Z', '2026-11-25T09:59:59.5Z', '2026-11-24T23:00:00Z', undefined]);
});
