//! Usage limits on the pool: counting grants, keeping a resource over a
//! limit out of selection until its window frees it (a timer, so acquire
//! never scans), retiring it when its uses or age run out, and reconciling
//! a grant's reserved tokens to what it used. A resource's `per_context`
//! limits are counted the same way by its cell in each context, and keep
//! only that cell out of selection.

use crate::authority::Claim;
use crate::error::Result;
use crate::event::EventKind;
use crate::id::Context;
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
    /// What a grant of `slot` for `context` reserving `cost` tokens claims
    /// of its limits at the authority; none when it has no limits to count.
    pub(super) fn claim(&self, slot: u32, context: &Context, cost: u64) -> Option<Claim> {
        let limits = self.registry.res(slot).limits;
        let context = limits.per_context.counted().then(|| context.clone());
        let groups = self.group_claims(slot);
        (limits.counted() || context.is_some() || !groups.is_empty()).then_some(Claim {
            limits: limits.paced(),
            cost,
            context,
            groups,
        })
    }

    /// The pool's own judgement of a grant of `cost` on `slot` for
    /// `context` now, by the resource's limits, its context's and its
    /// groups' (see `check_groups`). A refusal that holds for any cost keeps the resource
    /// (or, by a `per_context` limit, its cell in `context`) out of
    /// selection until it may be granted again (`Err(Refused::Gated)`); one
    /// that only a cost this large meets is for this acquire alone
    /// (`Err(Refused::Cost)`).
    pub(super) fn check_limits(
        &mut self,
        slot: u32,
        context: &Context,
        cost: u64,
    ) -> core::result::Result<(), Refused> {
        let now = self.now;
        let r = self.registry.res_mut(slot);
        if r.limits.counted() {
            r.usage.expire(now);
            if r.usage.admits(&r.limits, cost, now).is_err() {
                return match r.usage.gate(&r.limits, now) {
                    None => Err(Refused::Cost),
                    Some(at) => {
                        self.limit(slot, at);
                        Err(Refused::Gated)
                    }
                };
            }
        }
        self.check_groups(slot, cost)?;
        let r = self.registry.res(slot);
        let per = r.limits.per_context;
        if !per.counted() {
            return Ok(());
        }
        let cell = self.contexts.id(context).filter(|&c| self.cells.contains_key(&(slot, c)));
        let Some(ctx) = cell else {
            // No grant for this context was counted yet; the cell that will
            // count them must fit the cell budget.
            return if self.cells_full() { Err(Refused::Cost) } else { Ok(()) };
        };
        let limits = per.as_limits();
        let cc = self.cells.get_mut(&(slot, ctx)).expect("checked above");
        cc.usage.expire(now);
        if cc.usage.admits(&limits, cost, now).is_ok() {
            return Ok(());
        }
        match cc.usage.gate(&limits, now) {
            Some(Some(at)) => {
                self.limit_cell(slot, ctx, at);
                Err(Refused::Gated)
            }
            None | Some(None) => Err(Refused::Cost),
        }
    }

    /// The authority refused a grant of `slot` for its limits: for `wait` ns,
    /// or (`None`) for good.
    pub(super) fn limited_by_authority(&mut self, slot: u32, wait: Option<u64>) {
        let at = wait.map(|w| self.now.saturating_add(w).max(self.now + 1));
        self.limit(slot, at);
    }

    /// The authority refused a grant of `slot` for `context` by its
    /// `per_context` limits for `wait` ns. Returns the context's number,
    /// which its cell gives it if it had none, unless the cell budget is spent.
    pub(super) fn context_limited_by_authority(&mut self, slot: u32, context: &Context, wait: u64) -> Option<u32> {
        let ctx = self.cell_for(slot, context).ok()?;
        let at = self.now.saturating_add(wait).max(self.now + 1);
        self.limit_cell(slot, ctx, at);
        Some(ctx)
    }

    /// Keeps `slot` out of selection in context `ctx` until `at`.
    fn limit_cell(&mut self, slot: u32, ctx: u32, at: u64) {
        let cc = self.cells.get_mut(&(slot, ctx)).expect("a cell of the resource");
        if cc.limited.is_some_and(|l| l >= at) {
            return;
        }
        cc.limited = Some(at);
        self.timers.arm(at, Timer::ContextLimit(slot, ctx));
        self.reindex(slot);
    }

    /// Recomputes whether `slot` is over a `per_context` limit in `ctx`
    /// now, or waits for its learned pace.
    pub(super) fn regate_cell(&mut self, slot: u32, ctx: u32) {
        let now = self.now;
        let limits = self.registry.res(slot).limits.per_context.as_limits();
        let cc = self.cells.get_mut(&(slot, ctx)).expect("a cell of the resource");
        cc.usage.expire(now);
        let over = match cc.usage.gate(&limits, now) {
            Some(Some(at)) => Some(at),
            None | Some(None) => None,
        };
        match over.max(cc.paced.filter(|&at| at > now)) {
            Some(at) => self.limit_cell(slot, ctx, at),
            None => {
                cc.limited = None;
                self.reindex(slot);
            }
        }
    }

    /// Spaces the next grant of `slot` in context `ctx` by the rate its
    /// cell there learned, if it learned one.
    pub(super) fn pace_cell(&mut self, slot: u32, ctx: u32) {
        let now = self.now;
        let Some(cc) = self.cells.get_mut(&(slot, ctx)) else { return };
        let Some(interval) = cc.cell.pace.interval(now) else { return };
        let at = now.saturating_add(interval);
        cc.paced = Some(at);
        self.limit_cell(slot, ctx, at);
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

    /// Counts a grant of `cost` tokens on `slot` for `context`, then shuts
    /// it out of selection (resource-wide, or in `context` alone) if its
    /// limits admit no further grant for now. Without limits to count only
    /// its uses grow.
    pub(super) fn count_grant(&mut self, slot: u32, context: &Context, cost: u64) {
        let now = self.now;
        self.count_group_grant(slot, cost);
        let r = self.registry.res_mut(slot);
        let per_context = r.limits.per_context.counted();
        if r.limits.counted() {
            let limits = r.limits;
            r.usage.record(&limits, cost, now);
            self.regate(slot);
        } else {
            r.usage.uses += 1;
        }
        if per_context {
            // `check_limits` made sure the cell fits the budget.
            if let Ok(ctx) = self.cell_for(slot, context) {
                let limits = self.registry.res(slot).limits.per_context.as_limits();
                self.cells.get_mut(&(slot, ctx)).expect("made above").usage.record(&limits, cost, now);
                self.regate_cell(slot, ctx);
            }
        }
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
        let context = e.lease.context.clone();
        if let Some(at) = counted_at.filter(|_| reserved != used) {
            self.reconcile_groups(slot, at, reserved, used);
        }
        let groups_weigh = self.groups_weigh(slot);
        let r = self.registry.res_mut(slot);
        let limits = r.limits;
        if !(limits.weighed() || groups_weigh) || reserved == used {
            return Ok(());
        }
        if let (Some(at), true) = (counted_at, limits.tpm.is_some() || limits.tpd.is_some()) {
            r.usage.reconcile(at, reserved, used);
        }
        let resource = r.id.clone();
        let cell = self.contexts.id(&context).filter(|&c| self.cells.contains_key(&(slot, c)));
        if let (Some(at), Some(ctx), true) = (counted_at, cell, limits.per_context.tpm.is_some()) {
            self.cells.get_mut(&(slot, ctx)).expect("checked above").usage.reconcile(at, reserved, used);
        }
        let scoped = limits.per_context.counted().then_some(&context);
        self.authority.reconcile(&resource, scoped, permit, token, reserved, used);
        self.leases.live.get_mut(&id).expect("found live").cost = used;
        self.regate(slot);
        if let Some(ctx) = cell {
            self.regate_cell(slot, ctx);
        }
        Ok(())
    }
}
