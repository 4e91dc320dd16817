//! `repute.Pool`: one tenant's pool, a thin shell over the host's
//! [`Holder`](repute_host::Holder), which owns the open options and their
//! defaults, the waiting acquire, the lease handles and close.
//!
//! Every call detaches from the interpreter (releases the GIL) before it
//! touches the host, so other Python threads run while a call waits for the
//! pool's lock, the component or the store (a PostgreSQL round trip). One
//! `Pool` is safe to share across threads.

use std::sync::Arc;

use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyList, PyType};
use repute_host::holder::OpenOptions;
use repute_host::{Clock, Holder, PoolOps, Wall};

use crate::clock::ManualClock;
use crate::errors::{invalid, to_py, Failure};
use crate::events::event;
use crate::lease::Lease;
use crate::open::{field_name, hold, OpenPool};
use crate::outcome;
use crate::selector;
use crate::time::{ns_to_secs, positive_duration, secs_to_ns};
use crate::views::{Cell, Group, ProbeTarget, Resource, Stats};

/// One tenant's pool. `store` is "memory", "sqlite:PATH", a "postgres://" or a
/// "redis://" URL; `mode`, `owner_ttl` and `owners` ("store" or "etcd://HOST:PORT")
/// matter only for the shared stores.
#[pyclass(frozen, weakref, module = "repute")]
pub(crate) struct Pool {
    shared: Arc<OpenPool>,
}

impl Pool {
    pub(crate) fn shared(&self) -> &Arc<OpenPool> {
        &self.shared
    }
}

