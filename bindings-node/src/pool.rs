//! `NativePool`: one tenant's `repute_host::Pool` behind a mutex, so that the
//! JS thread (fast in-memory calls) and the libuv pool (`*Async` calls that
//! may touch SQLite or PostgreSQL) can share it. The JavaScript `Pool` class
//! in `index.js` is the public face; this is its engine room.
//!
//! No call here enters a tokio runtime: the PostgreSQL client blocks, and it
//! may only do so on plain threads (the JS thread, libuv's workers).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use napi::bindgen_prelude::{AsyncTask, BigInt, Buffer, Uint8Array};
use napi_derive::napi;
use repute_host::providers::Exchange;
use repute_host::{
    finish_probe, start_probes, Clock, EmbeddedPool, Error, Lease, Mode, OwnersSpec, Policy, Pool, PoolOps, RateLimit,
    Recovery, Sharing, StoreSpec, Strategy, SystemClock, TenantConfig, Verdict, Wall,
};

use crate::clock::NativeClock;
use crate::errors::{invalid, to_js, OrThrow};
use crate::events::EventData;
use crate::link::{LinkSlot, Target};
use crate::outcome::{self, CooldownConfig, OutcomeSpec};
use crate::task::Job;
use crate::units::{ms_to_ns, ns_to_ms};
use crate::views::{CellInfo, LeaseData, ProbeTarget, ResourceInfo, StatsInfo};

/// The pool options after `index.js` filled in defaults; names as in the docs.
#[napi(object, object_to_js = false)]
pub struct PoolConfig {
    /// `memory`, `sqlite:PATH` or a `postgres://` URL.
    pub store: String,
    /// With PostgreSQL: `sharded` (the default) or `shared`.
    pub mode: Option<String>,
    /// The owner lease of a sharded tenant; 10 s when absent.
    pub owner_ttl_ms: Option<f64>,
    /// Where sharded mode keeps owner leases: `store` (the default) or `etcd://HOST:PORT[,...]`.
    pub owners: Option<String>,
    pub tenant: String,
    pub lease_ttl_ms: Option<f64>,
    pub probe_ttl_ms: Option<f64>,
    pub strategy: Option<String>,
    pub seed: Option<BigInt>,
    pub max_resources: Option<u32>,
    pub max_cells: Option<u32>,
    pub rate_limit: Option<RateLimitConfig>,
    /// Safety margin subtracted from the TTL for a lease's local deadline;
    /// a tenth of the TTL when absent.
    pub renew_margin_ms: Option<f64>,
    /// `traffic` (the default), `probe` or `classic`.
    pub recovery: Option<String>,
    pub fail_open: Option<bool>,
    pub cooldowns: Option<HashMap<String, CooldownConfig>>,
}

/// Long enough to ride out a slow renewal or two, short enough that a dead
/// owner's tenant is taken over within seconds.
const DEFAULT_OWNER_TTL: Duration = Duration::from_secs(10);

#[napi(object, object_to_js = false)]
pub struct RateLimitConfig {
    /// Acquires per second.
    pub rate: f64,
    pub burst: u32,
}

pub(crate) struct Shared {
    /// `None` once closed.
    pool: Mutex<Option<EmbeddedPool>>,
    clock: Arc<dyn Clock>,
    durable: bool,
    margin: Option<u64>,
}

fn positive_ms(field: &str, ms: f64) -> Result<u64, Error> {
    match ms_to_ns(field, ms)? {
        0 => Err(invalid(field, "must be > 0")),
        ns => Ok(ns),
    }
}

pub(crate) fn u64_arg(field: &str, n: &BigInt) -> Result<u64, Error> {
    match n.get_u64() {
        (false, v, true) => Ok(v),
        _ => Err(invalid(field, "must be an integer in 0..2^64")),
    }
}

fn policy(config: &PoolConfig) -> Result<Policy, Error> {
    let mut policy = Policy::default();
    if let Some(ms) = config.lease_ttl_ms {
        policy.lease_ttl = positive_ms("leaseTtlMs", ms)?;
    }
    if let Some(ms) = config.probe_ttl_ms {
        policy.probe_ttl = positive_ms("probeTtlMs", ms)?;
    }
    if let Some(s) = &config.strategy {
        policy.strategy =
            Strategy::parse(s).map_err(|_| invalid("strategy", "must be one of classic, thompson, first"))?;
    }
    policy.max_resources = config.max_resources;
    policy.max_cells = config.max_cells;
    if let Some(rl) = &config.rate_limit {
        if !(rl.rate.is_finite() && rl.rate > 0.0) {
            return Err(invalid("rateLimit.rate", "must be finite and > 0"));
        }
        if rl.burst == 0 {
            return Err(invalid("rateLimit.burst", "must be >= 1"));
        }
        policy.rate_limit = Some(RateLimit { rate: rl.rate, burst: rl.burst });
    }
    if let Some(r) = &config.recovery {
        policy.recovery =
            Recovery::parse(r).map_err(|_| invalid("recovery", "must be one of traffic, probe, classic"))?;
    }
    policy.fail_open = config.fail_open.unwrap_or(false);
    if let Some(c) = &config.cooldowns {
        outcome::cooldowns(&mut policy, c)?;
    }
    Ok(policy)
}

