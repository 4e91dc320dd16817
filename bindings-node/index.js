'use strict';
// The public JavaScript API of repute. The pool itself is the Rust core
// behind `repute.node`; this file only converts: options to the native
// config (the native module throws typed errors itself),
// lease data to `Lease` objects, and pool events to an async iterator.

const { EventEmitter } = require('node:events');
// Typed by repute.d.node.ts, which the napi build generates.
const native = require('./repute.node');

/**
 * The public types (index.d.ts), which the classes here implement.
 * @typedef {import('./index').Pool} PoolApi
 * @typedef {import('./index').Lease} LeaseApi
 * @typedef {import('./index').ManualClock} ManualClockApi
 */

// ---------------------------------------------------------------- errors
// The classes come from the host's code table (`repute_host::codes`, the
// Python binding's names too): ReputeError, and one subclass of it per class
// the table names. The native module builds every error itself, as an
// instance of its class, with `code` and the class's fields set (see
// src/errors.rs); these classes only give them their identity.

const Base = class ReputeError extends Error {
  /** @param {string} message @param {Record<string, unknown>} [fields] `code` and the class's fields */
  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.name;
    Object.assign(this, fields);
  }
};

/** @type {Record<string, typeof Base>} */
const made = { ReputeError: Base };
for (const { class: name } of native._errorCodes()) {
  // Made as a property, the class is named after it.
  made[name] ??= { [name]: class extends Base {} }[name];
}
native.setErrorClasses(made);

/**
 * The classes as index.d.ts declares them (test/declarations.test.mjs checks
 * those declarations against the same table).
 * @typedef {typeof import('./index')} Api
 * @typedef {{ [K in keyof Api as Api[K] extends abstract new (...args: any) => import('./index').ReputeError ? K : never]: Api[K] }} ErrorClasses
 */
const errors = /** @type {ErrorClasses} */ (/** @type {unknown} */ (made));
const { InvalidInputError, NoResourceAvailableError, LeaseExpiredError, RateLimitedError } = errors;

// ------------------------------------------------------ argument checks
// JavaScript types are checked here, where they are dynamic; value rules
// (lengths, ranges) are the core's, and come back as InvalidInputError too.

function invalidArg(field, rule) {
  return new InvalidInputError(`invalid ${field}: ${rule}`, { code: 'invalid_input', field, rule });
}

function str(field, v) {
  if (typeof v !== 'string') throw invalidArg(field, 'must be a string');
  return v;
}

function optStr(field, v) {
  return v === undefined || v === null ? undefined : str(field, v);
}

function num(field, v) {
  if (typeof v !== 'number') throw invalidArg(field, 'must be a number');
  return v;
}

function optNum(field, v) {
  return v === undefined || v === null ? undefined : num(field, v);
}

function uint(field, v) {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw invalidArg(field, 'must be an integer in 0..2^32');
  return v;
}

function optUint(field, v) {
  return v === undefined || v === null ? undefined : uint(field, v);
}

function bool(field, v) {
  if (typeof v !== 'boolean') throw invalidArg(field, 'must be a boolean');
  return v;
}

function obj(field, v) {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object') throw invalidArg(field, 'must be an object');
  return v;
}

/** An array of strings, or undefined. */
function optStrings(field, v) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw invalidArg(field, 'must be an array of strings');
  return v;
}

