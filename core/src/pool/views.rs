//! Inspection: cells, resources, leases, the heap footprint and stats as
//! callers see them.

use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

use crate::cell::{Cell, CellState, Pause, Phase};
use crate::error::Result;
use crate::event::Event;
use crate::id::{Context, ResourceId};
use crate::labels::Labels;
use crate::lease::Lease;
use crate::limits::{Limits, RetireReason};
use crate::outcome::FailureKind;
use crate::quota::GroupName;
use crate::score;
use crate::usage::Window;

use super::blocklist::reason_bytes;
use super::{Block, ContextCell, Pool};

/// A reputation cell as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellView {
    /// `None` for the global (`"*"`) layer.
    pub context: Option<Context>,
    pub state: CellState,
    pub score: i32,
    /// The blended score selection uses (see `score`); equals `score` for the global layer.
    pub effective_score: f64,
    pub consecutive_failures: u32,
    pub consecutive_successes: u32,
    /// When the cell (or, for the global layer, the resource) may be selected
    /// again: the later of a cooldown's and a pause's end.
    pub cooling_until: Option<u64>,
    pub cause: Option<FailureKind>,
    pub half_open: bool,
    pub due_for_probe: bool,
    pub success_rate: Option<f64>,
    pub latency_ms: f64,
    pub observations: u64,
    pub block: Option<Block>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceView {
    pub resource: ResourceId,
    pub permits: u32,
    pub labels: Labels,
    pub limits: Limits,
    /// Grants since it was registered.
    pub uses: u64,
    /// Why its limits retired it, if they did.
    pub retired: Option<RetireReason>,
    pub leased: u32,
    pub score: i32,
    pub contexts: u32,
    pub block: Option<Block>,
    /// What its own current window holds, as this pool counts it; the
    /// host puts its lease authority's count here where that is another.
    pub window: Window,
    /// What its own day window holds (for an `rpd` or `tpd`), likewise.
    pub day: Window,
    /// The quota groups it belongs to.
    pub groups: Vec<GroupName>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub resources: u32,
    pub cells: u32,
    pub contexts: u32,
    pub live_leases: u32,
    /// Resources with a free permit and no resource-wide block.
    pub available: u32,
    pub due_for_probe: u32,
    pub now: u64,
    /// Heap bytes the pool holds (`Pool::footprint`).
    pub footprint: u64,
    /// Log entries folded or written that did not apply (`Pool::refused_entries`).
    pub refused_entries: u64,
}

impl Pool {
    /// Cells whose cooldown has ended for a cause other than `blocked`, waiting
    /// for a probe; sorted by resource, then context.
    pub fn due_for_probe(&mut self, now: u64) -> Vec<(ResourceId, Context)> {
        self.advance(now);
        let mut due: Vec<_> = self
            .probe_due
            .iter()
            .filter(|&&(slot, c)| !self.held_back(slot, c))
            .map(|&(slot, c)| (self.registry.res(slot).id.clone(), self.contexts.name(c).clone()))
            .collect();
        due.sort();
        due
    }

    /// The global cell first, then one per context, sorted by context.
    pub fn cells(&mut self, id: &ResourceId, now: u64) -> Result<Vec<CellView>> {
        self.advance(now);
        let slot = self.registry.slot_of(id)?;
        let r = self.registry.res(slot);
        let now = self.now;
        let mut out = Vec::with_capacity(r.contexts.len() + 1);
        out.push(self.view(&r.global, None, r.block.clone(), r.pause, None, now));
        let mut ctxs: Vec<u32> = r.contexts.clone();
        ctxs.sort_by(|a, b| self.contexts.name(*a).cmp(self.contexts.name(*b)));
        for c in ctxs {
            let cc = &self.cells[&(slot, c)];
            let block = cc.block.clone().or_else(|| r.block.clone());
            out.push(self.view(&cc.cell, Some((slot, c, cc)), block, None, Some(&r.global), now));
        }
        Ok(out)
    }

