//! How a tenant's pool is made and what bounds every shard: the
//! configuration each front end fills in.

use std::time::Duration;

use repute_core::Policy;

/// How one tenant's pool is made. The default is a fresh, non-durable pool
/// with the default policy and seed 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TenantConfig {
    /// Used for a fresh pool; a pool opened from a checkpoint keeps the
    /// checkpoint's policy.
    pub policy: Policy,
    /// Seeds selection randomness of a fresh pool.
    pub seed: u64,
    /// Open from storage (newest checkpoint, then the report log) and log
    /// every report durably before acknowledging it.
    pub durable: bool,
}

/// Bounds on every shard, so that a core bug cannot hang or bloat the
/// process. (A resource's usage limits are [`Limits`](crate::Limits).)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLimits {
    /// Linear memory one shard's instance may grow to.
    pub memory_bytes: usize,
    /// Longest one component call may run before it is interrupted (a trap).
    pub call_timeout: Duration,
    /// Longest the opening of a durable tenant may run: it folds the log
    /// since the last checkpoint, whose length the store decides (a new
    /// count of partitions folds a tenant's whole log), not a core bug, so
    /// it has a bound of its own: an open cut at `call_timeout` would
    /// leave the tenant unopenable.
    pub open_timeout: Duration,
    /// Events kept per tenant until drained, in the component (they cross
    /// the boundary only when drained); older ones are dropped and counted.
    /// 0 turns events off: the component then builds none.
    pub max_pending_events: usize,
}

impl Default for ShardLimits {
    fn default() -> Self {
        ShardLimits {
            memory_bytes: 1 << 30,
            call_timeout: Duration::from_secs(10),
            open_timeout: Duration::from_secs(600),
            max_pending_events: 100_000,
        }
    }
}
