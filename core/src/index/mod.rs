//! The candidate index: which resources are selectable in a context and with
//! what weight, kept so that one acquire costs O(log n) however large the pool.
//!
//! Every resource has a global entry (its weight from the `"*"` layer) in one
//! sum tree. A context keeps only corrections, for the resources that have
//! a cell there: effective weight minus global weight, or minus everything when
//! the cell is gated (cooling, trial in flight, blocked in this context). The
//! weights of a context are then `global + delta`, descended in one pass.
//!
//! Classic weights need the minimum score among the candidates. Scores
//! (global and blended) are integers in [-100, 100], so 201-bucket histograms
//! answer it: the lowest global score among resources without a cell here is
//! the first bucket where the global histogram exceeds the context's count of
//! its own members, and the context's blended scores have their own histogram.
//! The minimum is taken over eligible candidates (not blocked, not gated),
//! including ones whose permits are all leased right now, so a grant elsewhere
//! does not reshuffle everyone's odds.
//!
//! What the index last recorded for a (resource, context) lives with the cell
//! (`ContextSlot`), so updating it costs no lookup of its own.
//!
//! `groups` mirrors the same entries into one tree per kind and per label
//! value, for acquires that filter on them.

mod groups;

pub(crate) use groups::{GroupKey, GroupRef, Groups};

use alloc::vec::Vec;

use crate::hist::Histogram;
use crate::tree::{descend, Delta, SumTree};

/// Fixed-point scale of weights.
pub(crate) const SCALE: i64 = 1 << 16;

/// What the index needs to know about one resource, resource-wide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GlobalEntry {
    /// Global score + 100, in 0..=200.
    pub bucket: u8,
    pub weight: i64,
    /// At least one permit is free.
    pub free: bool,
}

/// What the index needs to know about one resource in one context where it has a cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ContextEntry {
    /// The cell lets a client lease it now (not cooling, no trial in flight, not blocked here).
    pub open: bool,
    pub weight: i64,
    /// Effective (blended) score + 100, in 0..=200.
    pub bucket: u8,
}

/// The index's record of one (resource, context): kept by the cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ContextSlot {
    delta: (i64, i64),
    /// Global bucket counted in the context's member histogram.
    member: Option<u8>,
    /// Effective bucket counted in the context's score histogram.
    effective: Option<u8>,
}

#[derive(Debug, Clone)]
struct ContextIndex {
    delta: Delta,
    members: Histogram,
    effective: Histogram,
}

#[derive(Debug, Clone)]
pub(crate) struct Index {
    global: SumTree,
    shape: Vec<usize>,
    stored: Vec<Option<GlobalEntry>>,
    hist: Histogram,
    contexts: Vec<ContextIndex>,
    groups: Groups,
}

fn tree_value(g: Option<GlobalEntry>) -> (i64, i64) {
    match g {
        Some(e) if e.free => (e.weight, 1),
        _ => (0, 0),
    }
}

