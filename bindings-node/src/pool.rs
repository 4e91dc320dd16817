//! `NativePool`: one tenant's pool, over the host's [`Holder`] (the open
//! options and their defaults, the lease handles, the waiting plan, close),
//! shared by the JS thread (fast in-memory calls) and the libuv pool
//! (`*Async` calls that may touch SQLite or PostgreSQL). The JavaScript
//! `Pool` class in `lib/pool.js` is the public face; this is its engine room.
//!
//! No call here enters a tokio runtime: the PostgreSQL client blocks, and it
//! may only do so on plain threads (the JS thread, libuv's workers).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, BigInt, Buffer, Uint8Array};
use napi_derive::napi;
use repute_host::holder::{Cooldown, Field, OpenOptions};
use repute_host::providers::Exchange;
use repute_host::{
    finish_probe, start_probes, Clock, Error, GroupLimits, Holder, Lease, Pool, PoolOps, Selector, Verdict, Wall,
};

use crate::args::{field_name, u64_arg};
use crate::clock::NativeClock;
use crate::errors::{invalid, OrThrow};
use crate::events::EventData;
use crate::lease::{NativeLease, NativeWaiting};
use crate::link::{LinkSlot, Target};
use crate::outcome::{self, CooldownConfig, OutcomeSpec, Report};
use crate::selector::{self, GroupLimitsSpec, LimitsSpec, SelectorSpec};
use crate::task::Job;
use crate::units::{ms_to_ns, ns_to_ms};
use crate::views::{CellInfo, GroupInfo, LeaseData, ProbeTarget, ResourceInfo, StatsInfo};

/// The pool options after `lib/options.js` filled in defaults; names as in the docs.
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
    /// Kind to profile name: how the answers of that kind's resources are read.
    pub profiles: Option<HashMap<String, String>>,
}

#[napi(object, object_to_js = false)]
pub struct RateLimitConfig {
    /// Acquires per second.
    pub rate: f64,
    pub burst: u32,
}

fn open(config: PoolConfig, clock: Option<&NativeClock>) -> Result<Arc<Holder>, Error> {
    let ms = |field: Field, ms: Option<f64>| ms.map(|ms| ms_to_ns(field_name(field), ms)).transpose();
    let mut cooldowns = Vec::new();
    for (kind, c) in config.cooldowns.iter().flatten() {
        let base = c.base_ms.map(|ms| ms_to_ns("cooldowns.baseMs", ms)).transpose()?;
        cooldowns.push(Cooldown { kind: kind.clone(), base, cool_after: c.cool_after, max_exponent: c.max_exponent });
    }
    cooldowns.sort_by(|a, b| a.kind.cmp(&b.kind));
    let options = OpenOptions {
        store: Some(config.store),
        tenant: Some(config.tenant),
        mode: config.mode,
        owner_ttl: ms(Field::OwnerTtl, config.owner_ttl_ms)?,
        owners: config.owners,
        lease_ttl: ms(Field::LeaseTtl, config.lease_ttl_ms)?,
        probe_ttl: ms(Field::ProbeTtl, config.probe_ttl_ms)?,
        strategy: config.strategy,
        seed: config.seed.as_ref().map(|s| u64_arg("seed", s)).transpose()?,
        max_resources: config.max_resources,
        max_cells: config.max_cells,
        rate_limit: config.rate_limit.map(|rl| (rl.rate, rl.burst)),
        renew_margin: ms(Field::RenewMargin, config.renew_margin_ms)?,
        recovery: config.recovery,
        fail_open: config.fail_open.unwrap_or(false),
        cooldowns,
        profiles: config.profiles.into_iter().flatten().collect(),
    };
    let clock: Option<Arc<dyn Clock>> = clock.map(|c| Arc::new(c.clock.clone()) as Arc<dyn Clock>);
    Holder::open(options, clock, field_name)
}

