// The admin key and the admin API. The key lives in this tab's
// sessionStorage (never localStorage, never the URL) and goes out only as
// x-api-key on this gateway's /admin/api/* calls.

const KEY_NAME = 'llmgw-admin-key';

export function getKey(storage = globalThis.sessionStorage) {
  try { return storage.getItem(KEY_NAME) || ''; } catch { return ''; }
}
export function setKey(key, storage = globalThis.sessionStorage) {
  try { storage.setItem(KEY_NAME, key); } catch { /* private mode: memory only, see app.js */ }
}
export function clearKey(storage = globalThis.sessionStorage) {
  try { storage.removeItem(KEY_NAME); } catch { /* nothing kept */ }
}

// What a failed call means to the reader. kind: auth (401: sign in again),
// forbidden (403), outage (503: a store that cannot be read, never zeros),
// limited (429: the admin key's own limit), gone (network), error (the rest).
export function describeFailure(status, body) {
  const err = body && typeof body === 'object' && body.error && typeof body.error === 'object' ? body.error : {};
  const said = typeof err.message === 'string' ? err.message : '';
  switch (status) {
    case 0:
      return { kind: 'gone', text: 'The gateway could not be reached. The figures shown may be out of date.' };
    case 401:
      return { kind: 'auth', text: `The gateway did not accept this key (401${said ? `: ${said}` : ''}). Sign in with an admin key.` };
    case 403:
      return { kind: 'forbidden', text: `This key is not an admin key (403${said ? `: ${said}` : ''}). Sign in with the key of a user that has admin.` };
    case 429:
      return { kind: 'limited', text: `This admin key's own limit refused the read (429${said ? `: ${said}` : ''}). The next refresh tries again.` };
    case 503:
      return { kind: 'outage', text: `Store outage: ${said || 'the limit store could not be read'} (503). Counters are unavailable, not zero.` };
    default:
      return { kind: 'error', text: `The gateway answered ${status}${said ? `: ${said}` : ''}.` };
  }
}

export class ApiFailure extends Error {
  constructor(status, body) {
    const d = describeFailure(status, body);
    super(d.text);
    this.status = status;
    this.kind = d.kind;
  }
}

// GET <admin>/api/<path>?<params> as JSON; throws ApiFailure.
export async function getJson(path, params = {}, key = getKey()) {
  const url = new URL(`../api/${path}`, import.meta.url);
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  let res;
  try {
    res = await fetch(url, { headers: { 'x-api-key': key }, cache: 'no-store', credentials: 'omit',
      redirect: 'error', referrerPolicy: 'no-referrer' });
  } catch {
    throw new ApiFailure(0, null);
  }
  let body = null;
  try { body = await res.json(); } catch { body = null; }
  if (!res.ok) throw new ApiFailure(res.status, body);
  if (body === null || typeof body !== 'object') throw new ApiFailure(502, { error: { message: 'the answer was not JSON' } });
  return body;
}
