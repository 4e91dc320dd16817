//! `Pool(recovery="probe", probe=fn)`: the host's probe loop on a thread of
//! this pool, calling the user's probe (a plain or an `async` function) for
//! each cell due. Which cells, the probe leases and the outcomes are the
//! host's prober; this only runs rounds and converts the probe's answer.

use std::sync::Weak;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt};
use repute_host::{finish_probe, start_probes, Lease, Verdict};

use crate::open::OpenPool;

/// How often the thread looks whether its pool was closed or dropped.
const LOOK: Duration = Duration::from_millis(50);

/// Starts the loop; it ends once the pool is closed or gone.
pub(crate) fn spawn(pool: Weak<OpenPool>, probe: Py<PyAny>, concurrency: usize, every: Duration) {
    std::thread::Builder::new()
        .name("repute-probe".into())
        .spawn(move || run(pool, probe, concurrency, every))
        .expect("spawn the probe thread");
}

fn run(pool: Weak<OpenPool>, probe: Py<PyAny>, concurrency: usize, every: Duration) {
    loop {
        let until = Instant::now() + every;
        while Instant::now() < until {
            std::thread::sleep(LOOK.min(until.saturating_duration_since(Instant::now())));
            if pool.upgrade().is_none_or(|s| s.holder.is_closed()) {
                return;
            }
        }
        let Some(shared) = pool.upgrade() else { return };
        let Ok(leases) = shared.with(|p| start_probes(p, concurrency)) else { continue };
        std::thread::scope(|scope| {
            for lease in &leases {
                let (shared, probe) = (&shared, &probe);
                scope.spawn(move || {
                    let started = Instant::now();
                    let verdict = Python::attach(|py| call(py, probe, lease));
                    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
                    // A pool closed meanwhile has nothing left to record it in.
                    let _ = shared.with(|p| finish_probe(p, shared.holder.profiles(), lease, verdict, latency_ms));
                });
            }
        });
    }
}

/// `probe(kind, value, context)`, awaited with `asyncio.run` when it is a
/// coroutine: `True`/`None` healthy, `False` failed, an int an HTTP status.
/// A probe that raises has failed; its exception is reported as unraisable,
/// as Python does for callbacks.
fn call(py: Python<'_>, probe: &Py<PyAny>, lease: &Lease) -> Verdict {
    static RUN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let args = (lease.resource.kind(), lease.resource.value(), lease.context.as_str());
    let answer = probe.bind(py).call1(args).and_then(|r| {
        let coroutine = py.import("inspect")?.call_method1("iscoroutine", (&r,))?.is_truthy()?;
        match coroutine {
            true => RUN.import(py, "asyncio", "run")?.call1((r,)),
            false => Ok(r),
        }
    });
    match answer {
        Ok(r) if r.is_none() => Verdict::Healthy,
        Ok(r) if r.is_instance_of::<PyBool>() => match r.is_truthy() {
            Ok(true) => Verdict::Healthy,
            _ => Verdict::Failed,
        },
        Ok(r) if r.is_instance_of::<PyInt>() => r.extract::<u16>().map_or(Verdict::Failed, Verdict::Http),
        Ok(_) => Verdict::Failed,
        Err(e) => {
            e.write_unraisable(py, Some(probe.bind(py)));
            Verdict::Failed
        }
    }
}
