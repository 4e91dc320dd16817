//! Usage limits on the pool: counting grants, keeping a resource over a
//! limit out of selection until its window frees it (a timer, so acquire
//! never scans), retiring it when its uses or age run out, and reconciling
//! a grant's reserved tokens to what it used.

use crate::authority::Claim;
use crate::error::Result;
use crate::event::EventKind;
use crate::limits::RetireReason;

use super::{Pool, Timer};

/// How a resource's limits refused a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// For any cost, until the resource's gate opens.
    Gated,
    /// For the cost asked only.
    Cost,
}

impl Pool {
    /// What a grant of `slot` reserving `cost` tokens claims of its limits
    /// at the authority; none when it has no limits to count.
    pub(super) fn claim(&self, slot: u32, cost: u64) -> Option<Claim> {
        let limits = self.registry.res(slot).limits;
        limits.counted().then_some(Claim { limits, cost })
    }

    /// The pool's own judgement of a grant of `cost` on `slot` now. A
    /// refusal that holds for any cost keeps the resource out of selection
    /// until it may be granted again (`Err(Refused::Gated)`); one that only
    /// a cost this large meets is for this acquire alone (`Err(Refused::Cost)`).
    pub(super) fn check_limits(&mut self, slot: u32, cost: u64) -> core::result::Result<(), Refused> {
        let now = self.now;
        let r = self.registry.res_mut(slot);
        if !r.limits.counted() {
            return Ok(());
        }
        r.usage.expire(now);
        if r.usage.admits(&r.limits, cost, now).is_ok() {
            return Ok(());
        }
        match r.usage.gate(&r.limits, now) {
            None => Err(Refused::Cost),
            Some(at) => {
                self.limit(slot, at);
                Err(Refused::Gated)
            }
        }
    }

    /// The authority refused a grant of `slot` for its limits: for `wait` ns,
    /// or (`None`) for good.
    pub(super) fn limited_by_authority(&mut self, slot: u32, wait: Option<u64>) {
        let at = wait.map(|w| self.now.saturating_add(w).max(self.now + 1));
        self.limit(slot, at);
    }

    /// Keeps `slot` out of selection until `at`; `None`: retired.
    fn limit(&mut self, slot: u32, at: Option<u64>) {
        let Some(at) = at else {
            self.retire(slot, RetireReason::MaxUses);
            return;
        };
        let r = self.registry.res_mut(slot);
        if r.limited.is_some_and(|l| l >= at) {
            return;
        }
        r.limited = Some(at);
        self.timers.arm(at, Timer::Limit(slot));
        self.reindex(slot);
    }

    /// Counts a grant of `cost` tokens on `slot`, then shuts it out of
    /// selection if its limits admit no further grant for now. Without
    /// limits to count only its uses grow.
    pub(super) fn count_grant(&mut self, slot: u32, cost: u64) {
        let now = self.now;
        let r = self.registry.res_mut(slot);
        if !r.limits.counted() {
            r.usage.uses += 1;
            return;
        }
        r.usage.record(cost, now);
        self.regate(slot);
    }

    /// Recomputes whether `slot` is over a limit now.
    pub(super) fn regate(&mut self, slot: u32) {
        let now = self.now;
        let r = self.registry.res_mut(slot);
        if r.retired.is_some() {
            return;
        }
        r.usage.expire(now);
        match r.usage.gate(&r.limits, now) {
            None => {
                r.limited = None;
                self.reindex(slot);
            }
            Some(at) => self.limit(slot, at),
        }
    }

    /// Arms the end of `slot`'s life under `limits.max_age`.
    pub(super) fn arm_max_age(&mut self, slot: u32) {
        let r = self.registry.res(slot);
        if let Some(age) = r.limits.max_age {
            self.timers.arm(r.born.saturating_add(age), Timer::Retire(slot));
        }
    }

    pub(super) fn retire(&mut self, slot: u32, reason: RetireReason) {
        let r = self.registry.res_mut(slot);
        if r.retired.is_some() {
            return;
        }
        r.retired = Some(reason);
        r.limited = None;
        let resource = r.id.clone();
        self.reindex(slot);
        self.emit(self.now, EventKind::Retired { resource, reason });
    }

    /// Counts `used` tokens for a live lease instead of the cost it
    /// reserved against its resource's `tpm`.
    pub fn reconcile(&mut self, id: u64, token: u64, used: u64, now: u64) -> Result<()> {
        self.advance(now);
        let e = self.leases.find(id, token)?;
        let (slot, permit, reserved, counted_at) = (e.slot, e.lease.permit, e.cost, e.counted_at);
        let r = self.registry.res_mut(slot);
        if r.limits.tpm.is_none() || reserved == used {
            return Ok(());
        }
        if let Some(at) = counted_at {
            r.usage.reconcile(at, reserved, used);
        }
        let resource = r.id.clone();
        self.authority.reconcile(&resource, permit, token, reserved, used);
        self.leases.live.get_mut(&id).expect("found live").cost = used;
        self.regate(slot);
        Ok(())
    }
}
