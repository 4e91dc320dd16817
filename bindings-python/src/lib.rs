//! `repute._native`: the Python binding of repute, a thin pyo3 shell over
//! `repute-host`. It holds no pool logic: it converts arguments (seconds to
//! nanoseconds, strings to names), releases the GIL around every host call,
//! and maps the host's typed errors to Python exceptions in one place
//! (`errors`). The `repute` package re-exports it and adds the asyncio layer.

use pyo3::prelude::*;

mod clock;
mod errors;
mod fork;
mod lease;
mod link;
mod outcome;
mod pool;
mod probe;
mod selector;
mod time;
mod views;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::install();
    m.add_class::<pool::Pool>()?;
    m.add_class::<lease::Lease>()?;
    m.add_class::<lease::Waiting>()?;
    m.add_class::<link::RedisLink>()?;
    m.add_class::<clock::ManualClock>()?;
    m.add_class::<views::Cell>()?;
    m.add_class::<views::Resource>()?;
    m.add_class::<views::Stats>()?;
    m.add_class::<views::ProbeTarget>()?;
    m.add_class::<views::Event>()?;
    m.add_class::<views::RegisteredEvent>()?;
    m.add_class::<views::UnregisteredEvent>()?;
    m.add_class::<views::CooledEvent>()?;
    m.add_class::<views::RecoveredEvent>()?;
    m.add_class::<views::BlocklistedEvent>()?;
    m.add_class::<views::UnblockedEvent>()?;
    m.add_class::<views::RejectedEvent>()?;
    m.add_class::<views::RetiredEvent>()?;
    m.add_class::<views::LeaseEvent>()?;
    m.add_class::<views::LeasedEvent>()?;
    m.add_class::<views::RenewedEvent>()?;
    m.add_class::<views::ReleasedEvent>()?;
    m.add_class::<views::LeaseExpiredEvent>()?;
    m.add_class::<views::RevokedEvent>()?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(errors::_error_table, m)?)?;
    Ok(())
}
