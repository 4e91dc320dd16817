//! The lease authority behind the `fencing` import.

use std::collections::HashMap;

use repute_core::RateLimit;

use crate::error::StoreError;

/// One resource permit, as the core names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit<'a> {
    pub kind: &'a str,
    pub value: &'a str,
    pub index: u32,
}

/// Decides whether a permit may be held, and mints fencing tokens.
///
/// `now` is the tenant's clock reading. An authority that lives in a shared
/// store judges expiry by the store's own clock instead (I6). An error is
/// treated as a refusal by the pool (refusing is always safe) and is then
/// reported to the caller as `Error::Store`.
pub trait Fencing: Send {
    /// Grants `permit` for `ttl` ns, returning a token greater than `last` and
    /// than every token ever issued for it; `None` if it is held elsewhere.
    fn grant(&mut self, permit: Permit<'_>, ttl: u64, last: u64, now: u64) -> Result<Option<u64>, StoreError>;

    /// Extends the lease holding `token` by `ttl` ns from `now`; false once
    /// `token` is no longer the newest token of the permit.
    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError>;

    /// Ends the lease holding `token`, if it still holds the permit.
    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError>;

    /// True when this authority knows the lease holding `token` ended: it
    /// was revoked, or a newer token was issued for the permit. Asked at
    /// open for every lease restored from the checkpoint, which can be older
    /// than the authority's record: such a lease is dropped instead of
    /// coming back to life for a whole TTL. An authority that keeps nothing
    /// beyond the process knows of no ended lease.
    fn ended(&mut self, permit: Permit<'_>, token: u64) -> Result<bool, StoreError> {
        let _ = (permit, token);
        Ok(false)
    }

    /// True when this authority only ever sees the grants of the one pool
    /// it serves and keeps nothing beyond the process: that pool can then be
    /// its own authority, and no grant crosses the component boundary.
    fn in_process(&self) -> bool {
        false
    }

    /// Spends one acquire of a rate limit shared by every process serving
    /// the tenant; `Some(ns)` refuses it. An authority that serves one
    /// process leaves rate limiting to the pool's own bucket.
    fn admit(&mut self, limit: &RateLimit) -> Result<Option<u64>, StoreError> {
        let _ = limit;
        Ok(None)
    }
}

/// The state of one permit at the authority.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PermitState {
    /// The newest token issued.
    pub last: u64,
    /// Expiry (on the tenant's clock) of the lease holding `last`, if held.
    pub held_until: Option<u64>,
    /// Read from durable storage already: an authority that keeps permits
    /// beyond the process loads each one the first time it is touched.
    pub loaded: bool,
}

/// An in-process authority: permits and their newest tokens in a table.
/// Nothing survives the process; use `SqliteFencing` for durable tokens.
#[derive(Debug, Default)]
pub struct MemoryFencing {
    /// kind → value → permit index → state; nested so lookups borrow `&str`.
    permits: HashMap<String, HashMap<String, Vec<PermitState>>>,
}

impl MemoryFencing {
    pub(crate) fn state(&mut self, permit: Permit<'_>) -> &mut PermitState {
        if !self.permits.contains_key(permit.kind) {
            self.permits.insert(permit.kind.to_owned(), HashMap::new());
        }
        let values = self.permits.get_mut(permit.kind).expect("inserted above");
        if !values.contains_key(permit.value) {
            values.insert(permit.value.to_owned(), Vec::new());
        }
        let states = values.get_mut(permit.value).expect("inserted above");
        let index = permit.index as usize;
        if states.len() <= index {
            states.resize(index + 1, PermitState::default());
        }
        &mut states[index]
    }

    /// The grant decision shared with the SQLite authority: refused while
    /// an unexpired lease holds the permit, else the next token.
    pub(crate) fn decide(state: &mut PermitState, ttl: u64, last: u64, now: u64) -> Option<u64> {
        if state.held_until.is_some_and(|until| now < until) {
            return None;
        }
        let token = state.last.max(last) + 1;
        state.last = token;
        state.held_until = Some(now.saturating_add(ttl));
        Some(token)
    }

    /// A lease may be extended while its token is still the newest one of the
    /// permit: nobody else can have been granted it since. A token newer than
    /// any this authority issued belongs to a lease restored from a snapshot
    /// (I5: restored leases keep their holder); it is adopted as the newest
    /// token unless another unexpired lease holds the permit here.
    pub(crate) fn prolong(state: &mut PermitState, token: u64, ttl: u64, now: u64) -> bool {
        let held_by_other = state.held_until.is_some_and(|until| now < until);
        let adoptable = token > state.last && !held_by_other;
        if token == 0 || !(token == state.last || adoptable) {
            return false;
        }
        state.last = token;
        state.held_until = Some(now.saturating_add(ttl));
        true
    }

    pub(crate) fn end(state: &mut PermitState, token: u64) {
        if state.last == token {
            state.held_until = None;
        }
    }
}

impl Fencing for MemoryFencing {
    fn in_process(&self) -> bool {
        true
    }

    fn grant(&mut self, permit: Permit<'_>, ttl: u64, last: u64, now: u64) -> Result<Option<u64>, StoreError> {
        Ok(MemoryFencing::decide(self.state(permit), ttl, last, now))
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError> {
        Ok(MemoryFencing::prolong(self.state(permit), token, ttl, now))
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        MemoryFencing::end(self.state(permit), token);
        Ok(())
    }
}
