//! Quota groups on the pool: which resources share which limits, what the
//! members used together, and keeping every member out of selection while
//! its group is over a limit (a timer per group, so acquire never scans).
//!
//! A group exists while it has members or limits. Its usage counts every
//! member's grants in one minute and one day window; its `leased` counts
//! the members' live leases, for `concurrency`. Over a window limit the
//! group is gated until its window frees; at its concurrency, until a
//! member's lease ends (the pool sees its own leases end; leases of other
//! processes are judged by the authority, which answers with a wait).

use alloc::vec::Vec;
use hashbrown::HashMap;

use crate::error::{Error, Result};
use crate::quota::{GroupClaim, GroupLimits, GroupName};
use crate::usage::{Usage, Window};

use super::usage::Refused;
use super::{Pool, Timer};

/// Most groups with limits one pool keeps: a group with neither members
/// nor limits is dropped, so this bounds what a client can make the pool
/// remember by setting limits.
pub const MAX_LIMITED_GROUPS: usize = 10_000;

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub name: GroupName,
    pub limits: GroupLimits,
    pub usage: Usage,
    /// Member slots, in the order they joined.
    pub members: Vec<u32>,
    /// Live leases of the members.
    pub leased: u32,
    /// Over a limit: no member is selectable before this.
    pub limited: Option<u64>,
    /// A `quota_exhausted` on a member paused the group (`shared_quota`) until then.
    pub paused: Option<u64>,
}

/// The groups by slot, and by name.
#[derive(Debug, Default)]
pub(crate) struct QuotaGroups {
    slots: Vec<Option<Group>>,
    free: Vec<u32>,
    by_name: HashMap<GroupName, u32>,
}

impl QuotaGroups {
    pub fn find(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn get(&self, g: u32) -> Option<&Group> {
        self.slots.get(g as usize).and_then(Option::as_ref)
    }

    pub fn group(&self, g: u32) -> &Group {
        self.slots[g as usize].as_ref().expect("group in use")
    }

    pub fn group_mut(&mut self, g: u32) -> &mut Group {
        self.slots[g as usize].as_mut().expect("group in use")
    }

    /// The groups with their slots, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Group)> {
        self.slots.iter().enumerate().filter_map(|(g, s)| s.as_ref().map(|s| (g as u32, s)))
    }

    fn limited_count(&self) -> usize {
        self.iter().filter(|(_, g)| g.limits.limiting()).count()
    }

    /// The slot of `name`, made (without members or limits) if new.
    pub fn intern(&mut self, name: &GroupName) -> u32 {
        if let Some(g) = self.find(name.as_str()) {
            return g;
        }
        let group = Group {
            name: name.clone(),
            limits: GroupLimits::default(),
            usage: Usage::default(),
            members: Vec::new(),
            leased: 0,
            limited: None,
            paused: None,
        };
        let g = match self.free.pop() {
            Some(g) => {
                self.slots[g as usize] = Some(group);
                g
            }
            None => {
                self.slots.push(Some(group));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_name.insert(name.clone(), g);
        g
    }

    /// Drops `g` if it has neither members nor limits.
    pub fn drop_if_idle(&mut self, g: u32) {
        let group = self.group(g);
        if group.members.is_empty() && !group.limits.limiting() {
            let name = group.name.clone();
            self.slots[g as usize] = None;
            self.by_name.remove(&name);
            self.free.push(g);
        }
    }

    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        let groups: usize = self
            .iter()
            .map(|(_, g)| g.name.heap_bytes() + g.usage.heap_bytes() + vec::<u32>(g.members.capacity()))
            .sum();
        vec::<Option<Group>>(self.slots.capacity())
            + vec::<u32>(self.free.capacity())
            + table::<(GroupName, u32)>(self.by_name.capacity())
            + groups
    }
}

/// A group as a view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub name: GroupName,
    pub limits: GroupLimits,
    /// Registered members.
    pub members: u32,
    /// Live leases of its members in this pool.
    pub leased: u32,
    /// What the minute and the day window hold now.
    pub window: Window,
    pub day: Window,
    /// No member is selectable before this (a limit, or a shared quota's pause).
    pub limited_until: Option<u64>,
}

