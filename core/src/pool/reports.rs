//! Reports: folding outcomes into reputation, and the pauses and blocks
//! some failures bring.

use alloc::string::String;

use crate::cell::Pause;
use crate::error::Result;
use crate::event::EventKind;
use crate::id::{Context, ResourceId};
use crate::outcome::{FailureKind, Outcome};
use crate::policy::Recovery;
use crate::score::expected_failure;

use super::outage::Answer;
use super::{Block, Pool, Timer};

impl Pool {
    /// Folds one outcome into the resource's cell for `context` and its global cell.
    pub fn report(&mut self, id: &ResourceId, context: &Context, outcome: Outcome, now: u64) -> Result<()> {
        outcome.revalidate()?;
        self.advance(now);
        let slot = self.registry.slot_of(id)?;
        let ctx = self.cell_for(slot, context)?;
        let now = self.now;
        if self.context_failed(slot, ctx, &outcome) {
            self.registry.res_mut(slot).global.observed(&outcome);
            self.cells.get_mut(&(slot, ctx)).expect("cell exists").cell.observed(&outcome);
            return Ok(());
        }
        let policy = &self.policy;
        let r = self.registry.res_mut(slot);
        r.global.apply(&outcome, now, policy, false);
        let t = self.cells.get_mut(&(slot, ctx)).expect("cell exists").cell.apply(&outcome, now, policy, true);
        if let Some((until, cause)) = t.cooled {
            self.probe_due.remove(&(slot, ctx));
            self.timers.arm(until, Timer::Cooldown(slot, ctx));
            self.emit(now, EventKind::Cooled { resource: id.clone(), context: Some(context.clone()), until, cause });
        }
        if let Some(Pause { until, cause }) = t.paused {
            self.timers.arm(until, Timer::Pause(slot, Some(ctx)));
            self.emit(now, EventKind::Cooled { resource: id.clone(), context: Some(context.clone()), until, cause });
        }
        match outcome {
            Outcome::Failure { kind: FailureKind::QuotaExhausted, retry_after, .. } => {
                let until =
                    now.saturating_add(retry_after.unwrap_or(self.policy.rule(FailureKind::QuotaExhausted).base));
                let r = self.registry.res_mut(slot);
                if let Some(pause) = Pause::extend(r.pause, until, FailureKind::QuotaExhausted) {
                    r.pause = Some(pause);
                    self.timers.arm(until, Timer::Pause(slot, None));
                    let cause = pause.cause;
                    self.emit(now, EventKind::Cooled { resource: id.clone(), context: None, until, cause });
                }
                self.pause_groups(slot, until);
            }
            Outcome::Failure { kind: FailureKind::AuthFailed, .. } => {
                let r = self.registry.res_mut(slot);
                if r.block.as_ref().is_none_or(|b| b.until.is_some()) {
                    let reason = Some(String::from(FailureKind::AuthFailed.as_str()));
                    r.block = Some(Block { until: None, reason: reason.clone() });
                    let resource = id.clone();
                    self.emit(now, EventKind::Blocklisted { resource, context: None, until: None, reason });
                }
            }
            _ => {}
        }
        if t.left_cooling {
            self.probe_due.remove(&(slot, ctx));
        }
        if t.recovered {
            self.emit(now, EventKind::Recovered { resource: id.clone(), context: context.clone() });
        }
        self.reindex(slot);
        Ok(())
    }

    /// Remembers an answer in its context's latest; whether it is a
    /// transient failure the context's outage explains (see `outage`).
    /// The classic recovery keeps the 0.5.0 rules: every failure is the
    /// resource's.
    fn context_failed(&mut self, slot: u32, ctx: u32, outcome: &Outcome) -> bool {
        if self.policy.recovery == Recovery::Classic {
            return false;
        }
        let failed = match outcome.kind() {
            None => false,
            Some(kind) if kind.is_transient() => true,
            Some(_) => return false,
        };
        let cell = &self.cells.get(&(slot, ctx)).expect("cell exists").cell;
        let expected = expected_failure(cell, &self.registry.res(slot).global) as f32;
        self.outages.heard(ctx, Answer { slot, at: self.now, failed, expected })
    }
}
