'use strict';
// The pool.

const native = require('../repute.node');
const { NoResourceAvailableError, LeaseExpiredError, RateLimitedError } = require('./errors');
const { invalidArg, str, optStr, num, optNum, uint, obj, optStrings, bigint, optBigint } = require('./checks');
const { Lease, kAdopt, kRenew, kRelease, kReconcile, kReport, kNativePool, kAcquireFor, kNextFor, kTryNextFor, kChanged, ignore } = require('./lease');
const { selectorOptions, labelsOption, limitsOption, groupLimitsOption, holdOptions, httpSpec, nativeConfig } = require('./options');
const { startProber } = require('./prober');
const { EventFeed } = require('./events');
const { Line } = require('./line');

/**
 * Whether `e` is an acquire's refusal (nothing selectable, or the pool's
 * rate limit): what a waiting acquire waits out and an adapter gives up on.
 * @param {unknown} e
 */
function isRefusal(e) {
  return e instanceof NoResourceAvailableError || e instanceof RateLimitedError;
}

/**
 * A refused acquire's error as the attempt protocol reads it (absent fields undefined).
 * @param {any} err @returns {import('../repute.node').RefusalSpec}
 */
function refusalOf(err) {
  const n = (v) => v ?? undefined;
  return {
    code: err.code,
    registered: n(err.registered),
    blocked: n(err.blocked),
    rateLimited: n(err.rateLimited),
    cooling: n(err.cooling),
    leased: n(err.leased),
    limited: n(err.limited),
    retryAfterMs: n(err.retryAfterMs),
    expectedAfterMs: n(err.expectedAfterMs),
    settled: n(err.settled),
  };
}

/** The public type (index.d.ts) this class implements. @typedef {import('../index').Pool} PoolApi */

/**
 * One tenant's reputation-aware resource pool.
 * @implements {PoolApi}
 */
class Pool {
  /** @type {import('../repute.node').NativePool} */
  #native;
  #durable;
  /** On Redis: acquires and releases run on the pool's own connection on the event loop. */
  #link;
  /** Sleeping `acquire` calls, woken early by anything that may free a permit (lib/line.js). */
  #line = new Line();
  /** Open `events()` iterators. */
  #feed;

  /**
   * @param {import('../index').PoolOptions} [options]
   * @param {symbol} [adopt] `kAdopt` when `opened` is the native pool `open` made
   * @param {import('../repute.node').NativePool} [opened]
   */
  constructor(options = {}, adopt = undefined, opened = undefined) {
    const [config, clock] = nativeConfig(options);
    this.#native = adopt === kAdopt ? /** @type {import('../repute.node').NativePool} */ (opened) : new native.NativePool(config, clock);
    this.#durable = this.#native.durable;
    this.#link = this.#native.hasLink;
    this.#feed = new EventFeed(this.#native);
    this.#prober = startProber(this.#native, obj('options', options), config.recovery, () => this.#changed('all'));
  }

  /** The probe loop's timer (`recovery: 'probe'` with a `probe`), until `close`. */
  #prober;

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

