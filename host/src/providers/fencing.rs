//! The lease authority behind the `fencing` import.

use std::collections::HashMap;

use repute_core::{Claim, GrantAnswer, GroupLimits, GroupView, RateLimit, ResourceView, Window};

use super::usage::{grouped, windowed, Claimed, GroupUsage, ResourceUsage, UsageState, RESOURCE_SCOPE};
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
    /// made, its context's, and its groups' over every grant of their
    /// members, in the same atomic step as the grant (see
    /// `providers::usage` for the rule and the order): `Limited` refuses it
    /// for a while, or for good; `ContextLimited` and `GroupLimited` name
    /// the scope that refused. `view` is the log position the pool has
    /// folded: a store that several processes append to answers `Stale`,
    /// granting and counting nothing, while its log holds a change of
    /// registrations or groups after it (an authority of one process has
    /// no other writer, and ignores it).
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        now: u64,
        claim: Option<&Claim>,
        view: u64,
    ) -> Result<GrantAnswer, StoreError>;

    /// The grant of `token` on `permit` reserved `reserved` tokens of its
    /// resource's `tpm` and `tpd` (with `context`, of that context's `tpm`
    /// too, and of its groups'); count `used` instead. Nothing happens in a
    /// window that grant has left, nor once the permit was granted again
    /// with a claim (the authority remembers a permit's newest claimed
    /// grant only).
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

    /// What each named group holds at the authority, in order: its minute
    /// and day windows and its live leases over every process's grants,
    /// read only, on the clock its grants are judged by. An authority
    /// counts a group's minute only while the group has an `rpm` or `tpm`,
    /// its day while it has an `rpd` or `tpd`, its leases while it has a
    /// `concurrency` (see [`authority_groups`]). An authority that serves
    /// one process answers nothing: its pool's counts are the authority's.
    fn groups(&mut self, names: &[&str], now: u64) -> Result<Vec<GroupCounts>, StoreError> {
        let _ = (names, now);
        Ok(Vec::new())
    }

    /// Extends the lease holding `token` by `ttl` ns from `now`; false once
    /// `token` is no longer the newest token of the permit.
    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError>;

    /// Ends the lease holding `token`, if it still holds the permit.
    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError>;

    /// How many of the resource's permits `first..permits` hold an
    /// unexpired lease at `now` (the store's own clock for a shared store),
    /// whoever holds them: asked before a change that would take them away
    /// is logged, since every process folds it.
    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, now: u64) -> Result<u32, StoreError>;

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

    /// The signal of a permit another process released while this pool
    /// waits in the line of a group whose concurrency is full (see
    /// [`Releases`]); `None` where no other process grants.
    fn releases(&self) -> Option<Box<dyn Releases>> {
        None
    }

    /// Spends one acquire of a rate limit shared by every process serving
    /// the tenant; `Some(ns)` refuses it. An authority that serves one
    /// process leaves rate limiting to the pool's own bucket.
    fn admit(&mut self, limit: &RateLimit) -> Result<Option<u64>, StoreError> {
        let _ = limit;
        Ok(None)
    }
}

/// Where a pool in shared mode hears of permits other processes release.
///
/// A pool refused because a group's concurrency is full waits in the
/// group's line at the store (the grant step keeps it: a freed slot goes
/// to the pool that has waited longest since it was last granted one). A
/// release there tells every pool in a line, so the first in line tries at
/// once instead of at its next poll.
pub trait Releases: Send {
    /// Blocks until a release is heard of, or for about `at_most`: true
    /// for a release.
    fn next(&mut self, at_most: std::time::Duration) -> Result<bool, StoreError>;
}

impl std::fmt::Debug for dyn Releases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Releases")
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

/// One group's counts at the authority (see [`Fencing::groups`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub minute: Window,
    pub day: Window,
    pub leased: u32,
}

