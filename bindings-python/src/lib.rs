//! `repute._native`: the Python binding of repute, a thin pyo3 shell over
//! `repute-host`. It holds no pool logic: it converts arguments (seconds to
//! nanoseconds, strings to names), releases the GIL around every host call,
//! and maps the host's typed errors to Python exceptions in one place
//! (`errors`). The `repute` package re-exports it and adds the asyncio layer.

use pyo3::prelude::*;

mod attempts;
mod clock;
mod errors;
mod events;
mod fork;
mod lease;
mod line;
mod link;
mod open;
mod outcome;
mod partition;
mod pool;
mod probe;
mod selector;
mod time;
mod typed;
mod views;

// The module is declared inline so pyo3 can introspect it for the stubs
// (`stubgen.py`); its init adds the exception classes of the code table.
#[pymodule]
mod _native {
    use pyo3::prelude::*;

    #[pymodule_export]
    use super::attempts::_context_of;
    #[pymodule_export]
    use super::attempts::Attempts;
    #[pymodule_export]
    use super::attempts::Plan;
    #[pymodule_export]
    use super::clock::ManualClock;
    #[pymodule_export]
    use super::errors::_absent_fields;
    #[pymodule_export]
    use super::errors::_error_table;
    #[pymodule_export]
    use super::events::BlocklistedEvent;
    #[pymodule_export]
    use super::events::CooledEvent;
    #[pymodule_export]
    use super::events::Event;
    #[pymodule_export]
    use super::events::LeaseEvent;
    #[pymodule_export]
    use super::events::LeaseExpiredEvent;
    #[pymodule_export]
    use super::events::LeasedEvent;
    #[pymodule_export]
    use super::events::RecoveredEvent;
    #[pymodule_export]
    use super::events::RegisteredEvent;
    #[pymodule_export]
    use super::events::RejectedEvent;
    #[pymodule_export]
    use super::events::ReleasedEvent;
    #[pymodule_export]
    use super::events::RenewedEvent;
    #[pymodule_export]
    use super::events::RetiredEvent;
    #[pymodule_export]
    use super::events::RevokedEvent;
    #[pymodule_export]
    use super::events::UnblockedEvent;
    #[pymodule_export]
    use super::events::UnregisteredEvent;
    #[pymodule_export]
    use super::lease::Lease;
    #[pymodule_export]
    use super::lease::Waiting;
    #[pymodule_export]
    use super::line::Line;
    #[pymodule_export]
    use super::link::RedisLink;
    #[pymodule_export]
    use super::partition::lease_partition;
    #[pymodule_export]
    use super::partition::partition_of;
    #[pymodule_export]
    use super::pool::Pool;
    #[pymodule_export]
    use super::views::Cell;
    #[pymodule_export]
    use super::views::Group;
    #[pymodule_export]
    use super::views::ProbeTarget;
    #[pymodule_export]
    use super::views::Resource;
    #[pymodule_export]
    use super::views::Stats;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        super::fork::install();
        super::errors::register(m)
    }
}
