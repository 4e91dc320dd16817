'use strict';
// The public JavaScript API of repute. The pool itself is the Rust core
// behind `repute.node`; lib/ only converts: options to the native config
// (the native module throws typed errors itself), lease data to `Lease`
// objects, and pool events to an async iterator. lib/errors.js makes the
// error classes, lib/checks.js and lib/options.js check and convert
// arguments, lib/pool.js, lib/lease.js and lib/clock.js hold the classes,
// lib/events.js and lib/prober.js what a pool runs beside its calls,
// lib/attempts.js one request's attempts (the host's protocol) and
// lib/dispatcher.js the undici dispatcher and `fetch` built on them,
// lib/clients.js (axios), lib/got.js and lib/crawlee.js other clients'
// extension points on the attempts, lib/partitions.js the partition map of
// partitioned servers.

const { Pool } = require('./lib/pool');
const { Lease } = require('./lib/lease');
const { ManualClock } = require('./lib/clock');
const errors = require('./lib/errors');
const { Attempts, contextOf } = require('./lib/attempts');
const { ReputeDispatcher, dispatcher, fetch } = require('./lib/dispatcher');
const { axiosConfig } = require('./lib/clients');
const { gotOptions } = require('./lib/got');
const { CrawleeProxies, crawleeProxies } = require('./lib/crawlee');
const { partitionOf, leasePartition } = require('./lib/partitions');

// ES modules import this same object (one addon load, one set of classes, so
// `instanceof` agrees across both). Node finds the named exports by reading
// the literal below, so it stays a plain list of names (the tests check that
// its error classes are the table's).
const {
  ReputeError,
  InvalidInputError,
  NoResourceAvailableError,
  LeaseExpiredError,
  RateLimitedError,
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
  Attempts,
  contextOf,
  ReputeDispatcher,
  dispatcher,
  fetch,
  axiosConfig,
  gotOptions,
  CrawleeProxies,
  crawleeProxies,
  partitionOf,
  leasePartition,
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