impl Pool {
    /// Sets the limits `name`'s members share; the default limits remove
    /// them (the group stays while it has members). Returns whether
    /// anything changed.
    pub fn set_group(&mut self, name: GroupName, limits: GroupLimits, now: u64) -> Result<bool> {
        limits.validate()?;
        self.advance(now);
        let existing = self.quota.find(name.as_str());
        if existing.is_some_and(|g| self.quota.group(g).limits == limits) {
            return Ok(false);
        }
        if existing.is_none() && !limits.limiting() {
            return Ok(false);
        }
        let newly_limiting = existing.is_none_or(|g| !self.quota.group(g).limits.limiting());
        if limits.limiting() && newly_limiting && self.quota.limited_count() >= MAX_LIMITED_GROUPS {
            return Err(Error::BudgetExhausted { budget: "max_groups", limit: MAX_LIMITED_GROUPS as u64 });
        }
        let g = self.quota.intern(&name);
        let group = self.quota.group_mut(g);
        group.limits = limits;
        if !limits.shared_quota && group.paused.take().is_some() {
            self.reindex_members(g);
        }
        // New limits judge the grants already counted afresh.
        self.regate_group(g);
        self.quota.drop_if_idle(g);
        Ok(true)
    }

    /// Every group, by name.
    pub fn groups(&self, now: u64) -> Vec<GroupView> {
        let mut views: Vec<GroupView> = self.quota.iter().map(|(_, g)| self.group_view(g, now)).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        views
    }

    fn group_view(&self, g: &Group, now: u64) -> GroupView {
        let now = now.max(self.now);
        GroupView {
            name: g.name.clone(),
            limits: g.limits,
            members: g.members.len() as u32,
            leased: g.leased,
            window: g.usage.minute.window_at(now),
            day: g.usage.day.window_at(now),
            limited_until: g.limited.max(g.paused).filter(|&at| at > now),
        }
    }

    /// The names of the groups `slot` belongs to, in the order registered.
    pub(crate) fn group_names(&self, slot: u32) -> Vec<GroupName> {
        self.registry.res(slot).groups.iter().map(|&g| self.quota.group(g).name.clone()).collect()
    }

    /// Makes `slot` (which belongs to none) a member of each of `names`;
    /// its live leases count in them from now on.
    pub(crate) fn join_groups(&mut self, slot: u32, names: &[GroupName]) {
        let held = self.registry.res(slot).permits.held_from(0).count() as u32;
        let mut joined = Vec::with_capacity(names.len());
        for name in names {
            let g = self.quota.intern(name);
            let group = self.quota.group_mut(g);
            group.members.push(slot);
            group.leased += held;
            joined.push(g);
        }
        self.registry.res_mut(slot).groups = joined;
        if held > 0 {
            for &g in &self.registry.res(slot).groups.clone() {
                self.regate_group(g);
            }
        }
    }

    /// Takes `slot` out of every group it belongs to, with its live leases
    /// (a logged regroup moves a resource this pool holds only when the
    /// writer found it free at the authority: see `apply_register`).
    pub(super) fn leave_groups(&mut self, slot: u32) {
        let held = self.registry.res(slot).permits.held_from(0).count() as u32;
        for g in core::mem::take(&mut self.registry.res_mut(slot).groups) {
            let group = self.quota.group_mut(g);
            group.members.retain(|&m| m != slot);
            group.leased = group.leased.saturating_sub(held);
            if held > 0 && group.limits.concurrency.is_some() && group.limited.is_some() {
                self.regate_group(g);
            }
            self.quota.drop_if_idle(g);
        }
    }

    /// Whether a group of `slot` counts its grants.
    pub(super) fn groups_count(&self, slot: u32) -> bool {
        self.registry.res(slot).groups.iter().any(|&g| self.quota.group(g).limits.counted())
    }

    /// Whether a group of `slot` counts its grants' tokens.
    pub(super) fn groups_weigh(&self, slot: u32) -> bool {
        let weighs = |l: &GroupLimits| l.tpm.is_some() || l.tpd.is_some();
        self.registry.res(slot).groups.iter().any(|&g| weighs(&self.quota.group(g).limits))
    }

    /// Until when a group of `slot` keeps it out of selection, if one does.
    #[inline]
    pub(super) fn group_gate(&self, slot: u32) -> Option<u64> {
        let r = self.registry.res(slot);
        r.groups.iter().map(|&g| self.quota.group(g)).map(|g| g.limited.max(g.paused)).max().flatten()
    }

