//! `repute.Lease`: the holder's handle on one granted lease.
//!
//! The handle keeps the holder's side of invariant I7: a lease counts as held
//! only until its local deadline, `send time + TTL - margin`, where the send
//! time is the clock reading taken just before the acquire or renew went out.
//! A renewal that fails, or a deadline that passes, demotes the handle for
//! good (`valid` False): the authority may already have handed the permit on.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyType;
use repute_host::{Error, Lease as HostLease, Outcome, PoolOps, Wall};

use crate::errors::{to_py, Failure};
use crate::outcome;
use crate::pool::Shared;
use crate::time::ns_to_secs;
use crate::views::{lease_kind, py_value, repr};

const HELD: u8 = 0;
const RELEASED: u8 = 1;
const LOST: u8 = 2;

#[pyclass(frozen, module = "repute")]
pub(crate) struct Lease {
    shared: Arc<Shared>,
    /// As granted; its `expires_at` is superseded by the field below.
    lease: HostLease,
    expires_at: AtomicU64,
    deadline: AtomicU64,
    status: AtomicU8,
    /// Serialises renew and release of this handle. Taken only while
    /// detached from the interpreter, so it can never wait on the GIL.
    op: Mutex<()>,
}

impl Lease {
    /// A handle for a lease the authority granted after the clock read `sent`.
    pub(crate) fn new(shared: Arc<Shared>, lease: HostLease, sent: u64) -> Self {
        let deadline = shared.deadline(sent, lease.ttl);
        Lease {
            expires_at: AtomicU64::new(lease.expires_at),
            deadline: AtomicU64::new(deadline),
            status: AtomicU8::new(HELD),
            op: Mutex::new(()),
            shared,
            lease,
        }
    }

    fn op(&self) -> std::sync::MutexGuard<'_, ()> {
        self.op.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn renew_detached(&self) -> Result<(), Failure> {
        let _op = self.op();
        self.shared.check()?;
        let status = self.status.load(Ordering::SeqCst);
        if status == LOST {
            return Err(Failure::Lost);
        }
        let sent = self.shared.clock.now();
        if status == HELD && sent >= self.deadline.load(Ordering::SeqCst) {
            self.status.store(LOST, Ordering::SeqCst);
            return Err(Failure::Lost);
        }
        match self.shared.with(|p| p.renew(self.lease.id, self.lease.token)) {
            Ok(renewed) => {
                self.expires_at.store(renewed.expires_at, Ordering::SeqCst);
                self.deadline.store(self.shared.deadline(sent, renewed.ttl), Ordering::SeqCst);
                Ok(())
            }
            Err(e) => {
                if status == HELD {
                    self.status.store(LOST, Ordering::SeqCst);
                }
                Err(e)
            }
        }
    }

    fn release_detached(&self) -> Result<(), Failure> {
        let _op = self.op();
        let status = self.status.load(Ordering::SeqCst);
        if status == RELEASED {
            return Ok(());
        }
        let result = self.shared.with(|p| p.release(self.lease.id, self.lease.token));
        let gone = matches!(
            result,
            Ok(()) | Err(Failure::Host(Error::LeaseExpired | Error::UnknownLease | Error::StaleLease))
        );
        if !gone {
            // A refusal for another reason (storage down, pool closed) may
            // leave the permit held: the holder can retry.
            return result;
        }
        self.status.store(RELEASED, Ordering::SeqCst);
        self.shared.notify_freed();
        match result {
            // A lost lease already told its holder it is gone; its release is
            // only a courtesy to free the permit early.
            Err(_) if status == LOST => Ok(()),
            r => r,
        }
    }

    fn report(&self, py: Python<'_>, outcome: Result<Outcome, Failure>) -> PyResult<()> {
        let outcome = outcome.map_err(|f| to_py(py, f))?;
        let (id, context) = (&self.lease.resource, self.lease.context.as_str());
        py.detach(|| self.shared.with(|p| p.report(id.kind(), id.value(), context, &outcome))).map_err(|f| to_py(py, f))
    }
}

#[pymethods]
impl Lease {
    /// The lease id, unique for the life of the pool.
    #[getter]
    fn id(&self) -> u64 {
        self.lease.id
    }

    #[getter]
    fn kind(&self) -> &str {
        self.lease.resource.kind()
    }

    #[getter]
    fn value(&self) -> &str {
        self.lease.resource.value()
    }

    #[getter]
    fn context(&self) -> &str {
        self.lease.context.as_str()
    }

