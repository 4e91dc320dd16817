//! The lease authority: the core decides *who should* get a permit, the
//! authority decides *whether they may* and mints the fencing token.
//!
//! In one process the pool's own fence counters are the authority (`Local`).
//! The host swaps in one backed by durable or shared storage, so tokens keep
//! increasing across restarts and across processes.

use crate::id::{Context, ResourceId};
use crate::limits::Limits;
use crate::policy::RateLimit;
use crate::quota::GroupClaim;

/// What a grant counts against its resource's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub limits: Limits,
    /// Tokens reserved against `limits.tpm` (and `limits.per_context.tpm`).
    pub cost: u64,
    /// The acquire's context, when `limits.per_context` counts its grants
    /// apart from the resource's other contexts.
    pub context: Option<Context>,
    /// The groups the resource belongs to whose limits count the grant,
    /// in the resource's order; a `GroupLimited` answer names one by index.
    pub groups: alloc::vec::Vec<GroupClaim>,
}

/// What a grant asks of the authority besides the permit.
#[derive(Debug, Clone, Copy)]
pub struct GrantRequest<'a> {
    pub ttl: u64,
    /// The highest token the pool has seen for the permit.
    pub last: u64,
    pub claim: Option<&'a Claim>,
    /// The log position the pool has folded (0 for a pool that logs nothing).
    pub view: u64,
}

/// An authority's answer to a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantAnswer {
    /// Granted, with this fencing token.
    Granted(u64),
    /// The permit is held elsewhere (or the authority is unreachable).
    Held,
    /// The resource's limits admit no grant for this many ns; `None`: never
    /// again (its `max_uses` are spent).
    Limited(Option<u64>),
    /// The `per_context` limits of the claim's context admit no grant for
    /// this many ns; the resource's other contexts may still be granted.
    ContextLimited(u64),
    /// The limits of the claim's group at this index admit no grant for
    /// this many ns: none of the group's members may be granted.
    GroupLimited(u32, u64),
    /// The log holds a change of registrations or groups after the
    /// position the grant was judged on: the pool folds it and asks again.
    Stale,
}

pub trait Authority: Send + core::fmt::Debug {
    /// Grants `permit` of `resource` for `ttl` nanoseconds. `last` is the
    /// highest token this pool has seen for the permit; the token returned
    /// must be greater. With a `claim`, the grant also counts against the
    /// resource's limits, across every pool the authority serves. `view`
    /// is the log position the pool has folded: an authority shared by
    /// processes answers `Stale` while the log holds a change of
    /// registrations or groups after it, so no grant is judged against
    /// limits or groups the log has changed.
    fn grant(&mut self, resource: &ResourceId, permit: u32, grant: GrantRequest<'_>) -> GrantAnswer;

    /// The grant holding `token` used `used` tokens, not the `reserved`
    /// ones; `context` when it was counted per context too.
    fn reconcile(
        &mut self,
        resource: &ResourceId,
        context: Option<&Context>,
        permit: u32,
        token: u64,
        reserved: u64,
        used: u64,
    ) {
        let _ = (resource, context, permit, token, reserved, used);
    }

    /// Extends the lease holding `token` by `ttl` from now; false once the
    /// authority no longer recognises that token as the permit's holder.
    fn extend(&mut self, resource: &ResourceId, permit: u32, token: u64, ttl: u64) -> bool;

    /// Ends the lease holding `token`, if it is still the holder.
    fn revoke(&mut self, resource: &ResourceId, permit: u32, token: u64);

    /// How many permits of `resource` from `first` up to `permits` hold a live
    /// lease, by whoever holds them: asked before logging a change that
    /// would take those permits away, which every process folds. An
    /// authority that serves this pool alone has none but the pool's own,
    /// which the pool counts itself.
    fn live(&mut self, resource: &ResourceId, first: u32, permits: u32) -> u32 {
        let _ = (resource, first, permits);
        0
    }

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
/// is held anywhere else; the pool counts its limits itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Authority for Local {
    fn grant(&mut self, _: &ResourceId, _: u32, grant: GrantRequest<'_>) -> GrantAnswer {
        GrantAnswer::Granted(grant.last + 1)
    }

    fn extend(&mut self, _: &ResourceId, _: u32, _: u64, _: u64) -> bool {
        true
    }

    fn revoke(&mut self, _: &ResourceId, _: u32, _: u64) {}
}
