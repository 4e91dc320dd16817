// ES module entry: the same objects as the CommonJS entry (one addon load,
// one set of classes, so `instanceof` agrees across both).
import repute from './index.js';

export const {
  Pool,
  Lease,
  ManualClock,
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
} = repute;

export default repute;
