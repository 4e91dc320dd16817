//! The typed event stream: one frozen class per host event kind, all
//! deriving from `Event`, and the lease events from `LeaseEvent`. Times are
//! as in the views (see `views`): pool clock seconds, with their Unix time
//! beside each instant.

use pyo3::prelude::*;
use repute_host::{Event as HostEvent, EventKind, FailureKind, Lease as HostLease, RejectReason, Wall};

use crate::time::ns_to_secs;
use crate::typed::{self, Failure, Rejection, Retirement};
use crate::views::{failure_kind, lease_kind, py_value, repr};

/// Base of every event: when it happened and its `type` name (the host's
/// event name, e.g. "leased", "lease_expired").
#[pyclass(frozen, subclass, module = "repute")]
pub(crate) struct Event {
    #[pyo3(get)]
    at: f64,
    #[pyo3(get)]
    at_unix: f64,
    #[pyo3(get, name = "type")]
    kind: &'static str,
}

#[pymethods]
impl Event {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let this = slf.get();
        let name = slf.get_type().name()?;
        let fields = vec![("type", py_value(py, this.kind)?), ("at", py_value(py, this.at)?)];
        repr(name.to_str()?, fields)
    }
}

/// A resource was registered (or its permits changed).
#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct RegisteredEvent {
    kind: String,
    value: String,
    permits: u32,
}

#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct UnregisteredEvent {
    kind: String,
    value: String,
}

/// A cell (or, `context` None, the whole resource) is not selected until
/// `until` because of `cause`.
#[pyclass(frozen, extends = Event, module = "repute")]
pub(crate) struct CooledEvent {
    #[pyo3(get)]
    kind: String,
    #[pyo3(get)]
    value: String,
    #[pyo3(get)]
    context: Option<String>,
    #[pyo3(get)]
    until: f64,
    #[pyo3(get)]
    until_unix: f64,
    cause: FailureKind,
}

#[pymethods]
impl CooledEvent {
    #[getter]
    fn cause<'py>(&self, py: Python<'py>) -> PyResult<Failure<'py>> {
        failure_kind(py, self.cause)
    }
}

#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct RecoveredEvent {
    kind: String,
    value: String,
    context: String,
}

/// A block was put in place; `context` None is resource-wide, `until` None permanent.
#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct BlocklistedEvent {
    kind: String,
    value: String,
    context: Option<String>,
    until: Option<f64>,
    until_unix: Option<f64>,
    reason: Option<String>,
}

#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct UnblockedEvent {
    kind: String,
    value: String,
    context: Option<String>,
}

/// Nothing could be granted for `context`; `reason` is "no_candidates" or "rate_limited".
#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct RejectedEvent {
    context: String,
    reason: Rejection,
}

/// Its usage limits retired a resource: `reason` is "max_uses" or "max_age";
/// it is not selected again.
#[pyclass(frozen, get_all, extends = Event, module = "repute")]
pub(crate) struct RetiredEvent {
    kind: String,
    value: String,
    reason: Retirement,
}

/// Base of the lease events: the lease as it was at the event.
#[pyclass(frozen, get_all, subclass, extends = Event, module = "repute")]
pub(crate) struct LeaseEvent {
    lease_id: u64,
    kind: String,
    value: String,
    context: String,
    permit: u32,
    token: u64,
    lease_kind: typed::LeaseKind,
    granted_at: f64,
    granted_at_unix: f64,
    expires_at: f64,
    expires_at_unix: f64,
}

/// Declares the lease event classes, which add nothing to `LeaseEvent` but
/// their type, so `isinstance` and `match` can tell them apart.
macro_rules! lease_events {
    ($($name:ident: $doc:literal),* $(,)?) => {$(
        #[doc = $doc]
        #[pyclass(frozen, extends = LeaseEvent, module = "repute")]
        pub(crate) struct $name {}
    )*};
}

lease_events!(
    LeasedEvent: "A lease was granted.",
    RenewedEvent: "A lease was extended.",
    ReleasedEvent: "A lease was released by its holder.",
    LeaseExpiredEvent: "A lease ran out; its permit is free.",
    RevokedEvent: "A lease was ended by a forced unregister; its holder is fenced out.",
);