/// Puts the authority's counts of each group in place of its pool's where
/// the authority keeps them (a limit on them, see [`Fencing::groups`]):
/// the pool sees its own process's grants only, the authority every
/// process's, and its count is what the next grant is judged by. One read
/// for the groups that have such limits, none without.
pub(crate) fn authority_groups(fencing: &mut dyn Fencing, now: u64, views: &mut [GroupView]) -> Result<(), StoreError> {
    let kept = |l: &GroupLimits| {
        (l.rpm.is_some() || l.tpm.is_some(), l.rpd.is_some() || l.tpd.is_some(), l.concurrency.is_some())
    };
    let asked: Vec<usize> = (0..views.len()).filter(|&i| kept(&views[i].limits) != (false, false, false)).collect();
    if asked.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = asked.iter().map(|&i| views[i].name.as_str()).collect();
    let counts = fencing.groups(&names, now)?;
    for (i, counts) in asked.into_iter().zip(counts) {
        let view = &mut views[i];
        let (minute, day, leases) = kept(&view.limits);
        if minute {
            view.window = counts.minute;
        }
        if day {
            view.day = counts.day;
        }
        if leases {
            view.leased = counts.leased;
        }
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
/// the usage of every resource a claim was made on, and of every group one
/// named. Nothing survives the process; use `SqliteFencing` for durable
/// tokens and limits.
#[derive(Debug, Default)]
pub struct MemoryFencing {
    /// Permit index → state, by resource.
    permits: ByResource<Vec<PermitState>>,
    usage: ByResource<ResourceUsage>,
    /// By group name: the tenant's, shared by every member.
    groups: HashMap<String, GroupState>,
}

/// What the authority keeps of one group.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupState {
    pub usage: GroupUsage,
    /// The newest lease of each permit granted with the group while it
    /// had a `concurrency`: those still live count against it.
    pub leases: Vec<GroupLease>,
    /// Read from durable storage already (as `PermitState::loaded`).
    pub loaded: bool,
}

/// A lease granted with a group, by its permit and token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupLease {
    pub kind: String,
    pub value: String,
    pub permit: u32,
    pub token: u64,
}

impl GroupState {
    /// Remembers the lease of `token` on `permit` as the permit's newest.
    pub fn lease(&mut self, permit: Permit<'_>, token: u64) {
        let same = |l: &GroupLease| l.kind == permit.kind && l.value == permit.value && l.permit == permit.index;
        match self.leases.iter_mut().find(|l| same(l)) {
            Some(l) => l.token = token,
            None => self.leases.push(GroupLease {
                kind: permit.kind.to_owned(),
                value: permit.value.to_owned(),
                permit: permit.index,
                token,
            }),
        }
    }
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

    /// What the authority keeps of group `name` (made empty on first use).
    pub(crate) fn group(&mut self, name: &str) -> &mut GroupState {
        if !self.groups.contains_key(name) {
            self.groups.insert(name.to_owned(), GroupState::default());
        }
        self.groups.get_mut(name).expect("inserted above")
    }

    /// The live leases of group `name` at `now`, with the expiry of the
    /// soonest to end; the ended ones are dropped.
    pub(crate) fn live(&mut self, name: &str, now: u64) -> (usize, Option<u64>) {
        let Some(group) = self.groups.get_mut(name) else { return (0, None) };
        let permits = &self.permits;
        let expiry = |l: &GroupLease| {
            let state = permits.get(&l.kind).and_then(|v| v.get(&l.value)).and_then(|s| s.get(l.permit as usize))?;
            state.held_until.filter(|&until| state.last == l.token && now < until)
        };
        group.leases.retain(|l| expiry(l).is_some());
        (group.leases.len(), group.leases.iter().filter_map(expiry).min())
    }

