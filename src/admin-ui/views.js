// The dashboard's views. Each has load(get, state) -> data (admin API reads;
// a failed read throws and app.js shows why) and render(data, state, redraw)
// -> element. state.params[view] holds a view's choices (scope, metric...).
import * as f from './format.js';
import { drawChart } from './chart.js';
import { renderTable } from './table.js';

// h('p', {class: 'x'}, 'text', node...): an element; attributes through the
// DOM (never markup), so no text from the API is ever parsed as HTML.
export function h(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    e.append(kid instanceof Node ? kid : String(kid));
  }
  return e;
}

const badge = (text, kind) => h('span', { class: `badge ${kind || ''}` }, text);
const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
const section = (title, ...kids) => h('section', { class: 'card' }, h('h2', {}, title), ...kids);
const field = (label, value) => [h('dt', {}, label), h('dd', {}, value)];

function select(name, options, value, onchange) {
  return h('label', {}, `${name} `, h('select', { name, onchange: (e) => onchange(e.target.value) },
    options.map(([v, text]) => {
      const o = h('option', { value: v }, text);
      if (String(v) === String(value)) o.selected = true;
      return o;
    })));
}

function params(state, view, defaults) {
  state.params[view] = { ...defaults, ...(state.params[view] || {}) };
  return state.params[view];
}

// ---------------------------------------------------------------- overview

const overview = {
  title: 'Overview',
  async load(get) {
    return { o: await get('overview') };
  },
  render({ o }, state) {
    const s = o.store || {};
    const shared = s.type === 'redis';
    const storeState = s.up === false ? badge('down', 'bad') : badge('up', 'good');
    const store = section('Store',
      h('dl', { class: 'facts' },
        field('type', shared ? 'shared (Redis)' : 'this nginx only (shared memory)'),
        shared && field('address', dash(s.url)),
        field('state', storeState),
        shared && field('when down', s.failOpen ? 'fail open (requests pass)' : 'fail closed (503)'),
        shared && field('last error', s.lastError ? `${s.lastError} — ${f.utc(s.lastErrorTime)}` : 'none'),
        shared && field('background writes dropped', f.count(s.telemetryDropped || 0))));
    if (s.up === false) store.classList.add('alarm');

    const providers = section('Providers', renderTable(document, [
      { key: 'name', label: 'Name', value: (p) => p.name, cell: (p) => p.name },
      { key: 'type', label: 'Type', value: (p) => p.type, cell: (p) => p.type },
      { key: 'health', label: 'Health', value: (p) => (p.health ? p.health.state : ''),
        cell: (p) => healthBadge(p.health) },
      { key: 'fails', label: 'Failures in a row', num: true, value: (p) => (p.health ? p.health.consecutiveFailures : null),
        cell: (p) => (p.health ? f.count(p.health.consecutiveFailures) : '—') },
      { key: 'models', label: 'Models', num: true, value: (p) => (p.models || []).length, cell: (p) => f.count((p.models || []).length) },
      { key: 'key', label: 'Key', value: (p) => p.key, cell: (p) => dash(p.key) },
      { key: 'location', label: 'Location', value: (p) => p.location, cell: (p) => h('code', {}, dash(p.location)) },
      { key: 'default', label: 'Default', value: (p) => (p.default ? 1 : 0), cell: (p) => (p.default ? 'yes' : '') },
    ], { id: 'providers', rows: o.providers || [], empty: 'no provider configured' }));

    const feats = o.features || {};
    const pricing = o.pricing || {};
    const warnings = o.warnings || [];
    return h('div', { class: 'grid' },
      section('This replica', h('dl', { class: 'facts' },
        field('replica', dash(o.replica)),
        field('instance', dash(o.instance)),
        field('users', f.count(o.users)),
        field('groups', (o.groups || []).join(', ') || '—'),
        field('built-in prices checked', dash(pricing.builtinDate)),
        field('priced models', f.count(pricing.models)),
        field('unpriced models', pricing.allowUnpriced ? 'billed as zero' : 'refused under a cost budget'),
        field('features', featureList(feats)))),
      store,
      section(`Warnings (${warnings.length})`, warnings.length
        ? h('ul', { class: 'warnings' }, warnings.map((w) => h('li', {}, w)))
        : h('p', { class: 'empty' }, 'no warnings: nothing was logged at warn while the configuration was built')),
      h('div', { class: 'wide' }, providers));
  },
};