    pub(super) fn view(
        &self,
        cell: &Cell,
        ctx: Option<(u32, u32, &ContextCell)>,
        block: Option<Block>,
        pause: Option<Pause>,
        global: Option<&Cell>,
        now: u64,
    ) -> CellView {
        let phase = match cell.phase {
            Phase::Cooling { until, cause } => Some(Pause { until, cause }),
            _ => None,
        };
        // The latest of the cell's cooldown, its pause and its resource's pause.
        let slot_pause = ctx.map_or(pause, |(slot, _, _)| self.registry.res(slot).pause);
        let latest = [phase, cell.pause, slot_pause].into_iter().flatten().max_by_key(|p| p.until);
        let (cooling_until, cause) = (latest.map(|p| p.until), latest.map(|p| p.cause));
        let paused = cell.pause.is_some() || slot_pause.is_some();
        let state = match (block.is_some(), paused) {
            (true, _) => CellState::Blocklisted,
            (false, true) => CellState::Cooling,
            (false, false) => cell.state(),
        };
        let effective = match global {
            Some(g) => score::blended(Some(cell), g, self.policy.window),
            None => score::blended(None, cell, self.policy.window),
        };
        let (half_open, due) = match ctx {
            Some((slot, c, cc)) => (
                block.is_none()
                    && cc.trial.is_none()
                    && cell.cooled_out(now).is_some_and(|c| self.policy.recovery.half_open(c)),
                self.probe_due.contains(&(slot, c)) && !self.held_back(slot, c),
            ),
            None => (false, false),
        };
        CellView {
            context: ctx.map(|(_, c, _)| self.contexts.name(c).clone()),
            state,
            score: cell.score,
            effective_score: effective as f64,
            consecutive_failures: cell.consecutive_failures,
            consecutive_successes: cell.consecutive_successes,
            cooling_until,
            cause,
            half_open,
            due_for_probe: due,
            success_rate: cell.success_rate(),
            latency_ms: cell.latency_ms,
            observations: cell.observations,
            block,
        }
    }

    /// Every registered resource, sorted by id.
    pub fn resources(&self) -> Vec<ResourceView> {
        let mut out: Vec<ResourceView> = self
            .registry
            .iter()
            .map(|(slot, r)| ResourceView {
                resource: r.id.clone(),
                permits: r.permits.count() as u32,
                labels: r.labels.clone(),
                limits: r.limits,
                uses: r.usage.uses,
                retired: r.retired,
                leased: r.permits.held_from(0).count() as u32,
                score: r.global.score,
                contexts: r.contexts.len() as u32,
                block: r.block.clone(),
                window: r.usage.minute.window_at(self.now),
                day: r.usage.day.window_at(self.now),
                groups: self.group_names(slot),
            })
            .collect();
        out.sort_by(|a, b| a.resource.cmp(&b.resource));
        out
    }

    /// The live leases, sorted by id.
    pub fn leases(&self) -> Vec<Lease> {
        let mut out: Vec<Lease> = self.leases.live.values().map(|e| e.lease.clone()).collect();
        out.sort_by_key(|l| l.id);
        out
    }

    /// Heap bytes this pool holds, an upper bound of what it asked its
    /// allocator for (see `footprint`): what a host holds a tenant's memory
    /// share to. A walk over every resource, context and retired fence set.
    pub fn footprint(&self) -> u64 {
        use crate::footprint::{btree, vec};
        use core::mem::size_of;
        let cells: usize = self.cells.values().map(|cc| cc.cell.heap_bytes() + reason_bytes(&cc.block)).sum();
        let total = size_of::<Pool>()
            + self.registry.heap_bytes()
            + self.quota.heap_bytes()
            + self.contexts.heap_bytes()
            + self.cells.heap_bytes()
            + cells
            + self.leases.heap_bytes()
            + self.timers.heap_bytes()
            + btree::<(u32, u32)>(self.probe_due.len())
            + self.index.heap_bytes()
            + self.affinities.heap_bytes()
            + self.outages.heap_bytes()
            + vec::<Event>(self.events.pending.capacity());
        total as u64
    }

    pub fn stats(&self) -> Stats {
        Stats {
            footprint: self.footprint(),
            resources: self.registry.len() as u32,
            cells: self.cells.len() as u32,
            contexts: self.contexts.len() as u32,
            live_leases: self.leases.live.len() as u32,
            available: self.index.available(),
            due_for_probe: self.probe_due.iter().filter(|&&(slot, c)| !self.held_back(slot, c)).count() as u32,
            now: self.now,
            refused_entries: self.refused_entries(),
        }
    }
}
