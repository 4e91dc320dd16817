'use strict';
// An undici Dispatcher that carries each request on the pool's resources,
// so `undici.request`, `undici.fetch` and every SDK that takes a dispatcher
// or a `fetch` use the pool in one line. Each try follows the host's
// attempt protocol (lib/attempts.js): a proxy's request goes through an
// undici ProxyAgent for that proxy (a bounded cache of them), a key's with
// its credential header; an error answer is read whole, judged, and
// replayed to the caller when it is the answer; a success streams to the
// caller with its lease held until the body ends.

const { Dispatcher, Agent, ProxyAgent, fetch: undiciFetch, errors: undiciErrors } = require('undici');
// undici's own adapter from its newer handler interface to the one its
// request(), fetch() and this class deliver to.
const UnwrapHandler = require('undici/lib/handler/unwrap-handler');
const zlib = require('node:zlib');
const { Pool, isRefusal } = require('./pool');
const { Plan, contextOf, kNextRoute, kTryRoute, READ_HEADERS } = require('./attempts');
const { invalidArg, optStr, optUint, obj } = require('./checks');

/** Proxies whose agent (and connections) stay open, least recently used first out. */
const DEFAULT_MAX_PROXIES = 64;

const TIMEOUTS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);
const RESETS = new Set(['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'ECONNABORTED', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * The failure kind of a transport error, or null for one that is not the
 * resource's (a bad request, the caller's abort): then it is raised as is.
 * @param {any} err
 */
function failureOf(err) {
  const code = err?.code ?? err?.cause?.code;
  if (typeof code !== 'string') return null;
  if (TIMEOUTS.has(code)) return 'timeout';
  if (RESETS.has(code)) return 'connection_reset';
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code)) return 'tls_handshake';
  if (code === 'UND_ERR_ABORTED' && /^Proxy response/.test(String(err.message))) return 'connection_reset';
  return null;
}

/** Request headers (object, flat array, pairs or iterable of pairs) as pairs. */
function requestHeaders(headers) {
  if (headers === undefined || headers === null) return [];
  if (Array.isArray(headers)) {
    if (headers.every((h) => Array.isArray(h))) return headers.map(([k, v]) => [String(k), v]);
    const pairs = [];
    for (let i = 0; i < headers.length; i += 2) pairs.push([String(headers[i]), headers[i + 1]]);
    return pairs;
  }
  if (typeof headers[Symbol.iterator] === 'function') return [...headers].map(([k, v]) => [String(k), v]);
  return Object.entries(headers);
}

/** A request body as bytes, so every attempt can send it again (FormData is re-encoded each time). */
async function replayable(body) {
  if (body === undefined || body === null) return null;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return body;
  if (typeof FormData !== 'undefined' && body instanceof FormData) return body;
  if (typeof body.arrayBuffer === 'function') return Buffer.from(await body.arrayBuffer());
  if (typeof body[Symbol.asyncIterator] === 'function' || typeof body[Symbol.iterator] === 'function') {
    const chunks = [];
    for await (const chunk of body) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk));
    return Buffer.concat(chunks);
  }
  throw invalidArg('body', 'must be a string, bytes, a Blob, FormData or an iterable of chunks');
}

/** An error answer's body as text for the profile, decoded if compressed. */
function bodyText(bytes, encoding) {
  try {
    if (encoding === 'gzip' || encoding === 'x-gzip') return zlib.gunzipSync(bytes).toString();
    if (encoding === 'deflate') return zlib.inflateSync(bytes).toString();
    if (encoding === 'br') return zlib.brotliDecompressSync(bytes).toString();
  } catch {
    return '';
  }
  return Buffer.from(bytes).toString();
}

/**
 * A request's cancellation by its caller, seen by each try, with an
 * AbortSignal made only when a wait for a resource needs one: most
 * requests never wait, and an AbortController per request cost more than
 * the rest of a try's bookkeeping.
 */
class Cancel {
  aborted = false;
  /** @type {any} */
  reason = undefined;
  /** @type {AbortController | null} */
  #controller = null;

  /** @param {any} reason */
  abort(reason) {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.#controller?.abort(reason);
  }

  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.aborted) this.#controller.abort(this.reason);
    }
    return this.#controller.signal;
  }
}

/**
 * One try's handler on the inner agent. An error answer is read whole and
 * judged; a success the protocol streams goes to the caller's handler as it
 * comes (its pauses pause this request), and its lease is reported and
 * released when the body ends. `done` resolves to `{ streamed }`, to the
 * error answer `{ step, status, rawHeaders, statusText, bytes }`, or to the
 * transport failure `{ step, error }`; it rejects with an error that is no
 * resource's (the caller's abort, a bad request), to be raised as is.
 */
class Try {
  #attempts;
  #h;
  #cancel;
  #onAbort;
  /** `answer` (reading an error answer), `stream` (delivering), `drop` (a success not delivered). */
  #mode = 'answer';
  /** The answer's status and headers, once they came. @type {any} */
  #answer = null;
  #chunks = [];
  #settle;
  #fail;

