//! A shard: one wasmtime `Store` with one instance of the component, serving
//! any number of tenants (one pool resource each). Calls on one shard are
//! serial; different shards run in parallel.

use std::collections::VecDeque;
use std::sync::Arc;

use repute_core::{Event, Outcome};
use wasmtime::component::ResourceAny;
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder};

use crate::bindings::exports::repute::pool::api::{GuestPool, Options};
use crate::bindings::repute::pool::types as wit;
use crate::bindings::repute::pool::{clock, events, fencing, storage, types};
use crate::bindings::Repute;
use crate::convert::{self, store_err_out};
use crate::error::{Error, Result, StoreError};
use crate::names::Names;
use crate::providers::{Permit, Providers};
use crate::runtime::{runtime, Runtime, Variant, EPOCH_TICK};
use crate::two_phase::{Proposal, Revoke, Step};
use crate::{Limits, TenantConfig};

/// What the imports of one tenant reach.
pub(crate) struct TenantCtx {
    providers: Providers,
    events: VecDeque<wit::Event>,
    dropped_events: u64,
    max_events: usize,
    /// A provider error met during the current call; the pool saw a refusal.
    fault: Option<StoreError>,
    /// The newest full state seen (a snapshot with leases, or a saved
    /// checkpoint): what a non-durable tenant is rebuilt from after a trap.
    last_good: Option<Vec<u8>>,
    /// While set, revokes are collected here for the caller to send instead
    /// of going to the authority (`Shard::release_deferred`).
    deferred: Option<Vec<Revoke>>,
}

/// The data of a shard's `Store`: its limits and its tenants' providers.
pub struct ShardState {
    limits: StoreLimits,
    tenants: Vec<Option<TenantCtx>>,
    /// The tenant the running call belongs to; set before every call.
    current: usize,
}

impl ShardState {
    fn cur(&mut self) -> &mut TenantCtx {
        self.tenants[self.current].as_mut().expect("calls run for an open tenant")
    }

    fn now(&mut self) -> u64 {
        self.cur().providers.clock.now()
    }
}

impl types::Host for ShardState {}

impl clock::Host for ShardState {
    fn now(&mut self) -> u64 {
        ShardState::now(self)
    }
}

impl fencing::Host for ShardState {
    fn grant(&mut self, resource: wit::ResourceId, permit: u32, ttl: u64, last: u64) -> Option<u64> {
        let now = self.now();
        let ctx = self.cur();
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        ctx.providers.fencing.grant(permit, ttl, last, now).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            None
        })
    }

    fn extend(&mut self, resource: wit::ResourceId, permit: u32, token: u64, ttl: u64) -> bool {
        let now = self.now();
        let ctx = self.cur();
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        ctx.providers.fencing.extend(permit, token, ttl, now).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            false
        })
    }

    fn revoke(&mut self, resource: wit::ResourceId, permit: u32, token: u64) {
        let ctx = self.cur();
        if let Some(deferred) = ctx.deferred.as_mut() {
            match convert::id_in(&resource) {
                Ok(resource) => deferred.push(Revoke { resource, permit, token }),
                Err(_) => ctx.fault = Some(StoreError::Unavailable("the component revoked a malformed id".into())),
            }
            return;
        }
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        if let Err(e) = ctx.providers.fencing.revoke(permit, token) {
            ctx.fault = Some(e);
        }
    }

    /// An unreachable authority refuses, like a grant it cannot make; the
    /// caller sees the store error.
    fn admit(&mut self, limit: wit::RateLimit) -> Option<u64> {
        let ctx = self.cur();
        let limit = repute_core::RateLimit { rate: limit.rate, burst: limit.burst };
        ctx.providers.fencing.admit(&limit).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            Some(0)
        })
    }
}

impl storage::Host for ShardState {
    fn load(&mut self) -> Result<Option<wit::Checkpoint>, wit::StorageError> {
        let ctx = self.cur();
        let checkpoint = ctx.providers.storage.load().map_err(store_err_out)?;
        Ok(checkpoint.map(|c| wit::Checkpoint {
            epoch: c.epoch,
            version: c.version,
            log_seq: c.log_seq,
            bytes: c.bytes,
        }))
    }

    fn save(&mut self, bytes: Vec<u8>, expected_version: u64, log_seq: u64) -> Result<u64, wit::StorageError> {
        let ctx = self.cur();
        let version = ctx.providers.storage.save(&bytes, expected_version, log_seq).map_err(store_err_out)?;
        ctx.last_good = Some(bytes);
        Ok(version)
    }