impl Shared {
    fn open(config: PoolConfig, clock: Option<&NativeClock>) -> Result<Shared, Error> {
        let policy = policy(&config)?;
        let seed = config.seed.as_ref().map(|s| u64_arg("seed", s)).transpose()?.unwrap_or(0);
        let margin = config.renew_margin_ms.map(|ms| ms_to_ns("renewMarginMs", ms)).transpose()?;
        if config.tenant.is_empty() {
            return Err(invalid("tenant", "must not be empty"));
        }
        let clock: Arc<dyn Clock> = match clock {
            Some(c) => Arc::new(c.clock.clone()),
            None => Arc::new(SystemClock::new()),
        };
        let spec = StoreSpec::parse(&config.store)?;
        let mode = config.mode.as_deref().map(Mode::parse).transpose()?.unwrap_or_default();
        let owner_ttl = match config.owner_ttl_ms {
            Some(ms) => Duration::from_nanos(positive_ms("ownerTtlMs", ms)?),
            None => DEFAULT_OWNER_TTL,
        };
        let owners = config.owners.as_deref().map(OwnersSpec::parse).transpose()?.unwrap_or_default();
        let durable = spec.durable();
        let tenant = TenantConfig { policy, seed, durable };
        let sharing = Sharing { mode, owner_ttl, owners };
        let open = EmbeddedPool::open(&spec.open()?, &sharing, &config.tenant, tenant, clock.clone())?;
        Ok(Shared { pool: Mutex::new(Some(open)), clock, durable, margin })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<EmbeddedPool>> {
        // A panic while locked happened outside the pool (the component
        // cannot panic into us); the pool itself is consistent.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one operation, if the pool is open and still ours to serve:
    /// every operation passes here.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Pool) -> Result<T, Error>) -> napi::Result<T> {
        let mut guard = self.lock();
        let open = guard.as_mut().ok_or_else(|| to_js(Error::Closed))?;
        open.serve().and_then(f).or_throw()
    }

    /// A grant or renewal, stamped with its local deadline (I7): the clock
    /// is read before the call is sent, so the deadline can only be early.
    fn grant(&self, f: impl FnOnce(&mut Pool) -> Result<Lease, Error>) -> napi::Result<LeaseData> {
        let sent = self.clock.now();
        let lease = self.with(f)?;
        Ok(self.lease_data(&lease, sent))
    }

    /// A lease granted on a request sent at `sent`, with its local deadline.
    pub(crate) fn lease_data(&self, lease: &Lease, sent: u64) -> LeaseData {
        let margin = self.margin.unwrap_or(lease.ttl / 10).min(lease.ttl);
        LeaseData::new(lease, Some(sent.saturating_add(lease.ttl - margin)), &Wall::now(&*self.clock))
    }
}

#[napi]
pub struct NativePool {
    pub(crate) shared: Arc<Shared>,
    /// On Redis: the pool's own connection on the event loop (see `link`).
    pub(crate) link: LinkSlot,
    /// Probe leases handed to `index.js`'s probe loop, by lease id, until their verdict.
    probes: Mutex<HashMap<u64, Lease>>,
}

impl NativePool {
    fn opened(shared: Shared) -> Result<NativePool, Error> {
        let wire = shared.lock().as_ref().and_then(|open| open.wire().cloned());
        let ready = match wire {
            Some(wire) => Some((Target::resolve(wire.address())?, Exchange::new(wire))),
            None => None,
        };
        Ok(NativePool {
            shared: Arc::new(shared),
            link: LinkSlot { ready: RefCell::new(ready), open: RefCell::new(None) },
            probes: Mutex::new(HashMap::new()),
        })
    }
}

#[napi]
impl NativePool {
    /// Opens the pool on the calling thread (a SQLite file is opened here).
    #[napi(constructor)]
    pub fn new(config: PoolConfig, clock: Option<&NativeClock>) -> napi::Result<Self> {
        Shared::open(config, clock).and_then(NativePool::opened).or_throw()
    }