    /// Whether the windows of `slot`'s groups admit a grant of `cost` now,
    /// as `Usage::admits` answers.
    pub(super) fn groups_admit(&self, slot: u32, cost: u64) -> core::result::Result<(), Option<u64>> {
        let groups = self.registry.res(slot).groups.iter().map(|&g| self.quota.group(g));
        for g in groups.filter(|g| g.limits.counted()) {
            g.usage.allows(&g.limits.as_limits(), cost, self.now)?;
        }
        Ok(())
    }

    /// Until when a shared quota's pause keeps `slot` out, if one does.
    pub(super) fn group_pause(&self, slot: u32) -> Option<u64> {
        self.registry.res(slot).groups.iter().filter_map(|&g| self.quota.group(g).paused).max()
    }

    /// The pool's own judgement of a grant of `cost` on `slot` by its
    /// groups' limits now, as `check_limits` judges the resource's.
    pub(super) fn check_groups(&mut self, slot: u32, cost: u64) -> core::result::Result<(), Refused> {
        let now = self.now;
        for i in 0..self.registry.res(slot).groups.len() {
            let g = self.registry.res(slot).groups[i];
            let group = self.quota.group_mut(g);
            if group.limits.concurrency.is_some_and(|c| group.leased >= c) {
                self.regate_group(g);
                return Err(Refused::Gated);
            }
            if !group.limits.counted() {
                continue;
            }
            let limits = group.limits.as_limits();
            group.usage.expire(now);
            if group.usage.allows(&limits, cost, now).is_err() {
                return match group.usage.allows(&limits, 1, now).err() {
                    Some(Some(_)) => {
                        self.regate_group(g);
                        Err(Refused::Gated)
                    }
                    _ => Err(Refused::Cost),
                };
            }
        }
        Ok(())
    }

    /// What a grant on `slot` claims of its groups at the authority: each
    /// group that counts grants or leases, in the resource's order.
    pub(super) fn group_claims(&self, slot: u32) -> Vec<GroupClaim> {
        let r = self.registry.res(slot);
        let limiting = r.groups.iter().map(|&g| self.quota.group(g));
        let limiting = limiting.filter(|g| g.limits.counted() || g.limits.concurrency.is_some());
        limiting
            .map(|g| GroupClaim {
                name: g.name.clone(),
                limits: g.limits.as_limits(),
                concurrency: g.limits.concurrency,
            })
            .collect()
    }

    /// Counts a grant of `cost` on `slot` in each of its groups, and gates
    /// a group its limits now admit no further grant of.
    pub(super) fn count_group_grant(&mut self, slot: u32, cost: u64) {
        let now = self.now;
        for i in 0..self.registry.res(slot).groups.len() {
            let g = self.registry.res(slot).groups[i];
            let group = self.quota.group_mut(g);
            group.leased += 1;
            if group.limits.counted() {
                let limits = group.limits.as_limits();
                group.usage.record(&limits, cost, now);
            }
            if group.limits.counted() || group.limits.concurrency.is_some() {
                self.regate_group(g);
            }
        }
    }

    /// A lease of `slot` ended: its groups have one live lease fewer, and a
    /// group gated at its concurrency opens.
    pub(super) fn group_lease_ended(&mut self, slot: u32) {
        for i in 0..self.registry.res(slot).groups.len() {
            let g = self.registry.res(slot).groups[i];
            let group = self.quota.group_mut(g);
            group.leased = group.leased.saturating_sub(1);
            if group.limits.concurrency.is_some() && group.limited.is_some() {
                self.regate_group(g);
            }
        }
    }

    /// The grant on `slot` made at `at` used `used` tokens of each group's
    /// windows, not the `reserved` ones.
    pub(super) fn reconcile_groups(&mut self, slot: u32, at: u64, reserved: u64, used: u64) {
        for i in 0..self.registry.res(slot).groups.len() {
            let g = self.registry.res(slot).groups[i];
            let group = self.quota.group_mut(g);
            if group.limits.tpm.is_some() || group.limits.tpd.is_some() {
                group.usage.reconcile(at, reserved, used);
                self.regate_group(g);
            }
        }
    }

    /// The authority refused a grant of `slot` by the limits of the
    /// `index`th group it claimed, for `wait` ns.
    pub(super) fn group_limited_by_authority(&mut self, slot: u32, index: u32, wait: u64) {
        let claimed = self.group_claims(slot);
        let Some(name) = claimed.get(index as usize).map(|c| c.name.clone()) else { return };
        let Some(g) = self.quota.find(name.as_str()) else { return };
        let at = self.now.saturating_add(wait).max(self.now + 1);
        self.gate_group(g, at);
    }

