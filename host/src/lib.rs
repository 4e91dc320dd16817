//! repute-host: the repute pool behind its WebAssembly component boundary.
//!
//! The core runs as a wasm component in wasmtime; the host supplies its
//! capabilities (clock, fencing, storage) through [`Providers`] and
//! exposes a synchronous Rust API:
//!
//! - [`Pool`]: one tenant on its own shard.
//! - [`PoolSet`]: many tenants spread over shards; calls for tenants on
//!   different shards run in parallel.
//!
//! Both implement [`PoolOps`], one method per core operation, each one
//! component call. Errors are [`Error`]: the core's cases and the host's
//! own, each with its row in one table of codes ([`codes`]) that every front
//! end reads; a trap in the component is contained (the shard is rebuilt
//! from its last good state) and reported as [`Error::Trap`].
//!
//! Stores are [`Backend`]s, one per folder of [`providers`], listed in
//! [`providers::BACKENDS`]. Memory and SQLite are always built; PostgreSQL,
//! Redis and etcd owner leases are the features `postgres`, `redis` and
//! `etcd`, none on by default, so a library user links only the clients it
//! picks (the CLI and the bindings turn on what they ship). `testing` adds
//! what only tests and benchmarks use.

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "repute",
    });
}

mod convert;
mod embedded;
mod error;
#[cfg(feature = "testing")]
mod guest_bench;
pub mod holder;
/// The core linked into the host without the component, which tests and
/// benchmarks compare the component with.
#[cfg(feature = "testing")]
pub mod linked;
mod names;
mod ops;
mod ownership;
mod pool;
mod prober;
pub mod profile;
pub mod providers;
mod runtime;
mod shard;
mod store;
mod two_phase;
mod wall;

use std::time::Duration;

pub use embedded::{EmbeddedPool, Sharing};
pub use error::{codes, selector_error, Error, Field, Result, SnapshotError, StoreError, Unit};
#[cfg(feature = "testing")]
pub use guest_bench::GuestWorkload;
pub use holder::{HeldLease, Holder, Loss, OpenOptions};
pub use ops::PoolOps;
pub use ownership::{Keeper, Ownership, Standing};
pub use pool::{Pool, PoolSet, TenantPool};
pub use prober::{finish_probe, start_probes, Verdict};
pub use profile::{HttpAnswer, Profile, Profiles};
pub use providers::{Backend, Clock, ManualClock, Providers, SystemClock};
pub use repute_core::{
    Block, CellState, CellView, Claim, Command, Context, ContextLimits, CoolingRule, Event, EventKind, FailureKind,
    GrantAnswer, LabelFilter, Labels, Lease, LeaseKind, Limits, Outcome, Policy, RateLimit, Recovery, Refusal,
    Registration, RejectReason, ResourceId, ResourceView, RetireReason, Secret, Selector, Stats, Strategy,
    MAX_RETRY_AFTER, MAX_RPM, SECOND, WINDOW,
};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use runtime::{measure_cold_start, Variant};
pub use store::{Mode, OwnersSpec, StoreSpec};
pub use two_phase::{InFlight, Proposal, Revoke, Step};
pub use wall::Wall;

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
/// process. (A resource's usage limits are [`Limits`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLimits {
    /// Linear memory one shard's instance may grow to.
    pub memory_bytes: usize,
    /// Longest one component call may run before it is interrupted (a trap).
    pub call_timeout: Duration,
    /// Events kept per tenant until drained, in the component (they cross
    /// the boundary only when drained); older ones are dropped and counted.
    /// 0 turns events off: the component then builds none.
    pub max_pending_events: usize,
}

impl Default for ShardLimits {
    fn default() -> Self {
        ShardLimits { memory_bytes: 1 << 30, call_timeout: Duration::from_secs(10), max_pending_events: 100_000 }
    }
}

/// Builds an outcome from the names every front end uses: no failure kind
/// for a success, else one of the `FailureKind` names; `retry_after` (ns)
/// goes with `rate_limited` or `quota_exhausted`. Latency and wait are
/// checked by the core on the way in, so a bad one is refused by the same
/// rule in the component and in a core linked into the host.
pub fn parse_outcome(failure: Option<&str>, latency_ms: f64, retry_after: Option<u64>) -> Result<Outcome> {
    let kind = failure.map(FailureKind::parse).transpose()?;
    if let Some(wait) = retry_after {
        repute_core::check_retry_after(kind, wait)?;
    }
    Ok(match kind {
        None => Outcome::Success { latency_ms },
        Some(kind) => Outcome::Failure { kind, latency_ms, retry_after },
    })
}

/// One cooling rule from a front end's options: `kind` by name, and any of
/// `base` (ns), `cool_after`, `max_exponent` given, the rest taken from the
/// rule `policy` has for that kind now. `Policy::validate` checks the result.
pub fn cooling_rule(
    policy: &Policy,
    kind: &str,
    base: Option<u64>,
    cool_after: Option<u32>,
    max_exponent: Option<u32>,
) -> Result<(FailureKind, CoolingRule)> {
    let kind = FailureKind::parse(kind).map_err(|_| {
        Error::invalid(
            "policy.rules.kind",
            "must be one of connection_reset, tls_handshake, timeout, blocked, slow, rate_limited, quota_exhausted",
        )
    })?;
    let rule = policy.rule(kind);
    Ok((
        kind,
        CoolingRule {
            base: base.unwrap_or(rule.base),
            cool_after: cool_after.unwrap_or(rule.cool_after),
            max_exponent: max_exponent.unwrap_or(rule.max_exponent),
        },
    ))
}

/// FNV-1a: a hash that is the same in every build, for names that must
/// agree across processes (shard choice, lock files).
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
