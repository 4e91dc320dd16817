//! The public pool API: [`PoolOps`], and the two ways to hold pools
//! ([`Pool`] for one tenant, [`PoolSet`] for many).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock};

use repute_core::{
    CellView, Context, Event, GrantAnswer, Lease, Outcome, Registration, ResourceId, ResourceView, Secret, Selector,
    Stats,
};

use crate::error::{Error, Result};
use crate::providers::Providers;
use crate::runtime::Variant;
use crate::shard::Shard;
use crate::two_phase::{InFlight, Proposal, Revoke, Step};
use crate::{ShardLimits, TenantConfig};

/// Every pool operation. Each call but `secret` reads the tenant's clock
/// once, first fires the timers due by then, and is one call into the
/// component (a lease on a resource this host has not named before adds one
/// call that reads no clock, to learn the resource's id). Resources are
/// named by `kind` and `value` (each 1..=256 bytes, no control characters);
/// contexts by a name of the same rules other than `"*"`.
pub trait PoolOps {
    /// Registers a resource with its permits (1..=1024 concurrent leases),
    /// usage limits, labels and secret; again to replace them. True if
    /// anything changed. Lowering permits is refused with `Leased` while a
    /// removed permit is leased; bad limits with `InvalidInput` naming
    /// `limits.rpm`, `limits.tpm`, `limits.min_interval`, `limits.max_uses`
    /// or `limits.max_age`.
    fn register_with(&mut self, kind: &str, value: &str, registration: &Registration) -> Result<bool>;
    /// `register_with` of `permits` alone: no limits, labels or secret.
    fn register(&mut self, kind: &str, value: &str, permits: u32) -> Result<bool> {
        self.register_with(kind, value, &Registration::new(permits))
    }
    /// Removes a resource and its cells; refused with `Leased` while leased
    /// unless `force`, which revokes the leases. Fence counters are kept.
    fn unregister(&mut self, kind: &str, value: &str, force: bool) -> Result<()>;
    /// The best lease for `context` among the resources `selector` admits
    /// (its `prefer` and `affinity` tried first), fenced by the tenant's
    /// authority, which also counts it against its resource's limits
    /// (reserving the selector's `cost` of a `tpm`). A bad selector is
    /// refused with `InvalidInput` naming its part as the core does
    /// (`kind`, `labels`, `exclude`, `prefer`, `affinity`, `cost`; see
    /// [`crate::selector_error`] for the front ends' names).
    fn acquire_with(&mut self, context: &str, selector: &Selector) -> Result<Lease>;
    /// `acquire_with` of the default selector: any resource.
    fn acquire(&mut self, context: &str) -> Result<Lease> {
        self.acquire_with(context, &Selector::default())
    }
    /// The secret the resource was registered with, if any; `UnknownResource`
    /// if it is not registered. Reads no clock (it fires no timers). The one
    /// way a secret leaves a pool: no event, view, JSON snapshot or error
    /// carries it.
    fn secret(&mut self, kind: &str, value: &str) -> Result<Option<Secret>>;
    /// A probe lease on a cell that `due_for_probe` lists.
    fn acquire_for_probe(&mut self, kind: &str, value: &str, context: &str) -> Result<Lease>;
    /// Extends a live lease by its TTL from now.
    fn renew(&mut self, id: u64, token: u64) -> Result<Lease>;
    /// Ends a live lease and frees its permit.
    fn release(&mut self, id: u64, token: u64) -> Result<()>;
    /// A live lease used `used` tokens instead of the `cost` it reserved
    /// against its resource's `tpm`: the pool and the authority count that
    /// from now on (nothing to count without a `tpm`, or once the grant has
    /// left the window). A store that failed to take it is `Error::Store`;
    /// it keeps counting the reserved tokens until the grant leaves its
    /// window.
    fn reconcile(&mut self, id: u64, token: u64, used: u64) -> Result<()>;
    /// The live lease with this id, if any.
    fn lease(&mut self, id: u64) -> Result<Option<Lease>>;
    /// Folds one outcome into the resource's reputation in `context`.
    fn report(&mut self, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()>;
    /// Blocks a resource everywhere (`context` none) or in one context, for
    /// `duration` ns or until unblocked.
    fn block(
        &mut self,
        kind: &str,
        value: &str,
        context: Option<&str>,
        duration: Option<u64>,
        reason: Option<&str>,
    ) -> Result<()>;
    /// Lifts a block; true if one was in place.
    fn unblock(&mut self, kind: &str, value: &str, context: Option<&str>) -> Result<bool>;
    /// Cells waiting for a probe, sorted by resource then context.
    fn due_for_probe(&mut self) -> Result<Vec<(ResourceId, Context)>>;
    /// The global cell first, then one per context sorted by context.
    fn cells(&mut self, kind: &str, value: &str) -> Result<Vec<CellView>>;
    /// Every registered resource, sorted by id.
    fn resources(&mut self) -> Result<Vec<ResourceView>>;
    /// The live leases, sorted by id.
    fn leases(&mut self) -> Result<Vec<Lease>>;
    /// Pool-wide counters.
    fn stats(&mut self) -> Result<Stats>;
    /// The versioned binary snapshot; `with_leases` includes live leases.
    fn snapshot(&mut self, with_leases: bool) -> Result<Vec<u8>>;
    /// The same state as JSON.
    fn snapshot_json(&mut self, with_leases: bool) -> Result<String>;
    /// Replaces the state with a snapshot; a refused one changes nothing.
    fn restore(&mut self, bytes: &[u8]) -> Result<()>;
    /// `restore` from JSON.
    fn restore_json(&mut self, json: &str) -> Result<()>;
    /// Saves a checkpoint to the tenant's storage, conditional on the version
    /// last loaded or saved; returns the new version.
    fn checkpoint(&mut self, with_leases: bool) -> Result<u64>;
    /// Folds the changes other processes appended to the tenant's log since
    /// this pool last read it (durable pools); returns how many.
    fn sync(&mut self) -> Result<u32>;
    /// Events since the last drain, oldest first.
    fn drain_events(&mut self) -> Result<Vec<Event>>;
}

/// Implements `PoolOps` for a type that reaches a shard and a tenant slot:
/// each operation is the shard's method of the same name, on that slot.
macro_rules! shard_ops {
    (@impl $ty:ty, $this:ident => $parts:expr; $($op:ident($($arg:ident: $arg_ty:ty),*) -> $out:ty;)*) => {
        impl PoolOps for $ty {
            $(
                fn $op(&mut self, $($arg: $arg_ty),*) -> Result<$out> {
                    let $this = self;
                    let (s, t) = $parts;
                    s.$op(t, $($arg),*)
                }
            )*
        }
    };
    ($ty:ty, $this:ident => $parts:expr) => {
        shard_ops!(@impl $ty, $this => $parts;
            register_with(kind: &str, value: &str, registration: &Registration) -> bool;
            unregister(kind: &str, value: &str, force: bool) -> ();
            acquire_with(context: &str, selector: &Selector) -> Lease;
            secret(kind: &str, value: &str) -> Option<Secret>;
            acquire_for_probe(kind: &str, value: &str, context: &str) -> Lease;
            renew(id: u64, token: u64) -> Lease;
            release(id: u64, token: u64) -> ();
            reconcile(id: u64, token: u64, used: u64) -> ();
            lease(id: u64) -> Option<Lease>;
            report(kind: &str, value: &str, context: &str, outcome: &Outcome) -> ();
            block(kind: &str, value: &str, context: Option<&str>, duration: Option<u64>, reason: Option<&str>) -> ();
            unblock(kind: &str, value: &str, context: Option<&str>) -> bool;
            due_for_probe() -> Vec<(ResourceId, Context)>;
            cells(kind: &str, value: &str) -> Vec<CellView>;
            resources() -> Vec<ResourceView>;
            leases() -> Vec<Lease>;
            stats() -> Stats;
            snapshot(with_leases: bool) -> Vec<u8>;
            snapshot_json(with_leases: bool) -> String;
            restore(bytes: &[u8]) -> ();
            restore_json(json: &str) -> ();
            checkpoint(with_leases: bool) -> u64;
            sync() -> u32;
            drain_events() -> Vec<Event>;
        );
    };
}

/// One tenant's pool on a shard of its own.
#[derive(Debug)]
pub struct Pool {
    shard: Shard,
    tenant: usize,
}

impl Pool {
    /// Opens a tenant with default shard limits.
    pub fn open(config: TenantConfig, providers: Providers) -> Result<Pool> {
        Pool::open_with(config, providers, ShardLimits::default())
    }

