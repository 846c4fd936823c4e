// The dashboard: sign-in, the views (views.js), the refresh loop. It reads
// only this gateway's admin API (api.js) and keeps the key in this tab.
import { ApiFailure, clearKey, getJson, getKey, setKey } from './api.js';
import { utc } from './format.js';
import { h, views } from './views.js';

const $ = (id) => document.getElementById(id);

const state = {
  key: getKey(),     // memory; sessionStorage keeps it across reloads of this tab
  view: 'overview',
  params: {},        // per-view choices
  meta: null,        // names for the history's scope list, read once per sign-in
  paused: false,
  timer: 0,
  seq: 0,            // the newest refresh; older answers are dropped
};

function banner(text, kind) {
  const b = $('banner');
  b.textContent = text || '';
  b.className = `banner ${kind || ''}`;
  b.hidden = !text;
}

function showSignedIn(yes) {
  $('signin').hidden = yes;
  $('controls').hidden = !yes;
  $('tabs').hidden = !yes;
  if (!yes) {
    $('view').replaceChildren();
    $('where').textContent = '';
    $('key').value = '';
    $('key').focus();
  }
}

function signOut(message, kind) {
  clearTimeout(state.timer);
  state.key = '';
  state.meta = null;
  state.seq++;
  clearKey();
  showSignedIn(false);
  banner(message, kind);
}

function viewFromHash() {
  const v = location.hash.replace(/^#/, '');
  return Object.hasOwn(views, v) ? v : 'overview';
}

function markTab() {
  for (const b of $('tabs').querySelectorAll('button')) {
    const on = b.dataset.view === state.view;
    b.classList.toggle('active', on);
    if (on) b.setAttribute('aria-current', 'page'); else b.removeAttribute('aria-current');
  }
}

const get = (path, params) => getJson(path, params, state.key);

// Reads the current view and draws it; failures are shown for what they are.
async function refresh() {
  clearTimeout(state.timer);
  if (!state.key) return;
  const seq = ++state.seq;
  const name = state.view;
  const view = views[name];
  markTab();
  $('view').setAttribute('aria-busy', 'true');
  try {
    const data = await view.load(get, state);
    if (seq !== state.seq) return;
    const el = view.render(data, state, () => refresh());
    el.dataset.view = name;
    $('view').replaceChildren(h('h2', { class: 'view-title' }, view.title), el);
    banner('');
    $('updated').textContent = `updated ${utc(Date.now()).slice(11)}`;
    if (name === 'overview' && data.o) $('where').textContent = `replica ${data.o.replica || '?'}${data.o.instance ? ` · ${data.o.instance}` : ''}`;
  } catch (e) {
    if (seq !== state.seq) return;
    const failure = e instanceof ApiFailure ? e : new ApiFailure(-1, { error: { message: String(e && e.message) } });
    if (failure.kind === 'auth' || failure.kind === 'forbidden') {
      signOut(failure.message, 'bad');
      return;
    }
    if (failure.kind === 'outage') {
      // Never zeros: the view is replaced by what is known, the outage.
      $('view').replaceChildren(h('h2', { class: 'view-title' }, view.title),
        h('div', { class: 'outage', dataset: { view: name } }, h('strong', {}, 'Store outage'), h('p', {}, failure.message),
          h('p', { class: 'muted' }, 'The overview shows the store\'s last error; the figures come back when the store answers.')));
      banner(failure.message, 'bad');
    } else {
      banner(failure.message, failure.kind === 'limited' || failure.kind === 'gone' ? 'warn' : 'bad');
    }
  } finally {
    if (seq === state.seq) {
      $('view').removeAttribute('aria-busy');
      schedule();
    }
  }
}

function schedule() {
  clearTimeout(state.timer);
  if (state.paused || !state.key) return;
  state.timer = setTimeout(() => { if (!document.hidden) refresh(); else schedule(); }, Number($('interval').value) * 1000);
}

function start() {
  $('signin').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = $('key').value.trim();
    if (!k) return;
    // A header value carries printable ASCII only; anything else could never be a key.
    if (!/^[\x21-\x7e]+$/.test(k)) {
      banner('An API key is printable ASCII without spaces; this is not one.', 'bad');
      return;
    }
    state.key = k;
    setKey(k);
    $('key').value = '';
    showSignedIn(true);
    banner('');
    refresh();
  });
  $('signout').addEventListener('click', () => signOut('Signed out. The key was removed from this tab.', ''));
  $('pause').addEventListener('click', () => {
    state.paused = !state.paused;
    $('pause').textContent = state.paused ? 'Resume' : 'Pause';
    $('pause').setAttribute('aria-pressed', String(state.paused));
    if (state.paused) clearTimeout(state.timer); else refresh();
  });
  $('interval').addEventListener('change', schedule);
  $('tabs').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-view]');
    if (b) location.hash = b.dataset.view;   // hashchange draws it
  });
  window.addEventListener('hashchange', () => { state.view = viewFromHash(); refresh(); });
  document.addEventListener('visibilitychange', () => { if (!document.hidden && !state.paused && state.key) refresh(); });

  state.view = viewFromHash();
  if (state.key) {
    showSignedIn(true);
    refresh();
  } else {
    showSignedIn(false);
  }
}

start();
