//! The unit of every duration: nanoseconds of the caller's monotonic clock.
//! A leaf of its own so that the outcomes, the policy and the limits can all
//! speak of seconds without importing one another.

/// One second in nanoseconds.
pub const SECOND: u64 = 1_000_000_000;
