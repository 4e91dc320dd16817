//! Why an acquire found nothing, and the `fail_open` fallback. Both scan the
//! resources: they run only on the refusal path, never on a grant.

use crate::cell::Phase;
use crate::id::Context;
use crate::outcome::FailureKind;
use crate::policy::Recovery;
use crate::refusal::Refusal;
use crate::selector::Selector;

use super::registry::ContextCell;
use super::Pool;

/// A ban's early trial comes after this share of it (see [`Pool::early_due`]):
/// a first 300 s ban is tried again after 10 s, when every other resource
/// is held back too. The trial costs one request that would otherwise be
/// refused. Sites ban for as little as seconds (a rate-limiting rule's
/// block lasts as long as its owner set it), and a ban that holds costs a
/// logarithmic number of trials however the first is placed (the spacing
/// doubles with the ban: 10, 20, 40 s…, about nine an hour), so the first
/// trial comes early: a short ban is found within a thirtieth of the first
/// cooldown.
const BAN_TRIAL_SHARE: u64 = 30;

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
        let mut refusal = Refusal { settled: true, ..Refusal::default() };
        for (slot, r) in self.registry.iter() {
            if selector.admits(&r.id, &r.labels, &r.limits) {
                self.count(&mut refusal, slot, (ctx, Some(context)), selector.cost());
            }
        }
        // With nothing registered that the selector admits, nothing frees
        // one: settled, with no end (a typo'd kind is refused at once
        // instead of waiting for a registration that never comes).
        refusal
    }

    /// The refusal of a probe of one resource.
    pub(crate) fn refusal_of(&self, slot: u32, ctx: Option<u32>) -> Refusal {
        let mut refusal = Refusal { settled: true, ..Refusal::default() };
        self.count(&mut refusal, slot, (ctx, None), 1);
        refusal
    }

    /// Counts `slot` in `refusal` for the context `ctx` (its interned
    /// number, if any, and its name when known).
    fn count(&self, refusal: &mut Refusal, slot: u32, (ctx, context): (Option<u32>, Option<&Context>), cost: u64) {
        refusal.registered += 1;
        let now = self.now;
        if self.reported_in_flight(slot, ctx, context) {
            refusal.settled = false;
        }
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
                let early = self.next_early_trial(slot, ctx);
                if until.is_none() || early == Some(None) {
                    refusal.settled = false;
                }
                match (until, early) {
                    (Some(until), Some(Some(early))) if self.banned_in(slot, ctx) => {
                        refusal.soonest(Some(until), now);
                        refusal.chance(early, now);
                    }
                    (Some(until), Some(Some(early))) => refusal.soonest(Some(until.min(early)), now),
                    (until, _) => refusal.soonest(until, now),
                }
            }
            Standing::Leased(until) => {
                refusal.leased += 1;
                refusal.settled = false;
                refusal.soonest(until, now);
            }
            Standing::Limited(until) => {
                refusal.limited += 1;
                if self.reconcilable(slot) {
                    refusal.settled = false;
                }
                refusal.soonest(until, now);
            }
        }
    }

    /// Whether a lease of `slot` in this context is live: its report may
    /// change where the resource stands here at any moment. A lease
    /// granted before its context was interned is known by name only.
    fn reported_in_flight(&self, slot: u32, ctx: Option<u32>, context: Option<&Context>) -> bool {
        let r = self.registry.res(slot);
        r.permits.held_from(0).filter_map(|id| self.leases.live.get(&id)).any(|e| match (e.ctx, context) {
            (Some(c), _) if ctx.is_some() => Some(c) == ctx,
            (_, Some(name)) => e.lease.context == *name,
            _ => false,
        })
    }

    /// Whether usage that frees a limit's tokens may come in at any moment:
    /// a live lease of `slot` (in any context) settles what it used, and a
    /// group's limits count its other members' leases too.
    fn reconcilable(&self, slot: u32) -> bool {
        let r = self.registry.res(slot);
        !r.groups.is_empty() || r.permits.held_from(0).next().is_some()
    }

    /// For a cooling cell an early trial may take back before its cooldown
    /// ends ([`Pool::early_due`]): `Some(Some(at))` when its next early
    /// trial is due later, `Some(None)` when one is due now; `None` for any
    /// other cell.
    fn next_early_trial(&self, slot: u32, ctx: Option<u32>) -> Option<Option<u64>> {
        let due = self.early_due(self.cells.get(&(slot, ctx?))?)?;
        Some(Some(due).filter(|&at| at > self.now))
    }

    /// Whether `slot` is cooling in `ctx` for a site's refusal (`blocked`),
    /// whose early trials mostly find the ban still on.
    fn banned_in(&self, slot: u32, ctx: Option<u32>) -> bool {
        ctx.and_then(|c| self.cells.get(&(slot, c)))
            .is_some_and(|cc| matches!(cc.cell.phase, Phase::Cooling { cause: FailureKind::Blocked, .. }))
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
    /// resource with a free permit held back in `ctx` only by a cooldown
    /// that an early trial may cut short ([`Pool::early_due`]), with no
    /// trial in flight and its early trial due; the one whose cooldown ends
    /// soonest, ties to the lowest slot. A request that would be refused
    /// tries the resource rather than leave it idle: the trial costs at
    /// most that request, a failed one lengthens the cooldown, and the
    /// spacing between early trials bounds what a dead or banned resource
    /// costs.
    pub(crate) fn early_trial(&self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
        let ctx = ctx?;
        let mut best: Option<(u64, u32)> = None;
        for (slot, r) in self.registry.iter() {
            if !r.permits.any_free() || !selector.admits(&r.id, &r.labels, &r.limits) {
                continue;
            }
            let Some(cc) = self.cells.get(&(slot, ctx)) else { continue };
            let Phase::Cooling { until, .. } = cc.cell.phase else { continue };
            if self.early_due(cc).is_none_or(|due| due > self.now) || cc.trial.is_some() {
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

    /// When a cell cooling in a context may next take an early trial, where
    /// a trial is the way back; `None` if it never does (a provider's
    /// pause, probe recovery). A transient cause (a dropped connection, a
    /// failed handshake, a timeout, a slow answer) is weak evidence (a
    /// site's overload fails every exit at once): one early trial at once,
    /// then one per the cause's base cooldown. A site's refusal (`blocked`)
    /// is strong evidence of a ban of unknown length: the first early trial
    /// comes after a thirtieth of the ban ([`BAN_TRIAL_SHARE`]), and each
    /// after a thirtieth of the ban it renewed, so the trials back off as the ban
    /// doubles. The classic rules keep no early trial across a ban.
    fn early_due(&self, cc: &ContextCell) -> Option<u64> {
        let Phase::Cooling { until, cause } = cc.cell.phase else { return None };
        if !cause.is_strike() || !self.policy.recovery.half_open(cause) {
            return None;
        }
        if cause != FailureKind::Blocked {
            return Some(cc.early.map_or(self.now, |at| at.saturating_add(self.policy.rule(cause).base)));
        }
        if self.policy.recovery == Recovery::Classic {
            return None;
        }
        // A running ban is restarted, never lengthened, by reports of the
        // same incident: its length is the cooldown of the cell's streak.
        let ban = self.policy.cooldown(cause, cc.cell.consecutive_failures.max(1));
        let began = until.saturating_sub(ban);
        Some(cc.early.map_or(began, |at| at.max(began)).saturating_add(ban / BAN_TRIAL_SHARE))
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
