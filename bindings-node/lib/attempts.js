'use strict';
// One request's attempts over the host's attempt protocol: which resource
// carries each try, what its answer means, whom to blame, when to stop.
// The decisions are the host's (src/attempts.rs converts); this class
// acquires with the pool's own waiting acquire and converts arguments.

const native = require('../repute.node');
const { Pool } = require('./pool');
const { Lease, kAdopt, kNativePool, kAcquireFor, kNextFor, kTryNextFor, kChanged, kNativeLease } = require('./lease');

/** The adapters' way through: a native lease, without a Lease object around it. */
const kNextLease = Symbol('repute.nextLease');
const kBeginOn = Symbol('repute.beginOn');
/** The adapters' way through when they need no lease: the next attempt acquired and begun. */
const kNextRoute = Symbol('repute.nextRoute');
/** `kNextRoute`'s first try, without waiting: the route, or null to wait for one with `kNextRoute`. */
const kTryRoute = Symbol('repute.tryRoute');
const { invalidArg, str, optNum, uint, optUint, obj } = require('./checks');
const { selectorOptions, headerPairs } = require('./options');

/** The response headers a profile reads, lower case: `answered` passes only these to the host. */
const READ_HEADERS = new Set(native.readHeaders());

/** The public type (index.d.ts) this class implements. @typedef {import('../index').Attempts} AttemptsApi */

/** @param {unknown} pool @returns {Pool} */
function poolArg(pool) {
  if (!(pool instanceof Pool)) throw invalidArg('pool', 'must be a Pool');
  return pool;
}

/**
 * A request plan (`{ kind, where, exclude, prefer, affinity, cost,
 * attempts, timeoutMs }`) checked once, by type here and by the host's
 * rules natively; each request's attempts start from it with their
 * context. An adapter makes one when it is made, so a bad option fails
 * then, and a request converts none.
 */
class Plan {
  #pool;
  #n;

  /** @param {unknown} pool a Pool, checked @param {import('../index').AttemptsPlan} options */
  constructor(pool, options) {
    this.#pool = poolArg(pool);
    const o = obj('options', options);
    const spec = { selector: selectorOptions(o), attempts: optUint('attempts', o.attempts), timeoutMs: optNum('timeoutMs', o.timeoutMs) };
    this.#n = new native.NativePlan(this.#pool[kNativePool](), spec);
  }

  /** One request's attempts, counted in `context`. @param {string} context @returns {Attempts} */
  start(context) {
    return new Attempts(kAdopt, this.#pool, this.#n.start(str('context', context)));
  }
}

/**
 * One request carried by the pool's resources: `acquire`, `begin` (how to
 * send), then `answered` or `failed` (what to do next: `stream`, `deliver`,
 * `retry`), `finished` once a streamed body ends, and `end` however the
 * request ends.
 * @implements {AttemptsApi}
 */
class Attempts {
  #pool;
  #n;

  /**
   * `(pool, options)`; `(kAdopt, pool, started)` for a plan's (`Plan.start`).
   * @param {Pool | symbol} pool @param {import('../index').AttemptsOptions | Pool} options
   * @param {import('../repute.node').NativeAttempts} [started]
   */
  constructor(pool, options, started) {
    if (pool === kAdopt && options instanceof Pool && started !== undefined) {
      this.#pool = options;
      this.#n = started;
      return;
    }
    const o = obj('options', options);
    const attempts = new Plan(pool, o).start(o.context);
    this.#pool = attempts.#pool;
    this.#n = attempts.#n;
  }

  get context() {
    return this.#n.context;
  }

  /** Attempts begun so far. */
  get made() {
    return this.#n.made;
  }