const featureNames = { usersFile: 'users file', sharedStore: 'shared store', passthrough: 'passthrough',
  metrics: 'metrics', breaker: 'circuit breaker', retries: 'retries', discovery: 'model discovery' };

function featureList(feats) {
  const on = Object.entries(feats || {}).filter(([, v]) => v === true || (typeof v === 'number' && v > 0));
  return on.map(([k, v]) => (v === true ? featureNames[k] || k : `${featureNames[k] || k} ${v}`)).join(', ') || 'none';
}

function healthBadge(hl) {
  if (!hl) return badge('no calls yet', 'muted');
  const kind = hl.state === 'closed' ? 'good' : hl.state === 'open' ? 'bad' : 'warn';
  const text = hl.state === 'closed' ? 'healthy' : hl.state === 'open' ? 'open (skipped)' : hl.state;
  return h('span', {}, badge(text, kind), hl.retryAt ? h('small', {}, ` retry ${f.utc(hl.retryAt)}`) : '');
}

// ---------------------------------------------------------------- usage

// used(row) and the limit it is measured against; null: no such limit.
const usageColumns = [
  { key: 'rpm', label: 'Requests / min', used: (r) => r.requestsPerMinute, limit: 'requestsPerMinute', fmt: f.count },
  { key: 'rpd', label: 'Requests / day', used: (r) => r.requestsPerDay, limit: 'requestsPerDay', fmt: f.count },
  { key: 'tpd', label: 'Tokens / day', used: (r) => r.tokensInPerDay + r.tokensOutPerDay, limit: 'tokensPerDay', fmt: f.count,
    detail: (r) => `${f.count(r.tokensInPerDay)} in · ${f.count(r.tokensOutPerDay)} out` },
  { key: 'tpm', label: 'Tokens / month', used: (r) => r.tokensInPerMonth + r.tokensOutPerMonth, limit: 'tokensPerMonth', fmt: f.count,
    detail: (r) => `${f.count(r.tokensInPerMonth)} in · ${f.count(r.tokensOutPerMonth)} out` },
  { key: 'cpd', label: 'Cost / day', used: (r) => r.costPerDayMicroUsd, limit: 'costPerDayMicroUsd', fmt: f.usd },
  { key: 'cpm', label: 'Cost / month', used: (r) => r.costPerMonthMicroUsd, limit: 'costPerMonthMicroUsd', fmt: f.usd },
];

// With reservations on (llm_gateway_budget_mode reserve): what requests in
// flight hold on the scope, beside what was spent.
function reservedNote(c, r) {
  const tokens = c.key === 'tpd' || c.key === 'tpm';
  const held = tokens ? r.reservedTokens : c.key === 'cpd' || c.key === 'cpm' ? r.reservedCostMicroUsd : 0;
  return held > 0 ? `${tokens ? f.count(held) : f.usd(held)} reserved` : '';
}

export function meter(used, limit, fmt) {
  const frac = f.fraction(used, limit);
  const box = h('div', { class: 'meter' }, h('span', { class: 'value' }, fmt(used)));
  if (frac === null) return box;
  const lvl = f.level(frac);
  box.append(h('span', { class: 'of' }, ` of ${fmt(limit)} · ${f.percent(frac)}`));
  const bar = h('div', { class: `bar ${lvl}`, role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': limit,
    'aria-valuenow': used, 'aria-label': `${fmt(used)} of ${fmt(limit)}` });
  const fill = h('div', { class: 'fill' });
  fill.style.width = `${Math.min(100, frac * 100)}%`;   // CSSOM, allowed by the page's policy
  bar.append(fill);
  box.append(bar);
  return box;
}

