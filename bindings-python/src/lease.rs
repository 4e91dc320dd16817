//! `repute.Lease`: the holder's handle on one granted lease, over the host's
//! [`HeldLease`], which keeps the local deadline of invariant I7, renews
//! automatically when asked and says once when the lease is lost.

use std::sync::Arc;

use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::types::PyType;
use repute_host::holder::{Hint, Released, Waiting as HostWaiting};
use repute_host::{HeldLease, Outcome, Pool as HostPool, Wall};

use crate::errors::{to_py, Failure};
use crate::open::OpenPool;
use crate::outcome;
use crate::selector;
use crate::time::{ns_to_secs, secs_to_ns};
use crate::typed::{self, Loss, Release};
use crate::views::{lease_kind, py_value, repr};

/// A granted lease; `with lease:` releases it on exit.
///
/// `valid` is False once released or lost. A lease is lost for good when a
/// renewal is refused, its resource is blocked, the tenant's ownership is
/// lost, the local deadline (send time + TTL - margin) passes, `max_hold`
/// ends an auto-renewed lease, or the pool closes; `loss` says which, and
/// `on_lost` callbacks run once.
#[pyclass(frozen, module = "repute")]
pub(crate) struct Lease {
    shared: Arc<OpenPool>,
    held: Arc<HeldLease>,
}

impl Lease {
    pub(crate) fn new(shared: Arc<OpenPool>, held: Arc<HeldLease>) -> Self {
        Lease { shared, held }
    }

    /// A granted lease, auto-renewed when `hold` is `Some(max_hold)`.
    pub(crate) fn held(shared: Arc<OpenPool>, held: Arc<HeldLease>, hold: Option<Option<u64>>) -> Self {
        if let Some(max_hold) = hold {
            held.auto_renew(max_hold);
        }
        Lease::new(shared, held)
    }

    /// A grant by `f` on `shared`'s pool as a `Lease`.
    pub(crate) fn grant(
        shared: &Arc<OpenPool>,
        py: Python<'_>,
        f: impl FnOnce(&mut HostPool) -> repute_host::Result<repute_host::Lease> + Send,
    ) -> PyResult<Lease> {
        let held = py
            .detach(|| {
                shared.check()?;
                shared.holder.grant(f).map_err(Failure::from)
            })
            .map_err(|f| to_py(py, f))?;
        Ok(Lease::new(shared.clone(), held))
    }

    pub(crate) fn held_lease(&self) -> &Arc<HeldLease> {
        &self.held
    }

    fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&HeldLease) -> repute_host::Result<T> + Send) -> PyResult<T> {
        self.shared
            .detach(py, || {
                self.shared.check()?;
                f(&self.held).map_err(Failure::from)
            })
            .map_err(|f| to_py(py, f))
    }

    /// Reports `outcome`, first correcting the lease's cost to `usage` tokens if given.
    fn report(
        &self,
        py: Python<'_>,
        outcome: Result<Outcome, Failure>,
        usage: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let outcome = outcome.map_err(|f| to_py(py, f))?;
        let usage = selector::count_or_none("usage", usage).map_err(|f| to_py(py, f))?;
        self.run(py, |held| held.report(&outcome, usage))
    }
}

#[pymethods]
impl Lease {
    /// The lease id, unique for the life of the pool.
    #[getter]
    fn id(&self) -> u64 {
        self.held.lease().id
    }

    #[getter]
    fn kind(&self) -> &str {
        self.held.lease().resource.kind()
    }

    #[getter]
    fn value(&self) -> &str {
        self.held.lease().resource.value()
    }

    #[getter]
    fn context(&self) -> &str {
        self.held.lease().context.as_str()
    }

    #[getter]
    fn permit(&self) -> u32 {
        self.held.lease().permit
    }

    /// The fencing token: strictly increasing per (resource, permit).
    #[getter]
    fn token(&self) -> u64 {
        self.held.lease().token
    }