    fn append(&mut self, entry: wit::LogEntry) -> Result<u64, wit::StorageError> {
        let command =
            convert::log_entry_in(entry).map_err(|e| store_err_out(StoreError::Unavailable(e.to_string())))?;
        self.cur().providers.storage.append(&command).map_err(store_err_out)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<wit::Logged>, wit::StorageError> {
        let entries = self.cur().providers.storage.read_log(after, limit).map_err(store_err_out)?;
        Ok(entries.into_iter().map(|e| wit::Logged { seq: e.seq, entry: convert::log_entry_out(&e.command) }).collect())
    }
}

impl events::Host for ShardState {
    fn emit(&mut self, batch: Vec<wit::Event>) {
        let ctx = self.cur();
        ctx.events.extend(batch);
        let excess = ctx.events.len().saturating_sub(ctx.max_events);
        if excess > 0 {
            ctx.events.drain(..excess);
            ctx.dropped_events += excess as u64;
        }
    }
}

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
    limits: Limits,
    rebuilding: bool,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("tenants", &self.slots.iter().flatten().count()).finish()
    }
}

fn new_store(runtime: &Runtime, state: ShardState, limits: &Limits) -> Store<ShardState> {
    let mut store = Store::new(&runtime.engine, state);
    store.limiter(|s| &mut s.limits);
    // Instantiation runs guest code too.
    store.set_epoch_deadline(deadline(limits));
    store
}

/// `Limits::call_timeout` in epoch ticks.
fn deadline(limits: &Limits) -> u64 {
    (limits.call_timeout.as_nanos() / EPOCH_TICK.as_nanos()).max(1) as u64
}

fn store_limits(limits: &Limits) -> StoreLimits {
    StoreLimitsBuilder::new().memory_size(limits.memory_bytes).build()
}

fn runtime_err(e: wasmtime::Error) -> Error {
    Error::Runtime { message: format!("{e:#}") }
}

impl Shard {
    pub(crate) fn new(variant: Variant, limits: Limits) -> Result<Shard> {
        Shard::with_runtime(runtime(variant)?, limits)
    }

    pub(crate) fn with_runtime(runtime: Arc<Runtime>, limits: Limits) -> Result<Shard> {
        let state = ShardState { limits: store_limits(&limits), tenants: Vec::new(), current: 0 };
        let mut store = new_store(&runtime, state, &limits);
        let api = runtime.pre.instantiate(&mut store).map_err(runtime_err)?;
        Ok(Shard { runtime, store, api, slots: Vec::new(), limits, rebuilding: false })
    }

    /// Opens a tenant on this shard; returns its slot.
    pub(crate) fn add(&mut self, config: TenantConfig, providers: Providers) -> Result<usize> {
        let t = self.slots.iter().position(Option::is_none).unwrap_or(self.slots.len());
        let ctx = TenantCtx {
            providers,
            events: VecDeque::new(),
            dropped_events: 0,
            max_events: self.limits.max_pending_events,
            fault: None,
            last_good: None,
            deferred: None,
        };
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
        let options = Options { events: self.limits.max_pending_events > 0, own_authority, lease_id_floor };
        let handle = self.call(t, |store, pool| {
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
        if let Some(ctx) = self.store.data_mut().tenants[t].as_mut() {
            ctx.events.clear();
        }
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
        let placeholder = ShardState { limits: store_limits(&self.limits), tenants: Vec::new(), current: 0 };
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
        let deadline = deadline(&self.limits);
        self.store.data_mut().current = t;
        self.store.set_epoch_deadline(deadline);
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
        let events: Vec<wit::Event> = self.ctx(t)?.events.drain(..).collect();
        events.into_iter().map(convert::event_in).collect()
    }

    pub(crate) fn dropped_events(&mut self, t: usize) -> Result<u64> {
        Ok(self.ctx(t)?.dropped_events)
    }

    pub(crate) fn remember_good(&mut self, t: usize, bytes: &[u8]) -> Result<()> {
        self.ctx(t)?.last_good = Some(bytes.to_vec());
        Ok(())
    }
}

/// One component call for tenant `t`: its handle, the call, the result mapped.
macro_rules! op {
    ($self:ident, $t:ident, |$store:ident, $pool:ident, $h:ident| $body:expr) => {{
        let $h = $self.handle($t)?;
        let r = $self.call($t, |$store, $pool| $body)?;
        $self.finish($t, r)
    }};
}

impl Shard {
    pub(crate) fn register(&mut self, t: usize, kind: &str, value: &str, permits: u32) -> Result<bool> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_register(s, h, &id, permits))
    }

