'use strict';
// got's hooks carrying each request on the pool's resources, by the host's
// attempt protocol (lib/attempts.js):
//
//   const client = got.extend(repute.gotOptions(pool, { kind: 'proxy' }));
//
// beforeRequest leases a resource and routes the attempt (a proxy's
// through an http(s) agent for that proxy, a bounded cache of them; a
// key's with its credential header); afterResponse tells the answer (got
// has read the whole body) and, when the protocol says so, retries through
// got's own retry (retryWithMergedOptions); retry.calculateDelay tells a
// transport error and retries at once when the protocol says so, never
// otherwise; beforeError ends the request. When a retry finds no resource,
// the last answer is the request's result, replayed from beforeRequest.
// got's promise API only: a got stream is refused. An abort by `signal`
// ends the request's attempts; got's `.cancel()` runs no hook, so a
// cancelled attempt's lease is held until the garbage collector takes
// the request's attempts (their native side then releases it).

const { Readable } = require('node:stream');
const { HttpProxyAgent, HttpsProxyAgent } = require('hpagent');
const { Pool, isRefusal } = require('./pool');
const { Plan, contextOf, kNextRoute } = require('./attempts');
const { failureOf } = require('./dispatcher');
const { invalidArg, optStr, optUint, obj } = require('./checks');

/** The request's attempts in got's per-request `context` (shallow-copied into each retry's options). */
const kState = Symbol('repute.gotAttempts');
const DEFAULT_MAX_PROXIES = 64;

/** Node's response headers (values or arrays of them) as pairs. */
function headerPairs(headers) {
  const pairs = [];
  for (const [k, v] of Object.entries(headers ?? {})) {
    for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) pairs.push([k, String(one)]);
  }
  return pairs;
}

/** A response got reads as it reads a server's: the last answer, given back when no resource is left. */
function replay({ statusCode, statusMessage, headers, bytes }) {
  const again = Readable.from([bytes]);
  const { 'content-encoding': _, ...plain } = headers;
  return Object.assign(again, { statusCode, statusMessage, headers: { ...plain, 'content-length': String(bytes.length) } });
}

