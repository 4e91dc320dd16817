//! A shard: one wasmtime `Store` with one instance of the component, serving
//! any number of tenants (one pool resource each). Calls on one shard are
//! serial; different shards run in parallel.

use std::sync::Arc;
use std::time::Duration;

use repute_core::Event;
use wasmtime::component::ResourceAny;
use wasmtime::Store;

use crate::bindings::exports::repute::pool::api::{GuestPool, Options};
use crate::bindings::repute::pool::types as wit;
use crate::bindings::Repute;
use crate::config::{ShardLimits, TenantConfig};
use crate::convert;
use crate::error::{Error, Result};
use crate::names::Names;
use crate::providers::{Permit, Providers};
use crate::runtime::{runtime, Runtime, Variant, EPOCH_TICK};

mod calls;
mod imports;
pub(crate) mod state;

use state::{ShardState, TenantCtx};

struct Slot {
    config: TenantConfig,
    /// `None` while the tenant could not be brought back after a trap.
    handle: Option<ResourceAny>,
    /// The ids behind the resource keys this tenant's pool returned.
    names: Names,
}

/// One store and instance, and the tenants it serves.
pub struct Shard {
    runtime: Arc<Runtime>,
    store: Store<ShardState>,
    api: Repute,
    slots: Vec<Option<Slot>>,
    limits: ShardLimits,
    rebuilding: bool,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("tenants", &self.slots.iter().flatten().count()).finish()
    }
}

fn new_store(runtime: &Runtime, state: ShardState, limits: &ShardLimits) -> Store<ShardState> {
    let mut store = Store::new(&runtime.engine, state);
    store.limiter(|s| &mut s.limits);
    // Instantiation runs guest code too.
    store.set_epoch_deadline(ticks(limits.call_timeout));
    store
}

/// A timeout in epoch ticks.
fn ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos() / EPOCH_TICK.as_nanos()).max(1) as u64
}

fn runtime_err(e: wasmtime::Error) -> Error {
    Error::Runtime { message: format!("{e:#}") }
}

impl Shard {
    pub(crate) fn new(variant: Variant, limits: ShardLimits) -> Result<Shard> {
        Shard::with_runtime(runtime(variant)?, limits)
    }

    pub(crate) fn with_runtime(runtime: Arc<Runtime>, limits: ShardLimits) -> Result<Shard> {
        let state = ShardState::new(&limits);
        let mut store = new_store(&runtime, state, &limits);
        let api = runtime.pre.instantiate(&mut store).map_err(runtime_err)?;
        Ok(Shard { runtime, store, api, slots: Vec::new(), limits, rebuilding: false })
    }

    /// Opens a tenant on this shard; returns its slot.
    pub(crate) fn add(&mut self, config: TenantConfig, providers: Providers) -> Result<usize> {
        let t = self.slots.iter().position(Option::is_none).unwrap_or(self.slots.len());
        let ctx = TenantCtx { providers, fault: None, last_good: None, deferred: None };
        if t == self.slots.len() {
            self.slots.push(None);
            self.store.data_mut().tenants.push(None);
        }
        self.store.data_mut().tenants[t] = Some(ctx);
        match self.create(t, &config) {
            Ok(handle) => {
                self.slots[t] = Some(Slot { config, handle: Some(handle), names: Names::default() });
                Ok(t)
            }
            Err(e) => {
                self.store.data_mut().tenants[t] = None;
                Err(e)
            }
        }
    }

    /// Closes a tenant, handing back its providers (dropping them releases
    /// any ownership they hold).
    pub(crate) fn remove(&mut self, t: usize) -> Option<Providers> {
        let slot = self.slots.get_mut(t)?.take()?;
        if let Some(handle) = slot.handle {
            // A failure here means the store is already broken; the
            // resource goes with it.
            let _ = handle.resource_drop(&mut self.store);
        }
        self.store.data_mut().tenants[t].take().map(|ctx| ctx.providers)
    }

    /// Makes the tenant's pool resource: opened from storage when durable,
    /// else fresh (and, after a trap, restored from its last good state).
    fn create(&mut self, t: usize, config: &TenantConfig) -> Result<ResourceAny> {
        let policy = convert::policy_out(&config.policy);
        let durable = config.durable;
        let providers = &self.ctx(t)?.providers;
        let (own_authority, lease_id_floor) = (providers.fencing.in_process(), providers.storage.lease_id_floor());
        let max_events = u32::try_from(self.limits.max_pending_events).unwrap_or(u32::MAX);
        let options = Options { max_events, own_authority, lease_id_floor };
        let timeout = if durable { self.limits.open_timeout } else { self.limits.call_timeout };
        let handle = self.call_within(t, timeout, |store, pool| {
            if durable {
                pool.call_open(store, &policy, config.seed, true, options)
            } else {
                pool.call_create(store, &policy, config.seed, options)
            }
        })?;
        let handle = self.finish(t, handle)?;
        let last_good = self.store.data_mut().tenants[t].as_mut().and_then(|c| c.last_good.clone());
        if let (false, Some(bytes)) = (durable, last_good) {
            let restored = self.call(t, |store, pool| pool.call_restore(store, handle, &bytes))?;
            self.finish(t, restored)?;
        }
        if durable {
            self.drop_ended_leases(t, handle)?;
        }
        // What opening caused (restored leases, a replayed log) is no news.
        self.call(t, |store, pool| pool.call_drain_events(store, handle))?;
        Ok(handle)
    }

