//! Owner leases of tenants (sharded mode), behind one trait so that the
//! coordination store can be PostgreSQL or etcd.

use std::time::{Duration, Instant};

use crate::error::StoreError;

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This process owns the tenant under `epoch` until `deadline` on its
    /// own clock: the request's send time + TTL − margin, so it stops
    /// serving before the database could give the tenant to another (I7).
    Owned { epoch: u64, deadline: Instant },
    /// Another process owns it; `address` is where it serves.
    Elsewhere { owner: String, address: String },
}

/// Where owner leases live. Every take of a tenant raises its epoch above
/// every earlier one; expiry is judged by the store's clock, and the local
/// deadlines returned are on this process's clock (send time + TTL − margin).
pub trait OwnerStore: Send + std::fmt::Debug {
    /// Takes `tenant` for `owner` (a name unique to this process start) if
    /// nobody holds it or its owner let it expire; a store may also let
    /// `owner` take it again while its own lease still runs (a new epoch
    /// all the same).
    fn claim(&mut self, tenant: &str, owner: &str, address: &str, ttl: Duration) -> Result<Claim, StoreError>;

    /// Extends the owner lease; the new local deadline, or `None` once the
    /// store no longer counts this process as the owner under `epoch`.
    fn renew(&mut self, tenant: &str, owner: &str, epoch: u64, ttl: Duration) -> Result<Option<Instant>, StoreError>;

    /// Gives the tenant up at once (a graceful shutdown), so another process
    /// need not wait for the lease to run out.
    fn resign(&mut self, tenant: &str, owner: &str, epoch: u64) -> Result<(), StoreError>;

    /// The address of the process that holds `tenant` now, if one does.
    fn owner(&mut self, tenant: &str) -> Result<Option<String>, StoreError>;

    /// Tenants this process was turned away from whose owner has since let
    /// go, each reported once, so they can be claimed now rather than on
    /// their next request. Stores that cannot watch report none, and such
    /// tenants move on their next request.
    fn vacated(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// How much earlier than the database an owner gives its lease up: covers
/// the request's time in flight and the gap between two clocks' rates.
pub fn owner_margin(ttl: Duration) -> Duration {
    (ttl / 5).max(Duration::from_millis(100)).min(ttl / 2)
}
