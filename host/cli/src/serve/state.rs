//! What every request shares: the pool set, lazily opened tenants, the event
//! fan-out and the metrics.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use repute_host::{
    lease_partition, partition_of, tenant_of, Backend, Clock, Event, Ownership, Partition, Policy, PoolOps, PoolSet,
    Profiles, Standing, StoreError, TenantConfig, TenantPool,
};
use tokio::sync::{broadcast, watch};

use repute_core::snapshot::{capped, CappedInput, Caps};
use repute_host::providers::FoldCount;

use super::auth::KeyFile;
use super::metrics::Metrics;
use super::probe::ProbeUrl;
use super::problem::Problem;

/// Events buffered per SSE subscriber before a slow one starts missing some.
const EVENT_BUFFER: usize = 4096;

pub struct AppState {
    pub set: PoolSet,
    pub store: Arc<dyn Backend>,
    /// Sharded and partitioned modes: the owner leases of this process (of
    /// tenants, or of partitions). `None` when every tenant is served here
    /// (single process, or shared mode).
    pub ownership: Option<Ownership>,
    /// `--partitions` in partitioned mode: each tenant is split into this
    /// many pools by context (see [`AppState::pool`]).
    pub partitions: Option<u32>,
    pub clock: Arc<dyn Clock>,
    pub policy: Policy,
    /// `--profile`: how the answers of each kind's resources are read.
    pub profiles: Profiles,
    pub seed: u64,
    /// `None` only with `--no-auth`.
    pub keys: Option<KeyFile>,
    /// The operator's budgets (`--max-resources`, `--max-cells`, `--rate`),
    /// which a snapshot import may tighten but never lift.
    pub caps: Caps,
    /// `--max-body-bytes`, or the default the budgets lead to.
    pub max_body_bytes: usize,
    /// `--max-tenant-bytes`: the memory share of each tenant (see `share`).
    pub max_tenant_bytes: Option<u64>,
    /// `--metrics-auth`: `/metrics` wants a key from the key file.
    pub metrics_auth: bool,
    pub metrics: Metrics,
    pub ready: AtomicBool,
    /// Turns true when the server starts shutting down, ending event streams so draining can finish.
    pub stopping: watch::Receiver<bool>,
    /// `--probe-url`: the probe loop this server runs for `--recovery probe`.
    pub probe: Option<ProbeUrl>,
    opened: RwLock<HashSet<String>>,
    events: Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>,
}