// The response cache today: the hit rate with the hits and misses under it,
// the tokens served from the cache in its tooltip; "—" without a lookup.
function cacheCell(r) {
  const day = r.cache && r.cache.day;
  const c = f.cacheSummary(day);
  if (!c) return '—';
  const title = `${f.count(day.hitTokensIn)} in · ${f.count(day.hitTokensOut)} out tokens served from the cache today`;
  return h('div', { class: 'meter', title }, h('span', { class: 'value' }, c.text), h('small', { class: 'detail' }, c.detail));
}

function usageTable(id, rows, { withGroup, total, now, cache }) {
  const cols = [
    { key: 'name', label: withGroup ? 'User' : 'Group', value: (r) => r.name,
      cell: (r) => (r.kind === 'total' ? h('strong', {}, 'Total (all traffic)') : r.name) },
  ];
  if (withGroup) cols.push({ key: 'group', label: 'Group', value: (r) => r.group, cell: (r) => dash(r.group) });
  for (const c of usageColumns) {
    cols.push({ key: c.key, label: c.label, num: true,
      value: (r) => c.used(r),
      cell: (r) => {
        const m = meter(c.used(r), (r.limits || {})[c.limit], c.fmt);
        if (c.detail) m.append(h('small', { class: 'detail' }, c.detail(r)));
        const held = reservedNote(c, r);
        if (held) m.append(h('small', { class: 'detail' }, held));
        return m;
      } });
  }
  if (cache) {
    cols.push({ key: 'cache', label: 'Cache hits / day', num: true,
      value: (r) => { const c = f.cacheSummary(r.cache && r.cache.day); return c ? c.rate : null; },
      cell: cacheCell });
  }
  cols.push({ key: 'rej', label: 'Rejections today', num: true, value: (r) => r.rejectionsPerDay,
    cell: (r) => (r.rejectionsPerDay > 0 ? badge(f.count(r.rejectionsPerDay), 'bad') : '0') });
  cols.push({ key: 'seen', label: 'Last seen', value: (r) => r.lastSeen,
    cell: (r) => (r.kind === 'total' ? '' : h('span', { title: f.utc(r.lastSeen) }, f.ago(r.lastSeen, now))) });
  return renderTable(document, cols, { id, rows, foot: total ? [total] : [],
    empty: withGroup ? 'no users configured' : 'no groups configured' });
}

const usage = {
  title: 'Usage',
  async load(get) {
    return { u: await get('usage') };
  },
  render({ u }, state) {
    const now = Date.parse(u.time) || Date.now();
    const cache = f.cacheInUse(u);
    return h('div', {},
      h('p', { class: 'muted' }, `Current UTC windows, read ${f.utc(u.time)} from replica ${dash(u.replica)}. `,
        'Bars show usage against the limits that are set; the total counts all LLM traffic (admin calls excluded).',
        cache ? ' Cache hits: the share of today\'s cache lookups answered from the response cache.' : ''),
      section('Users', usageTable('usage-users', u.users || [], { withGroup: true, now, cache })),
      section('Groups', usageTable('usage-groups', u.groups || [], { withGroup: false, total: u.total, now, cache })));
  },
};

// ---------------------------------------------------------------- history

const spans = { hour: 48, day: 30, month: 12 };

async function scopesOf(get, state) {
  if (!state.meta) {
    const [u, c] = await Promise.all([get('usage'), get('catalog')]);
    state.meta = {
      users: (u.users || []).map((x) => x.name),
      groups: (u.groups || []).map((x) => x.name),
      models: (c.models || []).map((m) => m.id),
    };
  }
  return state.meta;
}