    /// Opens a tenant with the given shard limits.
    pub fn open_with(config: TenantConfig, providers: Providers, limits: ShardLimits) -> Result<Pool> {
        Pool::on(Shard::new(Variant::Release, limits)?, config, providers)
    }

    /// Opens a tenant on a chosen build of the component (tests only).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn open_variant(
        config: TenantConfig,
        providers: Providers,
        limits: ShardLimits,
        variant: Variant,
    ) -> Result<Pool> {
        Pool::on(Shard::new(variant, limits)?, config, providers)
    }

    fn on(mut shard: Shard, config: TenantConfig, providers: Providers) -> Result<Pool> {
        let tenant = shard.add(config, providers)?;
        Ok(Pool { shard, tenant })
    }

    /// Events dropped because they were not drained in time (see `ShardLimits`).
    pub fn dropped_events(&mut self) -> Result<u64> {
        self.shard.dropped_events(self.tenant)
    }

    /// The first half of an acquire whose authority the caller asks itself
    /// (see [`Proposal`]), among the resources `selector` admits; the rate
    /// limit is checked as by `acquire`. The permits of `in_flight` (the
    /// caller's proposals still unanswered) are not proposed again.
    pub fn propose(&mut self, context: &str, selector: &Selector, in_flight: &InFlight) -> Result<Proposal> {
        self.shard.propose(self.tenant, context, selector, &in_flight.0)
    }