    /// The secret the resource was registered with (an API key, a
    /// password), or None; read from the pool once, then kept. No repr,
    /// event, view or error shows it.
    #[getter]
    fn secret(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.run(py, |held| held.secret())?.map(|s| s.expose().to_owned()))
    }

    /// "client", "trial" (a half-open trial), "probe" or "fail_open".
    #[getter]
    fn lease_kind(&self) -> typed::LeaseKind {
        lease_kind(self.held.lease().kind)
    }

    #[getter]
    fn ttl(&self) -> f64 {
        ns_to_secs(self.held.lease().ttl)
    }

    #[getter]
    fn granted_at(&self) -> f64 {
        ns_to_secs(self.held.lease().granted_at)
    }

    /// When the authority lets the lease lapse (pool clock seconds).
    #[getter]
    fn expires_at(&self) -> f64 {
        ns_to_secs(self.held.expires_at())
    }

    /// `granted_at` as Unix time (float seconds), mapped now.
    #[getter]
    fn granted_at_unix(&self) -> f64 {
        Wall::now(&**self.shared.holder.clock()).unix_secs(self.held.lease().granted_at)
    }

    /// `expires_at` as Unix time (float seconds), mapped now.
    #[getter]
    fn expires_at_unix(&self) -> f64 {
        Wall::now(&**self.shared.holder.clock()).unix_secs(self.held.expires_at())
    }

    /// The local deadline (pool clock seconds), before `expires_at` by the margin.
    #[getter]
    fn deadline(&self) -> f64 {
        ns_to_secs(self.held.deadline())
    }

    /// Seconds left until the local deadline; 0 once the lease is not valid.
    #[getter]
    fn expires_in(&self) -> f64 {
        ns_to_secs(self.held.expires_in())
    }

    /// True while the lease may be relied on: not released, not lost, and
    /// the local deadline has not passed.
    #[getter]
    fn valid(&self) -> bool {
        self.held.valid()
    }

    /// True once `release()` has ended the lease.
    #[getter]
    fn released(&self) -> bool {
        self.held.released()
    }

    /// True once the lease is lost: a renewal was refused, the resource was
    /// blocked, the tenant's ownership was lost, the local deadline passed,
    /// `max_hold` was reached or the pool closed.
    #[getter]
    fn lost(&self) -> bool {
        self.held.lost().is_some()
    }

    /// Why the lease was lost ("expired", "renewal_refused", "blocked",
    /// "owner_lost", "max_hold", "closed"), or None.
    #[getter]
    fn loss(&self) -> Option<Loss> {
        self.held.lost().map(|l| Loss(l.as_str()))
    }

    /// Calls `callback(loss)` once when the lease is lost (at once if it
    /// already is), from the thread that noticed: the pool's renewal thread,
    /// or the caller of a failed `renew()`. A released lease is never lost.
    /// An exception in the callback is reported as unraisable.
    #[pyo3(signature = (callback: "Callable[[_Loss], object]"))]
    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) {
        let held = self.held.clone();
        py.detach(move || {
            held.on_lost(Box::new(move |loss| {
                Python::attach(|py| {
                    if let Err(e) = callback.call1(py, (loss.as_str(),)) {
                        e.write_unraisable(py, Some(callback.bind(py)));
                    }
                })
            }))
        });
    }

    /// Extends the lease by its TTL from now. A failure, or a call after the
    /// local deadline, loses the lease for good and raises.
    fn renew(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |held| held.renew())
    }

    /// Ends the lease and frees its permit. True if the lease was held up to
    /// now; False if it had been lost, in which case its grant is still
    /// revoked at the authority (conditionally on its token), so the permit
    /// frees at once if nobody holds it. Calling it again does nothing.
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.run(py, |held| held.release())? == Released::Held)
    }

    /// The lease used `used` tokens of its resource's `tpm` instead of the
    /// `cost` it reserved: the window counts `used` from now on.
    #[pyo3(signature = (used: "int"))]
    fn reconcile(&self, py: Python<'_>, used: Bound<'_, PyAny>) -> PyResult<()> {
        let used = selector::count("used", &used).map_err(|f| to_py(py, f))?;
        self.run(py, |held| held.reconcile(used))
    }

    /// Reports a successful use; `latency` in seconds, `usage` the tokens
    /// it used (reconciled first, as `reconcile` does).
    #[pyo3(signature = (latency, *, usage: "int | None" = None))]
    fn report_success(&self, py: Python<'_>, latency: f64, usage: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        self.report(py, outcome::outcome(None, latency, None), usage.as_ref())
    }

    /// Reports a failed use; `kind` is a `FailureKind` or its name,
    /// `retry_after` (seconds) the wait a `rate_limited` or `quota_exhausted`
    /// answer gave, and `usage` as for `report_success`.
    #[pyo3(signature = (kind: "FailureKind | str", latency, *, retry_after = None, usage: "int | None" = None))]
    fn report_failure(
        &self,
        py: Python<'_>,
        kind: &str,
        latency: f64,
        retry_after: Option<f64>,
        usage: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.report(py, outcome::outcome(Some(kind), latency, retry_after), usage.as_ref())
    }

    /// Reports the use by the upstream's HTTP answer: its status, headers
    /// and body (str or bytes; an error's code and stated delay are read),
    /// read by the profile of the resource's kind; `usage` as for
    /// `report_success`. An answer that says nothing about the resource (a
    /// provider's overload) reports nothing.
    #[pyo3(signature = (
        status, latency = 0.0, headers: "_Headers | None" = None, *, body: "str | bytes | None" = None,
        usage: "int | None" = None,
    ))]
    fn report_http(
        &self,
        py: Python<'_>,
        status: u16,
        latency: f64,
        headers: Option<Bound<'_, PyAny>>,
        body: Option<Bound<'_, PyAny>>,
        usage: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let answer = outcome::answer(status, latency, headers.as_ref(), body.as_ref()).map_err(|f| to_py(py, f))?;
        let usage = selector::count_or_none("usage", usage.as_ref()).map_err(|f| to_py(py, f))?;
        self.run(py, |held| held.report_http(&answer, usage))
    }

    /// `release`, saying how it found the lease: "held", "lost" (the holder
    /// had been told) or "lost_unseen" (lost without anything telling the
    /// holder). For the asyncio layer's `async with`.
    #[pyo3(signature = () -> "_Release")]
    fn _release_as(&self, py: Python<'_>) -> PyResult<Release> {
        self.run(py, |held| held.release()).map(released_name)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the lease. When the block itself succeeded, a release error
    /// is raised, and so is `LeaseExpired` if the lease was lost while the
    /// block ran without anything telling the holder (its work was not
    /// protected to the end); otherwise the block's exception is what matters.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyBaseException>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let released = self.run(py, |held| held.release());
        if exc_type.is_none() && released? == Released::LostUnseen {
            return Err(to_py(py, repute_host::Error::LeaseExpired.into()));
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let lease = self.held.lease();
        let fields = vec![
            ("id", py_value(py, lease.id)?),
            ("kind", py_value(py, lease.resource.kind())?),
            ("value", py_value(py, lease.resource.value())?),
            ("context", py_value(py, lease.context.as_str())?),
            ("permit", py_value(py, lease.permit)?),
            ("token", py_value(py, lease.token)?),
            ("valid", py_value(py, self.held.valid())?),
        ];
        repr("Lease", fields)
    }
}

