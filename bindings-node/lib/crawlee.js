'use strict';
// Crawlee's HTTP crawlers (HttpCrawler, CheerioCrawler, JSDOMCrawler)
// sending each request through a proxy the pool leases:
//
//   const proxies = repute.crawleeProxies(pool, { kind: 'proxy' });
//   new CheerioCrawler({ proxyConfiguration: new ProxyConfiguration({ newUrlFunction: proxies.newUrlFunction }),
//     ...proxies.hooks, requestHandler });
//
// `newUrlFunction` leases a proxy for the request Crawlee is about to send
// (the ones this request already tried excluded) and begins an attempt of
// the host's protocol on it. The crawler's hooks tell the outcome: the
// post-navigation hook the answer (status, headers, an error's body), the
// error handler a transport error of the attempt in flight, the
// failed-request handler the end. When the protocol says to retry, the
// hook throws, so Crawlee sends the request again (its maxRequestRetries
// still bound it), through another lease. Nothing of Crawlee is imported:
// the functions are what its options take.

const { Readable } = require('node:stream');
const { Pool } = require('./pool');
const { Plan, contextOf, kNextLease, kBeginOn } = require('./attempts');
const { invalidArg, optStr, obj } = require('./checks');

/** One Crawlee request's attempts, and whether one is in flight (begun, not yet told). */
class Followed {
  constructor(attempts) {
    this.attempts = attempts;
    this.sent = false;
  }
}

/** What an error of Crawlee's HTTP client says of the proxy that carried the attempt. */
function failureOf(error) {
  const text = `${error?.name} ${error?.code} ${error?.message} ${error?.cause?.code}`;
  if (/timed? ?out|TIMEDOUT/i.test(text)) return 'timeout';
  if (/TLS|SSL|certificate/i.test(text)) return 'tls_handshake';
  return 'connection_reset';
}

/** A proxy's URL from its value (`http://` when it names no scheme) and its secret (`user:password`). */
function proxyUrl(value, secret) {
  const url = new URL(value.includes('://') ? value : `http://${value}`);
  if (secret !== null && secret !== undefined && url.username === '') {
    const at = secret.indexOf(':');
    url.username = encodeURIComponent(at < 0 ? secret : secret.slice(0, at));
    if (at >= 0) url.password = encodeURIComponent(secret.slice(at + 1));
  }
  return url.href;
}

/** The response with its body read: what Crawlee parses next, from the bytes read. */
async function readWhole(response) {
  const chunks = [];
  for await (const chunk of response) chunks.push(Buffer.from(chunk));
  const bytes = Buffer.concat(chunks);
  const again = Readable.from([bytes]);
  for (const k of ['statusCode', 'statusMessage', 'headers', 'rawHeaders', 'url', 'redirectUrls', 'ip', 'timings', 'httpVersion', 'request']) {
    if (k in response) Object.defineProperty(again, k, { value: response[k], enumerable: true, writable: true });
  }
  return { bytes, again };
}

/**
 * A pool's `kind` resources (whose labels match `where`) as Crawlee's
 * proxies: `{ kind, where, exclude, prefer, attempts, timeoutMs, context }`,
 * `context` a string or a function of Crawlee's request; by default the
 * request URL's host.
 */
class CrawleeProxies {
  #pool;
  /** @type {Plan} */
  #plan;
  /** @type {string} */
  #kind;
  #context;
  /** @type {Map<string, Followed>} */
  #requests = new Map();

  /** @param {Pool} pool @param {import('../index').CrawleeProxiesOptions} [options] */
  constructor(pool, options = {}) {
    if (!(pool instanceof Pool)) throw invalidArg('pool', 'must be a Pool');
    const o = obj('options', options);
    if (o.context !== undefined && o.context !== null && typeof o.context !== 'function') optStr('context', o.context);
    this.#pool = pool;
    this.#context = o.context ?? null;
    this.#kind = optStr('kind', o.kind) ?? 'proxy';
    this.#plan = new Plan(pool, { ...o, kind: this.#kind });
    this.newUrlFunction = this.newUrlFunction.bind(this);
    this.postNavigationHook = this.postNavigationHook.bind(this);
    this.errorHandler = this.errorHandler.bind(this);
    this.failedRequestHandler = this.failedRequestHandler.bind(this);
  }