    #[getter]
    fn permit(&self) -> u32 {
        self.lease.permit
    }

    /// The fencing token: strictly increasing per (resource, permit).
    #[getter]
    fn token(&self) -> u64 {
        self.lease.token
    }

    /// "client", "trial" (a half-open trial) or "probe".
    #[getter]
    fn lease_kind(&self) -> &'static str {
        lease_kind(self.lease.kind)
    }

    #[getter]
    fn ttl(&self) -> f64 {
        ns_to_secs(self.lease.ttl)
    }

    #[getter]
    fn granted_at(&self) -> f64 {
        ns_to_secs(self.lease.granted_at)
    }

    /// When the authority lets the lease lapse (pool clock seconds).
    #[getter]
    fn expires_at(&self) -> f64 {
        ns_to_secs(self.expires_at.load(Ordering::SeqCst))
    }

    /// `granted_at` as Unix time (float seconds), mapped now.
    #[getter]
    fn granted_at_unix(&self) -> f64 {
        Wall::now(&*self.shared.clock).unix_secs(self.lease.granted_at)
    }

    /// `expires_at` as Unix time (float seconds), mapped now.
    #[getter]
    fn expires_at_unix(&self) -> f64 {
        Wall::now(&*self.shared.clock).unix_secs(self.expires_at.load(Ordering::SeqCst))
    }

    /// The local deadline (pool clock seconds), before `expires_at` by the margin.
    #[getter]
    fn deadline(&self) -> f64 {
        ns_to_secs(self.deadline.load(Ordering::SeqCst))
    }

    /// Seconds left until the local deadline; 0 once the lease is not valid.
    #[getter]
    fn expires_in(&self) -> f64 {
        if self.status.load(Ordering::SeqCst) != HELD {
            return 0.0;
        }
        ns_to_secs(self.deadline.load(Ordering::SeqCst).saturating_sub(self.shared.clock.now()))
    }

    /// True while the lease may be relied on: not released, no renewal has
    /// failed, and the local deadline has not passed.
    #[getter]
    fn valid(&self) -> bool {
        self.status.load(Ordering::SeqCst) == HELD && self.shared.clock.now() < self.deadline.load(Ordering::SeqCst)
    }

    /// True once `release()` has ended the lease.
    #[getter]
    fn released(&self) -> bool {
        self.status.load(Ordering::SeqCst) == RELEASED
    }

    /// Extends the lease by its TTL from now. A failure, or a call after the
    /// local deadline, loses the lease for good and raises.
    fn renew(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.renew_detached()).map_err(|f| to_py(py, f))
    }

    /// Ends the lease and frees its permit. Calling it again is a no-op; on a
    /// lease already lost it only frees the permit if the authority still has it.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.release_detached()).map_err(|f| to_py(py, f))
    }

    /// Reports a successful use; `latency` in seconds.
    fn report_success(&self, py: Python<'_>, latency: f64) -> PyResult<()> {
        self.report(py, outcome::outcome(None, latency, None))
    }

    /// Reports a failed use; `kind` is a `FailureKind` or its name, and
    /// `retry_after` (seconds) the wait a `rate_limited` or `quota_exhausted` answer gave.
    #[pyo3(signature = (kind, latency, *, retry_after = None))]
    fn report_failure(&self, py: Python<'_>, kind: &str, latency: f64, retry_after: Option<f64>) -> PyResult<()> {
        self.report(py, outcome::outcome(Some(kind), latency, retry_after))
    }

    /// Reports the use by the upstream's HTTP answer: its status and headers
    /// (`Retry-After` is read), mapped as the README's table says.
    #[pyo3(signature = (status, latency = 0.0, headers = None))]
    fn report_http(
        &self,
        py: Python<'_>,
        status: u16,
        latency: f64,
        headers: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.report(py, outcome::http(status, latency, headers.as_ref()))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the lease. A release error is raised only when the block
    /// itself succeeded; otherwise the block's exception is what matters.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let released = self.release(py);
        if exc_type.is_none() {
            released?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("id", py_value(py, self.lease.id)?),
            ("kind", py_value(py, self.lease.resource.kind())?),
            ("value", py_value(py, self.lease.resource.value())?),
            ("context", py_value(py, self.lease.context.as_str())?),
            ("permit", py_value(py, self.lease.permit)?),
            ("token", py_value(py, self.lease.token)?),
            ("valid", py_value(py, self.valid())?),
        ];
        repr("Lease", fields)
    }
}
