'use strict';
// The manual clock.

const native = require('../repute.node');
const { num } = require('./checks');

/** The public type (index.d.ts) this class implements. @typedef {import('../index').ManualClock} ManualClockApi */

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

module.exports = { ManualClock, kNative };
