// Numbers, money and times as people read them. Pure functions: no DOM, no
// clock of their own (the caller passes "now"), so node's test runner checks
// them (t/ui/format.test.mjs).

const grouping = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

// A count with thousands grouped: 1234567 -> "1,234,567". Not a finite number: "—".
export function count(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  return grouping.format(Math.round(n));
}

// Micro-USD (1,000,000 = 1 USD) as dollars. From one cent up: cents, grouped
// ("$1,234.57"); below a cent, every micro-dollar that is there
// ("$0.000018", "$0.0005"), so small costs never show as "$0.00".
export function usd(micro) {
  if (typeof micro !== 'number' || !Number.isFinite(micro)) return '—';
  const m = Math.round(micro);
  const sign = m < 0 ? '-' : '';
  const abs = Math.abs(m);
  if (abs === 0) return '$0.00';
  if (abs >= 10000) {
    const cents = Math.round(abs / 10000);
    const dollars = Math.floor(cents / 100);
    return `${sign}$${grouping.format(dollars)}.${String(cents % 100).padStart(2, '0')}`;
  }
  const frac = String(abs).padStart(6, '0').replace(/0+$/, '');
  return `${sign}$0.${frac.length < 2 ? frac.padEnd(2, '0') : frac}`;
}

// USD per million tokens, as the catalog gives it: "$0.15", "$2.50"; null: "—".
export function usdPerMTok(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  if (v === 0) return '$0.00';
  if (v >= 0.01) return `$${v.toFixed(2)}`;
  return `$${String(Number(v.toPrecision(3)))}`;
}

// One metric's value by its kind: cost in dollars, the rest as counts.
export function metricValue(metric, v) {
  return metric === 'cost' ? usd(v) : count(v);
}

export const metricNames = {
  req: 'requests',
  tokin: 'input tokens',
  tokout: 'output tokens',
  cost: 'cost',
};

// Milliseconds: "250 ms", "2.5 s", "60 s".
export function ms(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  if (v < 1000) return `${count(v)} ms`;
  const s = v / 1000;
  return `${Number.isInteger(s) ? s : s.toFixed(1)} s`;
}

// How full a budget is, 0..1 and beyond (no limit: null).
export function fraction(used, limit) {
  if (typeof limit !== 'number' || !(limit > 0)) return null;
  const u = typeof used === 'number' && used > 0 ? used : 0;
  return u / limit;
}

// "42%" of a fraction; over 999%: ">999%".
export function percent(f) {
  if (f === null || f === undefined || !Number.isFinite(f)) return '';
  const p = Math.floor(f * 100);
  return p > 999 ? '>999%' : `${p}%`;
}

// One window of a usage entry's response-cache counters ({hits, misses, ...}
// of /admin/api/usage): its hit rate (0..1, hits / (hits + misses)), that rate
// as a percent, and "2 hits · 1 miss"; null when the window had no cache
// lookup (the table shows "—").
export function cacheSummary(w) {
  if (!w || typeof w !== 'object') return null;
  const n = (v) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);
  const hits = n(w.hits);
  const misses = n(w.misses);
  if (hits + misses === 0) return null;
  const rate = hits / (hits + misses);
  return { rate, text: percent(rate),
    detail: `${count(hits)} ${hits === 1 ? 'hit' : 'hits'} · ${count(misses)} ${misses === 1 ? 'miss' : 'misses'}` };
}

// Whether a usage document shows a cache lookup this month in any entry: the
// usage tables show their cache column only then (no column while the cache
// is off).
export function cacheInUse(u) {
  if (!u || typeof u !== 'object') return false;
  const rows = [...(u.users || []), ...(u.groups || []), ...(u.total ? [u.total] : [])];
  return rows.some((r) => cacheSummary(r && r.cache && r.cache.month) !== null);
}

// The level a bar is drawn in: ok below 80%, warn from 80%, over from 100%.
export function level(f) {
  if (f === null || f === undefined) return 'none';
  if (f >= 1) return 'over';
  if (f >= 0.8) return 'warn';
  return 'ok';
}

// An ISO 8601 time (or epoch milliseconds) as "2026-11-25 18:16:21 UTC"; null/invalid: "—".
export function utc(t) {
  if (t === null || t === undefined || t === '') return '—';
  const d = typeof t === 'number' ? new Date(t) : new Date(String(t));
  if (Number.isNaN(d.getTime())) return '—';
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

// How long before now: "just now", "5 s ago", "3 min ago", "2 h ago", "4 d ago"; null: "never".
export function ago(t, now) {
  if (t === null || t === undefined || t === '') return 'never';
  const d = typeof t === 'number' ? t : Date.parse(String(t));
  if (!Number.isFinite(d)) return '—';
  const s = Math.floor((now - d) / 1000);
  if (s < 1) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// A counter bucket (UTC) as a label: month "202611" -> "2026-11",
// day "20261125" -> "2026-11-25", hour "2026112518" -> "11-25 18:00",
// minute "202611251807" -> "18:07". Anything else is shown as it is.
export function bucketLabel(bucket) {
  const b = String(bucket ?? '');
  if (!/^\d+$/.test(b)) return b;
  switch (b.length) {
    case 6: return `${b.slice(0, 4)}-${b.slice(4, 6)}`;
    case 8: return `${b.slice(0, 4)}-${b.slice(4, 6)}-${b.slice(6, 8)}`;
    case 10: return `${b.slice(4, 6)}-${b.slice(6, 8)} ${b.slice(8, 10)}:00`;
    case 12: return `${b.slice(8, 10)}:${b.slice(10, 12)}`;
    default: return b;
  }
}

// The same bucket in full, for the hover read-out: "2026-11-25 18:00 UTC".
export function bucketFull(bucket) {
  const b = String(bucket ?? '');
  if (/^\d{10}$/.test(b)) return `${b.slice(0, 4)}-${b.slice(4, 6)}-${b.slice(6, 8)} ${b.slice(8, 10)}:00 UTC`;
  if (/^\d{6}$|^\d{8}$/.test(b)) return `${bucketLabel(b)} (UTC)`;
  return b;
}