  constructor(attempts, h, cancel, onAbort) {
    this.#attempts = attempts;
    this.#h = h;
    this.#cancel = cancel;
    this.#onAbort = onAbort;
    /** @type {Promise<any>} */
    this.done = new Promise((ok, fail) => {
      this.#settle = ok;
      this.#fail = fail;
    });
  }

  onConnect(abort) {
    if (this.#cancel.aborted) return abort(this.#cancel.reason);
    this.#onAbort(abort);
  }

  onHeaders(status, rawHeaders, resume, statusText) {
    if (status < 200) return true;
    // What the profile reads of the headers, and how an error's body is encoded.
    const headers = [];
    let encoding;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i].toString('latin1').toLowerCase();
      if (READ_HEADERS.has(name)) headers.push([name, rawHeaders[i + 1].toString('latin1')]);
      else if (name === 'content-encoding') encoding = rawHeaders[i + 1].toString('latin1');
    }
    this.#answer = { status, rawHeaders, statusText: statusText ?? '', headers, encoding };
    if (status >= 400) return true;
    const step = this.#attempts.answered(status, { headers });
    if (step !== 'stream') {
      this.#mode = 'drop';
      this.#answer.step = step;
      return true;
    }
    this.#mode = 'stream';
    this.#settle({ streamed: true });
    return this.#h.onHeaders(status, rawHeaders, resume, statusText);
  }

  onData(chunk) {
    if (this.#mode === 'stream') return this.#h.onData(chunk);
    this.#chunks.push(chunk);
    return true;
  }

  onComplete(trailers) {
    if (this.#mode === 'stream') {
      this.#attempts.finished();
      return this.#h.onComplete(trailers);
    }
    const bytes = Buffer.concat(this.#chunks);
    const answer = this.#answer;
    if (this.#mode === 'answer') {
      answer.step = this.#attempts.answered(answer.status, { headers: answer.headers, body: bodyText(bytes, answer.encoding) });
    }
    this.#settle({ ...answer, bytes });
  }

  onError(err) {
    const kind = this.#cancel.aborted ? null : failureOf(err);
    if (this.#mode === 'stream') {
      this.#attempts.finished(this.#cancel.aborted ? null : (kind ?? 'connection_reset'));
      return this.#h.onError(this.#cancel.aborted ? this.#cancel.reason : err);
    }
    if (kind === null) return this.#fail(this.#cancel.aborted ? this.#cancel.reason : err);
    this.#settle({ step: this.#attempts.failed(kind), error: err });
  }
}

/**
 * `{ context, kind, where, exclude, prefer, affinity, attempts, timeoutMs,
 * maxProxies }`: `context` a string, or a function of the request's
 * dispatch options; by default `contextOf` the request.
 */
class ReputeDispatcher extends Dispatcher {
  #pool;
  /** @type {Plan} */
  #plan;
  #context;
  #kind;
  #maxProxies;
  /** @type {Map<string, ProxyAgent>} */
  #proxies = new Map();
  #direct = new Agent();
  #closed = false;

  /** @param {Pool} pool @param {import('../index').DispatcherOptions} [options] */
  constructor(pool, options = {}) {
    super();
    if (!(pool instanceof Pool)) throw invalidArg('pool', 'must be a Pool');
    const o = obj('options', options);
    if (o.context !== undefined && o.context !== null && typeof o.context !== 'function') optStr('context', o.context);
    this.#pool = pool;
    this.#context = o.context ?? null;
    this.#kind = optStr('kind', o.kind) ?? null;
    this.#maxProxies = optUint('maxProxies', o.maxProxies) ?? DEFAULT_MAX_PROXIES;
    if (this.#maxProxies < 1) throw invalidArg('maxProxies', 'must be >= 1');
    this.#plan = new Plan(pool, o);
  }

  dispatch(opts, handler) {
    const h = UnwrapHandler.unwrap(handler);
    if (this.#closed) {
      queueMicrotask(() => h.onError(new undiciErrors.ClientClosedError()));
      return false;
    }
    // #run delivers its own failures to the handler; what is left is the handler's own throw.
    this.#run(opts, h).catch(() => {});
    return true;
  }

  async #run(opts, h) {
    const cancel = new Cancel();
    /** The inner request's abort, while one is in flight. @type {((reason: any) => void) | null} */
    let inFlight = null;
    h.onConnect?.((reason) => {
      if (cancel.aborted) return;
      cancel.abort(reason ?? new undiciErrors.RequestAbortedError());
      inFlight?.(cancel.reason);
    });
    let attempts = null;
    /** The last result: an error answer read whole, or a transport error. @type {any} */
    let last = null;
    try {
      if (opts.upgrade) throw new undiciErrors.NotSupportedError('upgrade is not carried by the pool');
      const body = opts.body === undefined || opts.body === null ? null : await replayable(opts.body);
      const origin = String(opts.origin);
      attempts = this.#plan.start(this.#contextFor(opts, origin, body));
      for (;;) {
        let route;
        try {
          if (cancel.aborted) throw cancel.reason;
          route = attempts[kTryRoute]() ?? (await attempts[kNextRoute](cancel.signal));
        } catch (e) {
          if (last !== null && isRefusal(e)) break;
          throw e;
        }
        const tried = new Try(attempts, h, cancel, (abort) => (inFlight = abort));
        this.#route(route).dispatch(this.#request(route, opts, origin, body), tried);
        const result = await tried.done;
        // A streamed body's request stays abortable by the caller until it ends.
        if (result.streamed) return;
        inFlight = null;
        last = result;
        if (result.step === 'deliver') break;
      }
    } catch (e) {
      attempts?.end();
      h.onError(cancel.aborted ? cancel.reason : e);
      return;
    }
    attempts.end();
    if (last.error) return h.onError(last.error);
    h.onHeaders(last.status, last.rawHeaders, () => {}, last.statusText);
    if (last.bytes.length !== 0) h.onData(last.bytes);
    h.onComplete([]);
  }

  #contextFor(opts, origin, body) {
    if (typeof this.#context === 'string') return this.#context;
    if (typeof this.#context === 'function') return this.#context(opts);
    const url = new URL(String(opts.path ?? '/'), origin);
    return contextOf(this.#pool, url, { kind: this.#kind, body: body instanceof Uint8Array ? body : null });
  }

  /** The dispatch options of one try along `route`: the credential header set, the body replayable. */
  #request(route, opts, origin, body) {
    const credential = route.via === 'header' ? String(route.name).toLowerCase() : null;
    /** Flat name, value, name, value, ... as undici takes them. */
    const headers = [];
    for (const [k, v] of requestHeaders(opts.headers)) {
      if (body !== null && /^(content-length|transfer-encoding)$/i.test(k)) continue;
      if (credential !== null && k.toLowerCase() === credential) continue;
      if (Array.isArray(v)) for (const x of v) headers.push(k, String(x));
      else headers.push(k, String(v));
    }
    if (credential !== null) headers.push(credential, String(route.value));
    return {
      origin,
      path: opts.path,
      method: opts.method,
      headers,
      body,
      query: opts.query,
      headersTimeout: opts.headersTimeout,
      bodyTimeout: opts.bodyTimeout,
    };
  }

  /** @returns {Dispatcher} */
  #route(route) {
    return route.via === 'proxy' ? this.#proxy(String(route.proxy)) : this.#direct;
  }

  /** The agent of proxy `value` (a URL, `http://` when it names none), most recently used last. */
  #proxy(value) {
    let agent = this.#proxies.get(value);
    if (agent !== undefined) {
      this.#proxies.delete(value);
    } else {
      const uri = value.includes('://') ? value : `http://${value}`;
      agent = new ProxyAgent({ uri, proxyTunnel: false });
      if (this.#proxies.size >= this.#maxProxies) {
        const [oldest, evicted] = /** @type {[string, ProxyAgent]} */ (this.#proxies.entries().next().value);
        this.#proxies.delete(oldest);
        evicted.close().catch(() => {});
      }
    }
    this.#proxies.set(value, agent);
    return agent;
  }

  /** Closes every agent once their requests are done. @param {any} [callback] @returns {any} */
  close(callback) {
    const done = this.#shut((a) => a.close());
    if (typeof callback !== 'function') return done;
    done.then(() => callback(null), callback);
  }

  /** Closes every agent at once, failing their requests with `err`. @param {any} [err] @param {any} [callback] @returns {any} */
  destroy(err, callback) {
    if (typeof err === 'function') [callback, err] = [err, null];
    const done = this.#shut((a) => a.destroy(err ?? null));
    if (typeof callback !== 'function') return done;
    done.then(() => callback(null), callback);
  }

  async #shut(f) {
    this.#closed = true;
    const agents = [this.#direct, ...this.#proxies.values()];
    this.#proxies.clear();
    await Promise.all(agents.map(f));
  }

  /** Proxy agents open now (the cache's size). */
  get proxies() {
    return this.#proxies.size;
  }
}

/** `new ReputeDispatcher(pool, options)`. */
function dispatcher(pool, options) {
  return new ReputeDispatcher(pool, options);
}

/**
 * A `fetch` whose requests the pool carries (undici's fetch on a
 * ReputeDispatcher made from `options`), for SDKs that take a `fetch`;
 * `.dispatcher` is that dispatcher (`.close()` it when done).
 * @param {Pool} pool @param {import('../index').DispatcherOptions} [options]
 */
function fetch(pool, options) {
  const carrier = new ReputeDispatcher(pool, options);
  /** @type {any} */
  const f = (input, init) => undiciFetch(input, { ...init, dispatcher: carrier });
  f.dispatcher = carrier;
  return /** @type {import('../index').ReputeFetch} */ (f);
}

module.exports = { ReputeDispatcher, dispatcher, fetch, failureOf };