    /// How many of the resource's permits `first..permits` are held at `now`.
    pub(crate) fn held(&self, kind: &str, value: &str, first: u32, permits: u32, now: u64) -> u32 {
        let states = self.permits.get(kind).and_then(|v| v.get(value)).map_or(&[][..], Vec::as_slice);
        let range = states.get(first as usize..(permits as usize).min(states.len())).unwrap_or_default();
        range.iter().filter(|s| s.held_until.is_some_and(|until| now < until)).count() as u32
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
    /// nothing but the windows' pruning and the ended group leases:
    /// `Held` while an unexpired lease holds the permit at `now`, the
    /// refusal of a claim by its scopes' usage at `at` (the authority's
    /// limits clock; see `providers::usage` for the order) or by a group's
    /// concurrency at `now`, else the next token (to be taken with `take`
    /// and counted with `count`).
    pub(crate) fn decide(
        &mut self,
        permit: Permit<'_>,
        last: u64,
        now: u64,
        claim: Option<(&Claim, u64)>,
    ) -> Result<u64, GrantAnswer> {
        let state = *self.state(permit);
        if state.held_until.is_some_and(|until| now < until) {
            return Err(GrantAnswer::Held);
        }
        if let Some((claim, at)) = claim {
            if let Some(refused) = self.usage(permit).judge(claim, at) {
                return Err(refused);
            }
            for (index, g) in (0u32..).zip(&claim.groups) {
                let usage = &mut self.group(g.name.as_str()).usage;
                usage.prune(at);
                if let Some(refused) = usage.judge(&g.limits, claim.cost, at) {
                    return Err(grouped(index, refused));
                }
                if let Some(most) = g.concurrency {
                    let (live, soonest) = self.live(g.name.as_str(), now);
                    if live >= most as usize {
                        let wait = soonest.map_or(1, |until| until.saturating_sub(now).max(1));
                        return Err(GrantAnswer::GroupLimited(index, wait));
                    }
                }
            }
        }
        Ok(state.last.max(last) + 1)
    }

    /// Counts the grant of `token` on `permit` that `claim` made at `at`
    /// in every scope of the claim: its resource's, and each group's
    /// windows (where its limits count) and live leases (where it has a
    /// `concurrency`).
    pub(crate) fn count(&mut self, permit: Permit<'_>, claim: &Claim, token: u64, at: u64) {
        self.usage(permit).record(claim, permit.index, token, at);
        for g in &claim.groups {
            let group = self.group(g.name.as_str());
            if g.limits.counted() {
                group.usage.record(&g.limits, claim.cost, at);
            }
            if g.concurrency.is_some() {
                group.lease(permit, token);
            }
        }
    }

    /// The permit's newest claimed grant, if this authority has it.
    pub(crate) fn claimed(&self, permit: Permit<'_>) -> Option<&Claimed> {
        let usage = self.usage.get(permit.kind).and_then(|v| v.get(permit.value))?;
        usage.claimed.get(&permit.index)
    }

    /// The reconcile of `claimed`, the grant of `token` on `permit`, in
    /// the scopes this authority has in memory.
    pub(crate) fn settle(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        claimed: Option<&Claimed>,
        reserved: u64,
        used: u64,
    ) {
        if let Some(usage) = self.usage.get_mut(permit.kind).and_then(|v| v.get_mut(permit.value)) {
            usage.reconcile(context, permit.index, token, claimed, reserved, used);
        }
        for (name, counts) in claimed.filter(|c| c.token == token).map_or(&[][..], |c| &c.groups[..]) {
            if let Some(group) = self.groups.get_mut(name) {
                group.usage.reconcile(*counts, claimed.map_or(0, |c| c.at), reserved, used);
            }
        }
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
        _view: u64,
    ) -> Result<GrantAnswer, StoreError> {
        let token = match self.decide(permit, last, now, claim.map(|c| (c, now))) {
            Ok(token) => token,
            Err(refused) => return Ok(refused),
        };
        if let Some(claim) = claim {
            self.count(permit, claim, token, now);
        }
        MemoryFencing::take(self.state(permit), token, ttl, now);
        Ok(GrantAnswer::Granted(token))
    }

    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let claimed = self.claimed(permit).cloned();
        self.settle(permit, context, token, claimed.as_ref(), reserved, used);
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

    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, now: u64) -> Result<u32, StoreError> {
        Ok(self.held(kind, value, first, permits, now))
    }
}
