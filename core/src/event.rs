//! The event stream: everything that changed, stamped with the monotonic time
//! the core was given. The host drains it after each call.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use crate::id::{Context, ResourceId};
use crate::lease::Lease;
use crate::limits::RetireReason;
use crate::outcome::FailureKind;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Why an acquire returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    NoCandidates,
    RateLimited,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum EventKind {
    Registered {
        resource: ResourceId,
        permits: u32,
    },
    Unregistered {
        resource: ResourceId,
    },
    /// A cell (or, with `context` `None`, the whole resource: a spent quota)
    /// stops being selected until `until`.
    Cooled {
        resource: ResourceId,
        context: Option<Context>,
        until: u64,
        cause: FailureKind,
    },
    Recovered {
        resource: ResourceId,
        context: Context,
    },
    /// `context` is `None` for a resource-wide block; `until` is `None` when permanent.
    Blocklisted {
        resource: ResourceId,
        context: Option<Context>,
        until: Option<u64>,
        reason: Option<String>,
    },
    Unblocked {
        resource: ResourceId,
        context: Option<Context>,
    },
    Leased {
        lease: Lease,
    },
    Renewed {
        lease: Lease,
    },
    Released {
        lease: Lease,
    },
    LeaseExpired {
        lease: Lease,
    },
    /// A live lease ended by a forced unregister; its holder is fenced out.
    Revoked {
        lease: Lease,
    },
    Rejected {
        context: Context,
        reason: RejectReason,
    },
    /// Its limits retired a resource: it is not selected again.
    Retired {
        resource: ResourceId,
        reason: RetireReason,
    },
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Registered { .. } => "registered",
            EventKind::Unregistered { .. } => "unregistered",
            EventKind::Cooled { .. } => "cooled",
            EventKind::Recovered { .. } => "recovered",
            EventKind::Blocklisted { .. } => "blocklisted",
            EventKind::Unblocked { .. } => "unblocked",
            EventKind::Leased { .. } => "leased",
            EventKind::Renewed { .. } => "renewed",
            EventKind::Released { .. } => "released",
            EventKind::LeaseExpired { .. } => "lease_expired",
            EventKind::Revoked { .. } => "revoked",
            EventKind::Rejected { .. } => "rejected",
            EventKind::Retired { .. } => "retired",
        }
    }
}