    pub(crate) fn unregister(&mut self, t: usize, kind: &str, value: &str, force: bool) -> Result<()> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_unregister(s, h, &id, force))
    }

    pub(crate) fn acquire(&mut self, t: usize, context: &str) -> Result<repute_core::Lease> {
        let grant = op!(self, t, |s, p, h| p.call_acquire(s, h, context))?;
        let context = self.context(t, context)?;
        self.lease_from(t, grant, context)
    }

    pub(crate) fn propose(&mut self, t: usize, context: &str, in_flight: &[wit::RefusedPermit]) -> Result<Proposal> {
        let inner = op!(self, t, |s, p, h| p.call_propose(s, h, context, in_flight))?;
        let resource = self.resource_of(t, inner.resource)?;
        Ok(Proposal { inner, resource })
    }

    pub(crate) fn settle(
        &mut self,
        t: usize,
        context: &str,
        proposal: &Proposal,
        answer: Option<u64>,
        in_flight: &[wit::RefusedPermit],
    ) -> Result<Step> {
        match op!(self, t, |s, p, h| p.call_settle(s, h, context, &proposal.inner, answer, in_flight))? {
            wit::Settled::Granted(grant) => {
                let context = self.context(t, context)?;
                Ok(Step::Granted(self.lease_from(t, grant, context)?))
            }
            wit::Settled::Next(inner) => {
                let resource = self.resource_of(t, inner.resource)?;
                Ok(Step::Next(Proposal { inner, resource }))
            }
        }
    }

    pub(crate) fn acquire_for_probe(
        &mut self,
        t: usize,
        kind: &str,
        value: &str,
        context: &str,
    ) -> Result<repute_core::Lease> {
        let id = convert::id_out(kind, value);
        let grant = op!(self, t, |s, p, h| p.call_acquire_for_probe(s, h, &id, context))?;
        let context = self.context(t, context)?;
        self.lease_from(t, grant, context)
    }

    pub(crate) fn renew(&mut self, t: usize, id: u64, token: u64) -> Result<repute_core::Lease> {
        let renewal = op!(self, t, |s, p, h| p.call_renew(s, h, id, token))?;
        let context = self.context(t, &renewal.context)?;
        self.lease_from(t, renewal.grant, context)
    }

    /// A granted lease with its resource id filled in from the tenant's
    /// cache, asking the component on a miss.
    fn lease_from(&mut self, t: usize, grant: wit::Grant, context: repute_core::Context) -> Result<repute_core::Lease> {
        let resource = self.resource_of(t, grant.resource)?;
        Ok(convert::grant_in(grant, resource, context))
    }

    fn resource_of(&mut self, t: usize, key: wit::ResourceKey) -> Result<repute_core::ResourceId> {
        if let Some(id) = self.names(t).and_then(|n| n.get(key)) {
            return Ok(id.clone());
        }
        let h = self.handle(t)?;
        let id = self
            .call(t, |s, p| p.call_resource_of(s, h, key))?
            .ok_or_else(|| Error::Trap { message: "component returned a lease on an unknown resource key".into() })?;
        let id = convert::id_in(&id)?;
        if let Some(n) = self.names(t) {
            n.insert(key, id.clone());
        }
        Ok(id)
    }

    pub(crate) fn release(&mut self, t: usize, id: u64, token: u64) -> Result<()> {
        op!(self, t, |s, p, h| p.call_release(s, h, id, token))
    }

    /// `release`, with the revoke handed back instead of sent (none when
    /// the pool is its own authority).
    pub(crate) fn release_deferred(&mut self, t: usize, id: u64, token: u64) -> Result<Option<Revoke>> {
        self.ctx(t)?.deferred = Some(Vec::new());
        let released = (|| op!(self, t, |s, p, h| p.call_release(s, h, id, token)))();
        let mut revokes = self.ctx(t).ok().and_then(|c| c.deferred.take()).unwrap_or_default();
        released.map(|()| revokes.pop())
    }

    /// Revokes `token` on a permit at the tenant's authority, outside the
    /// pool: for a lease the pool already counts as ended whose grant the
    /// authority may still hold. The revoke is conditional on the token, so
    /// a newer holder is never touched.
    pub(crate) fn revoke(&mut self, t: usize, revoke: &Revoke) -> Result<()> {
        let fencing = &mut self.ctx(t)?.providers.fencing;
        if fencing.in_process() {
            // The pool is its own authority: what it ended is free already.
            return Ok(());
        }
        let permit = Permit { kind: revoke.resource.kind(), value: revoke.resource.value(), index: revoke.permit };
        Ok(fencing.revoke(permit, revoke.token)?)
    }

    pub(crate) fn lease(&mut self, t: usize, id: u64) -> Result<Option<repute_core::Lease>> {
        let lease = op!(self, t, |s, p, h| p.call_get_lease(s, h, id).map(Ok))?;
        lease.map(convert::lease_in).transpose()
    }

    pub(crate) fn report(&mut self, t: usize, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()> {
        let id = convert::id_out(kind, value);
        let outcome = convert::outcome_out(outcome);
        op!(self, t, |s, p, h| p.call_report(s, h, &id, context, outcome))
    }

    pub(crate) fn block(
        &mut self,
        t: usize,
        kind: &str,
        value: &str,
        context: Option<&str>,
        duration: Option<u64>,
        reason: Option<&str>,
    ) -> Result<()> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_block(s, h, &id, context, duration, reason))
    }

    pub(crate) fn unblock(&mut self, t: usize, kind: &str, value: &str, context: Option<&str>) -> Result<bool> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_unblock(s, h, &id, context))
    }

    pub(crate) fn due_for_probe(&mut self, t: usize) -> Result<Vec<(repute_core::ResourceId, repute_core::Context)>> {
        let due = op!(self, t, |s, p, h| p.call_due_for_probe(s, h).map(Ok))?;
        due.into_iter().map(convert::probe_in).collect()
    }

    pub(crate) fn cells(&mut self, t: usize, kind: &str, value: &str) -> Result<Vec<repute_core::CellView>> {
        let id = convert::id_out(kind, value);
        let cells = op!(self, t, |s, p, h| p.call_cells(s, h, &id))?;
        cells.into_iter().map(convert::cell_in).collect()
    }

    pub(crate) fn resources(&mut self, t: usize) -> Result<Vec<repute_core::ResourceView>> {
        let views = op!(self, t, |s, p, h| p.call_resources(s, h).map(Ok))?;
        views.into_iter().map(convert::resource_view_in).collect()
    }

    pub(crate) fn leases(&mut self, t: usize) -> Result<Vec<repute_core::Lease>> {
        let leases = op!(self, t, |s, p, h| p.call_leases(s, h).map(Ok))?;
        leases.into_iter().map(convert::lease_in).collect()
    }

    pub(crate) fn stats(&mut self, t: usize) -> Result<repute_core::Stats> {
        op!(self, t, |s, p, h| p.call_stats(s, h).map(Ok)).map(convert::stats_in)
    }

    pub(crate) fn snapshot(&mut self, t: usize, with_leases: bool) -> Result<Vec<u8>> {
        let bytes = op!(self, t, |s, p, h| p.call_snapshot(s, h, with_leases).map(Ok))?;
        if with_leases {
            self.remember_good(t, &bytes)?;
        }
        Ok(bytes)
    }

    pub(crate) fn snapshot_json(&mut self, t: usize, with_leases: bool) -> Result<String> {
        op!(self, t, |s, p, h| p.call_snapshot_json(s, h, with_leases).map(Ok))
    }

    pub(crate) fn restore(&mut self, t: usize, bytes: &[u8]) -> Result<()> {
        op!(self, t, |s, p, h| p.call_restore(s, h, bytes))?;
        self.forget_names(t);
        Ok(())
    }

    pub(crate) fn restore_json(&mut self, t: usize, json: &str) -> Result<()> {
        op!(self, t, |s, p, h| p.call_restore_json(s, h, json))?;
        self.forget_names(t);
        Ok(())
    }

    /// A context the component accepted (or produced), shared through the tenant's cache.
    fn context(&mut self, t: usize, name: &str) -> Result<repute_core::Context> {
        match self.names(t) {
            Some(names) => names.context(name).map_err(|e| convert::broken("context", e)),
            None => convert::ctx_in(name),
        }
    }

    fn names(&mut self, t: usize) -> Option<&mut Names> {
        self.slots.get_mut(t).and_then(Option::as_mut).map(|s| &mut s.names)
    }

    /// After a restore every key handed out before names nothing: free them.
    fn forget_names(&mut self, t: usize) {
        if let Some(names) = self.names(t) {
            names.clear();
        }
    }

    pub(crate) fn checkpoint(&mut self, t: usize, with_leases: bool) -> Result<u64> {
        op!(self, t, |s, p, h| p.call_checkpoint(s, h, with_leases))
    }

    pub(crate) fn sync(&mut self, t: usize) -> Result<u32> {
        op!(self, t, |s, p, h| p.call_sync(s, h))
    }
}
