// The dashboard's number, money and time formatting (src/admin-ui/format.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import * as f from '../../src/admin-ui/format.js';

test('counts are grouped', () => {
  assert.equal(f.count(0), '0');
  assert.equal(f.count(999), '999');
  assert.equal(f.count(1234), '1,234');
  assert.equal(f.count(1234567890), '1,234,567,890');
  assert.equal(f.count(-4200), '-4,200');
  assert.equal(f.count(2.6), '3');
  for (const bad of [null, undefined, NaN, Infinity, '12', {}]) assert.equal(f.count(bad), '—');
});

test('micro-USD are shown as dollars, small costs never as $0.00', () => {
  assert.equal(f.usd(0), '$0.00');
  assert.equal(f.usd(1), '$0.000001');
  assert.equal(f.usd(18), '$0.000018');
  assert.equal(f.usd(500), '$0.0005');
  assert.equal(f.usd(1000), '$0.001');
  assert.equal(f.usd(9999), '$0.009999');
  assert.equal(f.usd(10000), '$0.01');
  assert.equal(f.usd(100000), '$0.10');
  assert.equal(f.usd(1000000), '$1.00');
  assert.equal(f.usd(1234567), '$1.23');
  assert.equal(f.usd(1235000), '$1.24');
  assert.equal(f.usd(5000000000), '$5,000.00');
  assert.equal(f.usd(123456789012), '$123,456.79');
  assert.equal(f.usd(-250000), '-$0.25');
  assert.equal(f.usd(-18), '-$0.000018');
  assert.equal(f.usd(18.4), '$0.000018');
  for (const bad of [null, undefined, NaN, '5', -Infinity]) assert.equal(f.usd(bad), '—');
});

test('prices per million tokens', () => {
  assert.equal(f.usdPerMTok(0.15), '$0.15');
  assert.equal(f.usdPerMTok(2.5), '$2.50');
  assert.equal(f.usdPerMTok(10), '$10.00');
  assert.equal(f.usdPerMTok(0), '$0.00');
  assert.equal(f.usdPerMTok(0.0075), '$0.0075');
  assert.equal(f.usdPerMTok(null), '—');
  assert.equal(f.usdPerMTok(undefined), '—');
});

test('a metric is formatted by its kind', () => {
  assert.equal(f.metricValue('cost', 1500000), '$1.50');
  assert.equal(f.metricValue('req', 1500000), '1,500,000');
  assert.equal(f.metricValue('tokin', 12), '12');
});

test('milliseconds', () => {
  assert.equal(f.ms(250), '250 ms');
  assert.equal(f.ms(2500), '2.5 s');
  assert.equal(f.ms(60000), '60 s');
  assert.equal(f.ms(null), '—');
});

test('budget fraction, percent and level', () => {
  assert.equal(f.fraction(5, 10), 0.5);
  assert.equal(f.fraction(0, 10), 0);
  assert.equal(f.fraction(null, 10), 0);
  assert.equal(f.fraction(5, 0), null);
  assert.equal(f.fraction(5, undefined), null);
  assert.equal(f.fraction(15, 10), 1.5);
  assert.equal(f.percent(0.5), '50%');
  assert.equal(f.percent(0.999), '99%');   // never rounded up to a full budget
  assert.equal(f.percent(1), '100%');
  assert.equal(f.percent(12), '>999%');
  assert.equal(f.percent(null), '');
  assert.equal(f.level(null), 'none');
  assert.equal(f.level(0.79), 'ok');
  assert.equal(f.level(0.8), 'warn');
  assert.equal(f.level(1), 'over');
  assert.equal(f.level(3), 'over');
});

test('times in UTC, and how long ago', () => {
  assert.equal(f.utc('2026-11-25T18:16:21.123Z'), '2026-11-25 18:16:21 UTC');
  assert.equal(f.utc(Date.UTC(2026, 0, 2, 3, 4, 5)), '2026-01-02 03:04:05 UTC');
  assert.equal(f.utc(null), '—');
  assert.equal(f.utc(''), '—');
  assert.equal(f.utc('not a time'), '—');
  const now = Date.parse('2026-11-25T12:00:00Z');
  assert.equal(f.ago(null, now), 'never');
  assert.equal(f.ago('2026-11-25T12:00:00Z', now), 'just now');
  assert.equal(f.ago('2026-11-25T11:59:55Z', now), '5 s ago');
  assert.equal(f.ago('2026-11-25T11:57:00Z', now), '3 min ago');
  assert.equal(f.ago('2026-11-25T10:00:00Z', now), '2 h ago');
  assert.equal(f.ago('2026-11-21T12:00:00Z', now), '4 d ago');
  assert.equal(f.ago('garbage', now), '—');
});

test('UTC buckets as labels', () => {
  assert.equal(f.bucketLabel('202611'), '2026-11');
  assert.equal(f.bucketLabel('20261125'), '2026-11-25');
  assert.equal(f.bucketLabel('2026112518'), '11-25 18:00');
  assert.equal(f.bucketLabel('202611251807'), '18:07');
  assert.equal(f.bucketLabel('12345'), '12345');
  assert.equal(f.bucketLabel('<b>'), '<b>');
  assert.equal(f.bucketLabel(undefined), '');
  assert.equal(f.bucketFull('2026112518'), '2026-11-25 18:00 UTC');
  assert.equal(f.bucketFull('20261125'), '2026-11-25 (UTC)');
  assert.equal(f.bucketFull('202611'), '2026-11 (UTC)');
});

test('the response cache: hit rate and counts of a window, "—" without a lookup', () => {
  assert.deepEqual(f.cacheSummary({ hits: 2, misses: 1, hitTokensIn: 30, hitTokensOut: 12, hitRate: 2 / 3 }),
    { rate: 2 / 3, text: '66%', detail: '2 hits · 1 miss' });
  assert.deepEqual(f.cacheSummary({ hits: 1, misses: 0 }), { rate: 1, text: '100%', detail: '1 hit · 0 misses' });
  assert.deepEqual(f.cacheSummary({ hits: 0, misses: 1234, hitRate: 0 }), { rate: 0, text: '0%', detail: '0 hits · 1,234 misses' });
  assert.equal(f.cacheSummary({ hits: 0, misses: 0, hitRate: null }), null);
  for (const bad of [null, undefined, {}, 'x', { hits: -1, misses: 0 }, { hits: '3', misses: null }]) {
    assert.equal(f.cacheSummary(bad), null);
  }
});

test('the cache column is shown when any entry had a lookup this month', () => {
  const none = { day: { hits: 0, misses: 0 }, month: { hits: 0, misses: 0 } };
  const some = { day: { hits: 0, misses: 0 }, month: { hits: 0, misses: 3 } };
  assert.equal(f.cacheInUse({ users: [{ cache: none }], groups: [{ cache: none }], total: { cache: none } }), false);
  assert.equal(f.cacheInUse({ users: [{ cache: none }], groups: [], total: { cache: some } }), true);
  assert.equal(f.cacheInUse({ users: [{ cache: some }], groups: [] }), true);
  assert.equal(f.cacheInUse({ users: [{}], groups: [{}], total: {} }), false);   // a gateway without the cache object
  assert.equal(f.cacheInUse(null), false);
});