  /**
   * The lease for the next attempt, waiting as `Pool.acquire` does within
   * the request's time; rejects with the refusal when the attempts give up.
   * @param {{ signal?: AbortSignal }} [options]
   * @returns {Promise<Lease>}
   */
  async acquire(options = {}) {
    return new Lease(kAdopt, this.#pool, await this[kNextLease](obj('options', options).signal));
  }

  /** `acquire`'s native lease, for the adapters, which need no Lease object. @param {AbortSignal} [signal] */
  [kNextLease](signal) {
    return this.#pool[kAcquireFor](this.#n, signal);
  }

  /**
   * `kNextLease` and `kBeginOn` as one: the next attempt's route, for the
   * adapters that need nothing else of its lease.
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('../index').Route>}
   */
  [kNextRoute](signal) {
    return /** @type {Promise<import('../index').Route>} */ (this.#pool[kNextFor](this.#n, signal));
  }

  /** @returns {import('../index').Route | null} */
  [kTryRoute]() {
    return /** @type {import('../index').Route | null} */ (this.#pool[kTryNextFor](this.#n));
  }

  /** Begins an attempt on `lease` (from `acquire`): how to send it. */
  begin(lease) {
    if (!(lease instanceof Lease)) throw invalidArg('lease', 'must be a Lease from Attempts.acquire');
    return this[kBeginOn](lease[kNativeLease]());
  }

  /** `begin` on a native lease from `kNextLease`. @param {import('../repute.node').NativeLease} n */
  [kBeginOn](n) {
    return /** @type {import('../index').Route} */ (this.#after(() => this.#n.begin(n), false));
  }

  /**
   * The attempt's answer: `status`, `headers`, and for an error status
   * (>= 400) its whole `body` (a string or bytes).
   */
  answered(status, options = {}) {
    const o = obj('options', options);
    const headers =
      o.headers === undefined || o.headers === null ? [] : headerPairs(o.headers).filter(([k]) => READ_HEADERS.has(k.toLowerCase()));
    let body;
    if (typeof o.body === 'string') body = o.body;
    else if (o.body instanceof Uint8Array) body = new TextDecoder().decode(o.body);
    else if (o.body !== undefined && o.body !== null) throw invalidArg('body', 'must be a string or a Uint8Array');
    return this.#after(() => this.#n.answered(uint('status', status), headers, body));
  }

  /** The attempt got no answer: `connection_reset`, `timeout`, `tls_handshake`, ... */
  failed(kind) {
    return this.#after(() => this.#n.failed(str('kind', kind)));
  }

  /** The delivered (streamed) body was read to its end or closed, or was cut by `broken`. */
  finished(broken = null) {
    this.#after(() => this.#n.finished(broken === null || broken === undefined ? null : str('broken', broken)));
  }

  /** The request is over (delivered, given up, failed): safe to call more than once. */
  end() {
    this.#after(() => this.#n.end());
  }

  /**
   * `f()`, then events out and, when it may have freed a permit (not a
   * `begin`, not a success that keeps its lease), the first sleeper woken.
   * @template T @param {() => T} f @param {boolean} [frees] @returns {T}
   */
  #after(f, frees = true) {
    let done;
    try {
      done = f();
      return done;
    } finally {
      this.#pool[kChanged](frees && done !== 'stream');
    }
  }
}

/**
 * The context a request to `url` counts in by default: for an API key of
 * `kind` whose profile reads models, the `model` of its JSON `body`; else
 * the URL's host name.
 * @param {Pool} pool @param {string | URL} url
 * @param {{ kind?: string | null, body?: string | Uint8Array | null }} [options]
 */
function contextOf(pool, url, options = {}) {
  const o = obj('options', options);
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidArg('url', 'must be an absolute URL');
  }
  let body;
  if (typeof o.body === 'string') body = Buffer.from(o.body);
  else if (o.body instanceof Uint8Array) body = o.body;
  else if (o.body !== undefined && o.body !== null) throw invalidArg('body', 'must be a string or a Uint8Array');
  const kind = o.kind === undefined ? null : o.kind === null ? null : str('kind', o.kind);
  return poolArg(pool)[kNativePool]().contextOf(kind, parsed.hostname, parsed.pathname, body);
}

module.exports = { Attempts, Plan, contextOf, kNextLease, kBeginOn, kNextRoute, kTryRoute, READ_HEADERS };