impl AppState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        set: PoolSet,
        store: Arc<dyn Backend>,
        ownership: Option<Ownership>,
        clock: Arc<dyn Clock>,
        policy: Policy,
        profiles: Profiles,
        seed: u64,
        keys: Option<KeyFile>,
        stopping: watch::Receiver<bool>,
        probe: Option<ProbeUrl>,
        max_body_bytes: usize,
        max_tenant_bytes: Option<u64>,
        metrics_tenants: bool,
        metrics_auth: bool,
    ) -> Self {
        let caps =
            Caps { max_resources: policy.max_resources, max_cells: policy.max_cells, rate_limit: policy.rate_limit };
        AppState {
            set,
            store,
            ownership,
            partitions: None,
            clock,
            policy,
            profiles,
            seed,
            keys,
            caps,
            max_body_bytes,
            max_tenant_bytes,
            metrics_auth,
            metrics: Metrics::new(metrics_tenants),
            ready: AtomicBool::new(false),
            stopping,
            probe,
            opened: RwLock::new(HashSet::new()),
            events: Mutex::new(HashMap::new()),
        }
    }

    /// The pool a request of `tenant` runs in: the tenant's, or in
    /// partitioned mode the partition `by` picks (the one that holds its
    /// context, or that granted its lease; a request about no context goes
    /// to partition 0, which every registration reaches first). Every
    /// other call here takes the pool's name, so ownership, opening and
    /// closing work the same for a partition as for a tenant.
    pub fn pool(&self, tenant: &str, by: By<'_>) -> String {
        let Some(count) = self.partitions else { return tenant.to_owned() };
        let index = match by {
            By::Context(context) => partition_of(context, count),
            By::Lease(id) => lease_partition(id, count),
            By::Home => 0,
        };
        Partition { tenant: tenant.to_owned(), index, count }.name()
    }

    /// Opens `tenant` on first use: from its newest checkpoint on a durable
    /// store. In sharded mode it first makes sure this process owns the
    /// tenant (claiming it if nobody does) and answers `NotOwner` otherwise;
    /// a tenant whose owner lease lapsed here is closed and taken afresh.
    /// The common case is a read lock on a name set, so a request does not
    /// lock its tenant's shard twice.
    pub fn ensure_open(&self, tenant: &str) -> Result<(), Problem> {
        let epoch = self.standing(tenant)?;
        self.open(tenant, epoch)
    }

    /// The epoch this process may serve `tenant` under now (0 without
    /// ownership), claiming it if free; a tenant taken afresh is closed so
    /// that it reopens from the store under the new epoch.
    fn standing(&self, tenant: &str) -> Result<u64, Problem> {
        Ok(match &self.ownership {
            None => 0,
            Some(ownership) => match ownership.check(tenant) {
                Ok(Standing::Serving { epoch }) => epoch,
                Ok(Standing::Claimed { epoch }) => {
                    self.close(tenant);
                    epoch
                }
                Err(e) => {
                    self.close(tenant);
                    return Err(e.into());
                }
            },
        })
    }

    fn open(&self, tenant: &str, epoch: u64) -> Result<(), Problem> {
        if self.opened.read().unwrap_or_else(|p| p.into_inner()).contains(tenant) {
            return Ok(());
        }
        let mut opened = self.opened.write().unwrap_or_else(|p| p.into_inner());
        if opened.contains(tenant) {
            return Ok(());
        }
        let mut providers = self.store.providers(tenant, epoch, self.clock.clone())?;
        let folded = self.metrics.folded(tenant_of(tenant));
        providers.storage = Box::new(FoldCount::new(providers.storage, Box::new(folded)));
        let config = TenantConfig { policy: self.policy.clone(), seed: self.seed, durable: self.store.durable() };
        self.set.open_tenant(tenant, config, providers)?;
        if let Err(e) = self.hold_to_caps(tenant) {
            let _ = self.set.close_tenant(tenant);
            return Err(e);
        }
        opened.insert(tenant.to_owned());
        tracing::info!(tenant, epoch, "tenant opened");
        Ok(())
    }

    /// A tenant opened from a checkpoint has the policy it was saved with;
    /// the operator's caps are held over it as over an import, so caps set or
    /// tightened since then apply to every tenant, not only new ones. One
    /// that already holds more than the caps allow is left as saved, with a
    /// warning: which of its resources to drop is not the server's call.
    fn hold_to_caps(&self, tenant: &str) -> Result<(), Problem> {
        if self.caps == Caps::default() {
            return Ok(());
        }
        let saved = self.set.with(tenant, |p| p.snapshot(true))??;
        match capped(CappedInput::Binary(&saved), &self.caps) {
            Ok(held) if held == saved => {}
            Ok(held) => {
                self.set.with(tenant, |p| p.restore(&held))??;
                tracing::info!(tenant, "saved policy held to the operator's caps");
            }
            Err(e) => tracing::warn!(
                tenant,
                error = %e,
                "the tenant holds more than the operator's caps allow: its saved policy is kept"
            ),
        }
        Ok(())
    }

    /// Hands partition `pool`, which this process must own, to the process
    /// at `to`: a last checkpoint, so the next owner starts from it, then
    /// the owner lease given up and the pool closed; requests for it are
    /// sent to `to` until that process claims it (see `Ownership::hand_off`).
    pub fn hand_off(&self, pool: &str, to: &str) -> Result<(), Problem> {
        let Some(ownership) = &self.ownership else {
            return Err(Problem::not_found("owner lease: this server owns nothing"));
        };
        if ownership.serving(pool).is_err() {
            let owner = ownership.owner_of(pool)?.unwrap_or_else(|| "none: the partition is free".into());
            return Err(repute_host::Error::NotOwner { owner }.into());
        }
        self.call_blocking(pool, |p| p.checkpoint(true))?;
        ownership.hand_off(pool, to);
        self.close(pool);
        Ok(())
    }

    /// Stops serving `tenant` here (its owner lease is gone): the pool is
    /// dropped without a checkpoint, which the store would refuse anyway.
    pub fn close(&self, tenant: &str) {
        let mut opened = self.opened.write().unwrap_or_else(|p| p.into_inner());
        if opened.remove(tenant) {
            let _ = self.set.close_tenant(tenant);
            tracing::warn!(tenant, "tenant closed: this process no longer owns it");
        }
    }

    /// Renews this process's owner leases and closes the tenants it lost.
    pub fn renew_ownership(&self) {
        if let Some(ownership) = &self.ownership {
            for tenant in ownership.renew() {
                self.close(&tenant);
            }
        }
    }

    /// Claims and opens the tenants whose owner let go since this process
    /// answered "not owner" for them, so the first request after a takeover
    /// finds them open here; another process may win the claim instead.
    pub fn take_over_vacated(&self) {
        let Some(ownership) = &self.ownership else { return };
        for tenant in ownership.vacated() {
            match self.ensure_open(&tenant) {
                Ok(()) => tracing::info!(tenant, "tenant taken over: its owner let go"),
                Err(e) => tracing::debug!(tenant, problem = ?e, "tenant not taken over"),
            }
        }
    }

    /// Folds what other processes logged into every open tenant (shared
    /// mode) or partition (partitioned mode).
    pub fn sync_all(&self) {
        for pool in self.set.tenants() {
            if let Err(e) = self.set.with(&pool, |p| p.sync()).and_then(|r| r) {
                tracing::warn!(pool, error = %e, "log sync failed");
            }
        }
    }

    /// Runs one pool operation for `tenant` on a blocking thread, then
    /// publishes the events it caused.
    pub async fn call<R, F>(self: &Arc<Self>, tenant: &str, f: F) -> Result<R, Problem>
    where
        R: Send + 'static,
        F: FnOnce(&mut TenantPool<'_>) -> repute_host::Result<R> + Send + 'static,
    {
        let state = self.clone();
        let tenant = tenant.to_owned();
        blocking(move || state.call_blocking(&tenant, f)).await
    }

    pub fn call_blocking<R>(
        &self,
        tenant: &str,
        f: impl FnOnce(&mut TenantPool<'_>) -> repute_host::Result<R>,
    ) -> Result<R, Problem> {
        loop {
            // Asked again on every turn: a tenant closed since the last one
            // was lost, and is reopened only under the epoch held now.
            let epoch = self.standing(tenant)?;
            // The name set stays read-locked for the call: a tenant is closed
            // (its owner lease lost) only between calls, never under one.
            let opened = self.opened.read().unwrap_or_else(|p| p.into_inner());
            if opened.contains(tenant) {
                let (result, events) = self.set.with(tenant, |p| {
                    let result = f(p);
                    (result, p.drain_events())
                })?;
                drop(opened);
                if let Ok(events) = events {
                    self.publish(tenant, events);
                }
                return Ok(result?);
            }
            drop(opened);
            self.open(tenant, epoch)?;
        }
    }

    fn publish(&self, pool: &str, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let tenant = tenant_of(pool);
        self.metrics.observe_events(tenant, &events);
        let channels = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = channels.get(tenant) {
            for e in events {
                let _ = tx.send(Arc::new(e));
            }
        }
    }

    pub fn subscribe(&self, tenant: &str) -> broadcast::Receiver<Arc<Event>> {
        let mut channels = self.events.lock().unwrap_or_else(|p| p.into_inner());
        channels.entry(tenant.to_owned()).or_insert_with(|| broadcast::channel(EVENT_BUFFER).0).subscribe()
    }

    /// Lets time-driven changes (lease expiry, cooldown ends, block expiry)
    /// happen and be published even when no request arrives.
    pub fn tick(&self) {
        let all: Vec<_> = self
            .set
            .tenants()
            .into_iter()
            .filter_map(|tenant| self.call_blocking(&tenant, |p| p.stats()).ok().map(|s| (tenant, s)))
            .collect();
        self.metrics.observe_stats(&all);
    }

    /// Checkpoints every open tenant (with leases, so holders keep them across a restart).
    pub fn checkpoint_all(&self) {
        // In shared mode every process checkpoints every tenant and the store
        // keeps the one furthest along the log: a process behind it is refused
        // with a conflict, which is no fault.
        let shared = self.ownership.is_none() && self.store.is_shared();
        for tenant in self.set.tenants() {
            match self.call_blocking(&tenant, |p| Ok(p.checkpoint(true))) {
                Ok(Ok(version)) => tracing::debug!(tenant, version, "checkpoint saved"),
                Ok(Err(repute_host::Error::Store(StoreError::Conflict { .. }))) if shared => {
                    tracing::debug!(tenant, "checkpoint not saved: another process saved one further along the log")
                }
                Ok(Err(e)) => tracing::error!(tenant, problem = ?Problem::from(e), "checkpoint failed"),
                Err(problem) => tracing::error!(tenant, ?problem, "checkpoint failed"),
            }
        }
    }

    /// Picks up keys added to (or removed from) the key file since it was read.
    pub fn reload_keys(&self) {
        let Some(keys) = &self.keys else { return };
        match keys.reload_if_changed() {
            Ok(true) => tracing::info!("key file changed: keys re-read"),
            Ok(false) => {}
            Err(e) => tracing::error!(error = %e, "key file changed but does not parse: keeping the keys last read"),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// Runs `f` on a blocking thread (it waits on the store, or works long);
/// a thread that could not finish it is a runtime error.
pub async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, Problem> + Send + 'static,
) -> Result<R, Problem> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Problem::from(repute_host::Error::Runtime { message: e.to_string() }))?
}

/// What picks the pool of a request in partitioned mode.
pub enum By<'a> {
    /// The request is about this context.
    Context(&'a str),
    /// The request is about the lease with this id.
    Lease(u64),
    /// The request is about no context: registrations, groups, listings.
    Home,
}
