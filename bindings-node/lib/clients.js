'use strict';
// HTTP clients whose own extension point takes repute's `fetch`: axios
// (>= 1.7, its fetch adapter) carries each request on the pool through
// the dispatcher, with every attempt's lease, report and retry there.

const { Request, Response } = require('undici');
const { fetch } = require('./dispatcher');

/**
 * axios's configuration for its fetch adapter on repute's `fetch` (the
 * options are the dispatcher's): `axios.create(repute.axiosConfig(pool, {
 * kind }))`. undici's Request and Response go with it, the classes that
 * `fetch` takes and gives. `env.fetch.dispatcher.close()` when done.
 * @param {import('./pool').Pool} pool @param {import('../index').DispatcherOptions} [options]
 */
function axiosConfig(pool, options) {
  return { adapter: /** @type {const} */ ('fetch'), env: { fetch: fetch(pool, options), Request, Response } };
}

module.exports = { axiosConfig };