    /// One round of the host's probe loop: probe leases on up to `max` cells
    /// due; `index.js` runs the user's probe on each and answers `probeFinish`.
    #[napi]
    pub fn probe_start(&self, max: u32) -> napi::Result<Vec<LeaseData>> {
        let leases = self.shared.with(|p| start_probes(p, max as usize))?;
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        let wall = Wall::now(&*self.shared.clock);
        Ok(leases
            .into_iter()
            .map(|l| {
                let data = LeaseData::new(&l, None, &wall);
                probes.insert(l.id, l);
                data
            })
            .collect())
    }

    /// What the probe of lease `id` found: `healthy`, or an HTTP `status`.
    #[napi]
    pub fn probe_finish(&self, id: BigInt, healthy: bool, status: Option<u32>, latency_ms: f64) -> napi::Result<()> {
        let id = u64_arg("id", &id).or_throw()?;
        let Some(lease) = self.probes.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) else {
            return Err(invalid("id", "is not a probe lease of this pool")).or_throw();
        };
        let verdict = match (status, healthy) {
            (Some(s), _) => Verdict::Http(u16::try_from(s).unwrap_or(0)),
            (None, true) => Verdict::Healthy,
            (None, false) => Verdict::Failed,
        };
        self.shared.with(|p| finish_probe(p, &lease, verdict, latency_ms))
    }

    /// `new` off the JS thread.
    #[napi]
    pub fn open(config: PoolConfig, clock: Option<&NativeClock>) -> AsyncTask<Job<NativePool>> {
        let clock = clock.map(|c| NativeClock { clock: c.clock.clone() });
        AsyncTask::new(Job::new(move || Shared::open(config, clock.as_ref()).and_then(NativePool::opened).or_throw()))
    }

    /// True when reports and grants write to durable storage: the JS layer
    /// then sends them through the `*Async` calls.
    #[napi(getter)]
    pub fn durable(&self) -> bool {
        self.shared.durable
    }

    #[napi]
    pub fn now_ms(&self) -> f64 {
        ns_to_ms(self.shared.clock.now())
    }

    #[napi]
    pub fn register(&self, kind: String, value: String, permits: u32) -> napi::Result<bool> {
        self.shared.with(|p| p.register(&kind, &value, permits))
    }

    #[napi]
    pub fn unregister(&self, kind: String, value: String, force: bool) -> napi::Result<()> {
        self.shared.with(|p| p.unregister(&kind, &value, force))
    }

    #[napi]
    pub fn acquire(&self, context: String) -> napi::Result<LeaseData> {
        self.shared.grant(|p| p.acquire(&context))
    }

    #[napi]
    pub fn acquire_async(&self, context: String) -> AsyncTask<Job<LeaseData>> {
        let shared = self.shared.clone();
        AsyncTask::new(Job::new(move || shared.grant(|p| p.acquire(&context))))
    }

    #[napi]
    pub fn acquire_for_probe(&self, kind: String, value: String, context: String) -> napi::Result<LeaseData> {
        self.shared.grant(|p| p.acquire_for_probe(&kind, &value, &context))
    }

    #[napi]
    pub fn renew(&self, id: BigInt, token: BigInt) -> napi::Result<LeaseData> {
        let (id, token) = (u64_arg("id", &id).or_throw()?, u64_arg("token", &token).or_throw()?);
        self.shared.grant(|p| p.renew(id, token))
    }

    #[napi]
    pub fn renew_async(&self, id: BigInt, token: BigInt) -> napi::Result<AsyncTask<Job<LeaseData>>> {
        let (id, token) = (u64_arg("id", &id).or_throw()?, u64_arg("token", &token).or_throw()?);
        let shared = self.shared.clone();
        Ok(AsyncTask::new(Job::new(move || shared.grant(|p| p.renew(id, token)))))
    }

    #[napi]
    pub fn release(&self, id: BigInt, token: BigInt) -> napi::Result<()> {
        let (id, token) = (u64_arg("id", &id).or_throw()?, u64_arg("token", &token).or_throw()?);
        self.shared.with(|p| p.release(id, token))
    }

    /// The live lease with this id, if any.
    #[napi]
    pub fn lease(&self, id: BigInt) -> napi::Result<Option<LeaseData>> {
        let id = u64_arg("id", &id).or_throw()?;
        Ok(self.shared.with(|p| p.lease(id))?.map(|l| LeaseData::new(&l, None, &Wall::now(&*self.shared.clock))))
    }

    #[napi]
    pub fn report(&self, kind: String, value: String, context: String, spec: OutcomeSpec) -> napi::Result<()> {
        self.shared.with(|p| p.report(&kind, &value, &context, &outcome::outcome(&spec)?))
    }