const history = {
  title: 'History',
  async load(get, state) {
    const p = params(state, 'history', { scope: 'total', metric: 'req', window: 'day' });
    const meta = await scopesOf(get, state);
    const data = await get('usage/history', { scope: p.scope, metric: p.metric, window: p.window, span: spans[p.window] });
    return { data, meta };
  },
  render({ data, meta }, state, redraw) {
    const p = state.params.history;
    const opts = [['total', 'total (all traffic)'],
      ...meta.users.map((n) => [`user:${n}`, `user ${n}`]),
      ...meta.groups.map((n) => [`group:${n}`, `group ${n}`]),
      ...meta.models.map((n) => [`model:${n}`, `model ${n}`])];
    const set = (k) => (v) => { p[k] = v; redraw(); };
    const controls = h('div', { class: 'controls-row' },
      select('Scope', opts, p.scope, set('scope')),
      select('Metric', Object.entries(f.metricNames).map(([k, v]) => [k, v]), p.metric, set('metric')),
      select('Window', [['hour', 'hours (48)'], ['day', 'days (30)'], ['month', 'months (12)']], p.window, set('window')));
    const points = data.points || [];
    const fmt = (v) => f.metricValue(data.metric, v);
    const sum = points.reduce((a, x) => a + (x.value || 0), 0);
    const title = `${f.metricNames[data.metric] || data.metric} of ${data.scope} per ${data.window} (UTC)`;
    const { svg, readout } = drawChart(document, points, { format: fmt, label: f.bucketLabel, full: f.bucketFull, title });
    return h('div', {}, controls,
      section(title, h('p', { class: 'muted' }, `${points.length} buckets, oldest first; in all ${fmt(sum)}.`),
        readout, h('div', { class: 'chart-box' }, svg),
        sum === 0 ? h('p', { class: 'empty' }, 'no usage recorded in these buckets') : null));
  },
};

// ---------------------------------------------------------------- models

const models = {
  title: 'Models',
  async load(get, state) {
    const p = params(state, 'models', { metric: 'cost', window: 'day', span: 1, prefix: '', detail: '1' });
    return { r: await get('usage/models', { metric: p.metric, window: p.window, span: p.span, prefix: p.prefix,
      detail: p.detail === '1' ? 1 : undefined, limit: 100 }) };
  },
  render({ r }, state, redraw) {
    const p = state.params.models;
    const set = (k) => (v) => { p[k] = v; redraw(); };
    const max = { hour: 48, day: 35, month: 13 }[p.window];
    const prefix = h('input', { type: 'search', name: 'prefix', value: p.prefix, placeholder: 'provider/', size: 12 });
    prefix.addEventListener('change', () => set('prefix')(prefix.value.trim()));
    const span = h('input', { type: 'number', name: 'span', min: 1, max, value: Math.min(p.span, max) });
    span.addEventListener('change', () => set('span')(Math.max(1, Math.min(max, Number(span.value) || 1))));
    const detail = h('input', { type: 'checkbox', name: 'detail' });
    detail.checked = p.detail === '1';
    detail.addEventListener('change', () => set('detail')(detail.checked ? '1' : '0'));
    const controls = h('div', { class: 'controls-row' },
      select('Rank by', Object.entries(f.metricNames), p.metric, set('metric')),
      select('Window', [['hour', 'hour'], ['day', 'day'], ['month', 'month']], p.window, set('window')),
      h('label', {}, 'Buckets ', span), h('label', {}, 'Prefix ', prefix), h('label', {}, detail, ' detail'));
    const fmt = (v) => f.metricValue(r.metric, v);
    const cols = [
      { key: 'rank', label: '#', num: true, value: (m) => m.rank, cell: (m) => String(m.rank) },
      { key: 'model', label: 'Model', value: (m) => m.model,
        cell: (m) => h('span', {}, m.model, m.free ? badge('free', 'muted') : '') },
      { key: 'value', label: f.metricNames[r.metric] || r.metric, num: true, value: (m) => m.value, cell: (m) => fmt(m.value) },
    ];
    if (p.detail === '1') {
      cols.push(
        { key: 'requests', label: 'Requests', num: true, value: (m) => m.requests, cell: (m) => f.count(m.requests) },
        { key: 'tokensIn', label: 'Tokens in', num: true, value: (m) => m.tokensIn, cell: (m) => f.count(m.tokensIn) },
        { key: 'tokensOut', label: 'Tokens out', num: true, value: (m) => m.tokensOut, cell: (m) => f.count(m.tokensOut) },
        { key: 'cost', label: 'Cost', num: true, value: (m) => m.costMicroUsd, cell: (m) => f.usd(m.costMicroUsd) });
    }
    const rows = (r.models || []).map((m, i) => ({ ...m, rank: i + 1 }));
    return h('div', {}, controls,
      section(`Models by ${f.metricNames[r.metric] || r.metric}, ${r.span} ${r.window}${r.span > 1 ? 's' : ''} (UTC)`,
        h('p', { class: 'muted' }, `${f.count(r.total)} model${r.total === 1 ? '' : 's'} with usage${r.total > rows.length ? `; the first ${rows.length} shown` : ''}.`),
        renderTable(document, cols, { id: 'models', rows, empty: 'no model has usage in this window' })));
  },
};

