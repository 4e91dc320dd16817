//! The data of a shard's store: what the component's imports reach, for
//! the tenant whose call is running.

use wasmtime::{StoreLimits, StoreLimitsBuilder};

use crate::config::ShardLimits;
use crate::error::StoreError;
use crate::providers::Providers;
use crate::two_phase::Revoke;

/// What the imports of one tenant reach.
pub(crate) struct TenantCtx {
    pub(super) providers: Providers,
    /// A provider error met during the current call; the pool saw a refusal.
    pub(super) fault: Option<StoreError>,
    /// The newest full state seen (a snapshot with leases, or a saved
    /// checkpoint): what a non-durable tenant is rebuilt from after a trap.
    pub(super) last_good: Option<Vec<u8>>,
    /// While set, revokes are collected here for the caller to send instead
    /// of going to the authority (`Shard::release_deferred`).
    pub(super) deferred: Option<Vec<Revoke>>,
}

/// The data of a shard's `Store`: its limits and its tenants' providers.
pub struct ShardState {
    pub(super) limits: StoreLimits,
    pub(super) tenants: Vec<Option<TenantCtx>>,
    /// The tenant the running call belongs to; set before every call.
    pub(super) current: usize,
}

impl ShardState {
    /// The state of a store that serves no tenant yet.
    pub(crate) fn new(limits: &ShardLimits) -> ShardState {
        ShardState { limits: store_limits(limits), tenants: Vec::new(), current: 0 }
    }

    pub(super) fn cur(&mut self) -> &mut TenantCtx {
        self.tenants[self.current].as_mut().expect("calls run for an open tenant")
    }

    pub(super) fn now(&mut self) -> u64 {
        self.cur().providers.clock.now()
    }
}

fn store_limits(limits: &ShardLimits) -> StoreLimits {
    StoreLimitsBuilder::new().memory_size(limits.memory_bytes).build()
}