    /// Ends the leases the checkpoint restored that the authority knows
    /// ended after it was saved (released, or superseded by a newer token):
    /// its record is newer than any checkpoint, and without this a lease
    /// released before a crash would come back with a full TTL.
    fn drop_ended_leases(&mut self, t: usize, handle: ResourceAny) -> Result<()> {
        for lease in self.call(t, |store, pool| pool.call_leases(store, handle))? {
            let fencing = &mut self.ctx(t)?.providers.fencing;
            let permit = Permit { kind: &lease.resource.kind, value: &lease.resource.value, index: lease.permit };
            if fencing.ended(permit, lease.token)? {
                let released = self.call(t, |store, pool| pool.call_release(store, handle, lease.id, lease.token))?;
                self.finish(t, released)?;
            }
        }
        Ok(())
    }

    /// Replaces a trapped store: a fresh instance, and every tenant
    /// recreated from its last good state with its providers kept.
    fn rebuild(&mut self) {
        // A trap while rebuilding leaves the affected tenants without a
        // handle (`handle` retries on their next call) instead of recursing.
        if self.rebuilding {
            return;
        }
        self.rebuilding = true;
        self.rebuild_store();
        self.rebuilding = false;
    }

    fn rebuild_store(&mut self) {
        let placeholder = ShardState::new(&self.limits);
        let old = std::mem::replace(&mut self.store, new_store(&self.runtime, placeholder, &self.limits));
        let mut state = old.into_data();
        for ctx in state.tenants.iter_mut().flatten() {
            ctx.fault = None;
        }
        self.store = new_store(&self.runtime, state, &self.limits);
        for slot in self.slots.iter_mut().flatten() {
            slot.handle = None;
            slot.names.clear();
        }
        match self.runtime.pre.instantiate(&mut self.store) {
            Ok(api) => self.api = api,
            Err(_) => return,
        }
        for t in 0..self.slots.len() {
            let Some(config) = self.slots[t].as_ref().map(|s| s.config.clone()) else { continue };
            if let Ok(handle) = self.create(t, &config) {
                if let Some(slot) = self.slots[t].as_mut() {
                    slot.handle = Some(handle);
                }
            }
        }
    }

    /// The tenant's pool resource. A tenant left without one by a trap
    /// during an earlier rebuild gets one more rebuild attempt here.
    fn handle(&mut self, t: usize) -> Result<ResourceAny> {
        let slot = |shard: &Shard| shard.slots.get(t).and_then(Option::as_ref).map(|s| s.handle);
        match slot(self) {
            None => Err(Error::InvalidInput { field: "tenant".into(), rule: "is not open".into() }),
            Some(Some(h)) => Ok(h),
            Some(None) => {
                self.rebuild();
                slot(self).flatten().ok_or_else(|| Error::Trap {
                    message: "the tenant could not be rebuilt after an earlier trap".into(),
                })
            }
        }
    }

    /// Runs one component call for tenant `t` within the shard's limits. A
    /// trap rebuilds the shard and comes back as `Error::Trap`.
    fn call<R>(
        &mut self,
        t: usize,
        f: impl FnOnce(&mut Store<ShardState>, &GuestPool<'_>) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.call_within(t, self.limits.call_timeout, f)
    }

    /// [`Shard::call`] interrupted after `timeout` rather than the call timeout.
    fn call_within<R>(
        &mut self,
        t: usize,
        timeout: Duration,
        f: impl FnOnce(&mut Store<ShardState>, &GuestPool<'_>) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.store.data_mut().current = t;
        self.store.set_epoch_deadline(ticks(timeout));
        let api = self.api.repute_pool_api();
        f(&mut self.store, &api.pool()).map_err(|trap| {
            let message = format!("{trap:#}");
            self.rebuild();
            Error::Trap { message }
        })
    }

    /// Maps a call's WIT result, letting a provider failure met during the
    /// call take precedence over the refusal the pool saw because of it.
    fn finish<T>(&mut self, t: usize, r: std::result::Result<T, wit::Error>) -> Result<T> {
        let fault = self.store.data_mut().tenants[t].as_mut().and_then(|c| c.fault.take());
        match (r, fault) {
            (Ok(v), _) => Ok(v),
            (Err(_), Some(fault)) => Err(Error::Store(fault)),
            (Err(e), None) => Err(convert::err_in(e)),
        }
    }

    fn ctx(&mut self, t: usize) -> Result<&mut TenantCtx> {
        self.store
            .data_mut()
            .tenants
            .get_mut(t)
            .and_then(Option::as_mut)
            .ok_or_else(|| Error::Trap { message: "tenant is closed".into() })
    }

    pub(crate) fn drain_events(&mut self, t: usize) -> Result<Vec<Event>> {
        let h = self.handle(t)?;
        let events = self.call(t, |s, p| p.call_drain_events(s, h))?;
        events.into_iter().map(convert::event_in).collect()
    }

    pub(crate) fn dropped_events(&mut self, t: usize) -> Result<u64> {
        let h = self.handle(t)?;
        self.call(t, |s, p| p.call_dropped_events(s, h))
    }

    pub(crate) fn remember_good(&mut self, t: usize, bytes: &[u8]) -> Result<()> {
        self.ctx(t)?.last_good = Some(bytes.to_vec());
        Ok(())
    }
}
