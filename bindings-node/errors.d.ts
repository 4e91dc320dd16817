// The error classes of the `repute` package, which lib/errors.js makes from
// the host's code table; test/declarations.test.mjs holds these declarations
// to that table.

import type { Loss } from './index';

/** The codes of the host's code table (the Python binding's `code`s too). */
export type ErrorCode =
  | 'invalid_input'
  | 'unknown_resource'
  | 'unknown_lease'
  | 'stale_lease'
  | 'lease_expired'
  | 'blocked'
  | 'no_resource_available'
  | 'leased'
  | 'budget_exhausted'
  | 'rate_limited'
  | 'invalid_snapshot'
  | 'storage_conflict'
  | 'stale_epoch'
  | 'storage_unavailable'
  | 'store_recovering'
  | 'not_owner'
  | 'trap'
  | 'runtime'
  | 'closed';

/**
 * Base of every error repute throws. The native module builds each one, with
 * a plain-text message (durations in ms), `code`, and every field of its
 * class (`null` where that error has none). The class names are the Python
 * binding's; fields are its attributes in camelCase, durations in ms.
 */
export class ReputeError extends Error {
  constructor(message: string, fields?: { code?: string } & Record<string, unknown>);
  readonly code: ErrorCode;
}
export class InvalidInputError extends ReputeError {
  readonly code: 'invalid_input';
  readonly field: string;
  readonly rule: string;
}
export class UnknownResourceError extends ReputeError {
  readonly code: 'unknown_resource';
}
export class UnknownLeaseError extends ReputeError {
  readonly code: 'unknown_lease';
}
/** The token is not the lease's current one; which token is, is not told. */
export class StaleLeaseError extends ReputeError {
  readonly code: 'stale_lease';
}
export class LeaseExpiredError extends ReputeError {
  readonly code: 'lease_expired';
  /** Why the lease was lost, when the holder's side knows (`withLease`'s signal and rejection). */
  readonly loss?: Loss | null;
}
export class BlockedError extends ReputeError {
  readonly code: 'blocked';
}
export class NoResourceAvailableError extends ReputeError {
  readonly code: 'no_resource_available';
  /** When the first resource holding it back may free up, if known. */
  readonly retryAfterMs: number | null;
  /** As `retryAfterMs`, but a ban's early trial, which mostly finds the ban still on, does not count. */
  readonly expectedAfterMs: number | null;
  /** Each registered resource is counted once, under the first reason that holds it back. */
  readonly noneRegistered: boolean;
  readonly blocked: number;
  readonly rateLimited: number;
  readonly cooling: number;
  readonly leased: number;
  /** Over a usage limit until its window frees up, or retired by its limits. */
  readonly limited: number;
  /** Nothing known can free a resource before `retryAfterMs`: no release, report or usage of a live lease, no probe. */
  readonly settled: boolean;
}
export class LeasedError extends ReputeError {
  readonly code: 'leased';
  readonly live: number;
}
export class BudgetExhaustedError extends ReputeError {
  readonly code: 'budget_exhausted';
  readonly budget: string;
  readonly limit: number;
}
export class RateLimitedError extends ReputeError {
  readonly code: 'rate_limited';
  readonly retryAfterMs: number;
  /** Always true: only time ends a rate limit's wait. */
  readonly settled: boolean;
}
export class InvalidSnapshotError extends ReputeError {
  readonly code: 'invalid_snapshot';
  readonly reason: 'truncated' | 'foreign' | 'unsupported_version' | 'checksum' | 'malformed' | 'invalid';
  /** With reason `invalid`: the field and the rule it broke. */
  readonly field: string | null;
  readonly rule: string | null;
}
/**
 * `storage_conflict` sets `expected`/`found` (checkpoint versions), `stale_epoch` `mine`/`stored` (owner epochs),
 * `store_recovering` `retryAfterMs` (until the leases a failed-over store may have forgotten have expired).
 */
export class StoreError extends ReputeError {
  readonly code: 'storage_conflict' | 'stale_epoch' | 'storage_unavailable' | 'store_recovering';
  readonly expected: number | null;
  readonly found: number | null;
  readonly mine: number | null;
  readonly stored: number | null;
  readonly retryAfterMs: number | null;
}
export class NotOwnerError extends ReputeError {
  readonly code: 'not_owner';
  readonly owner: string;
}
export class PoolClosedError extends ReputeError {
  readonly code: 'closed';
}
/** The wasm runtime trapped (the shard was rebuilt) or failed. */
export class InternalError extends ReputeError {
  readonly code: 'trap' | 'runtime';
}