#[napi]
pub struct NativePool {
    pub(crate) holder: Arc<Holder>,
    /// On Redis: the pool's own connection on the event loop (see `link`).
    pub(crate) link: LinkSlot,
    /// Probe leases handed to `lib/prober.js`'s probe loop, by lease id, until their verdict.
    probes: Mutex<HashMap<u64, Lease>>,
}

impl NativePool {
    fn opened(holder: Arc<Holder>) -> Result<NativePool, Error> {
        let ready = match holder.wire() {
            Some(wire) => Some((Target::resolve(wire.address())?, Exchange::new(wire))),
            None => None,
        };
        Ok(NativePool {
            holder,
            link: LinkSlot { ready: RefCell::new(ready), open: RefCell::new(None) },
            probes: Mutex::new(HashMap::new()),
        })
    }

    /// Runs one pool operation.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Pool) -> Result<T, Error>) -> napi::Result<T> {
        self.holder.with(f).or_throw()
    }

    /// A grant by `f`, as a lease handle.
    fn grant(&self, f: impl FnOnce(&mut Pool) -> Result<repute_host::Lease, Error>) -> napi::Result<NativeLease> {
        self.holder.grant(f).map(NativeLease::new).or_throw()
    }
}

#[napi]
impl NativePool {
    /// Opens the pool on the calling thread (a SQLite file is opened here).
    #[napi(constructor)]
    pub fn new(config: PoolConfig, clock: Option<&NativeClock>) -> napi::Result<Self> {
        open(config, clock).and_then(NativePool::opened).or_throw()
    }

    /// One round of the host's probe loop: probe leases on up to `max` cells
    /// due; `lib/prober.js` runs the user's probe on each and answers `probeFinish`.
    #[napi]
    pub fn probe_start(&self, max: u32) -> napi::Result<Vec<LeaseData>> {
        let leases = self.with(|p| start_probes(p, max as usize))?;
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        let wall = Wall::now(&**self.holder.clock());
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
        self.with(|p| finish_probe(p, self.holder.profiles(), &lease, verdict, latency_ms))
    }

    /// `new` off the JS thread.
    #[napi(ts_return_type = "Promise<NativePool>")]
    pub fn open(config: PoolConfig, clock: Option<&NativeClock>) -> AsyncTask<Job<NativePool>> {
        let clock = clock.map(|c| NativeClock { clock: c.clock.clone() });
        AsyncTask::new(Job::new(move || open(config, clock.as_ref()).and_then(NativePool::opened).or_throw()))
    }

    /// True when reports and grants write to durable storage: the JS layer
    /// then sends them through the `*Async` calls.
    #[napi(getter)]
    pub fn durable(&self) -> bool {
        self.holder.durable()
    }

    #[napi]
    pub fn now_ms(&self) -> f64 {
        ns_to_ms(self.holder.now())
    }