    #[napi]
    pub fn report_async(
        &self,
        kind: String,
        value: String,
        context: String,
        spec: OutcomeSpec,
    ) -> napi::Result<AsyncTask<Job<()>>> {
        let outcome = outcome::outcome(&spec).or_throw()?;
        let shared = self.shared.clone();
        Ok(AsyncTask::new(Job::new(move || shared.with(|p| p.report(&kind, &value, &context, &outcome)))))
    }

    #[napi]
    pub fn block(
        &self,
        kind: String,
        value: String,
        context: Option<String>,
        duration_ms: Option<f64>,
        reason: Option<String>,
    ) -> napi::Result<()> {
        let duration = duration_ms.map(|ms| positive_ms("durationMs", ms)).transpose().or_throw()?;
        self.shared.with(|p| p.block(&kind, &value, context.as_deref(), duration, reason.as_deref()))
    }

    #[napi]
    pub fn unblock(&self, kind: String, value: String, context: Option<String>) -> napi::Result<bool> {
        self.shared.with(|p| p.unblock(&kind, &value, context.as_deref()))
    }

    #[napi]
    pub fn due_for_probe(&self) -> napi::Result<Vec<ProbeTarget>> {
        Ok(self.shared.with(|p| p.due_for_probe())?.into_iter().map(ProbeTarget::from).collect())
    }

    #[napi]
    pub fn cells(&self, kind: String, value: String) -> napi::Result<Vec<CellInfo>> {
        let wall = Wall::now(&*self.shared.clock);
        Ok(self.shared.with(|p| p.cells(&kind, &value))?.into_iter().map(|c| CellInfo::new(c, &wall)).collect())
    }

    #[napi]
    pub fn resources(&self) -> napi::Result<Vec<ResourceInfo>> {
        let wall = Wall::now(&*self.shared.clock);
        Ok(self.shared.with(|p| p.resources())?.into_iter().map(|r| ResourceInfo::new(r, &wall)).collect())
    }

    #[napi]
    pub fn leases(&self) -> napi::Result<Vec<LeaseData>> {
        let wall = Wall::now(&*self.shared.clock);
        Ok(self.shared.with(|p| p.leases())?.iter().map(|l| LeaseData::new(l, None, &wall)).collect())
    }

    #[napi]
    pub fn stats(&self) -> napi::Result<StatsInfo> {
        self.shared.with(|p| p.stats()).map(StatsInfo::from)
    }

    #[napi]
    pub fn snapshot(&self, with_leases: bool) -> napi::Result<Buffer> {
        self.shared.with(|p| p.snapshot(with_leases)).map(Buffer::from)
    }

    #[napi]
    pub fn restore(&self, bytes: Uint8Array) -> napi::Result<()> {
        self.shared.with(|p| p.restore(&bytes))
    }

    #[napi]
    pub fn snapshot_json(&self, with_leases: bool) -> napi::Result<String> {
        self.shared.with(|p| p.snapshot_json(with_leases))
    }

    #[napi]
    pub fn restore_json(&self, json: String) -> napi::Result<()> {
        self.shared.with(|p| p.restore_json(&json))
    }

    /// Saves a checkpoint off the JS thread; resolves to its version (a
    /// save counter, exact as a number).
    #[napi]
    pub fn checkpoint_async(&self, with_leases: bool) -> AsyncTask<Job<f64>> {
        let shared = self.shared.clone();
        AsyncTask::new(Job::new(move || shared.with(|p| p.checkpoint(with_leases)).map(|v| v as f64)))
    }

    #[napi]
    pub fn drain_events(&self) -> napi::Result<Vec<EventData>> {
        let wall = Wall::now(&*self.shared.clock);
        Ok(self.shared.with(|p| p.drain_events())?.into_iter().map(|e| EventData::new(e, &wall)).collect())
    }

    /// Events dropped because nobody drained them in time.
    #[napi]
    pub fn dropped_events(&self) -> napi::Result<f64> {
        self.shared.with(|p| p.dropped_events()).map(|n| n as f64)
    }

    /// Folds in what other processes appended to the tenant's log (shared
    /// mode on PostgreSQL); returns how many entries.
    #[napi]
    pub fn sync(&self) -> napi::Result<u32> {
        self.shared.with(|p| p.sync())
    }

    #[napi]
    pub fn sync_async(&self) -> AsyncTask<Job<u32>> {
        let shared = self.shared.clone();
        AsyncTask::new(Job::new(move || shared.with(|p| p.sync())))
    }

    /// Closes the pool, releasing the tenant's ownership of its store. Later
    /// calls fail with `PoolClosedError`. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.link.close();
        if let Some(open) = self.shared.lock().take() {
            drop(open.close());
        }
    }
}
