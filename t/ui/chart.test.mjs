// The history chart's scaling (src/admin-ui/chart.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { labelStride, layout, niceScale } from '../../src/admin-ui/chart.js';

test('an axis reaches a round value at or above the maximum', () => {
  assert.deepEqual(niceScale(3), { max: 4, step: 1, ticks: [0, 1, 2, 3, 4] });
  assert.deepEqual(niceScale(4), { max: 4, step: 1, ticks: [0, 1, 2, 3, 4] });
  assert.deepEqual(niceScale(5), { max: 8, step: 2, ticks: [0, 2, 4, 6, 8] });
  assert.deepEqual(niceScale(9), { max: 12, step: 3, ticks: [0, 3, 6, 9, 12] });
  assert.deepEqual(niceScale(10), { max: 12, step: 3, ticks: [0, 3, 6, 9, 12] });
  assert.deepEqual(niceScale(100), { max: 100, step: 25, ticks: [0, 25, 50, 75, 100] });
  assert.deepEqual(niceScale(101), { max: 120, step: 30, ticks: [0, 30, 60, 90, 120] });
  assert.deepEqual(niceScale(1234), { max: 2000, step: 500, ticks: [0, 500, 1000, 1500, 2000] });
  assert.deepEqual(niceScale(18000000).ticks, [0, 5000000, 10000000, 15000000, 20000000]);
});

test('every step is whole and every maximum covers the data', () => {
  for (let v = 1; v < 200000; v = Math.ceil(v * 1.37)) {
    const s = niceScale(v);
    assert.ok(Number.isInteger(s.step), `step of ${v}`);
    assert.ok(s.max >= v, `max of ${v}`);
    assert.ok(s.max < v * 2.6 + 4, `max of ${v} not too loose: ${s.max}`);
    assert.equal(s.ticks.length, 5);
    assert.equal(s.ticks[4], s.max);
  }
});

test('no data, zeros or junk still give an axis', () => {
  assert.deepEqual(niceScale(0), { max: 4, step: 1, ticks: [0, 1, 2, 3, 4] });
  assert.deepEqual(niceScale(-5), niceScale(0));
  assert.deepEqual(niceScale(NaN), niceScale(0));
  assert.deepEqual(niceScale(Infinity), niceScale(0));
  assert.deepEqual(niceScale(1, 2), { max: 2, step: 1, ticks: [0, 1, 2] });
  assert.deepEqual(niceScale(3, 0).ticks, [0, 3]);   // one step, at least 1
});

test('labels are thinned to fit', () => {
  assert.equal(labelStride(30, 10), 3);
  assert.equal(labelStride(48, 100), 1);
  assert.equal(labelStride(48, 0), 48);
  assert.equal(labelStride(0, 5), 1);
  assert.equal(labelStride(13, 12.4), 2);
});

test('bars fill the plot, left to right, scaled to the axis', () => {
  const pts = [{ bucket: 'a', value: 0 }, { bucket: 'b', value: 2 }, { bucket: 'c', value: 4 }, { bucket: 'd', value: 1 }];
  const L = layout(pts, { width: 500, height: 200, left: 50, right: 50, top: 0, bottom: 0, labelWidth: 100 });
  assert.deepEqual(L.plot, { left: 50, top: 0, width: 400, height: 200 });
  assert.equal(L.scale.max, 4);
  assert.deepEqual(L.bars.map((b) => b.h), [0, 100, 200, 50]);
  assert.deepEqual(L.bars.map((b) => b.y), [200, 100, 0, 150]);
  assert.deepEqual(L.bars.map((b) => b.slotX), [50, 150, 250, 350]);
  assert.ok(L.bars.every((b) => b.x >= b.slotX && b.x + b.w <= b.slotX + b.slotW + 1e-9));
  assert.deepEqual(L.bars.map((b) => b.bucket), ['a', 'b', 'c', 'd']);
  assert.deepEqual(L.yTicks.map((t) => t.y), [200, 150, 100, 50, 0]);
  assert.deepEqual(L.labelled, [0, 1, 2, 3]);
});

test('the newest bucket is always labelled', () => {
  const pts = Array.from({ length: 48 }, (_, i) => ({ bucket: String(i), value: i }));
  const L = layout(pts, { width: 400, left: 0, right: 0, labelWidth: 100 });
  assert.equal(L.labelled.at(-1), 47);
  assert.ok(L.labelled.length <= 4);
  assert.deepEqual(L.labelled, [11, 23, 35, 47]);
});

test('negative, missing and non-numeric values draw as zero', () => {
  const L = layout([{ bucket: 'a', value: -3 }, { bucket: 'b' }, { bucket: 'c', value: 'x' }]);
  assert.deepEqual(L.bars.map((b) => b.value), [0, 0, 0]);
  assert.ok(L.bars.every((b) => b.h === 0));
  assert.equal(layout([]).bars.length, 0);
});
