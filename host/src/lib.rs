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

pub mod attempt;
mod bindings;
#[cfg(feature = "testing")]
mod cold_start;
mod config;
mod convert;
mod cooling;
mod embedded;
mod error;
#[cfg(feature = "testing")]
mod guest_bench;
mod hash;
pub mod holder;
/// The core linked into the host without the component, which tests and
/// benchmarks compare the component with.
#[cfg(feature = "testing")]
pub mod linked;
mod names;
mod ops;
mod outcome;
mod ownership;
mod partition;
mod pool;
mod prober;
pub mod profile;
mod provider_authority;
pub mod providers;
mod runtime;
mod shard;
mod store;
mod two_phase;
mod wall;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub use cold_start::measure_cold_start;
pub use config::{ShardLimits, TenantConfig};
pub use cooling::cooling_rule;
pub use embedded::{EmbeddedPool, Sharing};
pub use error::{codes, selector_error, Error, Field, Result, SnapshotError, StoreError, Unit};
#[cfg(feature = "testing")]
pub use guest_bench::GuestWorkload;
pub use holder::{HeldLease, Holder, Loss, OpenOptions};
pub use ops::PoolOps;
pub use outcome::parse_outcome;
pub use ownership::{Keeper, Ownership, Standing};
pub use partition::{
    check_partitions, context_hash, lease_partition, partition_of, tenant_of, Partition, MAX_PARTITIONS,
};
pub use pool::{Pool, PoolSet, TenantPool};
pub use prober::{finish_probe, start_probes, Verdict};
pub use profile::{HttpAnswer, Profile, Profiles};
pub use provider_authority::{ProviderAuthority, SharedFencing};
pub use providers::{Backend, Clock, ManualClock, Providers, SystemClock};
pub use repute_core::{
    Block, CellState, CellView, Claim, Command, Context, ContextLimits, CoolingRule, Event, EventKind, FailureKind,
    GrantAnswer, GroupClaim, GroupLimits, GroupName, GroupView, LabelFilter, Labels, Lease, LeaseKind, Limits, Outcome,
    Policy, RateLimit, Recovery, Refusal, Registration, RejectReason, ResourceId, ResourceView, RetireReason, Secret,
    Selector, Stats, Strategy, Window, DAY, MAX_GROUPS, MAX_RETRY_AFTER, MAX_RPD, MAX_RPM, SECOND, WINDOW,
};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use runtime::Variant;
pub use store::{Mode, OwnersSpec, StoreSpec};
pub use two_phase::{InFlight, Proposal, Revoke, Step};
pub use wall::Wall;