/** One got request's attempts: `sent` (an attempt in flight), `again` (retrying), `done`. */
class Followed {
  /** @param {import('./attempts').Attempts} attempts @param {AbortSignal | undefined} signal */
  constructor(attempts, signal) {
    this.attempts = attempts;
    this.phase = 'again';
    /** The last attempt's result: an answer (status, headers, bytes) or a transport error. @type {any} */
    this.last = null;
    // got settles an aborted request without its hooks: the abort ends the attempts itself.
    this.signal = signal;
    this.onAbort = () => this.end();
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  end() {
    this.signal?.removeEventListener('abort', this.onAbort);
    this.phase = 'done';
    this.attempts.end();
  }
}

/**
 * got's options (`hooks`, `retry.calculateDelay`) for `got.extend`: `{
 * context, kind, where, exclude, prefer, affinity, attempts, timeoutMs,
 * maxProxies }`, `context` a string or a function of got's options; by
 * default `contextOf` the request. Its `close()` (not enumerable, so got
 * takes the rest) closes the proxies' agents.
 * @param {Pool} pool @param {import('../index').GotAdapterOptions} [options]
 */
function gotOptions(pool, options = {}) {
  if (!(pool instanceof Pool)) throw invalidArg('pool', 'must be a Pool');
  const o = obj('options', options);
  if (o.context !== undefined && o.context !== null && typeof o.context !== 'function') optStr('context', o.context);
  const kind = optStr('kind', o.kind) ?? null;
  const maxProxies = optUint('maxProxies', o.maxProxies) ?? DEFAULT_MAX_PROXIES;
  if (maxProxies < 1) throw invalidArg('maxProxies', 'must be >= 1');
  const plan = new Plan(pool, o);

  /** Agents of each proxy, most recently used last. @type {Map<string, { http: HttpProxyAgent, https: HttpsProxyAgent }>} */
  const agents = new Map();
  const agentsOf = (value) => {
    let pair = agents.get(value);
    if (pair !== undefined) {
      agents.delete(value);
    } else {
      const proxy = value.includes('://') ? value : `http://${value}`;
      pair = { http: new HttpProxyAgent({ proxy, keepAlive: true }), https: new HttpsProxyAgent({ proxy, keepAlive: true }) };
      if (agents.size >= maxProxies) {
        const [oldest, evicted] = /** @type {[string, any]} */ (agents.entries().next().value);
        agents.delete(oldest);
        evicted.http.destroy();
        evicted.https.destroy();
      }
    }
    agents.set(value, pair);
    return pair;
  };

  const contextFor = (options) => {
    if (typeof o.context === 'string') return o.context;
    if (typeof o.context === 'function') return o.context(options);
    const body = typeof options.body === 'string' || options.body instanceof Uint8Array ? options.body : options.json !== undefined ? JSON.stringify(options.json) : null;
    return contextOf(pool, options.url, { kind, body });
  };

  /** @param {any} options */
  const beforeRequest = async (options) => {
    if (options.isStream) throw invalidArg('isStream', "got streams are not carried by the pool: use got's promise API, or repute.dispatcher");
    /** @type {Followed} */
    let followed = options.context[kState];
    if (followed === undefined) {
      followed = new Followed(plan.start(contextFor(options)), options.signal ?? undefined);
      options.context[kState] = followed;
    }
    let route;
    try {
      route = await followed.attempts[kNextRoute](options.signal ?? undefined);
    } catch (e) {
      followed.end();
      const refused = isRefusal(e);
      if (refused && followed.last?.bytes) return replay(followed.last);
      throw refused && followed.last?.error ? followed.last.error : e;
    }
    followed.phase = 'sent';
    if (route.via === 'proxy') {
      options.agent = agentsOf(String(route.proxy));
    } else if (route.via === 'header') {
      const name = String(route.name).toLowerCase();
      for (const k of Object.keys(options.headers)) if (k.toLowerCase() === name) delete options.headers[k];
      options.headers[name] = route.value;
    }
  };

  /** @param {any} response @param {(o: object) => any} retryWithMergedOptions */
  const afterResponse = (response, retryWithMergedOptions) => {
    /** @type {Followed | undefined} */
    const followed = response.request?.options?.context?.[kState];
    if (followed === undefined || followed.phase !== 'sent') return response;
    const { statusCode, statusMessage, headers, rawBody } = response;
    const bytes = Buffer.from(rawBody ?? []);
    const step = followed.attempts.answered(statusCode, { headers: headerPairs(headers), body: statusCode >= 400 ? bytes.toString() : null });
    if (step === 'retry') {
      followed.last = { statusCode, statusMessage, headers, bytes };
      followed.phase = 'again';
      return retryWithMergedOptions({ preserveHooks: true });
    }
    // got has read the whole body before this hook runs.
    if (step === 'stream') followed.attempts.finished();
    followed.end();
    return response;
  };

  /** got's retry decision: the protocol's for the attempt in flight, never got's own. @param {any} r */
  const calculateDelay = ({ error }) => {
    /** @type {Followed | undefined} */
    const followed = error?.options?.context?.[kState];
    if (followed === undefined) return 0;
    // retryWithMergedOptions: the protocol already said to retry.
    if (followed.phase === 'again') return 1;
    if (followed.phase !== 'sent') return 0;
    const kind = failureOf(error);
    if (kind !== null && followed.attempts.failed(kind) === 'retry') {
      followed.last = { error };
      followed.phase = 'again';
      return 1;
    }
    followed.end();
    return 0;
  };

  /** @param {any} error */
  const beforeError = (error) => {
    const followed = error?.options?.context?.[kState];
    if (followed !== undefined && followed.phase !== 'done') followed.end();
    return error;
  };

  const result = { hooks: { beforeRequest: [beforeRequest], afterResponse: [afterResponse], beforeError: [beforeError] }, retry: { calculateDelay } };
  Object.defineProperty(result, 'close', {
    enumerable: false,
    value() {
      for (const pair of agents.values()) {
        pair.http.destroy();
        pair.https.destroy();
      }
      agents.clear();
    },
  });
  Object.defineProperty(result, 'proxies', { enumerable: false, get: () => agents.size });
  return result;
}

module.exports = { gotOptions };
