//! Pool events as flat JavaScript objects: `type` names the event (the
//! core's names: `leased`, `cooled`, ...) and only the fields that event
//! carries are set.

use napi_derive::napi;
use repute_host::{Event, EventKind, RejectReason, ResourceId, Wall};

use crate::units::ns_to_ms;
use crate::views::LeaseData;

#[napi(object, object_from_js = false)]
#[derive(Default)]
pub struct EventData {
    #[napi(js_name = "type")]
    pub kind_name: &'static str,
    /// When it happened, on the pool's clock.
    pub at_ms: f64,
    /// The same instant as Unix time (see `views`).
    pub at_unix_ms: f64,
    /// The resource it concerns (`kind`, `value`), if any.
    pub kind: Option<String>,
    pub value: Option<String>,
    pub context: Option<String>,
    pub permits: Option<u32>,
    /// End of a cooldown or block; absent for a block until lifted.
    pub until_ms: Option<f64>,
    pub until_unix_ms: Option<f64>,
    /// The failure kind that cooled a cell.
    pub cause: Option<&'static str>,
    /// A block's reason, why an acquire was rejected, or why a resource was retired.
    pub reason: Option<String>,
    pub lease: Option<LeaseData>,
}

impl EventData {
    pub(crate) fn new(e: Event, wall: &Wall) -> Self {
        let mut out = EventData {
            kind_name: e.kind.name(),
            at_ms: ns_to_ms(e.at),
            at_unix_ms: wall.unix_ms(e.at),
            ..Default::default()
        };
        let mut resource = |r: &ResourceId| {
            out.kind = Some(r.kind().to_owned());
            out.value = Some(r.value().to_owned());
        };
        match e.kind {
            EventKind::Registered { resource: r, permits } => {
                resource(&r);
                out.permits = Some(permits);
            }
            EventKind::Unregistered { resource: r } => resource(&r),
            EventKind::Cooled { resource: r, context, until, cause } => {
                resource(&r);
                out.context = context.map(|c| c.as_str().to_owned());
                out.until_ms = Some(ns_to_ms(until));
                out.until_unix_ms = Some(wall.unix_ms(until));
                out.cause = Some(cause.as_str());
            }
            EventKind::Recovered { resource: r, context } => {
                resource(&r);
                out.context = Some(context.as_str().to_owned());
            }
            EventKind::Blocklisted { resource: r, context, until, reason } => {
                resource(&r);
                out.context = context.map(|c| c.as_str().to_owned());
                out.until_ms = until.map(ns_to_ms);
                out.until_unix_ms = until.map(|t| wall.unix_ms(t));
                out.reason = reason;
            }
            EventKind::Unblocked { resource: r, context } => {
                resource(&r);
                out.context = context.map(|c| c.as_str().to_owned());
            }
            EventKind::Leased { lease }
            | EventKind::Renewed { lease }
            | EventKind::Released { lease }
            | EventKind::LeaseExpired { lease }
            | EventKind::Revoked { lease } => {
                resource(&lease.resource);
                out.context = Some(lease.context.as_str().to_owned());
                out.lease = Some(LeaseData::new(&lease, None, wall));
            }
            EventKind::Retired { resource: r, reason } => {
                resource(&r);
                out.reason = Some(reason.as_str().to_owned());
            }
            EventKind::Rejected { context, reason } => {
                out.context = Some(context.as_str().to_owned());
                out.reason = Some(
                    match reason {
                        RejectReason::NoCandidates => "no_candidates",
                        RejectReason::RateLimited => "rate_limited",
                    }
                    .to_owned(),
                );
            }
        }
        out
    }
}
