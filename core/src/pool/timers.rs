//! Time: the timers due at an instant and what firing each one does.

use alloc::collections::BTreeSet;

use crate::cell::Phase;
use crate::event::EventKind;

use super::leases::End;
use super::Pool;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Lease(u64),
    Cooldown(u32, u32),
    Block(u32, Option<u32>),
    /// The end of a pause of a resource (`None`) or of one of its cells.
    Pause(u32, Option<u32>),
    /// A resource over a usage limit may be granted again.
    Limit(u32),
    /// A resource over a `per_context` limit in a context may be granted there again.
    ContextLimit(u32, u32),
    /// A resource's `max_age` runs out.
    Retire(u32),
    /// A quota group over a limit may be granted again.
    Group(u32),
    /// A quota group's shared pause ends.
    GroupPause(u32),
}

/// Every armed timer by due time. Lease timers are disarmed when their lease
/// ends or moves; others may go stale and are checked when they fire.
#[derive(Debug, Default)]
pub(crate) struct TimerTable(BTreeSet<(u64, Timer)>);

impl TimerTable {
    pub fn arm(&mut self, at: u64, timer: Timer) {
        self.0.insert((at, timer));
    }

    pub fn disarm(&mut self, at: u64, timer: Timer) {
        self.0.remove(&(at, timer));
    }

    /// The earliest timer due by `now`, taken out.
    fn pop_due(&mut self, now: u64) -> Option<(u64, Timer)> {
        match self.0.first() {
            Some(&(at, _)) if at <= now => self.0.pop_first(),
            _ => None,
        }
    }

    /// Heap bytes of the table (see `Pool::footprint`).
    pub fn heap_bytes(&self) -> usize {
        crate::footprint::btree::<(u64, Timer)>(self.0.len())
    }
}

impl Pool {
    /// Fires every timer due by `now`. Called at the start of every operation.
    pub fn advance(&mut self, now: u64) {
        let now = now.max(self.now);
        self.now = now;
        while let Some((at, timer)) = self.timers.pop_due(now) {
            self.fire(at, timer);
        }
    }

    /// Lease timers are removed when their lease ends or moves; others may go
    /// stale (replaced block, removed cell) and are recognised here when they fire.
    pub(super) fn timer_live(&self, at: u64, timer: Timer) -> bool {
        match timer {
            Timer::Lease(id) => self.leases.live.get(&id).is_some_and(|e| e.lease.expires_at == at),
            Timer::Cooldown(slot, ctx) => self
                .cells
                .get(&(slot, ctx))
                .is_some_and(|cc| matches!(cc.cell.phase, Phase::Cooling { until, .. } if until == at)),
            Timer::Block(slot, None) => matches!(
                self.registry.get(slot),
                Some(r) if r.block.as_ref().and_then(|b| b.until) == Some(at)
            ),
            Timer::Block(slot, Some(ctx)) => {
                self.cells.get(&(slot, ctx)).is_some_and(|cc| cc.block.as_ref().and_then(|b| b.until) == Some(at))
            }
            Timer::Pause(slot, None) => matches!(
                self.registry.get(slot),
                Some(r) if r.pause.map(|p| p.until) == Some(at)
            ),
            Timer::Pause(slot, Some(ctx)) => {
                self.cells.get(&(slot, ctx)).is_some_and(|cc| cc.cell.pause.map(|p| p.until) == Some(at))
            }
            Timer::Limit(slot) => self.registry.get(slot).is_some_and(|r| r.limited == Some(at)),
            Timer::ContextLimit(slot, ctx) => self.cells.get(&(slot, ctx)).is_some_and(|cc| cc.limited == Some(at)),
            Timer::Group(g) => self.group_timer_live(g, at, false),
            Timer::GroupPause(g) => self.group_timer_live(g, at, true),
            Timer::Retire(slot) => self.registry.get(slot).is_some_and(|r| {
                r.retired.is_none() && r.limits.max_age.is_some_and(|age| r.born.saturating_add(age) == at)
            }),
        }
    }

    pub(super) fn fire(&mut self, at: u64, timer: Timer) {
        if !self.timer_live(at, timer) {
            return;
        }
        match timer {
            Timer::Lease(id) => self.end_lease(id, End::Expired, at),
            Timer::Cooldown(slot, ctx) => {
                let cc = &self.cells[&(slot, ctx)];
                if cc.cell.cooled_out(at).is_some_and(|c| self.policy.recovery.probes(c)) && cc.probe.is_none() {
                    self.probe_due.insert((slot, ctx));
                }
                self.reindex(slot);
            }
            Timer::Pause(slot, None) => {
                self.registry.res_mut(slot).pause = None;
                self.reindex(slot);
            }
            Timer::Pause(slot, Some(ctx)) => {
                self.cells.get_mut(&(slot, ctx)).expect("live timer").cell.pause = None;
                self.reindex(slot);
            }
            Timer::Block(slot, None) => {
                self.registry.res_mut(slot).block = None;
                let resource = self.registry.res(slot).id.clone();
                self.reindex(slot);
                self.emit(at, EventKind::Unblocked { resource, context: None });
            }
            Timer::Limit(slot) => {
                self.registry.res_mut(slot).limited = None;
                self.regate(slot);
            }
            Timer::ContextLimit(slot, ctx) => {
                self.cells.get_mut(&(slot, ctx)).expect("live timer").limited = None;
                self.regate_cell(slot, ctx);
            }
            Timer::Retire(slot) => self.retire(slot, crate::limits::RetireReason::MaxAge),
            Timer::Group(g) => self.group_timer(g, false),
            Timer::GroupPause(g) => self.group_timer(g, true),
            Timer::Block(slot, Some(ctx)) => {
                self.cells.get_mut(&(slot, ctx)).expect("live timer").block = None;
                let resource = self.registry.res(slot).id.clone();
                let context = self.contexts.name(ctx).clone();
                self.reindex(slot);
                self.emit(at, EventKind::Unblocked { resource, context: Some(context) });
            }
        }
    }
}
