//! `repute._Attempts`: the host's attempt protocol
//! ([`repute_host::attempt`]) for the Python adapters (`repute.httpx`,
//! `repute.requests`, `repute.aiohttp`), which send the request and say
//! what came back; every decision (whom to blame, whether to retry, what
//! to report) is the host's. Converting only: seconds, names, tuples.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use repute_host::attempt::{self, Attempts as HostAttempts, CheckedPlan, Plan as HostPlan, Refused, Route, Step};
use repute_host::{Error, FailureKind};

use crate::errors::{invalid, to_py, Failure};
use crate::lease::Lease;
use crate::open::OpenPool;
use crate::pool::Pool;
use crate::selector;
use crate::time::{ns_to_secs, secs_to_ns};

/// A request plan checked once, when an adapter is made: each request's
/// attempts start from it with their context, so a request converts no
/// options.
#[pyclass(frozen, module = "repute", name = "_Plan")]
pub(crate) struct Plan {
    shared: Arc<OpenPool>,
    plan: CheckedPlan,
}

#[pymethods]
impl Plan {
    /// Requests on `pool`'s resources of `kind` whose labels match
    /// `where`, none of `exclude`: at most `attempts` each (1..=16), within
    /// `timeout` seconds in all (None: no limit).
    #[new]
    #[pyo3(signature = (
        pool, *, kind = None, r#where: "_Where | None" = None, exclude: "Iterable[str] | None" = None,
        attempts = 3, timeout = None,
    ))]
    fn new(
        py: Python<'_>,
        pool: PyRef<'_, Pool>,
        kind: Option<&str>,
        r#where: Option<Bound<'_, PyAny>>,
        exclude: Option<Bound<'_, PyAny>>,
        attempts: u32,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let selector = selector::selector(kind, r#where.as_ref(), exclude.as_ref(), None, None, None);
        let selector = selector.map_err(|f| to_py(py, f))?;
        let timeout = timeout.map(|t| secs_to_ns("timeout", t)).transpose().map_err(|f| to_py(py, f))?;
        let shared = pool.shared().clone();
        let plan = HostPlan { selector, attempts, timeout };
        let plan = plan.checked(shared.holder.clone()).map_err(|e| to_py(py, e.into()))?;
        Ok(Plan { shared, plan })
    }

    /// One request's attempts, counted in `context`.
    fn start(&self, context: &str) -> Attempts {
        let inner = self.plan.start(context);
        Attempts { shared: self.shared.clone(), inner: Mutex::new(inner), refusal: Mutex::new(None) }
    }
}

/// One request's attempts over a pool's resources (from `_Plan.start`).
/// Driven from one thread or task: the next attempt acquired and begun
/// (`next`, or `try_next` and `refused` for an event loop's own waits;
/// `try_acquire` and `begin` apart for an adapter that needs the lease),
/// sent by the route, then `answered` or `failed`; after a `"stream"`
/// step, `finished` once the body ends; `end` whenever the adapter stops.
#[pyclass(frozen, module = "repute", name = "_Attempts")]
pub(crate) struct Attempts {
    shared: Arc<OpenPool>,
    inner: Mutex<HostAttempts>,
    /// The last refusal of `try_acquire`, for `refused` to read.
    refusal: Mutex<Option<Error>>,
}

impl Attempts {
    fn inner(&self) -> MutexGuard<'_, HostAttempts> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the protocol detached from the interpreter.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostAttempts) -> repute_host::Result<T> + Send,
    ) -> PyResult<T> {
        self.shared
            .detach(py, || {
                self.shared.check()?;
                f(&mut self.inner()).map_err(Failure::from)
            })
            .map_err(|f| to_py(py, f))
    }
}

#[pymethods]
impl Attempts {
    #[getter]
    fn context(&self) -> String {
        self.inner().context().to_owned()
    }

    /// Attempts begun so far.
    #[getter]
    fn made(&self) -> u32 {
        self.inner().made()
    }

    /// What the next try asks the pool for, hashed: tries with the same
    /// wish are refused or granted alike (the asyncio line hands a wake on
    /// only to a sleeper that wishes otherwise).
    #[getter]
    fn wish(&self) -> u64 {
        self.inner().wish()
    }

    /// Seconds left for the request; None: no limit.
    #[getter]
    fn remaining(&self) -> Option<f64> {
        self.inner().remaining().map(ns_to_secs)
    }

