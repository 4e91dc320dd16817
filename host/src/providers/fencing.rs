//! The lease authority behind the `fencing` import.

use std::collections::HashMap;

use repute_core::{Claim, GrantAnswer, RateLimit, ResourceView, Window};

use super::usage::{windowed, ResourceUsage, UsageState, RESOURCE_SCOPE};
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
    /// Grants `permit` for `ttl` ns, answering a token greater than `last`
    /// and than every token ever issued for it, or `Held` if it is held
    /// elsewhere. With a `claim`, the grant is also judged against its
    /// resource's limits over every grant of the resource this authority
    /// made, in the same atomic step as the grant (see `providers::usage`
    /// for the rule): `Limited` refuses it for a while, or for good.
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        now: u64,
        claim: Option<&Claim>,
    ) -> Result<GrantAnswer, StoreError>;

    /// The grant of `token` on `permit` reserved `reserved` tokens of its
    /// resource's `tpm` (and, with `context`, of that context's); count
    /// `used` instead. Nothing happens once that grant has left the window.
    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError>;

    /// What each resource (kind, value) holds in its own current window,
    /// in order: read only, on the clock its grants are judged by (`now`
    /// for an authority on the tenant's), pruned by the same rule as the
    /// next grant prunes, so a view agrees with that grant's judgement. A
    /// networked store answers the whole list in one round trip.
    fn window(&mut self, resources: &[(&str, &str)], now: u64) -> Result<Vec<Window>, StoreError>;

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

/// Puts the authority's count of each view's window in place of its pool's,
/// where the authority is not the pool itself: it counts every pool's
/// grants, and its count is what the next grant is judged by. One read for
/// the views whose limits keep a window (none, and no round trip, without).
pub(crate) fn authority_windows(
    fencing: &mut dyn Fencing,
    now: u64,
    views: &mut [ResourceView],
) -> Result<(), StoreError> {
    if fencing.in_process() {
        return Ok(());
    }
    let windowed: Vec<usize> = (0..views.len()).filter(|&i| windowed(&views[i].limits)).collect();
    if windowed.is_empty() {
        return Ok(());
    }
    let names: Vec<(&str, &str)> =
        windowed.iter().map(|&i| (views[i].resource.kind(), views[i].resource.value())).collect();
    let counts = fencing.window(&names, now)?;
    for (i, window) in windowed.into_iter().zip(counts) {
        views[i].window = window;
    }
    Ok(())
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

/// kind → value → what the authority keeps of that resource; nested so
/// lookups borrow `&str`.
type ByResource<T> = HashMap<String, HashMap<String, T>>;

fn entry<'a, T: Default>(map: &'a mut ByResource<T>, kind: &str, value: &str) -> &'a mut T {
    if !map.contains_key(kind) {
        map.insert(kind.to_owned(), HashMap::new());
    }
    let values = map.get_mut(kind).expect("inserted above");
    if !values.contains_key(value) {
        values.insert(value.to_owned(), T::default());
    }
    values.get_mut(value).expect("inserted above")
}

/// An in-process authority: permits and their newest tokens in a table,
/// and the usage of every resource a claim was made on. Nothing survives
/// the process; use `SqliteFencing` for durable tokens and limits.
#[derive(Debug, Default)]
pub struct MemoryFencing {
    /// Permit index → state, by resource.
    permits: ByResource<Vec<PermitState>>,
    usage: ByResource<ResourceUsage>,
}

impl MemoryFencing {
    pub(crate) fn state(&mut self, permit: Permit<'_>) -> &mut PermitState {
        let states = entry(&mut self.permits, permit.kind, permit.value);
        let index = permit.index as usize;
        if states.len() <= index {
            states.resize(index + 1, PermitState::default());
        }
        &mut states[index]
    }

    /// The usage of the permit's resource (made empty on first use).
    pub(crate) fn usage(&mut self, permit: Permit<'_>) -> &mut ResourceUsage {
        entry(&mut self.usage, permit.kind, permit.value)
    }

    /// The resource's own window at `now`, pruned on a copy: reading
    /// changes nothing.
    pub(crate) fn window_of(&self, kind: &str, value: &str, now: u64) -> Window {
        self.own_usage(kind, value).map_or_else(Window::default, |state| state.usage.window_at(now))
    }

    /// The resource's own scope, if a grant or a load made it.
    pub(crate) fn own_usage(&self, kind: &str, value: &str) -> Option<&UsageState> {
        self.usage.get(kind).and_then(|v| v.get(value)).and_then(|u| u.get(RESOURCE_SCOPE))
    }

    /// The grant decision shared with the SQLite authority, changing
    /// nothing but the window's pruning: `Held` while an unexpired lease
    /// holds the permit at `now`, the refusal of a claim by its resource's
    /// usage at `at` (the authority's limits clock), else the next token
    /// (to be taken with `take`).
    pub(crate) fn decide(
        state: &PermitState,
        last: u64,
        now: u64,
        limits: Option<(&mut ResourceUsage, &Claim, u64)>,
    ) -> Result<u64, GrantAnswer> {
        if state.held_until.is_some_and(|until| now < until) {
            return Err(GrantAnswer::Held);
        }
        if let Some((usage, claim, at)) = limits {
            if let Some(refused) = usage.judge(claim, at) {
                return Err(refused);
            }
        }
        Ok(state.last.max(last) + 1)
    }

    /// Takes the grant `decide` allowed: the permit is held by `token`
    /// until `ttl` from `now`.
    pub(crate) fn take(state: &mut PermitState, token: u64, ttl: u64, now: u64) {
        state.last = token;
        state.held_until = Some(now.saturating_add(ttl));
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

    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        now: u64,
        claim: Option<&Claim>,
    ) -> Result<GrantAnswer, StoreError> {
        let state = *self.state(permit);
        let mut usage = claim.map(|c| (self.usage(permit), c));
        let limits = usage.as_mut().map(|(u, c)| (&mut **u, *c, now));
        let token = match MemoryFencing::decide(&state, last, now, limits) {
            Ok(token) => token,
            Err(refused) => return Ok(refused),
        };
        if let Some((usage, claim)) = usage {
            usage.record(claim, permit.index, token, now);
        }
        MemoryFencing::take(self.state(permit), token, ttl, now);
        Ok(GrantAnswer::Granted(token))
    }

    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        _reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        if let Some(usage) = self.usage.get_mut(permit.kind).and_then(|v| v.get_mut(permit.value)) {
            usage.reconcile(context, permit.index, token, used);
        }
        Ok(())
    }

    fn window(&mut self, resources: &[(&str, &str)], now: u64) -> Result<Vec<Window>, StoreError> {
        Ok(resources.iter().map(|&(kind, value)| self.window_of(kind, value, now)).collect())
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError> {
        Ok(MemoryFencing::prolong(self.state(permit), token, ttl, now))
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        MemoryFencing::end(self.state(permit), token);
        Ok(())
    }
}