    /// Registers a resource with its permits, limits, labels, secret and
    /// quota groups; again to replace them.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &self,
        kind: String,
        value: String,
        permits: u32,
        limits: Option<LimitsSpec>,
        labels: Option<HashMap<String, String>>,
        secret: Option<String>,
        groups: Option<Vec<String>>,
    ) -> napi::Result<bool> {
        let registration = selector::registration(permits, limits, labels, secret, groups).or_throw()?;
        self.with(|p| p.register_with(&kind, &value, &registration))
    }

    /// Sets the limits a quota group's members share; none removes them.
    #[napi]
    pub fn set_group(&self, name: String, limits: GroupLimitsSpec) -> napi::Result<bool> {
        let limits = GroupLimits::try_from(limits).or_throw()?;
        self.with(|p| p.set_group(&name, &limits))
    }

    /// Every quota group with members or limits, sorted by name.
    #[napi]
    pub fn groups(&self) -> napi::Result<Vec<GroupInfo>> {
        let wall = Wall::now(&**self.holder.clock());
        Ok(self.with(|p| p.groups())?.into_iter().map(|g| GroupInfo::new(g, &wall)).collect())
    }

    #[napi]
    pub fn unregister(&self, kind: String, value: String, force: bool) -> napi::Result<()> {
        self.with(|p| p.unregister(&kind, &value, force))
    }

    /// The best lease for `context` among the resources `selector` admits.
    #[napi]
    pub fn acquire(&self, context: String, selector: SelectorSpec) -> napi::Result<NativeLease> {
        let selector = Selector::try_from(selector).or_throw()?;
        self.holder.acquire_now(&context, &selector).map(NativeLease::new).or_throw()
    }

    #[napi(ts_return_type = "Promise<NativeLease>")]
    pub fn acquire_async(&self, context: String, selector: SelectorSpec) -> napi::Result<AsyncTask<Job<NativeLease>>> {
        let holder = self.holder.clone();
        let selector = Selector::try_from(selector).or_throw()?;
        Ok(AsyncTask::new(Job::new(move || holder.acquire_now(&context, &selector).map(NativeLease::new).or_throw())))
    }

    #[napi]
    pub fn acquire_for_probe(&self, kind: String, value: String, context: String) -> napi::Result<NativeLease> {
        self.grant(|p| p.acquire_for_probe(&kind, &value, &context))
    }

    /// A handle on a live lease from its id and token: renews it under that token.
    #[napi]
    pub fn resume(&self, id: BigInt, token: BigInt) -> napi::Result<NativeLease> {
        let (id, token) = (u64_arg("id", &id).or_throw()?, u64_arg("token", &token).or_throw()?);
        self.grant(|p| p.renew(id, token))
    }

    /// What an acquire in `context` with `selector` asks the pool for, as a
    /// key (`repute_host::holder::wish`): the line hands a wake only to a
    /// sleeper that wishes otherwise.
    #[napi]
    pub fn wish(&self, context: String, selector: SelectorSpec) -> napi::Result<String> {
        let selector = Selector::try_from(selector).or_throw()?;
        Ok(format!("{:016x}", repute_host::holder::wish(&context, &selector)))
    }

    /// The waiting plan of an acquire that may wait `timeoutMs` (null: without limit).
    #[napi]
    pub fn waiting(&self, timeout_ms: Option<f64>) -> napi::Result<NativeWaiting> {
        let timeout = timeout_ms.map(|ms| ms_to_ns("timeoutMs", ms)).transpose().or_throw()?;
        Ok(NativeWaiting::new(self.holder.clone(), self.holder.waiting(timeout)))
    }

    /// The live lease with this id, if any.
    #[napi]
    pub fn lease(&self, id: BigInt) -> napi::Result<Option<LeaseData>> {
        let id = u64_arg("id", &id).or_throw()?;
        Ok(self.with(|p| p.lease(id))?.map(|l| LeaseData::new(&l, None, &Wall::now(&**self.holder.clock()))))
    }

    #[napi]
    pub fn report(&self, kind: String, value: String, context: String, spec: OutcomeSpec) -> napi::Result<()> {
        let report = outcome::report(&spec).or_throw()?;
        send(&self.holder, (&kind, &value, &context), &report).or_throw()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn report_async(
        &self,
        kind: String,
        value: String,
        context: String,
        spec: OutcomeSpec,
    ) -> napi::Result<AsyncTask<Job<()>>> {
        let report = outcome::report(&spec).or_throw()?;
        let holder = self.holder.clone();
        Ok(AsyncTask::new(Job::new(move || send(&holder, (&kind, &value, &context), &report).or_throw())))
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
        let duration = match duration_ms.map(|ms| ms_to_ns("durationMs", ms)).transpose().or_throw()? {
            Some(0) => return Err(invalid("durationMs", "must be > 0")).or_throw(),
            d => d,
        };
        self.with(|p| p.block(&kind, &value, context.as_deref(), duration, reason.as_deref()))
    }

    #[napi]
    pub fn unblock(&self, kind: String, value: String, context: Option<String>) -> napi::Result<bool> {
        self.with(|p| p.unblock(&kind, &value, context.as_deref()))
    }

    #[napi]
    pub fn due_for_probe(&self) -> napi::Result<Vec<ProbeTarget>> {
        Ok(self.with(|p| p.due_for_probe())?.into_iter().map(ProbeTarget::from).collect())
    }

    #[napi]
    pub fn cells(&self, kind: String, value: String) -> napi::Result<Vec<CellInfo>> {
        let wall = Wall::now(&**self.holder.clock());
        Ok(self.with(|p| p.cells(&kind, &value))?.into_iter().map(|c| CellInfo::new(c, &wall)).collect())
    }

    #[napi]
    pub fn resources(&self) -> napi::Result<Vec<ResourceInfo>> {
        let wall = Wall::now(&**self.holder.clock());
        Ok(self.with(|p| p.resources())?.into_iter().map(|r| ResourceInfo::new(r, &wall)).collect())
    }

    #[napi]
    pub fn leases(&self) -> napi::Result<Vec<LeaseData>> {
        let wall = Wall::now(&**self.holder.clock());
        Ok(self.with(|p| p.leases())?.iter().map(|l| LeaseData::new(l, None, &wall)).collect())
    }

    #[napi]
    pub fn stats(&self) -> napi::Result<StatsInfo> {
        self.with(|p| p.stats()).map(StatsInfo::from)
    }

    #[napi]
    pub fn snapshot(&self, with_leases: bool) -> napi::Result<Buffer> {
        self.with(|p| p.snapshot(with_leases)).map(Buffer::from)
    }

    #[napi]
    pub fn restore(&self, bytes: Uint8Array) -> napi::Result<()> {
        self.with(|p| p.restore(&bytes))
    }

    #[napi]
    pub fn snapshot_json(&self, with_leases: bool) -> napi::Result<String> {
        self.with(|p| p.snapshot_json(with_leases))
    }

    #[napi]
    pub fn restore_json(&self, json: String) -> napi::Result<()> {
        self.with(|p| p.restore_json(&json))
    }

    /// Saves a checkpoint off the JS thread; resolves to its version (a
    /// save counter, exact as a number).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn checkpoint_async(&self, with_leases: bool) -> AsyncTask<Job<f64>> {
        let holder = self.holder.clone();
        AsyncTask::new(Job::new(move || holder.with(|p| p.checkpoint(with_leases)).map(|v| v as f64).or_throw()))
    }

    #[napi]
    pub fn drain_events(&self) -> napi::Result<Vec<EventData>> {
        let wall = Wall::now(&**self.holder.clock());
        Ok(self.with(|p| p.drain_events())?.into_iter().map(|e| EventData::new(e, &wall)).collect())
    }

    /// Events dropped because nobody drained them in time.
    #[napi]
    pub fn dropped_events(&self) -> napi::Result<f64> {
        self.with(|p| p.dropped_events()).map(|n| n as f64)
    }

    /// Folds in what other processes appended to the tenant's log (shared
    /// mode on PostgreSQL); returns how many entries.
    #[napi]
    pub fn sync(&self) -> napi::Result<u32> {
        self.with(|p| p.sync())
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn sync_async(&self) -> AsyncTask<Job<u32>> {
        let holder = self.holder.clone();
        AsyncTask::new(Job::new(move || holder.with(|p| p.sync()).or_throw()))
    }

    /// Closes the pool: a durable store saves a last checkpoint (if
    /// `checkpoint`, and not in shared mode), then the tenant's ownership is given up. Leases still
    /// held count as lost. Later calls fail with `PoolClosed`. Idempotent.
    #[napi]
    pub fn close(&self, checkpoint: bool) -> napi::Result<()> {
        self.link.close();
        self.holder.close(checkpoint).or_throw()
    }
}

/// Sends a report about a resource in a context to the pool.
fn send(holder: &Holder, (kind, value, context): (&str, &str, &str), report: &Report) -> Result<(), Error> {
    match report {
        Report::Named(outcome) => holder.with(|p| p.report(kind, value, context, outcome)),
        Report::Http(answer) => holder.report_http(kind, value, context, answer),
    }
}