  /** The crawler options that tell each attempt's outcome, to spread into the crawler's options. */
  get hooks() {
    return {
      postNavigationHooks: [this.postNavigationHook],
      errorHandler: this.errorHandler,
      failedRequestHandler: this.failedRequestHandler,
    };
  }

  /** Requests with an attempt begun or a result held back, not yet ended. */
  get pending() {
    return this.#requests.size;
  }

  /**
   * `ProxyConfiguration`'s `newUrlFunction`: the proxy URL for the next
   * attempt of `options.request`, leased and begun.
   * @param {string | number | undefined} _sessionId @param {{ request?: any }} [options]
   */
  async newUrlFunction(_sessionId, options) {
    const request = options?.request;
    if (request === undefined || request === null) throw invalidArg('request', 'repute leases a proxy per request, and Crawlee named none');
    let followed = this.#requests.get(request.uniqueKey);
    if (followed === undefined) {
      followed = new Followed(this.#plan.start(this.#contextOf(request)));
      this.#requests.set(request.uniqueKey, followed);
    }
    let lease;
    try {
      lease = await followed.attempts[kNextLease]();
    } catch (e) {
      // A refusal: Crawlee's retry of this request starts over.
      this.#end(request);
      throw e;
    }
    const route = followed.attempts[kBeginOn](lease);
    if (route.via !== 'proxy') {
      this.#end(request);
      throw invalidArg('kind', `must name proxy resources (a ${this.#kind} lease routes by ${route.via})`);
    }
    followed.sent = true;
    return proxyUrl(String(route.proxy), lease.secret());
  }

  /** The post-navigation hook: the answer of the attempt in flight. @param {any} context */
  async postNavigationHook(context) {
    const followed = this.#inFlight(context.request);
    if (followed === null || !context.response) return;
    const { statusCode, headers } = context.response;
    let body = null;
    if (statusCode >= 400) {
      const { bytes, again } = await readWhole(context.response);
      context.response = again;
      body = bytes.toString();
    }
    const step = followed.attempts.answered(statusCode, { headers: headerPairs(headers), body });
    // Crawlee's HTTP client reads the whole body before the request handler runs.
    if (step === 'stream') followed.attempts.finished();
    // Crawlee retries on another proxy; when its retries run out, this is
    // the error the user reads.
    if (step === 'retry') throw new Error(`${statusCode} from ${context.request.url} through a proxy repute blames for it`);
    this.#end(context.request);
  }

  /**
   * The error handler: a transport error of the attempt in flight (an error
   * after the answer, in a request handler, is not the proxy's).
   * @param {any} context @param {Error} error
   */
  async errorHandler(context, error) {
    const followed = this.#inFlight(context.request);
    if (followed === null) return;
    const response = context.response;
    const step =
      response && typeof response.statusCode === 'number'
        ? followed.attempts.answered(response.statusCode, { headers: headerPairs(response.headers) })
        : followed.attempts.failed(failureOf(error));
    if (step !== 'retry') this.#end(context.request);
  }

  /** The failed-request handler: Crawlee gave the request up. @param {any} context @param {Error} error */
  async failedRequestHandler(context, error) {
    await this.errorHandler(context, error);
    this.#end(context.request);
  }

  #contextOf(request) {
    if (typeof this.#context === 'string') return this.#context;
    if (typeof this.#context === 'function') return this.#context(request);
    return contextOf(this.#pool, request.url, { kind: this.#kind });
  }

  /** The request's attempts if one is in flight, which the caller now tells. */
  #inFlight(request) {
    const followed = this.#requests.get(request?.uniqueKey);
    if (followed === undefined || !followed.sent) return null;
    followed.sent = false;
    return followed;
  }

  #end(request) {
    const followed = this.#requests.get(request.uniqueKey);
    this.#requests.delete(request.uniqueKey);
    followed?.attempts.end();
  }
}

/** Node's response headers (values or arrays of them) as pairs. */
function headerPairs(headers) {
  const pairs = [];
  for (const [k, v] of Object.entries(headers ?? {})) {
    for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) pairs.push([k, String(one)]);
  }
  return pairs;
}

/** `new CrawleeProxies(pool, options)`. */
function crawleeProxies(pool, options) {
  return new CrawleeProxies(pool, options);
}

module.exports = { CrawleeProxies, crawleeProxies };
