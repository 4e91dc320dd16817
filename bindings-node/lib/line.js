'use strict';
// Acquires of one pool asleep between tries, in line: the event-loop form
// of the blocking acquire's line. A release frees one permit, so it wakes
// one sleeper; one that cannot use it hands the wake on. Who is woken is
// the host's (NativeLine: the first in line, then the next that wishes for
// something else and has not tried since the release); this keeps the
// timers and promises, keyed by place. A change that may make more than one
// resource selectable (a register, an unblock, a restore) wakes them all. A
// change this pool does not see (another process, an expiry) wakes no one:
// the sleep's backoff bounds that wait.

const { NativeLine } = require('../repute.node');

class Line {
  #order = new NativeLine();
  /** How each sleeping place ends its sleep. @type {Map<number, () => void>} */
  #sleeping = new Map();

  /** A place in line for one acquire, behind every one before it. */
  place() {
    return new Place(this, this.#order.place());
  }

  /** One permit was freed: the first in line tries for it. */
  wakeOne() {
    if (this.#sleeping.size !== 0) this.#ring(this.#order.wakeOne());
  }

  /** Anything may have become selectable: every sleeper tries. */
  wakeAll() {
    if (this.#sleeping.size === 0) return;
    for (const place of this.#order.wakeAll()) this.#ring(place);
  }

  /** @param {number | null} place */
  #ring(place) {
    if (place === null) return;
    const end = this.#sleeping.get(place);
    this.#sleeping.delete(place);
    end?.();
  }

  /**
   * Sleeps `ms` at `place`, or until a wake, or until `signal` aborts.
   * @param {number} place @param {number} ms @param {string} wish @param {AbortSignal} [signal]
   * @returns {Promise<void>}
   */
  sleep(place, ms, wish, signal) {
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', leave);
        resolve();
      };
      // Time up or aborted: out of line at once, so no wake goes to it.
      const leave = () => {
        this.#sleeping.delete(place);
        this.#order.leave(place);
        end();
      };
      const timer = setTimeout(leave, ms);
      this.#sleeping.set(place, end);
      this.#order.lieDown(place, wish);
      signal?.addEventListener('abort', leave, { once: true });
    });
  }

  /** @param {number} place */
  granted(place) {
    this.#order.granted(place);
  }

  /** @param {number} place @param {boolean} tried */
  hand(place, tried) {
    this.#ring(tried ? this.#order.refused(place) : this.#order.left(place));
  }

  /** How many sleepers are in line. */
  get length() {
    return this.#order.length;
  }
}

/**
 * One acquire's place in its pool's line: a wake it could not use is handed
 * on, whether the acquire tries again (`refused` after each refused try) or
 * ends (`left`).
 */
class Place {
  #line;
  #place;

  /** @param {Line} line @param {number} place */
  constructor(line, place) {
    this.#line = line;
    this.#place = place;
  }

  /**
   * Sleeps `ms`, or until a release wakes it; `wish` is what its next try
   * asks for (tries that ask alike are answered alike).
   * @param {number} ms @param {string} wish @param {AbortSignal} [signal]
   */
  sleep(ms, wish, signal) {
    return this.#line.sleep(this.#place, ms, wish, signal);
  }

  /** The try after the sleep got its permit: the wake is used. */
  granted() {
    this.#line.granted(this.#place);
  }

  /** The try after the sleep got nothing: a wake it holds goes to the next that wishes otherwise. */
  refused() {
    this.#line.hand(this.#place, true);
  }

  /** The acquire ends: a wake it holds and did not try goes to the next in line. */
  left() {
    this.#line.hand(this.#place, false);
  }
}

module.exports = { Line };
