//! `repute.ManualClock`: a clock that moves only when told to, so tests and
//! simulations drive cooldowns, expiry and rate limits without sleeping.

use std::sync::Arc;

use pyo3::prelude::*;
use repute_host::{Clock, ManualClock as HostClock};

use crate::errors::to_py;
use crate::time::{ns_to_secs, secs_to_ns};

/// A clock that moves only with `advance`; pass it as `Pool(clock=...)`.
#[pyclass(frozen, module = "repute")]
pub(crate) struct ManualClock {
    inner: HostClock,
}

impl ManualClock {
    /// The clock a pool reads; clones share one reading with this handle.
    pub(crate) fn shared(&self) -> Arc<dyn Clock> {
        Arc::new(self.inner.clone())
    }
}

#[pymethods]
impl ManualClock {
    #[new]
    #[pyo3(signature = (start = 0.0))]
    fn new(py: Python<'_>, start: f64) -> PyResult<Self> {
        let start = secs_to_ns("start", start).map_err(|f| to_py(py, f))?;
        Ok(ManualClock { inner: HostClock::new(start) })
    }

    /// Moves the clock forward; it never moves back.
    fn advance(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let ns = secs_to_ns("seconds", seconds).map_err(|f| to_py(py, f))?;
        self.inner.advance(ns);
        Ok(())
    }

    /// The reading, in seconds.
    #[getter]
    fn now(&self) -> f64 {
        ns_to_secs(self.inner.now())
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now={})", self.now())
    }
}