// ---------------------------------------------------------------- failure feed

const events = {
  title: 'Failures',
  async load(get) {
    return { e: await get('events', { limit: 200 }) };
  },
  render({ e }) {
    const list = e.events || [];
    const src = e.source === 'redis' ? 'the shared list (all replicas)' : `replica ${dash(e.replica)}'s own ring`;
    const cols = [
      { key: 'time', label: 'Time (UTC)', value: (x) => x.time, cell: (x) => f.utc(x.time) },
      { key: 'kind', label: 'Kind', value: (x) => x.kind, cell: (x) => badge(dash(x.kind), kindClass(x.kind)) },
      { key: 'route', label: 'Route', value: (x) => x.route, cell: (x) => dash(x.route) },
      { key: 'status', label: 'Status', num: true, value: (x) => x.status, cell: (x) => dash(x.status) },
      { key: 'user', label: 'User', value: (x) => x.user, cell: (x) => dash(x.user) },
      { key: 'model', label: 'Model', value: (x) => x.model, cell: (x) => dash(x.model) },
      { key: 'replica', label: 'Replica', value: (x) => x.replica, cell: (x) => dash(x.replica) },
      { key: 'message', label: 'Message', value: (x) => x.message, cell: (x) => h('span', { class: 'message' }, dash(x.message)) },
    ];
    return h('div', {},
      e.degraded ? h('p', { class: 'banner inline warn', role: 'status' },
        'Degraded: the store could not be read, so this is only this replica\'s own ring.') : null,
      section(`Failure feed — newest first, from ${src}`,
        h('p', { class: 'muted' }, `${f.count(list.length)} of at most ${f.count(e.capacity)} kept.`),
        renderTable(document, cols, { id: 'events', rows: list, empty: 'no events recorded' })));
  },
};

function kindClass(k) {
  return k === 'rate_limit' || k === 'budget' ? 'warn' : k === 'unpriced' ? 'muted' : 'bad';
}

// ---------------------------------------------------------------- targets

const access = (a) => (a === null || a === undefined ? 'every group' : a.length ? a.join(', ') : 'no group');

const targets = {
  title: 'Targets',
  async load(get) {
    return { t: await get('targets') };
  },
  render({ t }) {
    const req = (w) => ({ key: w, label: `Requests / ${w}`, num: true, value: (x) => (x.requests || {})[w],
      cell: (x) => f.count((x.requests || {})[w]) });
    const cols = [
      { key: 'kind', label: 'Kind', value: (x) => x.kind, cell: (x) => (x.kind === 'mcp' ? 'tool server (MCP)' : 'agent (A2A)') },
      { key: 'name', label: 'Name', value: (x) => x.name, cell: (x) => x.name },
      { key: 'url', label: 'URL', value: (x) => x.url, cell: (x) => h('code', {}, dash(x.url)) },
      { key: 'access', label: 'Access', value: (x) => access(x.access), cell: (x) => access(x.access) },
      { key: 'federated', label: 'Federated', value: (x) => (x.kind === 'mcp' ? (x.federated ? 'yes' : 'no') : ''),
        cell: (x) => (x.kind === 'mcp' ? (x.federated ? 'yes' : 'no (legacy SSE)') : '') },
      req('min'), req('hour'), req('day'), req('month'),
    ];
    return section('Tool servers and agents',
      renderTable(document, cols, { id: 'targets', rows: t.targets || [], empty: 'no tool servers or agents configured' }));
  },
};

