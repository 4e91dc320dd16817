// The API as the console calls it: the key (or, with auth off, the tenant)
// kept in this tab's sessionStorage and sent as a header, never in a URL.

const KEY = 'repute.key';
const TENANT = 'repute.tenant';

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export const auth = {
  get key() { return sessionStorage.getItem(KEY); },
  get tenant() { return sessionStorage.getItem(TENANT); },
  set(key, tenant) {
    if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
    if (tenant) sessionStorage.setItem(TENANT, tenant); else sessionStorage.removeItem(TENANT);
  },
  clear() { sessionStorage.removeItem(KEY); sessionStorage.removeItem(TENANT); },
};

function headers(extra) {
  const h = new Headers(extra);
  if (auth.key) h.set('Authorization', `Bearer ${auth.key}`);
  else if (auth.tenant) h.set('Repute-Tenant', auth.tenant);
  return h;
}

/** One call; a refusal becomes an ApiError carrying the problem+json. */
export async function call(method, path, body) {
  const init = { method, headers: headers(), cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    init.headers.set('Content-Type', 'application/json');
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  if (text) {
    try { json = JSON.parse(text); } catch { json = null; }
  }
  if (!res.ok) throw new ApiError(res.status, json || { title: text });
  return { json, headers: res.headers };
}

/** The path of one resource, each part percent-encoded. */
export function resourcePath(kind, value, rest = '') {
  return `/v1/resources/${encodeURIComponent(kind)}/${encodeURIComponent(value)}${rest}`;
}

/**
 * Server-Sent Events over fetch (EventSource cannot send the key's header):
 * calls onEvent(name, data) for each event until `signal` aborts; a dropped
 * stream is opened again after a pause.
 */
export async function events(onEvent, onState, signal) {
  while (!signal.aborted) {
    try {
      const res = await fetch('/v1/events', { headers: headers({ Accept: 'text/event-stream' }), signal, credentials: 'omit' });
      if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => ({})));
      onState(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = 'message';
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event:')) name = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          }
          if (data.length) onEvent(name, data.join('\n'));
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.status === 401) { onState(false, e); return; }
    }
    onState(false);
    await new Promise((r) => setTimeout(r, 2000));
  }
}