    /// The authority's answer to `proposal`, asked with its claim: the
    /// lease, or the next permit to ask for (none of `in_flight`), chosen
    /// by the selector the proposal was made with; a `Limited` answer keeps
    /// the resource out of selection for its wait (for good: retired, when
    /// none). A proposal overtaken meanwhile is refused with `InvalidInput`
    /// on `proposal`; the caller then revokes the token it was given.
    pub fn settle(
        &mut self,
        context: &str,
        selector: &Selector,
        proposal: &Proposal,
        answer: GrantAnswer,
        in_flight: &InFlight,
    ) -> Result<Step> {
        self.shard.settle(self.tenant, context, selector, proposal, answer, &in_flight.0)
    }

    /// Ends a live lease in the pool and returns the revoke the caller owes
    /// the authority (none when the pool is its own authority): the permit
    /// is free for other processes once that revoke ran.
    pub fn release_deferred(&mut self, id: u64, token: u64) -> Result<Option<Revoke>> {
        self.shard.release_deferred(self.tenant, id, token)
    }

    /// Revokes a grant at the authority that this pool no longer counts as a
    /// lease (it expired here while its reply was on the way, say): frees the
    /// permit for other processes now instead of at the authority's TTL.
    pub fn revoke(&mut self, revoke: &Revoke) -> Result<()> {
        self.shard.revoke(self.tenant, revoke)
    }

    /// Closes the pool and hands back its providers, releasing any ownership
    /// they hold once they are dropped.
    pub fn close(mut self) -> Option<Providers> {
        self.shard.remove(self.tenant)
    }
}

shard_ops!(Pool, this => (&mut this.shard, this.tenant));

/// One tenant of a [`PoolSet`], borrowed for the length of [`PoolSet::with`].
#[derive(Debug)]
pub struct TenantPool<'a> {
    shard: MutexGuard<'a, Shard>,
    tenant: usize,
}

shard_ops!(TenantPool<'_>, this => (&mut *this.shard, this.tenant));

/// Many tenants over a fixed number of shards, each a store and an instance
/// of the component behind a mutex. A tenant lives on the shard its name
/// hashes to; calls for tenants on different shards run in parallel.
#[derive(Debug)]
pub struct PoolSet {
    shards: Vec<Mutex<Shard>>,
    tenants: RwLock<HashMap<String, (usize, usize)>>,
}

impl PoolSet {
    /// `shards` instances (at least one), each bounded by `limits`.
    pub fn new(shards: usize, limits: ShardLimits) -> Result<PoolSet> {
        Self::on(shards, limits, Variant::Release)
    }

    /// `shards` instances of a chosen build of the component (tests only).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn with_variant(shards: usize, limits: ShardLimits, variant: Variant) -> Result<PoolSet> {
        Self::on(shards, limits, variant)
    }

    fn on(shards: usize, limits: ShardLimits, variant: Variant) -> Result<PoolSet> {
        let shards =
            (0..shards.max(1)).map(|_| Shard::new(variant, limits.clone()).map(Mutex::new)).collect::<Result<_>>()?;
        Ok(PoolSet { shards, tenants: RwLock::new(HashMap::new()) })
    }

    fn shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        // A panic while a shard was locked happened outside the component
        // (which cannot panic into us); the shard itself is consistent.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens `tenant` on its shard. Refused if it is already open here.
    pub fn open_tenant(&self, tenant: &str, config: TenantConfig, providers: Providers) -> Result<()> {
        let mut tenants = self.tenants.write().unwrap_or_else(|p| p.into_inner());
        if tenants.contains_key(tenant) {
            return Err(Error::NotOwner { owner: format!("tenant {tenant:?} is already open in this pool set") });
        }
        let shard = (crate::fnv1a(tenant) % self.shards.len() as u64) as usize;
        let slot = self.shard(shard).add(config, providers)?;
        tenants.insert(tenant.to_owned(), (shard, slot));
        Ok(())
    }

    /// Closes `tenant`, handing back its providers.
    pub fn close_tenant(&self, tenant: &str) -> Result<Providers> {
        let (shard, slot) = self
            .tenants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tenant)
            .ok_or_else(|| unknown_tenant(tenant))?;
        self.shard(shard).remove(slot).ok_or_else(|| unknown_tenant(tenant))
    }

    /// The open tenants, sorted.
    pub fn tenants(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tenants.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
        names.sort();
        names
    }

    /// Runs `f` on `tenant`'s pool, holding its shard for the duration.
    pub fn with<R>(&self, tenant: &str, f: impl FnOnce(&mut TenantPool<'_>) -> R) -> Result<R> {
        let (shard, slot) = *self
            .tenants
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tenant)
            .ok_or_else(|| unknown_tenant(tenant))?;
        let mut pool = TenantPool { shard: self.shard(shard), tenant: slot };
        Ok(f(&mut pool))
    }
}

fn unknown_tenant(tenant: &str) -> Error {
    Error::InvalidInput { field: format!("tenant {tenant:?}"), rule: "is not open in this pool set".into() }
}
