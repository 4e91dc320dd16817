'use strict';
// The error classes. They come from the host's code table
// (`repute_host::codes`, the Python binding's names too): ReputeError, and
// one subclass of it per class the table names. The native module builds every error itself, as an
// instance of its class, with `code` and the class's fields set (see
// src/errors.rs); these classes only give them their identity.

const native = require('../repute.node');

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
 * @typedef {typeof import('../index')} Api
 * @typedef {{ [K in keyof Api as Api[K] extends abstract new (...args: any) => import('../index').ReputeError ? K : never]: Api[K] }} ErrorClasses
 */
const errors = /** @type {ErrorClasses} */ (/** @type {unknown} */ (made));
module.exports = errors;