/// How `release` found a lease, by name.
pub(crate) fn released_name(r: Released) -> Release {
    Release(match r {
        Released::Held => "held",
        Released::Lost => "lost",
        Released::LostUnseen => "lost_unseen",
    })
}

/// The host's waiting plan for one asyncio acquire: how long to sleep on
/// the event loop after each refusal, on the pool's clock.
#[pyclass(module = "repute")]
pub(crate) struct Waiting {
    shared: Arc<OpenPool>,
    plan: HostWaiting,
}

impl Waiting {
    pub(crate) fn new(shared: Arc<OpenPool>, timeout: Option<u64>) -> Self {
        let plan = shared.holder.waiting(timeout);
        Waiting { shared, plan }
    }
}

#[pymethods]
impl Waiting {
    /// After a refusal whose `retry_after` (seconds) is the pool's hint,
    /// `settled` if nothing can free a resource sooner, and whose
    /// `expected_after` (seconds; `retry_after` when not given) is when one
    /// is expected to: the seconds to sleep before the next attempt, or None
    /// once time is up or is not expected to bring one.
    #[pyo3(signature = (retry_after, settled = false, expected_after = None))]
    fn next(
        &mut self,
        py: Python<'_>,
        retry_after: Option<f64>,
        settled: bool,
        expected_after: Option<f64>,
    ) -> PyResult<Option<f64>> {
        let ns = |field, s: Option<f64>| s.map(|s| secs_to_ns(field, s)).transpose().map_err(|f| to_py(py, f));
        let retry_after = ns("retry_after", retry_after)?;
        let hint = Hint::from_fields(retry_after, ns("expected_after", expected_after)?, settled);
        Ok(self.plan.next(hint, self.shared.now()).map(|d| d.as_secs_f64()))
    }
}
