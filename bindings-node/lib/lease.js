'use strict';
// The lease handle.

const { EventEmitter } = require('node:events');
const { str, optNum, obj, bigint } = require('./checks');
const { httpSpec } = require('./options');

/** The public type (index.d.ts) this class implements. @typedef {import('../index').Lease} LeaseApi */

const kAdopt = Symbol('repute.adopt');
const kRenew = Symbol('repute.renew');
const kRelease = Symbol('repute.release');
const kReconcile = Symbol('repute.reconcile');
const kReport = Symbol('repute.report');
/** The pool's hooks for lib/attempts.js: its native pool, its waiting acquire, its wake-up after a change. */
const kNativePool = Symbol('repute.nativePool');
const kAcquireFor = Symbol('repute.acquireFor');
const kNextFor = Symbol('repute.nextFor');
const kTryNextFor = Symbol('repute.tryNextFor');
const kChanged = Symbol('repute.changed');
/** A lease's native handle, for an attempt to begin on. */
const kNativeLease = Symbol('repute.nativeLease');

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

  /** @returns {import('../repute.node').NativeLease} */
  [kNativeLease]() {
    return this.#n;
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

module.exports = {
  Lease,
  kAdopt,
  kRenew,
  kRelease,
  kReconcile,
  kReport,
  kNativePool,
  kAcquireFor,
  kNextFor,
  kTryNextFor,
  kChanged,
  kNativeLease,
  ignore,
};
