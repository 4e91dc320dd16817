//! `repute.Pool`: one tenant's pool, a thin shell over `repute_host::Pool`.
//!
//! Every call detaches from the interpreter (releases the GIL) before it
//! touches the host, so other Python threads run while a call waits for the
//! pool's lock, the component or the store (a PostgreSQL round trip). The
//! host pool sits behind one mutex; one `Pool` is safe to share across
//! threads.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyList, PyType};
use repute_host::{
    Clock, EmbeddedPool, Error, Mode, Outcome, OwnersSpec, Policy, Pool as HostPool, PoolOps, RateLimit, Recovery,
    Sharing, Store, StoreSpec, Strategy, SystemClock, TenantConfig, Wall,
};

use crate::clock::ManualClock;
use crate::errors::{invalid, to_py, Failure};
use crate::lease::Lease;
use crate::outcome;
use crate::time::{ns_to_secs, positive_duration, secs_to_duration, secs_to_ns};
use crate::views::{event, Cell, ProbeTarget, Resource, Stats};

/// Waiting for a permit polls with exponential backoff between these bounds:
/// a release in this process wakes waiters at once (see `Shared::freed`), but
/// expiry, cooldown ends and releases by other processes have no signal.
const MIN_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// An open pool, and whether closing it saves a last checkpoint.
struct Open {
    pool: EmbeddedPool,
    /// Durable stores save one on close, except in shared mode: there every
    /// change is in the log already, and a checkpoint of one copy would only
    /// race the others'.
    last_checkpoint: bool,
}

impl Open {
    fn new(
        store: &Store,
        sharing: &Sharing,
        tenant: &str,
        config: TenantConfig,
        clock: Arc<dyn Clock>,
    ) -> repute_host::Result<Open> {
        let last_checkpoint = config.durable && !(store.is_shared() && sharing.mode == Mode::Shared);
        Ok(Open { pool: EmbeddedPool::open(store, sharing, tenant, config, clock)?, last_checkpoint })
    }

    fn serve(&mut self) -> repute_host::Result<&mut HostPool> {
        self.pool.serve()
    }

    /// Saves a last checkpoint if asked, then gives the tenant up.
    fn close(mut self, checkpoint: bool) -> repute_host::Result<()> {
        let saved = if checkpoint && self.last_checkpoint {
            self.pool.serve().and_then(|p| p.checkpoint(true)).map(drop)
        } else {
            Ok(())
        };
        drop(self.pool.close());
        saved
    }
}

/// What a `Pool` and its leases share.
pub(crate) struct Shared {
    /// `None` once closed.
    pool: Mutex<Option<Open>>,
    /// Signalled whenever a permit may have come free here.
    freed: Condvar,
    pub(crate) clock: Arc<dyn Clock>,
    /// Fixed margin before a lease's TTL runs out; `None` is a tenth of the TTL.
    margin: Option<u64>,
    /// Mirrors `pool` being `None`, readable without waiting for the lock.
    pub(crate) closed: AtomicBool,
    /// Calls wait for a PostgreSQL or Redis round trip (the asyncio layer
    /// runs those on an executor; the others take microseconds and run inline).
    network: bool,
    generation: u64,
    pid: u32,
}

