//! Why an acquire found nothing, and the `fail_open` fallback. Both scan the
//! resources: they run only on the refusal path, never on a grant.

use crate::cell::Phase;
use crate::id::Context;
use crate::outcome::FailureKind;
use crate::refusal::Refusal;
use crate::selector::Selector;

use super::Pool;

/// Where one resource stands for an acquire in one context.
enum Standing {
    Blocked(Option<u64>),
    RateLimited(u64),
    Cooling(Option<u64>),
    Leased(Option<u64>),
    Limited(Option<u64>),
}

impl Pool {
    /// The refusal of an acquire in `context` that found nothing, counting
    /// the resources `selector` admits. A permit
    /// the authority refused, or another acquire holds in flight, is free
    /// here and counts as leased.
    pub(crate) fn refusal(&self, context: &Context, selector: &Selector) -> Refusal {
        let ctx = self.contexts.id(context);
        let mut refusal = Refusal::default();
        for (slot, r) in self.registry.iter() {
            if selector.admits(&r.id, &r.labels, &r.limits) {
                self.count(&mut refusal, slot, ctx, selector.cost());
            }
        }
        refusal
    }

    /// The refusal of a probe of one resource.
    pub(crate) fn refusal_of(&self, slot: u32, ctx: Option<u32>) -> Refusal {
        let mut refusal = Refusal::default();
        self.count(&mut refusal, slot, ctx, 1);
        refusal
    }

    fn count(&self, refusal: &mut Refusal, slot: u32, ctx: Option<u32>, cost: u64) {
        refusal.registered += 1;
        let now = self.now;
        match self.standing(slot, ctx, cost) {
            Standing::Blocked(until) => {
                refusal.blocked += 1;
                refusal.soonest(until, now);
            }
            Standing::RateLimited(until) => {
                refusal.rate_limited += 1;
                refusal.soonest(Some(until), now);
            }
            Standing::Cooling(until) => {
                refusal.cooling += 1;
                refusal.soonest(until, now);
            }
            Standing::Leased(until) => {
                refusal.leased += 1;
                refusal.soonest(until, now);
            }
            Standing::Limited(until) => {
                refusal.limited += 1;
                refusal.soonest(until, now);
            }
        }
    }

    /// Where `slot` stands for a grant of `cost` tokens.
    fn standing(&self, slot: u32, ctx: Option<u32>, cost: u64) -> Standing {
        let r = self.registry.res(slot);
        let cc = ctx.and_then(|c| self.cells.get(&(slot, c)));
        if let Some(block) = r.block.as_ref().or(cc.and_then(|cc| cc.block.as_ref())) {
            return Standing::Blocked(block.until);
        }
        let pause = [r.pause, cc.and_then(|cc| cc.cell.pause)].into_iter().flatten().map(|p| p.until).max();
        if let Some(until) = pause.max(self.group_pause(slot)) {
            return Standing::RateLimited(until);
        }
        if r.retired.is_some() {
            return Standing::Limited(None);
        }
        if let Some(until) = r.limited.max(self.group_gate(slot)) {
            return Standing::Limited(Some(until));
        }
        if let Err(at) = r.usage.admits(&r.limits, cost, self.now) {
            return Standing::Limited(at);
        }
        if let Err(at) = self.groups_admit(slot, cost) {
            return Standing::Limited(at);
        }
        if let Some(cc) = cc.filter(|_| r.limits.per_context.counted()) {
            if let Some(until) = cc.limited {
                return Standing::Limited(Some(until));
            }
            if let Err(at) = cc.usage.admits(&r.limits.per_context.as_limits(), cost, self.now) {
                return Standing::Limited(at);
            }
        }
        if let Some(at) = cc.and_then(|cc| cc.paced).filter(|&at| at > self.now) {
            return Standing::RateLimited(at);
        }
        if let Some(cc) = cc {
            if let Phase::Cooling { until, cause } = cc.cell.phase {
                if self.now < until {
                    return Standing::Cooling(Some(until));
                }
                if let Some(trial) = cc.trial.and_then(|id| self.leases.live.get(&id)) {
                    return Standing::Cooling(Some(trial.lease.expires_at));
                }
                if !self.policy.recovery.half_open(cause) {
                    // Waiting for a probe: when one succeeds is not known here.
                    return Standing::Cooling(None);
                }
            }
        }
        let expiry =
            r.permits.held_from(0).filter_map(|id| self.leases.live.get(&id)).map(|e| e.lease.expires_at).min();
        Standing::Leased(expiry)
    }

    /// An early trial for an acquire that found nothing selectable: a
    /// resource with a free permit held back in `ctx` only by a cooldown for
    /// a transient cause (a dropped connection, a failed handshake, a
    /// timeout, a slow answer), with no trial in flight and none early
    /// within the cause's base cooldown, where a trial is the way back; the
    /// one whose cooldown ends soonest, ties to the lowest slot. A transient
    /// failure is weak evidence (a site's overload fails every exit at
    /// once), so a request that would be refused tries the resource rather
    /// than leave it idle; a failed trial lengthens the cooldown, and the
    /// base between early trials bounds what a dead resource costs.
    pub(crate) fn early_trial(&self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
        let ctx = ctx?;
        let mut best: Option<(u64, u32)> = None;
        for (slot, r) in self.registry.iter() {
            if !r.permits.any_free() || !selector.admits(&r.id, &r.labels, &r.limits) {
                continue;
            }
            let Some(cc) = self.cells.get(&(slot, ctx)) else { continue };
            let Phase::Cooling { until, cause } = cc.cell.phase else { continue };
            let transient = cause.is_strike() && cause != FailureKind::Blocked;
            let rested = cc.early.is_none_or(|at| self.now >= at.saturating_add(self.policy.rule(cause).base));
            if !transient || !rested || !self.policy.recovery.half_open(cause) || cc.trial.is_some() {
                continue;
            }
            if !matches!(self.standing(slot, Some(ctx), selector.cost()), Standing::Cooling(Some(_))) {
                continue;
            }
            if best.is_none_or(|(at, _)| until < at) {
                best = Some((until, slot));
            }
        }
        best.map(|(_, slot)| slot)
    }

    /// The `fail_open` candidate: a resource with a free permit that only a
    /// cooldown or pause holds back (never a block), the one whose wait ends
    /// soonest; ties go to the lowest slot.
    pub(crate) fn least_bad(&self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
        let mut best: Option<(u64, u32)> = None;
        for (slot, r) in self.registry.iter() {
            if !r.permits.any_free() || !selector.admits(&r.id, &r.labels, &r.limits) {
                continue;
            }
            let ready = match self.standing(slot, ctx, selector.cost()) {
                // Limits are the provider's: failing open never goes past them.
                Standing::Blocked(_) | Standing::Leased(_) | Standing::Limited(_) => continue,
                Standing::RateLimited(until) => until,
                Standing::Cooling(until) => until.unwrap_or(self.now),
            };
            if best.is_none_or(|(at, _)| ready < at) {
                best = Some((ready, slot));
            }
        }
        best.map(|(_, slot)| slot)
    }
}