#[pymethods]
impl Pool {
    #[new]
    #[pyo3(signature = (
        store = "memory", tenant = "default", lease_ttl = 30.0, strategy: "_Strategy | None" = None, seed = None,
        clock = None, *, probe_ttl = 15.0, renew_margin = None, max_resources = None, max_cells = None, rate = None,
        burst = 1, mode: "_Mode" = "sharded", owner_ttl = 10.0, owners = "store", recovery: "_Recovery" = "traffic",
        fail_open = false, cooldowns: "dict[str, dict[str, float]] | None" = None, probe: "_Probe | None" = None,
        probe_concurrency = 4, probe_every = 1.0, profiles: "dict[str, Profile] | None" = None,
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
        profiles: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        if probe.is_some() && recovery != "probe" {
            return Err(to_py(py, invalid("probe", "goes with recovery=\"probe\"")));
        }
        if probe_concurrency == 0 {
            return Err(to_py(py, invalid("probe_concurrency", "must be >= 1")));
        }
        let secs = |field, s| secs_to_ns(field, s).map_err(|f| to_py(py, f));
        let probe_every = positive_duration("probe_every", probe_every).map_err(|f| to_py(py, f))?;
        let cooldowns = cooldowns.map(|c| outcome::cooldowns(&c)).transpose().map_err(|f| to_py(py, f))?;
        let profiles = profiles.map(|p| outcome::profiles(&p)).transpose().map_err(|f| to_py(py, f))?;
        let options = OpenOptions {
            store: Some(store.to_owned()),
            tenant: Some(tenant.to_owned()),
            mode: Some(mode.to_owned()),
            owner_ttl: Some(secs("owner_ttl", owner_ttl)?),
            owners: Some(owners.to_owned()),
            lease_ttl: Some(secs("lease_ttl", lease_ttl)?),
            probe_ttl: Some(secs("probe_ttl", probe_ttl)?),
            strategy: strategy.map(str::to_owned),
            seed,
            max_resources,
            max_cells,
            rate_limit: rate.map(|rate| (rate, burst)),
            renew_margin: renew_margin.map(|m| secs("renew_margin", m)).transpose()?,
            recovery: Some(recovery.to_owned()),
            fail_open,
            cooldowns: cooldowns.unwrap_or_default(),
            profiles: profiles.unwrap_or_default(),
        };
        let clock: Option<Arc<dyn Clock>> = clock.map(|c| c.shared());
        let holder = py.detach(|| Holder::open(options, clock, field_name)).map_err(|e| to_py(py, e.into()))?;
        let shared = Arc::new(OpenPool::new(holder));
        if let Some(probe) = probe {
            crate::probe::spawn(Arc::downgrade(&shared), probe, probe_concurrency, probe_every);
        }
        Ok(Pool { shared })
    }

    /// The pool clock's reading, in seconds: the time base of every `at`,
    /// `until` and `expires_at` this pool reports.
    #[getter]
    fn now(&self) -> f64 {
        ns_to_secs(self.shared.now())
    }

    /// True when calls wait for a network store (PostgreSQL, Redis); memory
    /// and SQLite calls take microseconds.
    #[getter]
    fn waits_on_network(&self) -> bool {
        self.shared.holder.waits_on_network()
    }

    /// Registers a resource with `permits` concurrent leases, its `labels`
    /// (a mapping of str to str), its `secret`, the quota `groups` it
    /// belongs to (at most 8 names, each once: see `set_group`) and its
    /// usage limits: at most `rpm` grants and `tpm` tokens (each lease's
    /// `cost`, reconciled to its use) in any 60 s, at most `rpd` grants and
    /// `tpd` tokens in any rolling day, at least `min_interval` seconds
    /// between two grants, retired after `max_uses` grants or `max_age`
    /// seconds; and `per_context`, the same `rpm`, `tpm` and `min_interval`
    /// for each context on its own (a mapping with those keys: a provider's
    /// quota per model). Registering again replaces them all. True if
    /// anything changed.
    #[pyo3(signature = (
        kind, value, permits = 1, *, labels: "Mapping[str, str] | None" = None, secret = None,
        rpm: "int | None" = None, tpm: "int | None" = None, rpd: "int | None" = None, tpd: "int | None" = None,
        min_interval = None, max_uses: "int | None" = None, max_age = None,
        per_context: "ContextLimits | None" = None, groups: "Sequence[str] | None" = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &self,
        py: Python<'_>,
        kind: &str,
        value: &str,
        permits: u32,
        labels: Option<Bound<'_, PyAny>>,
        secret: Option<&str>,
        rpm: Option<Bound<'_, PyAny>>,
        tpm: Option<Bound<'_, PyAny>>,
        rpd: Option<Bound<'_, PyAny>>,
        tpd: Option<Bound<'_, PyAny>>,
        min_interval: Option<f64>,
        max_uses: Option<Bound<'_, PyAny>>,
        max_age: Option<f64>,
        per_context: Option<Bound<'_, PyAny>>,
        groups: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let limits = selector::LimitArgs {
            rpm: rpm.as_ref(),
            tpm: tpm.as_ref(),
            rpd: rpd.as_ref(),
            tpd: tpd.as_ref(),
            min_interval,
            max_uses: max_uses.as_ref(),
            max_age,
            per_context: per_context.as_ref(),
        };
        let registration = selector::registration(permits, &limits, labels.as_ref(), secret, groups.as_ref())
            .map_err(|f| to_py(py, f))?;
        self.shared.call_freeing(py, |p| p.register_with(kind, value, &registration))
    }

    /// Sets the limits the members of quota group `name` share (a resource
    /// joins a group with `register(..., groups=[name])`): at most `rpm`
    /// grants and `tpm` tokens in any 60 s, `rpd` grants and `tpd` tokens
    /// in any rolling day, `concurrency` live leases across them; with
    /// `shared_quota`, a `quota_exhausted` outcome on one member pauses
    /// them all. Setting again replaces them all; none removes them. True
    /// if anything changed.
    #[pyo3(signature = (
        name, *, rpm: "int | None" = None, tpm: "int | None" = None, rpd: "int | None" = None,
        tpd: "int | None" = None, concurrency: "int | None" = None, shared_quota = false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn set_group(
        &self,
        py: Python<'_>,
        name: &str,
        rpm: Option<Bound<'_, PyAny>>,
        tpm: Option<Bound<'_, PyAny>>,
        rpd: Option<Bound<'_, PyAny>>,
        tpd: Option<Bound<'_, PyAny>>,
        concurrency: Option<Bound<'_, PyAny>>,
        shared_quota: bool,
    ) -> PyResult<bool> {
        let args = selector::GroupLimitArgs {
            rpm: rpm.as_ref(),
            tpm: tpm.as_ref(),
            rpd: rpd.as_ref(),
            tpd: tpd.as_ref(),
            concurrency: concurrency.as_ref(),
            shared_quota,
        };
        let limits = args.limits().map_err(|f| to_py(py, f))?;
        self.shared.call_freeing(py, |p| p.set_group(name, &limits))
    }

    /// Every quota group with members or limits, sorted by name.
    fn groups(&self, py: Python<'_>) -> PyResult<Vec<Group>> {
        let groups = self.shared.call(py, |p| p.groups())?;
        let wall = Wall::now(&**self.shared.holder.clock());
        Ok(groups.into_iter().map(|v| Group::new(v, &wall)).collect())
    }

    /// Removes a resource; refused while leased unless `force` (which revokes the leases).
    #[pyo3(signature = (kind, value, force = false))]
    fn unregister(&self, py: Python<'_>, kind: &str, value: &str, force: bool) -> PyResult<()> {
        self.shared.call(py, |p| p.unregister(kind, value, force))
    }

    /// The best lease for `context` now among the resources the selector
    /// admits (see `acquire`), or None if nothing is available.
    #[pyo3(signature = (
        context, *, kind = None, r#where: "_Where | None" = None, exclude: "Iterable[str] | None" = None,
        prefer = None, affinity = None, cost: "int | None" = None, auto_renew = false, max_hold = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn try_acquire(
        &self,
        py: Python<'_>,
        context: &str,
        kind: Option<&str>,
        r#where: Option<Bound<'_, PyAny>>,
        exclude: Option<Bound<'_, PyAny>>,
        prefer: Option<&str>,
        affinity: Option<&str>,
        cost: Option<Bound<'_, PyAny>>,
        auto_renew: bool,
        max_hold: Option<f64>,
    ) -> PyResult<Option<Lease>> {
        let selector = selector::selector(kind, r#where.as_ref(), exclude.as_ref(), prefer, affinity, cost.as_ref());
        let selector = selector.map_err(|f| to_py(py, f))?;
        let hold = hold(auto_renew, max_hold).map_err(|f| to_py(py, f))?;
        let held = py
            .detach(|| {
                self.shared.check()?;
                self.shared.holder.try_acquire(context, &selector).map_err(Failure::from)
            })
            .map_err(|f| to_py(py, f))?;
        Ok(held.map(|held| Lease::held(self.shared.clone(), held, hold)))
    }

    /// The best lease for `context`, waiting up to `timeout` seconds (None:
    /// without limit) for one to come free. Raises `NoResourceAvailable` or
    /// `RateLimited` when the time is up. Only resources of `kind`, whose
    /// labels match `where` (label name to a value or a list of values) and
    /// whose value is not in `exclude` are chosen; `prefer` (a value) and
    /// `affinity` (a key: the resource the last lease with it got) are
    /// tried first. `cost` is the tokens the grant reserves against a
    /// resource's `tpm` (1 when None; only resources whose `tpm` admits it
    /// are chosen); `lease.reconcile(used)` corrects it to the use. With
    /// `auto_renew`, a thread of the pool renews the lease until it is
    /// released, lost, or held for `max_hold` seconds.
    #[pyo3(signature = (
        context, timeout = None, *, kind = None, r#where: "_Where | None" = None, exclude: "Iterable[str] | None" = None,
        prefer = None, affinity = None, cost: "int | None" = None, auto_renew = false, max_hold = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        context: &str,
        timeout: Option<f64>,
        kind: Option<&str>,
        r#where: Option<Bound<'_, PyAny>>,
        exclude: Option<Bound<'_, PyAny>>,
        prefer: Option<&str>,
        affinity: Option<&str>,
        cost: Option<Bound<'_, PyAny>>,
        auto_renew: bool,
        max_hold: Option<f64>,
    ) -> PyResult<Lease> {
        let timeout = timeout.map(|t| secs_to_ns("timeout", t)).transpose().map_err(|f| to_py(py, f))?;
        let selector = selector::selector(kind, r#where.as_ref(), exclude.as_ref(), prefer, affinity, cost.as_ref());
        let selector = selector.map_err(|f| to_py(py, f))?;
        let hold = hold(auto_renew, max_hold).map_err(|f| to_py(py, f))?;
        let held = py
            .detach(|| {
                self.shared.check()?;
                // Between waits, so that Ctrl-C interrupts a long wait.
                let between = || Python::attach(|py| py.check_signals()).map_err(Failure::Python);
                self.shared.holder.acquire(context, &selector, timeout, between)
            })
            .map_err(|f| to_py(py, f))?;
        Ok(Lease::held(self.shared.clone(), held, hold))
    }

    /// A probe lease on a cell that `due_for_probe` lists.
    fn acquire_for_probe(&self, py: Python<'_>, kind: &str, value: &str, context: &str) -> PyResult<Lease> {
        Lease::grant(&self.shared, py, |p| p.acquire_for_probe(kind, value, context))
    }

    /// A handle on a live lease from its id and fencing token (handed over
    /// from another thread or task): renews it under that token, so a wrong
    /// token raises `StaleLease` and an ended lease `LeaseExpired`.
    fn resume(&self, py: Python<'_>, lease_id: u64, token: u64) -> PyResult<Lease> {
        Lease::grant(&self.shared, py, |p| p.renew(lease_id, token))
    }

    /// The pool's grants and revokes as bytes for the asyncio layer's own
    /// connection, on a plain-TCP Redis store; None elsewhere.
    fn _link(&self) -> Option<crate::link::RedisLink> {
        let exchange = repute_host::providers::Exchange::new(self.shared.holder.wire()?);
        Some(crate::link::RedisLink::new(self.shared.clone(), exchange))
    }

    /// The waiting plan of an acquire that may wait `timeout` seconds, for
    /// the asyncio layer, which sleeps on its event loop.
    #[pyo3(signature = (timeout = None))]
    fn _waiting(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<crate::lease::Waiting> {
        let timeout = timeout.map(|t| secs_to_ns("timeout", t)).transpose().map_err(|f| to_py(py, f))?;
        Ok(crate::lease::Waiting::new(self.shared.clone(), timeout))
    }

    /// Calls `callback(n)` after a call on this pool or its leases that
    /// saw `n` releases since the last it told of, wherever they were made:
    /// the asyncio layer's sleepers wait outside the blocking acquire's line.
    #[pyo3(signature = (callback: "Callable[[int], object]"))]
    fn _on_released(&self, callback: Py<PyAny>) {
        self.shared.on_released(callback);
    }

    /// What an acquire in `context` with this selector asks the pool for,
    /// hashed (`repute_host::holder::wish`): the asyncio line hands a wake
    /// only to a sleeper that wishes otherwise.
    #[pyo3(signature = (
        context, *, kind = None, r#where: "_Where | None" = None, exclude: "Iterable[str] | None" = None,
        prefer = None, affinity = None, cost: "int | None" = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn _wish(
        &self,
        py: Python<'_>,
        context: &str,
        kind: Option<&str>,
        r#where: Option<Bound<'_, PyAny>>,
        exclude: Option<Bound<'_, PyAny>>,
        prefer: Option<&str>,
        affinity: Option<&str>,
        cost: Option<Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let selector = selector::selector(kind, r#where.as_ref(), exclude.as_ref(), prefer, affinity, cost.as_ref());
        Ok(repute_host::holder::wish(context, &selector.map_err(|f| to_py(py, f))?))
    }

    /// Reports a successful use of a resource in `context`; `latency` in seconds.
    fn report_success(&self, py: Python<'_>, kind: &str, value: &str, context: &str, latency: f64) -> PyResult<()> {
        self.shared.report(py, (kind, value, context), outcome::outcome(None, latency, None))
    }

    /// Reports a failed use; `failure` is a `FailureKind` or its name, and
    /// `retry_after` (seconds) the wait a `rate_limited` or `quota_exhausted` answer gave.
    #[pyo3(signature = (kind, value, context, failure: "FailureKind | str", latency, *, retry_after = None))]
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
        self.shared.report(py, (kind, value, context), outcome::outcome(Some(failure), latency, retry_after))
    }

    /// Reports a use by the upstream's HTTP answer: its status, headers and
    /// body (str or bytes; an error's code and stated delay are read), read
    /// by the profile of `kind`; an answer that says nothing about the
    /// resource (a provider's overload) reports nothing.
    #[pyo3(signature = (
        kind, value, context, status, latency = 0.0, headers: "_Headers | None" = None, *,
        body: "str | bytes | None" = None,
    ))]
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
        body: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let answer = outcome::answer(status, latency, headers.as_ref(), body.as_ref()).map_err(|f| to_py(py, f))?;
        py.detach(|| {
            self.shared.check()?;
            Ok(self.shared.holder.report_http(kind, value, context, &answer)?)
        })
        .map_err(|f| to_py(py, f))
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
        self.shared.call(py, |p| p.block(kind, value, context, duration, reason))
    }

    /// Lifts a block; True if one was in place.
    #[pyo3(signature = (kind, value, context = None))]
    fn unblock(&self, py: Python<'_>, kind: &str, value: &str, context: Option<&str>) -> PyResult<bool> {
        self.shared.call_freeing(py, |p| p.unblock(kind, value, context))
    }

    /// Cells waiting for a probe, sorted.
    fn due_for_probe(&self, py: Python<'_>) -> PyResult<Vec<ProbeTarget>> {
        Ok(self.shared.call(py, |p| p.due_for_probe())?.into_iter().map(ProbeTarget::from).collect())
    }

    /// The resource's global cell first, then one per context, sorted by context.
    fn cells(&self, py: Python<'_>, kind: &str, value: &str) -> PyResult<Vec<Cell>> {
        let cells = self.shared.call(py, |p| p.cells(kind, value))?;
        let wall = Wall::now(&**self.shared.holder.clock());
        Ok(cells.into_iter().map(|v| Cell::new(v, &wall)).collect())
    }

    /// Every registered resource, sorted.
    fn resources(&self, py: Python<'_>) -> PyResult<Vec<Resource>> {
        let resources = self.shared.call(py, |p| p.resources())?;
        let wall = Wall::now(&**self.shared.holder.clock());
        Ok(resources.into_iter().map(|v| Resource::new(v, &wall)).collect())
    }

    fn stats(&self, py: Python<'_>) -> PyResult<Stats> {
        Ok(self.shared.call(py, |p| p.stats())?.into())
    }

    /// The versioned binary snapshot; `with_leases` includes live leases.
    #[pyo3(signature = (with_leases = true))]
    fn snapshot<'py>(&self, py: Python<'py>, with_leases: bool) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.shared.call(py, |p| p.snapshot(with_leases))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The same state as JSON.
    #[pyo3(signature = (with_leases = true))]
    fn snapshot_json(&self, py: Python<'_>, with_leases: bool) -> PyResult<String> {
        self.shared.call(py, |p| p.snapshot_json(with_leases))
    }

    /// Replaces the state with a snapshot; a refused one (`InvalidSnapshot`) changes nothing.
    fn restore(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.shared.call_freeing(py, |p| p.restore(data))
    }

    /// `restore` from JSON.
    fn restore_json(&self, py: Python<'_>, data: &str) -> PyResult<()> {
        self.shared.call_freeing(py, |p| p.restore_json(data))
    }

    /// Saves a checkpoint to the store, conditional on the version last
    /// loaded or saved; returns the new version.
    #[pyo3(signature = (with_leases = true))]
    fn checkpoint(&self, py: Python<'_>, with_leases: bool) -> PyResult<u64> {
        self.shared.call(py, |p| p.checkpoint(with_leases))
    }

    /// Folds in what other processes appended to the tenant's log since this
    /// pool last read it (shared mode on PostgreSQL, where every process
    /// serves the tenant); returns how many entries. Call it periodically,
    /// or before reading state another process may have changed.
    fn sync(&self, py: Python<'_>) -> PyResult<u32> {
        self.shared.call_freeing(py, |p| p.sync())
    }

    /// The events since the last call, oldest first.
    #[pyo3(signature = () -> "Iterator[Event]")]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let events = self.shared.call(py, |p| p.drain_events())?;
        let list = PyList::empty(py);
        let wall = Wall::now(&**self.shared.holder.clock());
        for e in events {
            list.append(event(py, e, &wall)?)?;
        }
        list.try_iter()
    }

    /// Events dropped because they were not drained in time.
    fn dropped_events(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.call(py, |p| p.dropped_events())
    }

    /// True once `close()` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.holder.is_closed()
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
            Ok(self.shared.holder.close(checkpoint)?)
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
        _exc: Option<Bound<'_, PyBaseException>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py, true)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Pool(closed={})", if self.closed() { "True" } else { "False" })
    }
}