impl Index {
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::vec;
        let contexts: usize = self
            .contexts
            .iter()
            .map(|c| c.delta.heap_bytes() + c.members.heap_bytes() + c.effective.heap_bytes())
            .sum();
        self.global.heap_bytes()
            + vec::<usize>(self.shape.capacity())
            + vec::<Option<GlobalEntry>>(self.stored.capacity())
            + self.hist.heap_bytes()
            + vec::<ContextIndex>(self.contexts.capacity())
            + contexts
            + self.groups.heap_bytes()
    }

    pub fn new() -> Self {
        let global = SumTree::new();
        Index {
            shape: global.shape(),
            global,
            stored: Vec::new(),
            hist: Histogram::new(),
            contexts: Vec::new(),
            groups: Groups::default(),
        }
    }

    fn context_mut(&mut self, ctx: u32) -> &mut ContextIndex {
        while self.contexts.len() <= ctx as usize {
            self.contexts.push(ContextIndex {
                delta: Delta::new(&self.shape),
                members: Histogram::new(),
                effective: Histogram::new(),
            });
        }
        &mut self.contexts[ctx as usize]
    }

    /// Sets a resource's global entry; `None` when it is unregistered or blocked resource-wide.
    pub fn set_global(&mut self, slot: u32, entry: Option<GlobalEntry>) {
        let i = slot as usize;
        if self.global.ensure(i) {
            self.shape = self.global.shape();
            for c in &mut self.contexts {
                c.delta.grow(&self.shape);
            }
        }
        if self.stored.len() <= i {
            self.stored.resize(i + 1, None);
        }
        let old = self.stored[i];
        if old == entry {
            return;
        }
        let (ow, oc) = tree_value(old);
        let (nw, nc) = tree_value(entry);
        self.global.add(i, nw - ow, nc - oc);
        self.hist.recount(old.map(|o| o.bucket), entry.map(|n| n.bucket));
        self.stored[i] = entry;
        self.groups.set_global(slot, entry);
    }

    /// Sets a resource's entry in a context where it has a cell (`None` once the
    /// cell is removed). Call after `set_global` for the same resource.
    pub fn set_context(&mut self, slot: u32, ctx: u32, entry: Option<ContextEntry>, record: &mut ContextSlot) {
        let global = self.stored.get(slot as usize).copied().flatten();
        self.context_mut(ctx);
        let c = &mut self.contexts[ctx as usize];
        let new = match entry {
            None => ContextSlot::default(),
            Some(e) => {
                let (gw, gc) = tree_value(global);
                let own = match global {
                    Some(g) if g.free && e.open => (e.weight, 1),
                    _ => (0, 0),
                };
                ContextSlot {
                    delta: (own.0 - gw, own.1 - gc),
                    member: global.map(|g| g.bucket),
                    effective: global.filter(|_| e.open).map(|_| e.bucket),
                }
            }
        };
        let (dw, dc) = (new.delta.0 - record.delta.0, new.delta.1 - record.delta.1);
        if (dw, dc) != (0, 0) {
            c.delta.add(&self.shape, slot as usize, dw, dc);
        }
        c.members.recount(record.member, new.member);
        c.effective.recount(record.effective, new.effective);
        self.groups.apply(slot, ctx, record, &new);
        *record = new;
    }

    /// Puts a slot into the groups of `keys` (see `Groups::join`); `records`
    /// are its cells' records, by context.
    pub fn join(&mut self, slot: u32, keys: impl IntoIterator<Item = GroupKey>, records: &[(u32, ContextSlot)]) {
        let global = self.stored.get(slot as usize).copied().flatten();
        self.groups.join(slot, keys, global, records);
    }

    /// Takes a slot out of its groups; `records` as for `join`.
    pub fn leave(&mut self, slot: u32, records: &[(u32, ContextSlot)]) {
        self.groups.leave(slot, records);
    }

    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The weight of a slot leasable now in the context whose record is
    /// `record` (none: no cell there), or `None` if it is not leasable.
    pub fn leasable(&self, slot: u32, record: Option<&ContextSlot>) -> Option<i64> {
        let (w, c) = tree_value(self.stored.get(slot as usize).copied().flatten());
        let (dw, dc) = record.map_or((0, 0), |r| r.delta);
        (c + dc == 1).then_some(w + dw)
    }

    /// Lowest eligible score in a context, fixed point; `None` when nothing is eligible.
    pub fn min_score(&self, ctx: Option<u32>) -> Option<i64> {
        let c = ctx.and_then(|c| self.contexts.get(c as usize));
        let untouched = self.hist.first_occupied(|b| self.hist.count(b) > c.map_or(0, |c| c.members.count(b)));
        let touched = c.and_then(|c| c.effective.occupied().next());
        let bucket = match (untouched, touched) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some((bucket as i64 - 100) * SCALE)
    }

    /// Resources with a free permit and no resource-wide block.
    pub fn available(&self) -> u32 {
        self.global.total().1 as u32
    }

    /// Total of `weight + k` over the candidates leasable now in a context.
    pub fn total(&self, ctx: Option<u32>, k: i64) -> i64 {
        let (mut w, mut c) = self.global.total();
        if let Some(d) = ctx.and_then(|c| self.contexts.get(c as usize)) {
            let (dw, dc) = d.delta.total();
            w += dw;
            c += dc;
        }
        w + k * c
    }

    /// The slot holding the `target`-th unit of `weight + k`, `target < total`.
    pub fn pick(&self, ctx: Option<u32>, k: i64, target: i64) -> u32 {
        let delta = ctx.and_then(|c| self.contexts.get(c as usize)).map(|c| &c.delta);
        descend(&self.global, delta, k, target) as u32
    }
}