impl Shared {
    /// Refuses calls in a process forked after the pool was opened.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if crate::fork::generation() == self.generation {
            Ok(())
        } else {
            Err(Failure::Forked { opened_in: self.pid })
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Open>> {
        // The host pool is consistent after a panic (it contains traps and
        // refuses half-applied changes), so a poisoned lock is still usable.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pool behind the lock, if open and still ours to serve: every
    /// operation passes here.
    fn serve<'a>(&self, guard: &'a mut Option<Open>) -> Result<&'a mut HostPool, Failure> {
        self.check()?;
        Ok(guard.as_mut().ok_or(Failure::Closed)?.serve()?)
    }

    /// Runs one host operation under the pool lock. Call only while detached.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut HostPool) -> repute_host::Result<T>) -> Result<T, Failure> {
        Ok(f(self.serve(&mut self.lock())?)?)
    }

    pub(crate) fn notify_freed(&self) {
        self.freed.notify_all();
    }

    /// The holder's local deadline for a lease sent at `sent` (I7).
    pub(crate) fn deadline(&self, sent: u64, ttl: u64) -> u64 {
        let margin = self.margin.unwrap_or(ttl / 10);
        sent.saturating_add(ttl.saturating_sub(margin))
    }

    /// One acquire attempt; on "nothing now", waits (lock released) until a
    /// permit may be free, the hint, the backoff or `until` (on the pool's
    /// clock, so a `ManualClock` pool waits for its clock), whichever is
    /// first. `Ok(None)` means try again.
    fn acquire_step(
        &self,
        context: &str,
        until: Option<u64>,
        backoff: &mut Duration,
    ) -> Result<Option<(repute_host::Lease, u64)>, Failure> {
        let mut guard = self.lock();
        let pool = self.serve(&mut guard)?;
        let sent = self.clock.now();
        let refusal = match pool.acquire(context) {
            Ok(lease) => return Ok(Some((lease, sent))),
            Err(e @ (Error::NoResourceAvailable { .. } | Error::RateLimited { .. })) => e,
            Err(e) => return Err(e.into()),
        };
        let hint = match refusal {
            Error::NoResourceAvailable(refusal) => refusal.retry_after,
            Error::RateLimited { retry_after } => Some(retry_after),
            _ => None,
        };
        let remaining = until.map(|u| Duration::from_nanos(u.saturating_sub(self.clock.now())));
        if remaining == Some(Duration::ZERO) {
            // Out of time: the refusal just seen is the answer.
            return Err(refusal.into());
        }
        let mut wait = (*backoff).min(hint.map_or(MAX_BACKOFF, Duration::from_nanos)).max(Duration::from_micros(50));
        if let Some(remaining) = remaining {
            wait = wait.min(remaining);
        }
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        drop(self.freed.wait_timeout(guard, wait).unwrap_or_else(|p| p.into_inner()));
        Ok(None)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.check().is_err() {
            // In a forked child the host pool's locks, instance and store
            // connections, and the owner lease's renewal thread, belong to
            // the parent: never run their destructors here.
            let pool = self.pool.get_mut().unwrap_or_else(|p| p.into_inner()).take();
            std::mem::forget(pool);
        }
    }
}

#[pyclass(frozen, module = "repute")]
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

impl Pool {
    /// Runs one host operation detached from the interpreter.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostPool) -> repute_host::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| self.shared.with(f)).map_err(|e| to_py(py, e))
    }

    fn lease(&self, lease: repute_host::Lease, sent: u64) -> Lease {
        Lease::new(self.shared.clone(), lease, sent)
    }

    fn report(
        &self,
        py: Python<'_>,
        (kind, value, context): (&str, &str, &str),
        outcome: Result<Outcome, Failure>,
    ) -> PyResult<()> {
        let outcome = outcome.map_err(|f| to_py(py, f))?;
        py.detach(|| self.shared.with(|p| p.report(kind, value, context, &outcome))).map_err(|f| to_py(py, f))
    }
}

