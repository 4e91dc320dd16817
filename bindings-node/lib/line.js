'use strict';
// Acquires of one pool asleep between tries, in line.
//
// A release frees one permit, so it wakes one sleeper: the one longest in
// line (a place is taken at an acquire's first refusal and kept until it
// ends). A sleeper that cannot use what was freed (another acquire took it
// first, or it is not what this one's context and selector admit) hands the
// wake on to the next in line that wishes for something else and has not
// tried since that release: the permit reaches whoever can take it, and
// sleepers that wish alike (answered alike) cost one try a release between
// them, where waking them all cost each a try. A change that may make more
// than one resource selectable (a register, an unblock, a restore) wakes
// them all. A change this pool does not see (another process, an expiry)
// wakes no one: the sleep's backoff bounds that wait.

/** @typedef {{ release: number, refused: Set<string> }} Wake */
/** @typedef {{ end: (wake: Wake | null) => void, seen: number, wish: string }} Sleeper */

class Line {
  #places = 0;
  /** Wakes made, counted. */
  #releases = 0;
  /** @type {Map<number, Sleeper>} */
  #sleeping = new Map();
  /** The places of the sleepers, ascending. @type {number[]} */
  #order = [];

  /** A place in line for one acquire, behind every one before it. */
  place() {
    return new Place(this, this.#places++);
  }

  /** One permit was freed: the first in line that may use it tries for it. */
  wakeOne() {
    if (this.#order.length === 0) return;
    this.hand({ release: ++this.#releases, refused: new Set() }, -1);
  }

  /** Anything may have become selectable: every sleeper tries. */
  wakeAll() {
    if (this.#order.length === 0) return;
    this.#releases++;
    for (const sleeper of [...this.#sleeping.values()]) sleeper.end(null);
  }

  /**
   * Wakes the first sleeper behind place `after` that may use what `wake`
   * freed: one that has not tried since and does not wish for what was
   * refused. None: every one has, or wishes so.
   * @param {Wake} wake @param {number} after
   */
  hand(wake, after) {
    for (let i = this.#after(after); i < this.#order.length; i++) {
      const sleeper = /** @type {Sleeper} */ (this.#sleeping.get(this.#order[i]));
      if (sleeper.seen < wake.release && !wake.refused.has(sleeper.wish)) {
        sleeper.end(wake);
        return;
      }
    }
  }

  /**
   * Sleeps `ms` at `place`, or until a wake, or until `signal` aborts: the
   * wake that ended it, or null.
   * @param {number} place @param {number} ms @param {string} wish @param {AbortSignal} [signal]
   * @returns {Promise<Wake | null>}
   */
  sleep(place, ms, wish, signal) {
    return new Promise((resolve) => {
      let ended = false;
      /** @param {Wake | null} wake */
      const end = (wake) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        this.#sleeping.delete(place);
        this.#order.splice(this.#after(place) - 1, 1);
        resolve(wake);
      };
      const aborted = () => end(null);
      const timer = setTimeout(aborted, ms);
      this.#sleeping.set(place, { end, seen: this.#releases, wish });
      this.#order.splice(this.#after(place), 0, place);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  /** How many sleepers are in line. */
  get length() {
    return this.#order.length;
  }

  /** The index of the first place in line after `place`. @param {number} place */
  #after(place) {
    let lo = 0;
    let hi = this.#order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#order[mid] <= place) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * One acquire's place in its pool's line, and the wake it holds: a wake it
 * could not use is handed on, whether the acquire tries again, gives up or
 * is aborted.
 */
class Place {
  #line;
  #place;
  /** @type {Wake | null} */
  #wake = null;
  #wish = '';

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
  async sleep(ms, wish, signal) {
    this.#wish = wish;
    this.#wake = await this.#line.sleep(this.#place, ms, wish, signal);
  }

  /** The try after the sleep got its permit: the wake is used. */
  granted() {
    this.#wake = null;
  }

  /** The try after the sleep got nothing, or the acquire ends without one: the wake goes on. */
  refused() {
    const wake = this.#wake;
    if (wake === null) return;
    this.#wake = null;
    wake.refused.add(this.#wish);
    this.#line.hand(wake, this.#place);
  }
}

module.exports = { Line };