    /// Lets each group held out at its concurrency by the authority's
    /// answer be asked again, as its own count at `now` allows: another
    /// process may have released a slot since (see `Journal::sync`).
    pub(crate) fn reopen_concurrency_gates(&mut self, now: u64) {
        self.advance(now);
        let gated: Vec<u32> = self
            .quota
            .iter()
            .filter(|(_, g)| g.limits.concurrency.is_some() && g.limited.is_some())
            .map(|(g, _)| g)
            .collect();
        for g in gated {
            self.regate_group(g);
        }
    }

    /// Recomputes whether group `g` is over a limit now, and gates or
    /// frees its members: the gate becomes exactly what the pool's own
    /// count asks (an authority's longer wait is asked again at the next
    /// grant).
    pub(super) fn regate_group(&mut self, g: u32) {
        let now = self.now;
        let group = self.quota.group_mut(g);
        let limits = group.limits.as_limits();
        group.usage.expire(now);
        let mut over = match group.usage.allows(&limits, 1, now) {
            Err(Some(at)) if group.limits.counted() => Some(at),
            _ => None,
        };
        if group.limits.concurrency.is_some_and(|c| group.leased >= c) {
            // `leased` counts this pool's live member leases: at least one expires.
            let soonest = self.soonest_member_expiry(g).unwrap_or(now);
            over = over.max(Some(soonest.max(now + 1)));
        }
        let group = self.quota.group_mut(g);
        if group.limited == over {
            return;
        }
        group.limited = over;
        if let Some(at) = over {
            self.timers.arm(at, Timer::Group(g));
        }
        self.reindex_members(g);
    }

    /// When the first live lease of `g`'s members in this pool expires.
    fn soonest_member_expiry(&self, g: u32) -> Option<u64> {
        let group = self.quota.group(g);
        let leases = group.members.iter().flat_map(|&m| self.registry.res(m).permits.held_from(0));
        leases.filter_map(|id| self.leases.live.get(&id)).map(|e| e.lease.expires_at).min()
    }

    /// Keeps every member of `g` out of selection until `at`.
    fn gate_group(&mut self, g: u32, at: u64) {
        let group = self.quota.group_mut(g);
        if group.limited.is_some_and(|l| l >= at) {
            return;
        }
        group.limited = Some(at);
        self.timers.arm(at, Timer::Group(g));
        self.reindex_members(g);
    }

    fn reindex_members(&mut self, g: u32) {
        for i in 0..self.quota.group(g).members.len() {
            let slot = self.quota.group(g).members[i];
            self.reindex(slot);
        }
    }

    /// A `quota_exhausted` on `slot` until `until`: each of its groups that
    /// shares its quota pauses every member as long.
    pub(super) fn pause_groups(&mut self, slot: u32, until: u64) {
        for i in 0..self.registry.res(slot).groups.len() {
            let g = self.registry.res(slot).groups[i];
            let group = self.quota.group_mut(g);
            if !group.limits.shared_quota || group.paused.is_some_and(|p| p >= until) {
                continue;
            }
            group.paused = Some(until);
            self.timers.arm(until, Timer::GroupPause(g));
            self.reindex_members(g);
        }
    }

    /// Whether a group timer due at `at` is still the group's.
    pub(super) fn group_timer_live(&self, g: u32, at: u64, pause: bool) -> bool {
        self.quota.get(g).is_some_and(|group| if pause { group.paused } else { group.limited } == Some(at))
    }

    /// Group `g`'s gate (or, with `pause`, its pause) due at now ends.
    pub(super) fn group_timer(&mut self, g: u32, pause: bool) {
        if pause {
            self.quota.group_mut(g).paused = None;
            self.reindex_members(g);
        } else {
            self.regate_group(g);
        }
    }

    /// Rebuilds what each group counts of live leases, and arms the timers
    /// of gated and paused groups, after a restore.
    pub(crate) fn restore_groups(&mut self) {
        let slots: Vec<u32> = self.quota.iter().map(|(g, _)| g).collect();
        for g in slots {
            let members = self.quota.group(g).members.clone();
            let leased = members.iter().map(|&m| self.registry.res(m).permits.held_from(0).count() as u32).sum();
            let group = self.quota.group_mut(g);
            group.leased = leased;
            if let Some(at) = group.limited {
                self.timers.arm(at, Timer::Group(g));
            }
            if let Some(at) = group.paused {
                self.timers.arm(at, Timer::GroupPause(g));
            }
        }
    }
}
