// The history chart: one bar per bucket, drawn as SVG. The scaling
// (niceScale, layout, labelStride) is pure and tested with node's test
// runner (t/ui/chart.test.mjs); drawChart builds the elements.

// An axis from 0 to a round maximum at or above max, in `ticks` steps of
// 1, 2, 2.5, 3 or 5 times a power of ten. Integer data (counts, micro-USD) gets
// integer steps. An empty or all-zero series still gets an axis (0..ticks).
export function niceScale(max, ticks = 4) {
  const n = Math.max(1, Math.floor(ticks));
  const top = Number.isFinite(max) && max > 0 ? max : 0;
  if (top === 0) return { max: n, step: 1, ticks: range(n, 1) };
  const raw = top / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  let step = mag * 10;
  for (const m of [1, 2, 2.5, 3, 5, 10]) {
    const s = Number((m * mag).toPrecision(12));
    if (s >= 1 && !Number.isInteger(s)) continue;   // counts and micro-dollars are whole
    if (s >= raw - 1e-9) { step = s; break; }
  }
  if (step < 1) step = 1;
  return { max: step * n, step, ticks: range(n, step) };
}

function range(n, step) {
  const out = [];
  for (let i = 0; i <= n; i++) out.push(i * step);
  return out;
}

// Every how many buckets a label fits: at most maxLabels labels.
export function labelStride(count, maxLabels) {
  if (count <= 0) return 1;
  const m = Math.max(1, Math.floor(maxLabels));
  return Math.max(1, Math.ceil(count / m));
}

// Where everything goes in a width x height box: the plot area, one bar per
// point (left to right, oldest first), the y ticks, which buckets are labelled.
export function layout(points, { width = 640, height = 240, left = 64, right = 40, top = 12, bottom = 36,
  ticks = 4, labelWidth = 72 } = {}) {
  const values = points.map((p) => (Number.isFinite(p.value) && p.value > 0 ? p.value : 0));
  const scale = niceScale(values.length ? Math.max(...values) : 0, ticks);
  const plotW = Math.max(1, width - left - right);
  const plotH = Math.max(1, height - top - bottom);
  const slot = points.length ? plotW / points.length : plotW;
  const gap = Math.min(4, slot * 0.2);
  const y = (v) => top + plotH - (v / scale.max) * plotH;
  const bars = points.map((p, i) => {
    const v = values[i];
    const h = (v / scale.max) * plotH;
    return { x: left + i * slot + gap / 2, y: top + plotH - h, w: Math.max(1, slot - gap), h, value: v,
      bucket: p.bucket, slotX: left + i * slot, slotW: slot };
  });
  const stride = labelStride(points.length, plotW / labelWidth);
  const labelled = [];
  // The newest bucket is always labelled; the others every `stride` back from it.
  for (let i = points.length - 1; i >= 0; i -= stride) labelled.unshift(i);
  return { width, height, plot: { left, top, width: plotW, height: plotH }, scale,
    yTicks: scale.ticks.map((v) => ({ value: v, y: y(v) })), bars, labelled };
}

const SVG = 'http://www.w3.org/2000/svg';

function el(doc, name, attrs = {}, text) {
  const e = doc.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// The chart's SVG, with a read-out element the caller places: hovering or
// focusing a bar writes "<bucket>: <value>" there. format(v) formats values
// and tick labels; label(bucket) the x labels; full(bucket) the read-out's.
export function drawChart(doc, points, { format, label, full, title, width = 1080, height = 300 } = {}) {
  const L = layout(points, { width, height });
  const svg = el(doc, 'svg', { viewBox: `0 0 ${L.width} ${L.height}`, class: 'chart', role: 'img',
    'aria-label': title || 'history' });
  const readout = doc.createElement('p');
  readout.className = 'readout';
  readout.setAttribute('aria-live', 'polite');
  readout.textContent = points.length ? 'Hover a bar for its value.' : 'No buckets.';

  const axes = el(doc, 'g', { class: 'axes' });
  for (const t of L.yTicks) {
    axes.append(el(doc, 'line', { x1: L.plot.left, x2: L.plot.left + L.plot.width, y1: t.y, y2: t.y, class: 'grid' }));
    axes.append(el(doc, 'text', { x: L.plot.left - 6, y: t.y + 4, 'text-anchor': 'end', class: 'tick' }, format(t.value)));
  }
  const baseY = L.plot.top + L.plot.height;
  axes.append(el(doc, 'line', { x1: L.plot.left, x2: L.plot.left + L.plot.width, y1: baseY, y2: baseY, class: 'axis' }));
  axes.append(el(doc, 'line', { x1: L.plot.left, x2: L.plot.left, y1: L.plot.top, y2: baseY, class: 'axis' }));
  for (const i of L.labelled) {
    const b = L.bars[i];
    axes.append(el(doc, 'text', { x: b.slotX + b.slotW / 2, y: baseY + 18, 'text-anchor': 'middle', class: 'tick' },
      label(b.bucket)));
  }
  svg.append(axes);

  const bars = el(doc, 'g', { class: 'points' });
  for (const b of L.bars) {
    const g = el(doc, 'g', { class: 'point', tabindex: 0, 'data-bucket': b.bucket, 'data-value': b.value });
    // The whole slot answers the pointer, so a zero bar can be read too.
    g.append(el(doc, 'rect', { x: b.slotX, y: L.plot.top, width: b.slotW, height: L.plot.height, class: 'hit' }));
    g.append(el(doc, 'rect', { x: b.x, y: b.y, width: b.w, height: Math.max(b.h, 0), class: 'col' }));
    g.append(el(doc, 'title', {}, `${full(b.bucket)}: ${format(b.value)}`));
    const show = () => {
      readout.textContent = `${full(b.bucket)}: ${format(b.value)}`;
      for (const o of bars.children) o.classList.toggle('active', o === g);
    };
    g.addEventListener('pointerenter', show);
    g.addEventListener('focus', show);
    bars.append(g);
  }
  svg.append(bars);
  return { svg, readout };
}
