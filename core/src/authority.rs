//! The lease authority: the core decides *who should* get a permit, the
//! authority decides *whether they may* and mints the fencing token.
//!
//! In one process the pool's own fence counters are the authority (`Local`).
//! The host swaps in one backed by durable or shared storage, so tokens keep
//! increasing across restarts and across processes.

use crate::id::ResourceId;
use crate::policy::RateLimit;

pub trait Authority: Send + core::fmt::Debug {
    /// Grants `permit` of `resource` for `ttl` nanoseconds. `last` is the
    /// highest token this pool has seen for the permit; the token returned
    /// must be greater. `None` means the permit is held elsewhere.
    fn grant(&mut self, resource: &ResourceId, permit: u32, ttl: u64, last: u64) -> Option<u64>;

    /// Extends the lease holding `token` by `ttl` from now; false once the
    /// authority no longer recognises that token as the permit's holder.
    fn extend(&mut self, resource: &ResourceId, permit: u32, token: u64, ttl: u64) -> bool;

    /// Ends the lease holding `token`, if it is still the holder.
    fn revoke(&mut self, resource: &ResourceId, permit: u32, token: u64);

    /// Spends one acquire of a rate limit that processes serving the tenant
    /// together share; `Some(ns)` refuses it until a token is minted that
    /// much later. The pool's own bucket applies as well, so an authority
    /// that serves one process only admits everything.
    fn admit(&mut self, limit: &RateLimit) -> Option<u64> {
        let _ = limit;
        None
    }
}

/// The pool's own counters: the next token is the last plus one, and nothing
/// is held anywhere else.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Authority for Local {
    fn grant(&mut self, _: &ResourceId, _: u32, _: u64, last: u64) -> Option<u64> {
        Some(last + 1)
    }

    fn extend(&mut self, _: &ResourceId, _: u32, _: u64, _: u64) -> bool {
        true
    }

    fn revoke(&mut self, _: &ResourceId, _: u32, _: u64) {}
}