function bigint(field, v) {
  if (typeof v === 'bigint') return v;
  if (Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw invalidArg(field, 'must be a non-negative safe integer or a bigint');
}

function optBigint(field, v) {
  return v === undefined || v === null ? undefined : bigint(field, v);
}

// ------------------------------------------------------------------ clock

const kNative = Symbol('repute.native');

/**
 * A clock that moves only when told to; pass it as `new Pool({ clock })`.
 * @implements {ManualClockApi}
 */
class ManualClock {
  constructor(startMs = 0) {
    this[kNative] = new native.NativeClock(num('startMs', startMs));
  }

  /** Moves the clock forward by `ms`. */
  advance(ms) {
    this[kNative].advance(num('ms', ms));
  }

  /** Sets the reading; a value below the current one is ignored (monotonic). */
  set(ms) {
    this[kNative].set(num('ms', ms));
  }

  /** The reading, in ms. */
  now() {
    return this[kNative].nowMs();
  }
}

// ------------------------------------------------------------------ lease

const kAdopt = Symbol('repute.adopt');
const kRenew = Symbol('repute.renew');
const kRelease = Symbol('repute.release');
const kReconcile = Symbol('repute.reconcile');
const kReport = Symbol('repute.report');

/**
 * An exclusive, fenced hold on one permit of one resource. The handle's
 * state (the local deadline, renewal, loss) is the host's: this class only
 * converts. It emits `'lost'` (with the loss's name) once when the lease
 * is lost: a renewal refused, the resource blocked, the tenant's ownership
 * lost, the local deadline passed, `maxHoldMs` reached or the pool closed.
 * @implements {LeaseApi}
 */
class Lease extends EventEmitter {
  #pool;
  #n;
  /** The fields that never change, read once. */
  #d;
  #watching = false;

  constructor(adopt, pool, nativeLease) {
    if (adopt !== kAdopt) throw new TypeError('leases come from Pool.acquire / tryAcquire / withLease');
    super();
    this.#pool = pool;
    this.#n = nativeLease;
    this.#d = nativeLease.data();
    this.on('newListener', (event) => {
      if (event === 'lost' && !this.#watching) {
        this.#watching = true;
        // Runs on the JS thread, once. Listening keeps the process alive
        // until the lease is released or lost.
        this.#n.onLost((loss) => this.emit('lost', loss));
      }
    });
  }

  /** The lease id (bigint), unique in the pool. */
  get id() {
    return this.#d.id;
  }
  /** The fencing token (bigint): strictly increasing per resource permit. */
  get token() {
    return this.#d.token;
  }
  get kind() {
    return this.#d.kind;
  }
  get value() {
    return this.#d.value;
  }
  get context() {
    return this.#d.context;
  }
  get permit() {
    return this.#d.permit;
  }
  /** `client`, `trial` (a half-open trial of a cooled cell), `probe` or `fail_open`. */
  get leaseKind() {
    return this.#d.leaseKind;
  }
  /**
   * The secret the resource was registered with (an API key, a password),
   * or null: read from the pool once, then kept by the native lease. No
   * view, event, error, `toJSON` or inspection of the lease shows it.
   */
  get secret() {
    return this.#n.secret();
  }
  get ttlMs() {
    return this.#d.ttlMs;
  }
  get grantedAtMs() {
    return this.#d.grantedAtMs;
  }
  /** When the authority lets the lease lapse, on the pool's clock (as of the last renewal). */
  get expiresAtMs() {
    return this.#n.data().expiresAtMs;
  }
  /** When the holder must stop relying on the lease (I7), on the pool's clock. */
  get deadlineMs() {
    return this.#n.data().deadlineMs;
  }
  /** Time left until the authority lets the lease lapse, on the pool's clock. */
  get expiresInMs() {
    return Math.max(0, this.expiresAtMs - this.#pool.now());
  }
  /**
   * False once released or lost (a renewal failed, the local deadline
   * passed — the clock reading before the grant/renewal was sent + TTL -
   * margin): the holder must stop before the authority can hand the permit
   * to someone else.
   */
  get valid() {
    return this.#n.valid();
  }
  get released() {
    return this.#n.released();
  }
  /** True once the lease is lost; `loss` says why. */
  get lost() {
    return this.#n.loss() !== null;
  }
  /** `expired`, `renewal_refused`, `blocked`, `owner_lost`, `max_hold`, `closed`, or null. */
  get loss() {
    return this.#n.loss();
  }

  /** Extends the lease by its TTL; on failure the lease is lost for good. */
  async renew() {
    await this.#pool[kRenew](this.#n);
    return this;
  }

  /**
   * Frees the permit: in this pool at once, for other processes once the
   * returned promise resolves (on Redis, when the revoke has run; on other
   * stores it is already done). Resolves to true if the lease was held up
   * to now, false if it had been lost — its grant is still revoked at the
   * authority (conditionally on its token), so a permit the authority
   * still holds for it frees at once. Idempotent. A revoke that cannot
   * reach the store rejects; leaving the promise unawaited is safe.
   */
  release() {
    return this.#pool[kRelease](this.#n).then((how) => how === 'held');
  }

  /**
   * The lease used `used` tokens of its resource's `tpm` instead of the
   * `cost` it reserved: the window counts `used` from now on.
   */
  async reconcile(used) {
    await this.#pool[kReconcile](this.#n, bigint('used', used));
  }

  /** `{ latencyMs, usage }`: `usage`, the tokens used, is reconciled first (as `reconcile`). */
  reportSuccess(options) {
    return this.#pool[kReport](this.#n, {}, options);
  }

  reportFailure(failure, options = {}) {
    const retryAfterMs = optNum('retryAfterMs', obj('options', options).retryAfterMs);
    return this.#pool[kReport](this.#n, { failure: str('failure', failure), retryAfterMs }, options);
  }

  /** The upstream's answer, read by the resource's kind's profile: `{ latencyMs, headers, body, usage }`. */
  reportHttp(status, options = {}) {
    return this.#pool[kReport](this.#n, httpSpec(status, options), options);
  }

  [Symbol.dispose]() {
    this.release().catch(ignore);
  }

  async [Symbol.asyncDispose]() {
    await this.release();
  }

  toJSON() {
    const { id, token, ...rest } = this.#n.data();
    return { id: String(id), token: String(token), ...rest, valid: this.valid, loss: this.loss };
  }
}

/** A release nobody awaits must not end the process when Redis is gone. */
const ignore = () => {};

// ------------------------------------------------------------------- pool

/**
 * `{ kind, where, exclude, prefer, affinity, cost }`, checked for type, as the
 * native selector: `where` (label name to a value or an array of values)
 * becomes one label filter per name. The rules are the core's.
 */
function selectorOptions(o) {
  const rule = 'must be an object of label name to a string or an array of strings';
  let labels;
  if (o.where !== undefined && o.where !== null) {
    if (typeof o.where !== 'object' || Array.isArray(o.where)) throw invalidArg('where', rule);
    labels = Object.entries(o.where).map(([name, v]) => {
      const values = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(values) || !values.every((s) => typeof s === 'string')) throw invalidArg('where', rule);
      return { name, values };
    });
  }
  return {
    kind: optStr('kind', o.kind),
    labels,
    exclude: optStrings('exclude', o.exclude),
    prefer: optStr('prefer', o.prefer),
    affinity: optStr('affinity', o.affinity),
    cost: optBigint('cost', o.cost),
  };
}

/** `register`'s `labels`: an object of label name to string. */
function labelsOption(v) {
  if (v === undefined || v === null) return undefined;
  const ok = typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((s) => typeof s === 'string');
  if (!ok) throw invalidArg('labels', 'must be an object of label name to string');
  return v;
}

/** `register`'s `limits: { rpm, tpm, minIntervalMs, maxUses, maxAgeMs, perContext }`, checked for type; the rules are the core's. */
function limitsOption(v) {
  if (v === undefined || v === null) return undefined;
  const l = obj('limits', v);
  return {
    rpm: optUint('limits.rpm', l.rpm),
    tpm: optBigint('limits.tpm', l.tpm),
    minIntervalMs: optNum('limits.minIntervalMs', l.minIntervalMs),
    maxUses: optBigint('limits.maxUses', l.maxUses),
    maxAgeMs: optNum('limits.maxAgeMs', l.maxAgeMs),
    perContext: contextLimitsOption(l.perContext),
  };
}

/** `limits.perContext: { rpm, tpm, minIntervalMs }`, checked for type. */
function contextLimitsOption(v) {
  if (v === undefined || v === null) return undefined;
  const l = obj('limits.perContext', v);
  return {
    rpm: optUint('limits.perContext.rpm', l.rpm),
    tpm: optBigint('limits.perContext.tpm', l.tpm),
    minIntervalMs: optNum('limits.perContext.minIntervalMs', l.minIntervalMs),
  };
}

/** `{ autoRenew, maxHoldMs }`, checked for type; the rule is the host's. */
function holdOptions(options) {
  const o = obj('options', options);
  const autoRenew = o.autoRenew === undefined ? false : bool('autoRenew', o.autoRenew);
  const maxHoldMs = optNum('maxHoldMs', o.maxHoldMs);
  native.NativeLease.checkHold(autoRenew, maxHoldMs);
  return { autoRenew, maxHoldMs };
}

/** Response headers (fetch `Headers`, `Map`, plain object or pairs) as `[name, value]` string pairs. */
function headerPairs(headers) {
  const entries = typeof headers[Symbol.iterator] === 'function' ? headers : Object.entries(obj('headers', headers));
  const pairs = [];
  for (const pair of entries) {
    if (!Array.isArray(pair) || pair.length !== 2) throw invalidArg('headers', 'must be [name, value] pairs');
    pairs.push([String(pair[0]), String(pair[1])]);
  }
  return pairs;
}

/** `reportHttp`'s answer: the status, the headers as pairs and the body as text (a string, or bytes as UTF-8). */
function httpSpec(status, options) {
  const o = obj('options', options);
  const headers = o.headers === undefined || o.headers === null ? undefined : headerPairs(o.headers);
  let body;
  if (typeof o.body === 'string') body = o.body;
  else if (o.body instanceof Uint8Array) body = new TextDecoder().decode(o.body);
  else if (o.body !== undefined && o.body !== null) throw invalidArg('body', 'must be a string or a Uint8Array');
  return { status: uint('status', status), headers, body };
}

/** `profiles: { residential: 'proxy' }`, checked for shape; the names are the host's. */
function profiles(value) {
  const out = {};
  for (const [kind, profile] of Object.entries(obj('profiles', value))) {
    out[kind] = str('profiles', profile);
  }
  return out;
}

/** `cooldowns: { timeout: { baseMs, coolAfter, maxExponent } }`, checked for shape; the rules are the host's. */
function cooldowns(value) {
  const out = {};
  for (const [kind, rule] of Object.entries(obj('cooldowns', value))) {
    const r = obj(`cooldowns.${kind}`, rule);
    out[kind] = {
      baseMs: optNum('cooldowns.baseMs', r.baseMs),
      coolAfter: optUint('cooldowns.coolAfter', r.coolAfter),
      maxExponent: optUint('cooldowns.maxExponent', r.maxExponent),
    };
  }
  return out;
}

function nativeConfig(options) {
  const o = obj('options', options);
  const rateLimit = o.rateLimit === undefined || o.rateLimit === null ? undefined : obj('rateLimit', o.rateLimit);
  if (o.clock !== undefined && !(o.clock instanceof ManualClock)) throw invalidArg('clock', 'must be a ManualClock');
  const config = {
    store: o.store === undefined ? 'memory' : str('store', o.store),
    mode: optStr('mode', o.mode),
    ownerTtlMs: optNum('ownerTtlMs', o.ownerTtlMs),
    owners: optStr('owners', o.owners),
    tenant: o.tenant === undefined ? 'default' : str('tenant', o.tenant),
    leaseTtlMs: optNum('leaseTtlMs', o.leaseTtlMs),
    probeTtlMs: optNum('probeTtlMs', o.probeTtlMs),
    strategy: optStr('strategy', o.strategy),
    seed: o.seed === undefined || o.seed === null ? undefined : bigint('seed', o.seed),
    maxResources: optUint('maxResources', o.maxResources),
    maxCells: optUint('maxCells', o.maxCells),
    rateLimit: rateLimit && {
      rate: num('rateLimit.rate', rateLimit.rate),
      burst: uint('rateLimit.burst', rateLimit.burst),
    },
    renewMarginMs: optNum('renewMarginMs', o.renewMarginMs),
    recovery: optStr('recovery', o.recovery),
    failOpen: o.failOpen === undefined ? undefined : bool('failOpen', o.failOpen),
    cooldowns: o.cooldowns === undefined ? undefined : cooldowns(o.cooldowns),
    profiles: o.profiles === undefined ? undefined : profiles(o.profiles),
  };
  return [config, o.clock?.[kNative]];
}

/**
 * One tenant's reputation-aware resource pool.
 * @implements {PoolApi}
 */
class Pool {
  /** @type {import('./repute.node').NativePool} */
  #native;
  #durable;
  /** On Redis: acquires and releases run on the pool's own connection on the event loop. */
  #link;
  /** Sleeping `acquire` calls, woken early by anything that may free a permit. */
  #waiters = new Set();
  /** Open `events()` iterators. */
  #subscribers = new Set();

  /**
   * @param {import('./index').PoolOptions} [options]
   * @param {symbol} [adopt] `kAdopt` when `opened` is the native pool `open` made
   * @param {import('./repute.node').NativePool} [opened]
   */
  constructor(options = {}, adopt = undefined, opened = undefined) {
    const [config, clock] = nativeConfig(options);
    this.#native = adopt === kAdopt ? /** @type {import('./repute.node').NativePool} */ (opened) : new native.NativePool(config, clock);
    this.#durable = this.#native.durable;
    this.#link = this.#native.hasLink;
    this.#startProber(obj('options', options), config.recovery);
  }

  /** The probe loop's timer (`recovery: 'probe'` with a `probe`), until `close`. */
  #prober;

  /**
   * Rounds of the host's probe loop: probe leases on the cells due, the
   * user's `probe({ kind, value, context })` on each (true/undefined
   * healthy, false failed, a number an HTTP status; a throw is a failure),
   * the verdicts back to the host. One round at a time.
   */
  #startProber(o, recovery) {
    if (o.probe === undefined || o.probe === null) return;
    if (typeof o.probe !== 'function') throw invalidArg('probe', 'must be a function');
    if (recovery !== 'probe') throw invalidArg('probe', "goes with recovery: 'probe'");
    const concurrency = o.probeConcurrency === undefined ? 4 : uint('probeConcurrency', o.probeConcurrency);
    if (concurrency === 0) throw invalidArg('probeConcurrency', 'must be >= 1');
    const every = o.probeEveryMs === undefined ? 1000 : num('probeEveryMs', o.probeEveryMs);
    if (!(every > 0)) throw invalidArg('probeEveryMs', 'must be > 0');
    const probe = o.probe;
    let running = false;
    const round = async () => {
      if (running) return;
      running = true;
      try {
        const leases = this.#native.probeStart(concurrency);
        await Promise.all(
          leases.map(async (l) => {
            const started = performance.now();
            let answer;
            try {
              answer = await probe({ kind: l.kind, value: l.value, context: l.context });
            } catch {
              answer = false;
            }
            const status = typeof answer === 'number' ? answer : undefined;
            const healthy = answer === undefined || answer === null || answer === true;
            this.#native.probeFinish(l.id, healthy, status, performance.now() - started);
          }),
        );
        this.#changed(true);
      } catch {
        // A closed pool or a failed store: the next round tries again.
      } finally {
        running = false;
      }
    };
    this.#prober = setInterval(round, every);
    this.#prober.unref();
  }

  /** `new Pool(options)`, with the store opened off the JS thread. */
  static async open(options = {}) {
    const [config, clock] = nativeConfig(options);
    const opened = await native.NativePool.open(config, clock);
    return new Pool(options, kAdopt, opened);
  }

  /** The pool clock's reading, in ms. */
  now() {
    return this.#native.nowMs();
  }

  /** Runs a call that may write to durable storage off the JS thread. */
  async #maybeAsync(frees, name, ...args) {
    try {
      return this.#durable ? await this.#native[`${name}Async`](...args) : this.#native[name](...args);
    } finally {
      this.#changed(frees);
    }
  }

  /**
   * Runs a native call, then `#changed`. `frees` marks calls
   * that can make a resource selectable (release, register, unblock,
   * report, restore): they wake sleeping `acquire` calls. Failed acquires
   * must not, or waiters would wake each other in a loop.
   */
  #call(f, frees = false) {
    try {
      return f();
    } finally {
      this.#changed(frees);
    }
  }

  /** After any call: deliver events to iterators; maybe wake sleeping acquires. */
  #changed(frees) {
    if (this.#subscribers.size !== 0) this.#pumpEvents();
    if (frees && this.#waiters.size !== 0) {
      for (const wake of this.#waiters) wake();
      this.#waiters.clear();
    }
  }

  #pumpEvents() {
    const events = this.#native.drainEvents();
    if (events.length === 0) return;
    for (const sub of this.#subscribers) {
      sub.queue.push(...events);
      sub.wake?.();
    }
  }

  /**
   * Registers a resource with `{ permits, labels, secret, limits }`:
   * `permits` concurrent leases (default 1), `labels` (label name to
   * string) for acquire's `where`, a `secret` handed to its lease holders
   * (`lease.secret`), and usage `limits`: at most `rpm` grants and `tpm`
   * tokens (each lease's `cost`, reconciled to its use) in any 60 s, at
   * least `minIntervalMs` between two grants, retired after `maxUses`
   * grants or `maxAgeMs`. Registering again replaces them all. True if
   * anything changed.
   */
  register(kind, value, options = {}) {
    const o = obj('options', options);
    const permits = uint('permits', o.permits ?? 1);
    const limits = limitsOption(o.limits);
    const labels = labelsOption(o.labels);
    const secret = optStr('secret', o.secret);
    return this.#call(
      () => this.#native.register(str('kind', kind), str('value', value), permits, limits, labels, secret),
      true,
    );
  }

  unregister(kind, value, options = {}) {
    const force = Boolean(obj('options', options).force);
    this.#call(() => this.#native.unregister(str('kind', kind), str('value', value), force));
  }

  /**
   * The best lease for `context` now, or null when nothing is selectable.
   * Synchronous; on a SQLite store it writes the new fencing token (one
   * small local transaction) before returning, and on PostgreSQL or Redis
   * it waits for the store's round trip on the JS thread (`acquire` waits
   * off it). `{ kind, where, exclude, prefer, affinity, autoRenew,
   * maxHoldMs }` as for `acquire`.
   */
  tryAcquire(context, options = {}) {
    str('context', context);
    const selector = selectorOptions(obj('options', options));
    const hold = holdOptions(options);
    let n;
    try {
      n = this.#native.acquire(context, selector);
    } catch (e) {
      if (e instanceof NoResourceAvailableError) return null;
      throw e;
    } finally {
      this.#changed(false);
    }
    return this.#adopt(n, hold);
  }

  /**
   * A lease for `context`, waiting up to `timeoutMs` (default: without
   * limit, as in Python; 0 tries once; `signal` aborts) for one to free up. Waits
   * follow the pool's plan (the same as every front end's: from 1 ms up to
   * 50 ms, never past the pool's `retryAfterMs`, on the pool's clock) and
   * end early when this pool releases or changes anything. Rejects with the
   * last NoResourceAvailableError / RateLimitedError on timeout. Only
   * resources of `kind`, whose labels match `where` (label name to a value
   * or an array of values) and whose value is not in `exclude` are chosen;
   * `prefer` (a value) and `affinity` (a key: the resource the last lease
   * with it got) are tried first. `cost` is the tokens the grant reserves
   * against a resource's `tpm` (1 when absent; only resources whose `tpm`
   * admits it are chosen); `lease.reconcile(used)` corrects it to the use.
   * With `autoRenew: true` the pool renews the lease until it is released,
   * lost or held for `maxHoldMs`.
   */
  async acquire(context, options = {}) {
    str('context', context);
    const o = obj('options', options);
    const selector = selectorOptions(o);
    const hold = holdOptions(o);
    const timeoutMs = optNum('timeoutMs', o.timeoutMs);
    const signal = o.signal;
    const waiting = this.#native.waiting(timeoutMs);
    for (;;) {
      signal?.throwIfAborted();
      let err;
      try {
        return this.#adopt(await this.#acquireOnce(context, selector), hold);
      } catch (e) {
        if (!(e instanceof NoResourceAvailableError || e instanceof RateLimitedError)) throw e;
        err = e;
      }
      const wait = waiting.next(err.retryAfterMs ?? undefined);
      if (wait === null) throw err;
      await this.#sleep(wait, signal);
    }
  }

  /** A JS lease over a native one, auto-renewed when asked. */
  #adopt(n, hold) {
    if (hold.autoRenew) n.autoRenew(hold.maxHoldMs);
    return new Lease(kAdopt, this, n);
  }

  /** One attempt: over the link on Redis, else a (possibly async) native call. */
  async #acquireOnce(context, selector) {
    if (!this.#link) return this.#maybeAsync(false, 'acquire', context, selector);
    try {
      return await this.#native.linkAcquire(context, selector);
    } finally {
      this.#changed(false);
    }
  }

  /** @param {number} ms @param {AbortSignal} [signal] @returns {Promise<void>} */
  #sleep(ms, signal) {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Acquires a lease (options as for `acquire`), runs `fn(lease, signal)`
   * and releases the lease however `fn` ends. `signal` is an AbortSignal
   * aborted (with a LeaseExpiredError naming the loss) when the lease is
   * lost, so work can stop. If `fn` throws, that error is rethrown (a failed
   * release is then ignored); if it returns, a failed release rejects, and
   * so does a lease lost while `fn` ran (LeaseExpiredError naming the loss):
   * the work was not protected to the end.
   */
  async withLease(context, fn, options) {
    if (typeof fn !== 'function') throw invalidArg('fn', 'must be a function');
    const lease = await this.acquire(context, options);
    const controller = new AbortController();
    const onLost = (loss) => controller.abort(new LeaseExpiredError(`lease lost: ${loss}`, { code: 'lease_expired', loss }));
    lease.on('lost', onLost);
    let result;
    try {
      result = await fn(lease, controller.signal);
    } catch (e) {
      lease.off('lost', onLost);
      lease.release().catch(ignore);
      throw e;
    }
    lease.off('lost', onLost);
    if (!(await lease.release())) {
      throw new LeaseExpiredError(`lease lost while the callback ran: ${lease.loss ?? 'expired'}`, {
        code: 'lease_expired',
        loss: lease.loss,
      });
    }
    return result;
  }

  /** A probe lease on a cell that `dueForProbe()` lists. */
  acquireForProbe(kind, value, context) {
    const n = this.#call(() => this.#native.acquireForProbe(str('kind', kind), str('value', value), str('context', context)));
    return new Lease(kAdopt, this, n);
  }

  /**
   * A handle on a live lease from its id and fencing token (handed over
   * from elsewhere): renews it under that token, so a wrong token throws
   * StaleLeaseError and an ended lease LeaseExpiredError.
   */
  resume(id, token) {
    const n = this.#call(() => this.#native.resume(bigint('id', id), bigint('token', token)));
    return new Lease(kAdopt, this, n);
  }

  async [kRenew](n) {
    try {
      await (this.#durable ? n.renewAsync() : n.renew());
    } finally {
      this.#changed(false);
    }
  }

  /**
   * Ends the lease in this pool at once (on SQLite one small local
   * transaction, on PostgreSQL a round trip, before returning); resolves to
   * how the host found it, `held`, `lost` or `lost_unseen`, once other
   * processes can take the permit (on Redis, when the revoke has run).
   */
  [kRelease](n) {
    try {
      if (!this.#link) return Promise.resolve(n.release());
      return this.#native.linkRelease(n).then(() => n.releasedAs());
    } catch (e) {
      return Promise.reject(e);
    } finally {
      this.#changed(true);
    }
  }

  async [kReconcile](n, used) {
    try {
      await (this.#durable ? n.reconcileAsync(used) : n.reconcile(used));
    } finally {
      this.#changed(true);
    }
  }

  async [kReport](n, spec, options = {}) {
    const o = obj('options', options);
    const latencyMs = num('latencyMs', o.latencyMs ?? 0);
    const usage = optBigint('usage', o.usage);
    try {
      await (this.#durable ? n.reportAsync({ ...spec, latencyMs }, usage) : n.report({ ...spec, latencyMs }, usage));
    } finally {
      this.#changed(true);
    }
  }

  reportSuccess(kind, value, context, options = {}) {
    return this.#report(kind, value, context, {}, options);
  }

  async reportFailure(kind, value, context, failure, options = {}) {
    const retryAfterMs = optNum('retryAfterMs', obj('options', options).retryAfterMs);
    return this.#report(kind, value, context, { failure: str('failure', failure), retryAfterMs }, options);
  }

  /** Reports a use by the upstream's HTTP answer (status, headers, body), read by the kind's profile. */
  async reportHttp(kind, value, context, status, options = {}) {
    return this.#report(kind, value, context, httpSpec(status, options), options);
  }

  async #report(kind, value, context, spec, options) {
    const latencyMs = num('latencyMs', obj('options', options).latencyMs ?? 0);
    await this.#maybeAsync(true, 'report', str('kind', kind), str('value', value), str('context', context), { ...spec, latencyMs });
  }

  /** Blocks a resource everywhere, or in one `context`; for `durationMs` or until unblocked. */
  block(kind, value, options = {}) {
    const o = obj('options', options);
    this.#call(() =>
        this.#native.block(
          str('kind', kind),
          str('value', value),
          optStr('context', o.context),
          optNum('durationMs', o.durationMs),
          optStr('reason', o.reason),
        ),
      );
  }

  /** Lifts a block; true if one was in place. */
  unblock(kind, value, options = {}) {
    const o = obj('options', options);
    return this.#call(() => this.#native.unblock(str('kind', kind), str('value', value), optStr('context', o.context)), true);
  }

  dueForProbe() {
    return this.#call(() => this.#native.dueForProbe());
  }

  cells(kind, value) {
    return this.#call(() => this.#native.cells(str('kind', kind), str('value', value)));
  }

  resources() {
    return this.#call(() => this.#native.resources());
  }

  /** The live leases, as plain data. */
  leases() {
    return this.#call(() => this.#native.leases());
  }

  stats() {
    return this.#call(() => this.#native.stats());
  }

  /** The versioned binary snapshot (with live leases unless `withLeases: false`). */
  snapshot(options = {}) {
    return this.#call(() => this.#native.snapshot(obj('options', options).withLeases !== false));
  }

  /** Replaces the state with a snapshot; a refused one changes nothing. */
  restore(bytes) {
    if (!(bytes instanceof Uint8Array)) throw invalidArg('bytes', 'must be a Buffer or Uint8Array');
    this.#call(() => this.#native.restore(bytes), true);
  }

  snapshotJson(options = {}) {
    return JSON.parse(this.#native.snapshotJson(obj('options', options).withLeases !== false));
  }

  restoreJson(state) {
    this.#call(() => this.#native.restoreJson(typeof state === 'string' ? state : JSON.stringify(state)), true);
  }

  /** Saves a checkpoint to the store (off the JS thread); resolves to its version. */
  async checkpoint(options = {}) {
    const withLeases = obj('options', options).withLeases !== false;
    return this.#native.checkpointAsync(withLeases);
  }

  /**
   * Folds in what other processes appended to the tenant's log since this
   * pool last read it (shared mode on PostgreSQL, where every process serves
   * the tenant); returns how many entries. It waits for the database on the
   * JS thread; `syncAsync()` waits on the libuv thread pool.
   */
  sync() {
    return this.#call(() => this.#native.sync(), true);
  }

  /** `sync()` off the JS thread. */
  syncAsync() {
    return this.#maybeAsync(true, 'sync');
  }

  /** Events since the last drain, oldest first. */
  drainEvents() {
    return this.#call(() => this.#native.drainEvents());
  }

  /**
   * Pool events as an async iterator. Events are produced by pool calls
   * (the core fires due timers, such as lease expiry, on each call); the
   * iterator ends when the pool is closed or the loop is left.
   * @returns {AsyncIterableIterator<import('./index').PoolEvent>}
   */
  events() {
    /** @type {{ queue: import('./index').PoolEvent[], wake: ((value?: unknown) => void) | undefined, done: boolean }} */
    const sub = { queue: [], wake: undefined, done: false };
    this.#subscribers.add(sub);
    this.#pumpEvents();
    const subscribers = this.#subscribers;
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        while (sub.queue.length === 0 && !sub.done) {
          await new Promise((resolve) => {
            sub.wake = resolve;
          });
          sub.wake = undefined;
        }
        if (sub.queue.length !== 0) return { value: /** @type {import('./index').PoolEvent} */ (sub.queue.shift()), done: false };
        return { value: undefined, done: true };
      },
      async return() {
        sub.done = true;
        subscribers.delete(sub);
        return { value: undefined, done: true };
      },
    };
  }

  /**
   * Closes the pool: a durable store first saves a checkpoint (unless
   * `checkpoint: false`, or in shared mode), then the store is released (a
   * sharded tenant's owner lease is given up at once). Leases still held
   * are lost (`'lost'` with `closed`); later calls throw PoolClosedError.
   * Idempotent.
   */
  close(options = {}) {
    const checkpoint = obj('options', options).checkpoint !== false;
    clearInterval(this.#prober);
    if (this.#subscribers.size !== 0) this.#pumpEvents();
    try {
      // Closed even when the last checkpoint fails; that failure is thrown.
      this.#native.close(checkpoint);
    } finally {
      for (const sub of this.#subscribers) {
        sub.done = true;
        sub.wake?.();
      }
      this.#subscribers.clear();
      this.#changed(true);
    }
  }

  [Symbol.dispose]() {
    this.close();
  }
}

// ES modules import this same object (one addon load, one set of classes, so
// `instanceof` agrees across both). Node finds the named exports by reading
// the literal below, so it stays a plain list of names (the tests check that
// its error classes are the table's).
const {
  ReputeError,
  UnknownResourceError,
  UnknownLeaseError,
  StaleLeaseError,
  BlockedError,
  LeasedError,
  BudgetExhaustedError,
  InvalidSnapshotError,
  StoreError,
  NotOwnerError,
  PoolClosedError,
  InternalError,
} = errors;
module.exports = {
  Pool,
  Lease,
  ManualClock,
  ReputeError,
  InvalidInputError,
  NoResourceAvailableError,
  StaleLeaseError,
  LeaseExpiredError,
  BudgetExhaustedError,
  RateLimitedError,
  StoreError,
  NotOwnerError,
  UnknownResourceError,
  UnknownLeaseError,
  BlockedError,
  LeasedError,
  InvalidSnapshotError,
  PoolClosedError,
  InternalError,
};
