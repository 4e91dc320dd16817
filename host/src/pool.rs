//! The two ways to hold pools ([`Pool`] for one tenant, [`PoolSet`] for
//! many); their operations are [`crate::PoolOps`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock};

use repute_core::{GrantAnswer, Selector};

use crate::config::{ShardLimits, TenantConfig};
use crate::error::{Error, Result};
use crate::providers::Providers;
use crate::runtime::Variant;
use crate::shard::Shard;
use crate::two_phase::{InFlight, Proposal, Revoke, Step};

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

    /// The shard and slot every operation of `PoolOps` runs on.
    pub(crate) fn on_shard(&mut self) -> (&mut Shard, usize) {
        (&mut self.shard, self.tenant)
    }

    /// Closes the pool and hands back its providers, releasing any ownership
    /// they hold once they are dropped.
    pub fn close(mut self) -> Option<Providers> {
        self.shard.remove(self.tenant)
    }
}

/// One tenant of a [`PoolSet`], borrowed for the length of [`PoolSet::with`].
#[derive(Debug)]
pub struct TenantPool<'a> {
    shard: MutexGuard<'a, Shard>,
    tenant: usize,
}

impl TenantPool<'_> {
    /// The shard and slot every operation of `PoolOps` runs on.
    pub(crate) fn on_shard(&mut self) -> (&mut Shard, usize) {
        (&mut self.shard, self.tenant)
    }
}

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
        let shard = (crate::hash::fnv1a(tenant) % self.shards.len() as u64) as usize;
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