#[pymethods]
impl Pool {
    #[new]
    #[pyo3(signature = (
        store = "memory", tenant = "default", lease_ttl = 30.0, strategy = None, seed = None, clock = None,
        *, probe_ttl = 15.0, renew_margin = None, max_resources = None, max_cells = None, rate = None, burst = 1,
        mode = "sharded", owner_ttl = 10.0, owners = "store", recovery = "traffic", fail_open = false,
        cooldowns = None, probe = None, probe_concurrency = 4, probe_every = 1.0,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: &str,
        tenant: &str,
        lease_ttl: f64,
        strategy: Option<&str>,
        seed: Option<u64>,
        clock: Option<PyRef<'_, ManualClock>>,
        probe_ttl: f64,
        renew_margin: Option<f64>,
        max_resources: Option<u32>,
        max_cells: Option<u32>,
        rate: Option<f64>,
        burst: u32,
        mode: &str,
        owner_ttl: f64,
        owners: &str,
        recovery: &str,
        fail_open: bool,
        cooldowns: Option<Bound<'_, PyDict>>,
        probe: Option<Py<PyAny>>,
        probe_concurrency: usize,
        probe_every: f64,
    ) -> PyResult<Self> {
        if probe.is_some() && recovery != "probe" {
            return Err(to_py(py, invalid("probe", "goes with recovery=\"probe\"")));
        }
        if probe_concurrency == 0 {
            return Err(to_py(py, invalid("probe_concurrency", "must be >= 1")));
        }
        let probe_every = positive_duration("probe_every", probe_every).map_err(|f| to_py(py, f))?;
        let cooldowns = cooldowns.map(|c| outcome::cooldowns(&c)).transpose().map_err(|f| to_py(py, f))?;
        let clock: Arc<dyn Clock> = match clock {
            Some(c) => c.shared(),
            None => Arc::new(SystemClock::new()),
        };
        let shared = py
            .detach(|| -> Result<Shared, Failure> {
                let mut policy = Policy {
                    lease_ttl: secs_to_ns("lease_ttl", lease_ttl)?,
                    probe_ttl: secs_to_ns("probe_ttl", probe_ttl)?,
                    max_resources,
                    max_cells,
                    rate_limit: rate.map(|rate| RateLimit { rate, burst }),
                    recovery: Recovery::parse(recovery)
                        .map_err(|_| invalid("recovery", "must be one of traffic, probe, classic"))?,
                    fail_open,
                    ..Policy::default()
                };
                if let Some(name) = strategy {
                    policy.strategy = Strategy::parse(name).map_err(Error::from)?;
                }
                for cooldown in cooldowns.into_iter().flatten() {
                    cooldown.apply(&mut policy)?;
                }
                let margin = renew_margin.map(|m| secs_to_ns("renew_margin", m)).transpose()?;
                if margin.is_some_and(|m| m >= policy.lease_ttl.min(policy.probe_ttl)) {
                    return Err(invalid("renew_margin", "must be below lease_ttl and probe_ttl"));
                }
                if tenant.is_empty() {
                    return Err(invalid("tenant", "must not be empty"));
                }
                // Without a seed, selection randomness differs per pool, as
                // users expect from an unseeded generator.
                let seed = seed.unwrap_or_else(|| std::hash::RandomState::new().hash_one(std::process::id()));
                let spec = StoreSpec::parse(store)?;
                let sharing = Sharing {
                    mode: Mode::parse(mode)?,
                    owner_ttl: positive_duration("owner_ttl", owner_ttl)?,
                    owners: OwnersSpec::parse(owners)?,
                };
                let config = TenantConfig { policy, seed, durable: spec.durable() };
                let open = Open::new(&spec.open()?, &sharing, tenant, config, clock.clone())?;
                Ok(Shared {
                    pool: Mutex::new(Some(open)),
                    freed: Condvar::new(),
                    clock,
                    margin,
                    closed: AtomicBool::new(false),
                    network: matches!(spec, StoreSpec::Postgres(_) | StoreSpec::Redis(_)),
                    generation: crate::fork::generation(),
                    pid: std::process::id(),
                })
            })
            .map_err(|f| to_py(py, f))?;
        let shared = Arc::new(shared);
        if let Some(probe) = probe {
            crate::probe::spawn(Arc::downgrade(&shared), probe, probe_concurrency, probe_every);
        }
        Ok(Pool { shared })
    }

    /// The pool clock's reading, in seconds: the time base of every `at`,
    /// `until` and `expires_at` this pool reports.
    #[getter]
    fn now(&self) -> f64 {
        ns_to_secs(self.shared.clock.now())
    }

    /// True when calls wait for a network store (PostgreSQL, Redis); memory
    /// and SQLite calls take microseconds.
    #[getter]
    fn waits_on_network(&self) -> bool {
        self.shared.network
    }

    /// Registers a resource with `permits` concurrent leases, or changes its
    /// permits. True if anything changed.
    #[pyo3(signature = (kind, value, permits = 1))]
    fn register(&self, py: Python<'_>, kind: &str, value: &str, permits: u32) -> PyResult<bool> {
        let changed = self.call(py, |p| p.register(kind, value, permits))?;
        self.shared.notify_freed();
        Ok(changed)
    }

    /// Removes a resource; refused while leased unless `force` (which revokes the leases).
    #[pyo3(signature = (kind, value, force = false))]
    fn unregister(&self, py: Python<'_>, kind: &str, value: &str, force: bool) -> PyResult<()> {
        self.call(py, |p| p.unregister(kind, value, force))
    }

    /// The best lease for `context` now, or None if nothing is available.
    fn try_acquire(&self, py: Python<'_>, context: &str) -> PyResult<Option<Lease>> {
        let r = py.detach(|| {
            let sent = self.shared.clock.now();
            self.shared.with(|p| p.acquire(context)).map(|l| (l, sent))
        });
        match r {
            Ok((lease, sent)) => Ok(Some(self.lease(lease, sent))),
            Err(Failure::Host(Error::NoResourceAvailable { .. })) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// The best lease for `context`, waiting up to `timeout` seconds (None:
    /// without limit) for one to come free. Raises `NoResourceAvailable` or
    /// `RateLimited` when the time is up.
    #[pyo3(signature = (context, timeout = None))]
    fn acquire(&self, py: Python<'_>, context: &str, timeout: Option<f64>) -> PyResult<Lease> {
        let timeout = timeout.map(|t| secs_to_duration("timeout", t)).transpose().map_err(|f| to_py(py, f))?;
        let until = timeout.map(|t| self.shared.clock.now().saturating_add(t.as_nanos() as u64));
        let mut backoff = MIN_BACKOFF;
        loop {
            match py.detach(|| self.shared.acquire_step(context, until, &mut backoff)) {
                Ok(Some((lease, sent))) => return Ok(self.lease(lease, sent)),
                // Between waits, so that Ctrl-C interrupts a long wait.
                Ok(None) => py.check_signals()?,
                Err(e) => return Err(to_py(py, e)),
            }
        }
    }

    /// A probe lease on a cell that `due_for_probe` lists.
    fn acquire_for_probe(&self, py: Python<'_>, kind: &str, value: &str, context: &str) -> PyResult<Lease> {
        let (lease, sent) = py
            .detach(|| {
                let sent = self.shared.clock.now();
                self.shared.with(|p| p.acquire_for_probe(kind, value, context)).map(|l| (l, sent))
            })
            .map_err(|f| to_py(py, f))?;
        Ok(self.lease(lease, sent))
    }

    /// A handle on a live lease from its id and fencing token (handed over
    /// from another thread or task): renews it under that token, so a wrong
    /// token raises `StaleLease` and an ended lease `LeaseExpired`.
    fn resume(&self, py: Python<'_>, lease_id: u64, token: u64) -> PyResult<Lease> {
        let (lease, sent) = py
            .detach(|| {
                let sent = self.shared.clock.now();
                self.shared.with(|p| p.renew(lease_id, token)).map(|l| (l, sent))
            })
            .map_err(|f| to_py(py, f))?;
        Ok(self.lease(lease, sent))
    }

    /// Reports a successful use of a resource in `context`; `latency` in seconds.
    fn report_success(&self, py: Python<'_>, kind: &str, value: &str, context: &str, latency: f64) -> PyResult<()> {
        self.report(py, (kind, value, context), outcome::outcome(None, latency, None))
    }

    /// Reports a failed use; `failure` is a `FailureKind` or its name, and
    /// `retry_after` (seconds) the wait a `rate_limited` or `quota_exhausted` answer gave.
    #[pyo3(signature = (kind, value, context, failure, latency, *, retry_after = None))]
    #[allow(clippy::too_many_arguments)]
    fn report_failure(
        &self,
        py: Python<'_>,
        kind: &str,
        value: &str,
        context: &str,
        failure: &str,
        latency: f64,
        retry_after: Option<f64>,
    ) -> PyResult<()> {
        self.report(py, (kind, value, context), outcome::outcome(Some(failure), latency, retry_after))
    }

    /// Reports a use by the upstream's HTTP answer: its status and headers
    /// (`Retry-After` is read), mapped as the README's table says.
    #[pyo3(signature = (kind, value, context, status, latency = 0.0, headers = None))]
    #[allow(clippy::too_many_arguments)]
    fn report_http(
        &self,
        py: Python<'_>,
        kind: &str,
        value: &str,
        context: &str,
        status: u16,
        latency: f64,
        headers: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.report(py, (kind, value, context), outcome::http(status, latency, headers.as_ref()))
    }

    /// Blocks a resource everywhere (`context` None) or in one context, for
    /// `seconds` or until unblocked.
    #[pyo3(signature = (kind, value, seconds = None, context = None, reason = None))]
    fn block(
        &self,
        py: Python<'_>,
        kind: &str,
        value: &str,
        seconds: Option<f64>,
        context: Option<&str>,
        reason: Option<&str>,
    ) -> PyResult<()> {
        let duration = seconds.map(|s| secs_to_ns("seconds", s)).transpose().map_err(|f| to_py(py, f))?;
        self.call(py, |p| p.block(kind, value, context, duration, reason))
    }

    /// Lifts a block; True if one was in place.
    #[pyo3(signature = (kind, value, context = None))]
    fn unblock(&self, py: Python<'_>, kind: &str, value: &str, context: Option<&str>) -> PyResult<bool> {
        let lifted = self.call(py, |p| p.unblock(kind, value, context))?;
        self.shared.notify_freed();
        Ok(lifted)
    }

    /// Cells waiting for a probe, sorted.
    fn due_for_probe(&self, py: Python<'_>) -> PyResult<Vec<ProbeTarget>> {
        Ok(self.call(py, |p| p.due_for_probe())?.into_iter().map(ProbeTarget::from).collect())
    }

    /// The resource's global cell first, then one per context, sorted by context.
    fn cells(&self, py: Python<'_>, kind: &str, value: &str) -> PyResult<Vec<Cell>> {
        let cells = self.call(py, |p| p.cells(kind, value))?;
        let wall = Wall::now(&*self.shared.clock);
        Ok(cells.into_iter().map(|v| Cell::new(v, &wall)).collect())
    }

    /// Every registered resource, sorted.
    fn resources(&self, py: Python<'_>) -> PyResult<Vec<Resource>> {
        let resources = self.call(py, |p| p.resources())?;
        let wall = Wall::now(&*self.shared.clock);
        Ok(resources.into_iter().map(|v| Resource::new(v, &wall)).collect())
    }

    fn stats(&self, py: Python<'_>) -> PyResult<Stats> {
        Ok(self.call(py, |p| p.stats())?.into())
    }

    /// The versioned binary snapshot; `with_leases` includes live leases.
    #[pyo3(signature = (with_leases = true))]
    fn snapshot<'py>(&self, py: Python<'py>, with_leases: bool) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.call(py, |p| p.snapshot(with_leases))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The same state as JSON.
    #[pyo3(signature = (with_leases = true))]
    fn snapshot_json(&self, py: Python<'_>, with_leases: bool) -> PyResult<String> {
        self.call(py, |p| p.snapshot_json(with_leases))
    }

    /// Replaces the state with a snapshot; a refused one (`InvalidSnapshot`) changes nothing.
    fn restore(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.call(py, |p| p.restore(data))?;
        self.shared.notify_freed();
        Ok(())
    }

    /// `restore` from JSON.
    fn restore_json(&self, py: Python<'_>, data: &str) -> PyResult<()> {
        self.call(py, |p| p.restore_json(data))?;
        self.shared.notify_freed();
        Ok(())
    }

    /// Saves a checkpoint to the store, conditional on the version last
    /// loaded or saved; returns the new version.
    #[pyo3(signature = (with_leases = true))]
    fn checkpoint(&self, py: Python<'_>, with_leases: bool) -> PyResult<u64> {
        self.call(py, |p| p.checkpoint(with_leases))
    }

    /// Folds in what other processes appended to the tenant's log since this
    /// pool last read it (shared mode on PostgreSQL, where every process
    /// serves the tenant); returns how many entries. Call it periodically,
    /// or before reading state another process may have changed.
    fn sync(&self, py: Python<'_>) -> PyResult<u32> {
        let folded = self.call(py, |p| p.sync())?;
        self.shared.notify_freed();
        Ok(folded)
    }

    /// The events since the last call, oldest first.
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let events = self.call(py, |p| p.drain_events())?;
        let list = PyList::empty(py);
        let wall = Wall::now(&*self.shared.clock);
        for e in events {
            list.append(event(py, e, &wall)?)?;
        }
        list.try_iter()
    }

    /// Events dropped because they were not drained in time.
    fn dropped_events(&self, py: Python<'_>) -> PyResult<u64> {
        self.call(py, |p| p.dropped_events())
    }

    /// True once `close()` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Closes the pool: a durable store first saves a checkpoint (unless
    /// `checkpoint` is False, or in shared mode), then the tenant's
    /// ownership is released (in sharded mode, the owner lease is given up
    /// at once).
    /// Later calls raise `PoolClosed`; closing again does nothing.
    #[pyo3(signature = (checkpoint = true))]
    fn close(&self, py: Python<'_>, checkpoint: bool) -> PyResult<()> {
        py.detach(|| -> Result<(), Failure> {
            self.shared.check()?;
            let pool = self.shared.lock().take();
            self.shared.closed.store(true, Ordering::SeqCst);
            self.shared.notify_freed();
            pool.map_or(Ok(()), |open| open.close(checkpoint)).map_err(Failure::Host)
        })
        .map_err(|f| to_py(py, f))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py, true)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Pool(closed={})", if self.closed() { "True" } else { "False" })
    }
}
