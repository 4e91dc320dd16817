//! Why an acquire found nothing, and the `fail_open` fallback. Both scan the
//! resources: they run only on the refusal path, never on a grant.

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::cell::Phase;
use crate::id::Context;
use crate::outcome::FailureKind;
use crate::pool::Pool;
use crate::selector::Selector;

/// An acquire's refusal, resource by resource: each registered resource is
/// counted once, under the first of blocked, rate limited, cooling, leased
/// that holds it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Refusal {
    /// Resources registered; 0 means there was nothing to choose from.
    pub registered: u32,
    /// Blocked everywhere or in this context (`auth_failed` included).
    pub blocked: u32,
    /// Paused for a provider's wait (`rate_limited` here, `quota_exhausted`
    /// anywhere), or spacing its grants here by the rate its limits taught
    /// it (see `crate::pace`).
    pub rate_limited: u32,
    /// Cooling in this context, or cooled and waiting for its one trial or probe.
    pub cooling: u32,
    /// Every permit held (here or, as the authority said, elsewhere).
    pub leased: u32,
    /// Over a usage limit until its window frees up, or retired by its limits.
    pub limited: u32,
    /// Nanoseconds until the first of them may free up, when any end is known.
    pub retry_after: Option<u64>,
}

impl Refusal {
    fn soonest(&mut self, at: Option<u64>, now: u64) {
        if let Some(at) = at {
            let wait = at.saturating_sub(now);
            self.retry_after = Some(self.retry_after.map_or(wait, |r| r.min(wait)));
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.registered == 0 {
            return f.write_str("none registered");
        }
        let counts = [
            (self.blocked, "blocked"),
            (self.rate_limited, "rate limited"),
            (self.cooling, "cooling"),
            (self.leased, "leased"),
            (self.limited, "over a usage limit"),
        ];
        let mut first = true;
        for (n, what) in counts.into_iter().filter(|(n, _)| *n > 0) {
            if !first {
                f.write_str(", ")?;
            }
            write!(f, "{n} {what}")?;
            first = false;
        }
        if let Some(ns) = self.retry_after {
            write!(f, "; retry after {} ms", ns.div_ceil(1_000_000))?;
        }
        Ok(())
    }
}

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
        if let Some(until) = pause {
            return Standing::RateLimited(until);
        }
        if r.retired.is_some() {
            return Standing::Limited(None);
        }
        if let Some(until) = r.limited {
            return Standing::Limited(Some(until));
        }
        if let Err(at) = r.usage.admits(&r.limits, cost, self.now) {
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