    /// One try for the next attempt's lease, for an event loop that waits
    /// its own way: a refusal is raised, and `refused()` says what to do.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Lease> {
        let got = py.detach(|| {
            self.shared.check()?;
            let attempts = self.inner();
            let got = self.shared.holder.acquire_now(attempts.context(), attempts.selector());
            if let Err(e) = &got {
                *self.refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
            }
            got.map_err(Failure::from)
        });
        Ok(Lease::new(self.shared.clone(), got.map_err(|f| to_py(py, f))?))
    }

    /// After `try_acquire` or `try_next` raised a refusal: `("wait", seconds or None)`
    /// (sleep at most that, by the pool's waiting plan, and try again),
    /// `("again", None)` (try again at once) or `("give_up", None)`.
    #[pyo3(signature = () -> "_Refused")]
    fn refused(&self, py: Python<'_>) -> PyResult<(&'static str, Option<f64>)> {
        let refusal = self.refusal.lock().unwrap_or_else(|e| e.into_inner()).take();
        let refusal = refusal.ok_or_else(|| to_py(py, invalid("attempt", "must be refused before refused()")))?;
        Ok(match self.inner().refused(&refusal) {
            Refused::Wait(hint) => ("wait", hint.map(ns_to_secs)),
            Refused::Again => ("again", None),
            Refused::GiveUp => ("give_up", None),
        })
    }

    /// Begins an attempt on `lease` (from this request's acquire): how to
    /// send it, `("proxy", url, "")` through the proxy at the lease's
    /// value, `("header", name, value)` with that header replacing the
    /// request's, or `("as_is", "", "")`.
    #[pyo3(signature = (lease) -> "_Route")]
    fn begin(&self, py: Python<'_>, lease: PyRef<'_, Lease>) -> PyResult<RouteTuple> {
        let held = lease.held_lease().clone();
        self.run(py, |a| a.begin(held).map(|r| route_tuple(a, r)))
    }

    /// The next attempt's lease acquired, waiting (the GIL released,
    /// Ctrl-C checked between waits) until the request's time is up, and
    /// begun: its route, as `begin` gives it. Raises the refusal when it stops.
    #[pyo3(signature = () -> "_Route")]
    fn next(&self, py: Python<'_>) -> PyResult<RouteTuple> {
        self.shared
            .detach(py, || {
                self.shared.check()?;
                let between = || Python::attach(|py| py.check_signals()).map_err(Failure::Python);
                let mut a = self.inner();
                a.next(between).map(|r| route_tuple(&a, r))
            })
            .map_err(|f| to_py(py, f))
    }

    /// `try_acquire` then `begin`, in one call: the next attempt's route,
    /// or the refusal raised, and `refused()` says what to do.
    #[pyo3(signature = () -> "_Route")]
    fn try_next(&self, py: Python<'_>) -> PyResult<RouteTuple> {
        self.run(py, |a| {
            let route = a.next_now();
            if let Err(e) = &route {
                *self.refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
            }
            route.map(|r| route_tuple(a, r))
        })
    }

    /// The attempt's answer: its status, headers (a mapping or pairs) and,
    /// for an error status, its whole body (str or bytes). The step:
    /// `"stream"` (deliver it; call `finished` when its body ends),
    /// `"deliver"` (deliver it; done) or `"retry"`.
    #[pyo3(signature = (
        status, headers: "_Headers | None" = None, body: "str | bytes | None" = None,
    ) -> "_Step")]
    fn answered(
        &self,
        py: Python<'_>,
        status: u16,
        headers: Option<Bound<'_, PyAny>>,
        body: Option<Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let answer = crate::outcome::answer(status, 0.0, headers.as_ref(), body.as_ref()).map_err(|f| to_py(py, f))?;
        self.run(py, |a| a.answered(answer.status, answer.headers, answer.body)).map(step)
    }

    /// The attempt got no answer: `kind` (a `FailureKind` or its name) is
    /// what failed. The step, as `answered` gives it; on `"deliver"` the
    /// adapter raises the transport error.
    #[pyo3(signature = (kind: "FailureKind | str") -> "_Step")]
    fn failed(&self, py: Python<'_>, kind: &str) -> PyResult<&'static str> {
        let kind = FailureKind::parse(kind).map_err(|e| to_py(py, Failure::Host(e.into())))?;
        self.run(py, |a| a.failed(kind)).map(step)
    }

    /// The delivered success's body ended: read or closed (`broken` None),
    /// or cut (`broken`, a `FailureKind` or its name). Reports and releases.
    #[pyo3(signature = (broken: "FailureKind | str | None" = None))]
    fn finished(&self, py: Python<'_>, broken: Option<&str>) -> PyResult<()> {
        let broken = broken.map(FailureKind::parse).transpose().map_err(|e| to_py(py, Failure::Host(e.into())))?;
        self.run(py, |a| a.finished(broken))
    }

    /// The adapter stops: reports a result still held back, releases a
    /// lease still held. Safe to call more than once.
    fn end(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, HostAttempts::end)
    }

    fn __repr__(&self) -> String {
        let a = self.inner();
        format!("_Attempts(context={:?}, made={})", a.context(), a.made())
    }
}

/// `(how, name or URL, value)`, as `begin` documents it.
type RouteTuple = (&'static str, String, String);

fn route_tuple(a: &HostAttempts, route: Route) -> RouteTuple {
    match route {
        Route::Proxy => ("proxy", a.resource().map(|r| r.value().to_owned()).unwrap_or_default(), String::new()),
        Route::Header { name, value } => ("header", name.to_owned(), value),
        Route::AsIs => ("as_is", String::new(), String::new()),
    }
}

fn step(s: Step) -> &'static str {
    match s {
        Step::Stream => "stream",
        Step::Deliver => "deliver",
        Step::Retry => "retry",
    }
}

/// The context a request counts in when its caller names none, for a
/// resource of `kind` (None: the host): an API key's model from the JSON
/// body, else the request's host.
#[pyfunction]
#[pyo3(signature = (pool, kind, host, path, body = None))]
pub(crate) fn _context_of(
    pool: PyRef<'_, Pool>,
    kind: Option<&str>,
    host: &str,
    path: &str,
    body: Option<&[u8]>,
) -> String {
    match kind {
        Some(kind) => attempt::context_of(pool.shared().holder.profiles().of(kind), host, path, body),
        None => host.to_ascii_lowercase(),
    }
}
