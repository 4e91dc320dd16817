'use strict';
// Pool events, delivered to the open `events()` iterators.

/** @typedef {{ queue: import('../index').PoolEvent[], wake: ((value?: unknown) => void) | undefined, done: boolean }} Subscriber */

/** One pool's open iterators, fed the events the native pool drains after each call. */
class EventFeed {
  #native;
  /** @type {Set<Subscriber>} */
  #subscribers = new Set();

  /** @param {import('../repute.node').NativePool} native */
  constructor(native) {
    this.#native = native;
  }

  /** Hands the events since the last drain to every iterator; with none open, leaves them to `drainEvents()`. */
  pump() {
    if (this.#subscribers.size === 0) return;
    // The native event's `type` and `cause` are strings: the core's names, which PoolEvent lists.
    const events = /** @type {import('../index').PoolEvent[]} */ (this.#native.drainEvents());
    if (events.length === 0) return;
    for (const sub of this.#subscribers) {
      sub.queue.push(...events);
      sub.wake?.();
    }
  }

  /**
   * Pool events as an async iterator. Events are produced by pool calls
   * (the core fires due timers, such as lease expiry, on each call); the
   * iterator ends when the pool is closed or the loop is left.
   * @returns {AsyncIterableIterator<import('../index').PoolEvent>}
   */
  subscribe() {
    /** @type {Subscriber} */
    const sub = { queue: [], wake: undefined, done: false };
    this.#subscribers.add(sub);
    this.pump();
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
        if (sub.queue.length !== 0) return { value: /** @type {import('../index').PoolEvent} */ (sub.queue.shift()), done: false };
        return { value: undefined, done: true };
      },
      async return() {
        sub.done = true;
        subscribers.delete(sub);
        return { value: undefined, done: true };
      },
    };
  }

  /** Ends every iterator (the pool closed). */
  end() {
    for (const sub of this.#subscribers) {
      sub.done = true;
      sub.wake?.();
    }
    this.#subscribers.clear();
  }
}

module.exports = { EventFeed };
