//! `repute.RedisLink`: a pool's grants and revokes on Redis as bytes, for
//! the asyncio layer to run on a connection of its event loop (the host's
//! sans-IO [`Exchange`], which the Node binding drives from libuv the same
//! way). Python owns the socket; this turns calls into bytes to write and
//! bytes read into settled operations, so an asyncio acquire waits for its
//! reply on the loop, with no thread per call and no executor hop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use repute_host::providers::{Done, Exchange};
use repute_host::{Error, StoreError};

use crate::errors::{to_py, Failure};
use crate::lease::{released_name, Lease};
use crate::open::OpenPool;
use crate::selector;
use crate::typed::Release;

struct State {
    exchange: Exchange,
    next_op: u32,
    /// How each acquire in flight is to be held once granted.
    holds: HashMap<u32, Option<Option<u64>>>,
}

/// A pool's grants and revokes on Redis as bytes (used by the asyncio layer).
#[pyclass(frozen, module = "repute")]
pub(crate) struct RedisLink {
    shared: Arc<OpenPool>,
    state: Mutex<State>,
}

impl State {
    /// The number of the next operation (it only names replies in flight).
    fn op(&mut self) -> u32 {
        self.next_op = self.next_op.wrapping_add(1);
        self.next_op
    }
}

impl RedisLink {
    pub(crate) fn new(shared: Arc<OpenPool>, exchange: Exchange) -> Self {
        RedisLink { shared, state: Mutex::new(State { exchange, next_op: 0, holds: HashMap::new() }) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Settled operations as `(op, value)` pairs: a `Lease`, None (a
    /// release done) or an exception instance.
    fn settled<'py>(
        &self,
        py: Python<'py>,
        done: Vec<Done>,
        holds: Vec<Option<Option<u64>>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (d, hold) in done.into_iter().zip(holds) {
            let (op, value): (u32, Bound<'py, PyAny>) = match d {
                Done::Acquired { op, result: Ok(lease) } => {
                    // The grant was proposed at `granted_at`, read before it was sent.
                    let sent = lease.granted_at;
                    let held = self.shared.holder.adopt(lease, sent);
                    (op, Bound::new(py, Lease::held(self.shared.clone(), held, hold))?.into_any())
                }
                Done::Released { op, result: Ok(()) } => (op, py.None().into_bound(py)),
                Done::Acquired { op, result: Err(e) } | Done::Released { op, result: Err(e) } => {
                    (op, to_py(py, Failure::Host(e)).into_value(py).into_bound(py).into_any())
                }
            };
            out.append(PyTuple::new(py, [op.into_pyobject(py)?.into_any(), value])?)?;
        }
        Ok(out)
    }

    fn take_holds(state: &mut State, done: &[Done]) -> Vec<Option<Option<u64>>> {
        done.iter()
            .map(|d| match d {
                Done::Acquired { op, .. } => state.holds.remove(op).flatten(),
                Done::Released { .. } => None,
            })
            .collect()
    }
}

#[pymethods]
impl RedisLink {
    /// The server's `(host, port)`.
    #[getter]
    fn address(&self) -> (String, u16) {
        let state = self.state();
        let a = state.exchange.address();
        (a.host.clone(), a.port)
    }

    /// Starts an acquire (the selector's arguments and `cost` as for `Pool.acquire`);
    /// returns its operation number. Refusals the pool knows at once
    /// (nothing selectable, the rate limit) are raised here.
    #[pyo3(signature = (
        context, auto_renew = false, max_hold = None, *, kind = None, r#where: "_Where | None" = None,
        exclude: "Iterable[str] | None" = None, prefer = None, affinity = None, cost: "int | None" = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        context: &str,
        auto_renew: bool,
        max_hold: Option<f64>,
        kind: Option<&str>,
        r#where: Option<Bound<'_, PyAny>>,
        exclude: Option<Bound<'_, PyAny>>,
        prefer: Option<&str>,
        affinity: Option<&str>,
        cost: Option<Bound<'_, PyAny>>,
    ) -> PyResult<u32> {
        let selector = selector::selector(kind, r#where.as_ref(), exclude.as_ref(), prefer, affinity, cost.as_ref());
        let selector = selector.map_err(|f| to_py(py, f))?;
        let hold = crate::open::hold(auto_renew, max_hold).map_err(|f| to_py(py, f))?;
        py.detach(|| {
            self.shared.check()?;
            let mut state = self.state();
            let op = state.op();
            let exchange = &mut state.exchange;
            self.shared.holder.with(|p| exchange.acquire(p, op, context, &selector))?;
            state.holds.insert(op, hold);
            Ok(op)
        })
        .map_err(|f: Failure| to_py(py, f))
    }

    /// Starts a release: the lease ends in the pool now. Returns how it
    /// found the lease (see `Lease._release_as`) and the operation number
    /// whose reply says the revoke ran, or None when nothing is left to
    /// revoke (the release is complete).
    fn release(&self, py: Python<'_>, lease: &Lease) -> PyResult<(Release, Option<u32>)> {
        self.shared
            .detach(py, || {
                self.shared.check()?;
                let mut state = self.state();
                let op = state.op();
                let exchange = &mut state.exchange;
                let (how, sent) = lease.held_lease().release_by(|p, l| exchange.release(p, op, l.id, l.token))?;
                Ok((released_name(how), (sent == Some(true)).then_some(op)))
            })
            .map_err(|f: Failure| to_py(py, f))
    }

    /// The bytes to write next, in order.
    fn output<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.state().exchange.take_output())
    }

    /// Bytes read from the connection: the operations they settle. An
    /// unreadable reply raises `StoreError`; the connection is then
    /// unusable (call `reset`).
    #[pyo3(signature = (data) -> "list[tuple[int, Lease | None | ReputeError]]")]
    fn feed<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let (done, holds) = py
            .detach(|| {
                self.shared.check()?;
                let mut state = self.state();
                let exchange = &mut state.exchange;
                let done = self.shared.holder.with(|p| exchange.feed(p, data).map_err(Error::Store))?;
                let holds = Self::take_holds(&mut state, &done);
                Ok((done, holds))
            })
            .map_err(|f: Failure| to_py(py, f))?;
        // One feed may end several releases.
        self.shared.holder.notify_changed();
        self.settled(py, done, holds)
    }

    /// The `StoreError` a connection that could not be made raises.
    #[pyo3(signature = (why) -> "ReputeError")]
    fn unavailable(&self, py: Python<'_>, why: &str) -> Py<PyAny> {
        let e = Error::Store(StoreError::Unavailable(format!("redis: {why}")));
        to_py(py, Failure::Host(e)).into_value(py).into_any()
    }

    /// The connection is gone: every operation in flight fails (returned as
    /// `(op, exception)`), and the next connection starts with the handshake.
    #[pyo3(signature = (why) -> "list[tuple[int, Lease | None | ReputeError]]")]
    fn reset<'py>(&self, py: Python<'py>, why: &str) -> PyResult<Bound<'py, PyList>> {
        let mut state = self.state();
        let done = state.exchange.reset(&StoreError::Unavailable(format!("redis: {why}")));
        let holds = Self::take_holds(&mut state, &done);
        drop(state);
        self.settled(py, done, holds)
    }
}
