//! Leases: exclusive, expiring claims on one permit of one resource, each
//! carrying the fencing token that downstream writes are checked against.

use serde::{Deserialize, Serialize};

use crate::id::{Context, ResourceId};

/// Why a lease was granted: a client lease, the single half-open trial of a
/// cell whose cooldown ended, a probe of a cell due for one, or (policy
/// `fail_open`) the least-bad candidate while nothing was selectable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseKind {
    Client,
    Trial,
    Probe,
    FailOpen,
}

/// A granted lease as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: u64,
    pub resource: ResourceId,
    pub context: Context,
    pub permit: u32,
    /// Strictly increasing per (resource, permit) for the life of the pool.
    pub token: u64,
    pub kind: LeaseKind,
    pub granted_at: u64,
    pub expires_at: u64,
    /// The TTL the lease was granted with; renewals extend by it again.
    pub ttl: u64,
}

/// The lease table's record: the public lease plus where it lives.
#[derive(Debug, Clone)]
pub(crate) struct LeaseEntry {
    pub lease: Lease,
    pub slot: u32,
    /// Its context's interned number when it was granted, if the context
    /// had one then (the context is looked up by name only if not).
    pub ctx: Option<u32>,
    /// Tokens it holds against its resource's `tpm` (0 without one).
    pub cost: u64,
    /// When its grant was counted in its resource's window, if it was.
    pub counted_at: Option<u64>,
}