  /**
   * Runs a call that may write to durable storage off the JS thread.
   * @param {false | 'one' | 'all'} frees @param {string} name @param {...any} args
   */
  async #maybeAsync(frees, name, ...args) {
    try {
      return this.#durable ? await this.#native[`${name}Async`](...args) : this.#native[name](...args);
    } finally {
      this.#changed(frees);
    }
  }

  /**
   * Runs a native call, then `#changed`. `frees` marks calls that can
   * make a resource selectable: `'one'` (a release, a report: one permit
   * or one resource) wakes the first sleeping `acquire` in line that may
   * use it, `'all'` (a register, an unblock, a restore) wakes them all.
   * Failed acquires must not, or waiters would wake each other in a loop.
   * @param {() => any} f @param {false | 'one' | 'all'} [frees]
   */
  #call(f, frees = false) {
    try {
      return f();
    } finally {
      this.#changed(frees);
    }
  }

  /**
   * After any call: deliver events to iterators; maybe wake sleeping acquires.
   * @param {false | 'one' | 'all'} frees
   */
  #changed(frees) {
    this.#feed.pump();
    if (frees === 'one') this.#line.wakeOne();
    else if (frees === 'all') this.#line.wakeAll();
  }

  /**
   * Registers a resource with `{ permits, labels, secret, limits, groups }`:
   * `permits` concurrent leases (default 1), `labels` (label name to
   * string) for acquire's `where`, a `secret` handed to its lease holders
   * (`lease.secret`), usage `limits`: at most `rpm` grants and `tpm`
   * tokens (each lease's `cost`, reconciled to its use) in any 60 s, at
   * most `rpd` grants and `tpd` tokens in any rolling day, at least
   * `minIntervalMs` between two grants, retired after `maxUses` grants or
   * `maxAgeMs`; and the quota `groups` it belongs to (see `setGroup`).
   * Registering again replaces them all. True if anything changed.
   */
  register(kind, value, options = {}) {
    const o = obj('options', options);
    const permits = uint('permits', o.permits ?? 1);
    const limits = limitsOption(o.limits);
    const labels = labelsOption(o.labels);
    const secret = optStr('secret', o.secret);
    const groups = optStrings('groups', o.groups);
    return this.#call(
      () => this.#native.register(str('kind', kind), str('value', value), permits, limits, labels, secret, groups),
      'all',
    );
  }

  /**
   * Sets the limits the members of quota group `name` share: at most `rpm`
   * grants and `tpm` tokens in any 60 s, `rpd` grants and `tpd` tokens in
   * any rolling day, `concurrency` live leases across them; with
   * `sharedQuota`, a `quota_exhausted` failure on one member pauses them
   * all. Setting again replaces them all; none removes them. True if
   * anything changed.
   */
  setGroup(name, limits = {}) {
    const spec = groupLimitsOption(limits);
    return this.#call(() => this.#native.setGroup(str('name', name), spec), 'all');
  }

  /** Every quota group with members or limits, sorted by name. */
  groups() {
    return this.#call(() => this.#native.groups());
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
   * 50 ms, at most 1 ms past the pool's `retryAfterMs`, on the pool's clock) and
   * end early when this pool releases or changes anything (a release wakes
   * the longest-waiting acquire that may use it, lib/line.js). Rejects with the
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
    let wish = null;
    return this.#untilGranted(
      async () => this.#adopt(await this.#acquireOnce(context, selector), hold),
      (err) => {
        // A rate limit's wait is what is expected; a refusal says its own.
        const expected = err instanceof NoResourceAvailableError ? err.expectedAfterMs : err.retryAfterMs;
        const waitMs = waiting.next(err.retryAfterMs ?? undefined, err.settled, expected ?? undefined);
        if (waitMs === null) return null;
        wish ??= this.#native.wish(context, selector);
        return { waitMs, wish };
      },
      signal,
    );
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

  /**
   * The native lease for an attempt's next try (lib/attempts.js): `acquire`'s
   * waiting, on the attempts' selector and time left; a refusal the
   * attempts answer `again` (only what was tried is left) is tried again
   * at once, one they `give_up` on is thrown.
   * @param {import('../repute.node').NativeAttempts} attempts
   * @param {AbortSignal} [signal]
   */
  [kAcquireFor](attempts, signal) {
    if (this.#durable || this.#link) return this.#granting(attempts, signal, () => this.#acquireOnce(attempts.context, attempts.selector()));
    return this.#granting(attempts, signal, () => this.#call(() => attempts.acquireNow()));
  }

  /**
   * `kAcquireFor`, then the attempt begun: its route. On the JS thread
   * the two are one native call (`nextNow`).
   * @param {import('../repute.node').NativeAttempts} attempts
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('../repute.node').RouteData>}
   */
  [kNextFor](attempts, signal) {
    if (this.#durable || this.#link) return this[kAcquireFor](attempts, signal).then((lease) => this.#call(() => attempts.begin(lease)));
    return this.#granting(attempts, signal, () => this.#call(() => attempts.nextNow()));
  }

  /**
   * `kNextFor`'s first try, on this thread and without a promise: the
   * route, or null when the pool refused (the caller then waits with
   * `kNextFor`, which tries again at once) or acquires off the JS thread.
   * @param {import('../repute.node').NativeAttempts} attempts
   * @returns {import('../repute.node').RouteData | null}
   */
  [kTryNextFor](attempts) {
    if (this.#durable || this.#link) return null;
    try {
      return this.#call(() => attempts.nextNow());
    } catch (e) {
      if (isRefusal(e)) return null;
      throw e;
    }
  }

  /**
   * `once()` until it is granted, waiting between refusals as `attempts`
   * says; a refusal they give up on is thrown.
   * @template T
   * @param {import('../repute.node').NativeAttempts} attempts
   * @param {AbortSignal | undefined} signal
   * @param {() => T | Promise<T>} once
   * @returns {Promise<T>}
   */
  #granting(attempts, signal, once) {
    let waiting = null;
    return this.#untilGranted(
      once,
      (err) => {
        const { step, hintMs } = attempts.refused(refusalOf(err));
        if (step === 'again') return 'again';
        waiting ??= this.#native.waiting(attempts.remainingMs());
        const waitMs = step === 'wait' ? waiting.next(hintMs ?? undefined) : null;
        return waitMs === null ? null : { waitMs, wish: attempts.wish };
      },
      signal,
    );
  }

  /**
   * The one waiting loop: `once()` until it is granted. After each refusal
   * `next(err)` says what follows: a sleep of `waitMs` before a try that
   * asks for `wish`, in this pool's line (lib/line.js: a release may end it
   * early), `'again'` (a try at once) or null (the refusal is thrown).
   * @template T
   * @param {() => T | Promise<T>} once
   * @param {(err: import('../index').NoResourceAvailableError | import('../index').RateLimitedError) => { waitMs: number, wish: string } | 'again' | null} next
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<T>}
   */
  async #untilGranted(once, next, signal) {
    let place = null;
    try {
      for (;;) {
        signal?.throwIfAborted();
        let err;
        try {
          const granted = await once();
          place?.granted();
          return granted;
        } catch (e) {
          if (!isRefusal(e)) throw e;
          err = e;
        }
        place?.refused();
        const then = next(err);
        if (then === null) throw err;
        if (then === 'again') continue;
        place ??= this.#line.place();
        await place.sleep(then.waitMs, then.wish, signal);
      }
    } finally {
      place?.left();
    }
  }

  [kNativePool]() {
    return this.#native;
  }

  /**
   * After an attempt's call: events out, and the first sleeping acquire in
   * line woken when it may have freed a permit.
   * @param {boolean} frees
   */
  [kChanged](frees) {
    this.#changed(frees ? 'one' : false);
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
      this.#changed('one');
    }
  }

  async [kReconcile](n, used) {
    try {
      await (this.#durable ? n.reconcileAsync(used) : n.reconcile(used));
    } finally {
      this.#changed('all');
    }
  }

  async [kReport](n, spec, options = {}) {
    const o = obj('options', options);
    const latencyMs = num('latencyMs', o.latencyMs ?? 0);
    const usage = optBigint('usage', o.usage);
    try {
      await (this.#durable ? n.reportAsync({ ...spec, latencyMs }, usage) : n.report({ ...spec, latencyMs }, usage));
    } finally {
      this.#changed('one');
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
    await this.#maybeAsync('one', 'report', str('kind', kind), str('value', value), str('context', context), { ...spec, latencyMs });
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
    return this.#call(() => this.#native.unblock(str('kind', kind), str('value', value), optStr('context', o.context)), 'all');
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
    this.#call(() => this.#native.restore(bytes), 'all');
  }

  snapshotJson(options = {}) {
    return JSON.parse(this.#native.snapshotJson(obj('options', options).withLeases !== false));
  }

  restoreJson(state) {
    this.#call(() => this.#native.restoreJson(typeof state === 'string' ? state : JSON.stringify(state)), 'all');
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
    return this.#call(() => this.#native.sync(), 'all');
  }

  /** `sync()` off the JS thread. */
  syncAsync() {
    return this.#maybeAsync('all', 'sync');
  }

  /** Events since the last drain, oldest first. */
  drainEvents() {
    return this.#call(() => this.#native.drainEvents());
  }

  /**
   * Pool events as an async iterator. Events are produced by pool calls
   * (the core fires due timers, such as lease expiry, on each call); the
   * iterator ends when the pool is closed or the loop is left.
   * @returns {AsyncIterableIterator<import('../index').PoolEvent>}
   */
  events() {
    return this.#feed.subscribe();
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
    this.#feed.pump();
    try {
      // Closed even when the last checkpoint fails; that failure is thrown.
      this.#native.close(checkpoint);
    } finally {
      this.#feed.end();
      this.#changed('all');
    }
  }

  [Symbol.dispose]() {
    this.close();
  }
}

module.exports = { Pool, isRefusal };
