//! What a `Pool` and its leases share once it is open: the host's holder
//! and the process it was opened in, the detached calls on it, and the
//! Python names of the options the host validates.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use repute_host::holder::Field;
use repute_host::{Holder, Outcome, Pool as HostPool, PoolOps};

use crate::errors::{to_py, Failure};
use crate::time::secs_to_ns;

/// The Python spelling of the options the host validates.
pub(crate) fn field_name(field: Field) -> &'static str {
    match field {
        Field::Store => "store",
        Field::Tenant => "tenant",
        Field::Mode => "mode",
        Field::OwnerTtl => "owner_ttl",
        Field::Owners => "owners",
        Field::LeaseTtl => "lease_ttl",
        Field::ProbeTtl => "probe_ttl",
        Field::Strategy => "strategy",
        Field::RenewMargin => "renew_margin",
        Field::Recovery => "recovery",
        Field::RateLimitRate => "rate",
        Field::RateLimitBurst => "burst",
        Field::AutoRenew => "auto_renew",
        Field::MaxHold => "max_hold",
        Field::Profiles => "profiles",
    }
}

/// What a `Pool` and its leases share: the host's holder, and the process
/// it was opened in (a pool is not usable across `os.fork()`).
pub(crate) struct OpenPool {
    pub(crate) holder: Arc<Holder>,
    generation: u64,
    pid: u32,
    /// The holder's release count the last call here told of.
    told: AtomicU64,
    /// Told how many releases each call saw (`repute._freed`: the asyncio
    /// sleepers, who wait outside the holder's line).
    on_released: Mutex<Option<Py<PyAny>>>,
}

impl OpenPool {
    /// The holder of a pool opened in this process now.
    pub(crate) fn new(holder: Arc<Holder>) -> Self {
        OpenPool {
            holder,
            generation: crate::fork::generation(),
            pid: std::process::id(),
            told: AtomicU64::new(0),
            on_released: Mutex::new(None),
        }
    }

    /// Refuses calls in a process forked after the pool was opened.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if crate::fork::generation() == self.generation {
            Ok(())
        } else {
            Err(Failure::Forked { opened_in: self.pid })
        }
    }

    /// Runs one host operation, if this process may. Call only while detached.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut HostPool) -> repute_host::Result<T>) -> Result<T, Failure> {
        self.check()?;
        Ok(self.holder.with(f)?)
    }

    pub(crate) fn now(&self) -> u64 {
        self.holder.now()
    }

    /// Runs one host operation detached from the interpreter.
    pub(crate) fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostPool) -> repute_host::Result<T> + Send,
    ) -> PyResult<T> {
        self.detach(py, || self.with(f)).map_err(|e| to_py(py, e))
    }

    /// Runs `f` detached from the interpreter (a call that may release a
    /// lease), then tells `on_released` of the releases since the last
    /// call told, made by this call or by one on another thread. Told with
    /// the interpreter held and no lock of the pool's taken, so the
    /// listener may call back in.
    pub(crate) fn detach<T: Send>(&self, py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
        let r = py.detach(f);
        let now = self.holder.releases();
        let before = self.told.fetch_max(now, Ordering::SeqCst);
        if now > before {
            let listener = self.on_released.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.clone_ref(py));
            if let Some(listener) = listener {
                if let Err(e) = listener.call1(py, (now - before,)) {
                    e.write_unraisable(py, Some(listener.bind(py)));
                }
            }
        }
        r
    }

    /// Sets who `detach` tells of releases.
    pub(crate) fn on_released(&self, listener: Py<PyAny>) {
        *self.on_released.lock().unwrap_or_else(|e| e.into_inner()) = Some(listener);
    }

    /// Runs a host operation that may make resources selectable (a
    /// register, an unblock, a restore), then wakes every waiter.
    pub(crate) fn call_freeing<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostPool) -> repute_host::Result<T> + Send,
    ) -> PyResult<T> {
        let r = self.call(py, f);
        self.holder.notify_changed();
        r
    }

    pub(crate) fn report(
        &self,
        py: Python<'_>,
        (kind, value, context): (&str, &str, &str),
        outcome: Result<Outcome, Failure>,
    ) -> PyResult<()> {
        let outcome = outcome.map_err(|f| to_py(py, f))?;
        self.call(py, |p| p.report(kind, value, context, &outcome))
    }
}

impl Drop for OpenPool {
    fn drop(&mut self) {
        if self.check().is_err() {
            // In a forked child the host pool's locks, instance and store
            // connections belong to the parent: never run their destructors here.
            self.holder.abandon();
        }
    }
}

/// `auto_renew` and `max_hold` (seconds) as the host takes them.
pub(crate) fn hold(auto_renew: bool, max_hold: Option<f64>) -> Result<Option<Option<u64>>, Failure> {
    let max_hold = max_hold.map(|s| secs_to_ns("max_hold", s)).transpose()?;
    Ok(repute_host::holder::hold(auto_renew, max_hold, field_name)?)
}