// ---------------------------------------------------------------- catalog

const catalog = {
  title: 'Catalog',
  async load(get) {
    return { c: await get('catalog') };
  },
  render({ c }) {
    const srcText = { override: 'override (llm_gateway_price)', builtin: 'built-in table', free: 'free', unpriced: 'unpriced' };
    const cols = [
      { key: 'id', label: 'Model', value: (m) => m.id, cell: (m) => m.id },
      { key: 'provider', label: 'Provider', value: (m) => m.provider, cell: (m) => m.provider },
      { key: 'source', label: 'Price source', value: (m) => m.source,
        cell: (m) => badge(srcText[m.source] || m.source, m.source === 'unpriced' ? 'warn' : m.source === 'free' ? 'muted' : '') },
      { key: 'in', label: 'Input / M tokens', num: true, value: (m) => m.inputUsdPerMTok, cell: (m) => f.usdPerMTok(m.inputUsdPerMTok) },
      { key: 'out', label: 'Output / M tokens', num: true, value: (m) => m.outputUsdPerMTok, cell: (m) => f.usdPerMTok(m.outputUsdPerMTok) },
    ];
    return section('Catalog and prices',
      h('p', { class: 'muted' }, `Built-in prices checked on ${dash(c.builtinPricesChecked)}. Unpriced models are `,
        c.allowUnpriced ? 'billed as zero.' : 'refused (402) under a cost budget.'),
      renderTable(document, cols, { id: 'catalog', rows: c.models || [], empty: 'no model listed in any provider\'s models=' }));
  },
};

// ---------------------------------------------------------------- configuration

const config = {
  title: 'Configuration',
  async load(get) {
    return { c: await get('config') };
  },
  render({ c }) {
    const limits = (l) => Object.entries(l || {}).map(([k, v]) => `${k} ${/MicroUsd$/.test(k) ? f.usd(v) : f.count(v)}`).join(', ') || 'none';
    const users = renderTable(document, [
      { key: 'name', label: 'User', value: (u) => u.name, cell: (u) => u.name },
      { key: 'group', label: 'Group', value: (u) => u.group, cell: (u) => dash(u.group) },
      { key: 'admin', label: 'Admin', value: (u) => (u.admin ? 1 : 0), cell: (u) => (u.admin ? 'yes' : '') },
      { key: 'keySource', label: 'Key', value: (u) => u.keySource, cell: (u) => dash(u.keySource) },
      { key: 'limits', label: 'Limits', value: (u) => limits(u.limits), cell: (u) => limits(u.limits) },
    ], { id: 'config-users', rows: c.users || [], empty: 'no users configured' });
    const groups = renderTable(document, [
      { key: 'name', label: 'Group', value: (g) => g.name, cell: (g) => g.name },
      { key: 'limits', label: 'Limits', value: (g) => limits(g.limits), cell: (g) => limits(g.limits) },
    ], { id: 'config-groups', rows: c.groups || [], empty: 'no groups configured' });
    const aliases = renderTable(document, [
      { key: 'name', label: 'Alias', value: (a) => a.name, cell: (a) => a.name },
      { key: 'targets', label: 'Targets, in failover order', value: (a) => (a.targets || []).join(' '), cell: (a) => (a.targets || []).join(' → ') },
    ], { id: 'config-aliases', rows: c.aliases || [], empty: 'no aliases configured' });
    return h('div', {},
      h('p', { class: 'muted' }, 'The effective configuration, as the admin API returns it: keys and passwords are never in it, only how they are given.'),
      section('Users', users), section('Groups', groups), section('Aliases', aliases),
      section('Everything (JSON)', h('pre', { class: 'json' }, JSON.stringify(c, null, 2))));
  },
};

export const views = { overview, usage, history, models, events, targets, catalog, config };