fn lease_event(l: &HostLease, wall: &Wall) -> LeaseEvent {
    LeaseEvent {
        lease_id: l.id,
        kind: l.resource.kind().to_owned(),
        value: l.resource.value().to_owned(),
        context: l.context.as_str().to_owned(),
        permit: l.permit,
        token: l.token,
        lease_kind: lease_kind(l.kind),
        granted_at: ns_to_secs(l.granted_at),
        granted_at_unix: wall.unix_secs(l.granted_at),
        expires_at: ns_to_secs(l.expires_at),
        expires_at_unix: wall.unix_secs(l.expires_at),
    }
}

/// The typed Python object of one host event.
pub(crate) fn event<'py>(py: Python<'py>, e: HostEvent, wall: &Wall) -> PyResult<Bound<'py, PyAny>> {
    let base =
        PyClassInitializer::from(Event { at: ns_to_secs(e.at), at_unix: wall.unix_secs(e.at), kind: e.kind.name() });
    let object = match e.kind {
        EventKind::Registered { resource, permits } => Bound::new(
            py,
            base.add_subclass(RegisteredEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                permits,
            }),
        )?
        .into_any(),
        EventKind::Unregistered { resource } => Bound::new(
            py,
            base.add_subclass(UnregisteredEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
            }),
        )?
        .into_any(),
        EventKind::Cooled { resource, context, until, cause } => Bound::new(
            py,
            base.add_subclass(CooledEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                context: context.map(|c| c.as_str().to_owned()),
                until: ns_to_secs(until),
                until_unix: wall.unix_secs(until),
                cause,
            }),
        )?
        .into_any(),
        EventKind::Recovered { resource, context } => Bound::new(
            py,
            base.add_subclass(RecoveredEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                context: context.as_str().to_owned(),
            }),
        )?
        .into_any(),
        EventKind::Blocklisted { resource, context, until, reason } => Bound::new(
            py,
            base.add_subclass(BlocklistedEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                context: context.map(|c| c.as_str().to_owned()),
                until: until.map(ns_to_secs),
                until_unix: until.map(|t| wall.unix_secs(t)),
                reason,
            }),
        )?
        .into_any(),
        EventKind::Unblocked { resource, context } => Bound::new(
            py,
            base.add_subclass(UnblockedEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                context: context.map(|c| c.as_str().to_owned()),
            }),
        )?
        .into_any(),
        EventKind::Rejected { context, reason } => Bound::new(
            py,
            base.add_subclass(RejectedEvent {
                context: context.as_str().to_owned(),
                reason: Rejection(match reason {
                    RejectReason::NoCandidates => "no_candidates",
                    RejectReason::RateLimited => "rate_limited",
                }),
            }),
        )?
        .into_any(),
        EventKind::Retired { resource, reason } => Bound::new(
            py,
            base.add_subclass(RetiredEvent {
                kind: resource.kind().to_owned(),
                value: resource.value().to_owned(),
                reason: Retirement(reason.as_str()),
            }),
        )?
        .into_any(),
        EventKind::Leased { lease } => {
            Bound::new(py, base.add_subclass(lease_event(&lease, wall)).add_subclass(LeasedEvent {}))?.into_any()
        }
        EventKind::Renewed { lease } => {
            Bound::new(py, base.add_subclass(lease_event(&lease, wall)).add_subclass(RenewedEvent {}))?.into_any()
        }
        EventKind::Released { lease } => {
            Bound::new(py, base.add_subclass(lease_event(&lease, wall)).add_subclass(ReleasedEvent {}))?.into_any()
        }
        EventKind::LeaseExpired { lease } => {
            Bound::new(py, base.add_subclass(lease_event(&lease, wall)).add_subclass(LeaseExpiredEvent {}))?.into_any()
        }
        EventKind::Revoked { lease } => {
            Bound::new(py, base.add_subclass(lease_event(&lease, wall)).add_subclass(RevokedEvent {}))?.into_any()
        }
    };
    Ok(object)
}
