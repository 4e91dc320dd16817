//! Selection: the index weights and choosing a candidate under the
//! pool's strategy, among every resource or those a selector admits.

use alloc::vec::Vec;

use crate::cell::{Cell, Phase};
use crate::id::ResourceId;
use crate::index::{ContextEntry, GlobalEntry, GroupRef, SCALE};
use crate::policy::Strategy;
use crate::score;
use crate::selector::Selector;

use super::{ContextCell, Pool};

/// Candidates pre-drawn from the index before Thompson sampling among them;
/// 8 rather than 4 so the best resource is rarely missed (see `score::thompson_weight`).
const THOMPSON_DRAWS: usize = 8;
/// Draws from a filtered source before its members are scanned instead.
const FILTERED_DRAWS: usize = 32;

/// The candidates a filtered acquire draws from.
enum Source {
    /// Every resource (the selector filters on values only).
    All,
    /// The groups of one part of the selector.
    Groups(Vec<u32>),
}

impl Pool {
    pub(super) fn weight(&self, context: Option<&Cell>, global: &Cell) -> i64 {
        match self.policy.strategy {
            Strategy::Classic => (score::blended(context, global, self.policy.window) as i64 + 100) * SCALE,
            Strategy::First => SCALE,
            Strategy::Thompson => {
                let (a, b) = score::posterior(context, global, self.now);
                score::thompson_weight(a, b, self.floor())
            }
        }
    }

    pub(super) fn floor(&self) -> i64 {
        ((self.policy.exploration_floor * SCALE as f64) as i64).max(1)
    }

    /// Whether anything but the cooling cycle keeps a resource from serving
    /// a context now: a block, a wait the provider asked for (`rate_limited`,
    /// `quota_exhausted`) or a usage limit, of the resource or of its cell
    /// there. A probe is a request like any other, so it waits for these too.
    pub(super) fn held_back(&self, slot: u32, ctx: u32) -> bool {
        let r = self.registry.res(slot);
        let cell = self.cells.get(&(slot, ctx));
        self.blocked(slot, Some(ctx))
            || r.pause.is_some()
            || r.limited.is_some()
            || self.group_gate(slot).is_some()
            || cell.is_some_and(|cc| cc.cell.pause.is_some() || cc.limited.is_some())
    }

    pub(super) fn gate_open(&self, cc: &ContextCell) -> bool {
        if cc.block.is_some() || cc.cell.pause.is_some() || cc.limited.is_some() {
            return false;
        }
        match cc.cell.phase {
            Phase::Healthy | Phase::Recovering => true,
            Phase::Cooling { until, cause } => {
                self.now >= until && self.policy.recovery.half_open(cause) && cc.trial.is_none()
            }
        }
    }

    /// Brings the index in line with one resource's current state.
    pub(crate) fn reindex(&mut self, slot: u32) {
        let r = self.registry.res(slot);
        let out = r.limited.is_some() || r.retired.is_some() || self.group_gate(slot).is_some();
        let global = match (&r.block, r.pause) {
            (Some(_), _) | (_, Some(_)) => None,
            (None, None) if out => None,
            (None, None) => Some(GlobalEntry {
                bucket: (r.global.score + 100) as u8,
                weight: self.weight(None, &r.global),
                free: r.permits.any_free(),
            }),
        };
        self.index.set_global(slot, global);
        for i in 0..self.registry.res(slot).contexts.len() {
            let r = self.registry.res(slot);
            let ctx = r.contexts[i];
            let cc = &self.cells[&(slot, ctx)];
            let entry = ContextEntry {
                open: self.gate_open(cc),
                weight: self.weight(Some(&cc.cell), &r.global),
                bucket: (score::blended(Some(&cc.cell), &r.global, self.policy.window) + 100) as u8,
            };
            let cc = self.cells.get_mut(&(slot, ctx)).expect("cell of a listed context");
            self.index.set_context(slot, ctx, Some(entry), &mut cc.indexed);
        }
    }

    pub(super) fn select(&mut self, ctx: Option<u32>) -> Option<u32> {
        match self.policy.strategy {
            Strategy::First => (self.index.total(ctx, 0) > 0).then(|| self.index.pick(ctx, 0, 0)),
            Strategy::Classic => {
                let min = self.index.min_score(ctx)?;
                let k = self.floor() - (min + 100 * SCALE);
                let total = self.index.total(ctx, k);
                if total <= 0 {
                    return None;
                }
                let target = self.rng.below(total as u64) as i64;
                Some(self.index.pick(ctx, k, target))
            }
            Strategy::Thompson => {
                let total = self.index.total(ctx, 0);
                if total <= 0 {
                    return None;
                }
                let mut best: Option<(f64, u32)> = None;
                let mut seen = [u32::MAX; THOMPSON_DRAWS];
                for i in 0..THOMPSON_DRAWS {
                    let slot = self.index.pick(ctx, 0, self.rng.below(total as u64) as i64);
                    if seen[..i].contains(&slot) {
                        continue;
                    }
                    seen[i] = slot;
                    let u = self.thompson_utility(slot, ctx);
                    if best.is_none_or(|(bu, _)| u > bu) {
                        best = Some((u, slot));
                    }
                }
                best.map(|(_, slot)| slot)
            }
        }
    }

    /// One Thompson draw for a candidate: a sampled success rate, weighed by latency.
    fn thompson_utility(&mut self, slot: u32, ctx: Option<u32>) -> f64 {
        let r = self.registry.res(slot);
        let cell = ctx.and_then(|c| self.cells.get(&(slot, c))).map(|cc| &cc.cell);
        let (a, b) = score::posterior(cell, &r.global, self.now);
        let latency = cell.unwrap_or(&r.global).latency_ms;
        score::utility(self.rng.beta(a, b), latency)
    }

    /// The resource the selector's affinity key is bound to, else the one
    /// it prefers, if that one is leasable in `ctx` and admitted.
    pub(super) fn first_choice(&self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
        let bound = selector.affinity.as_deref().and_then(|a| self.affinities.get(a));
        let bound = bound.filter(|&key| self.resource_at(key).is_some()).map(|key| key.slot);
        let preferred =
            selector.prefer.as_deref().and_then(|value| self.slot_with_value(selector.kind.as_deref(), value));
        bound.into_iter().chain(preferred).find(|&slot| self.choosable(slot, ctx, selector))
    }

    /// The resource with `value`, of `kind` if given, else of any kind.
    fn slot_with_value(&self, kind: Option<&str>, value: &str) -> Option<u32> {
        let find = |kind: &str| ResourceId::new(kind, value).ok().and_then(|id| self.registry.find(&id));
        match kind {
            Some(kind) => find(kind),
            None => self.index.groups().kinds().find_map(find),
        }
    }

    /// Leasable in `ctx` now and admitted by the selector.
    fn choosable(&self, slot: u32, ctx: Option<u32>, selector: &Selector) -> bool {
        self.leasable_weight(slot, ctx).is_some() && {
            let r = self.registry.res(slot);
            selector.admits(&r.id, &r.labels, &r.limits)
        }
    }

    fn leasable_weight(&self, slot: u32, ctx: Option<u32>) -> Option<i64> {
        let record = ctx.and_then(|c| self.cells.get(&(slot, c))).map(|cc| &cc.indexed);
        self.index.leasable(slot, record)
    }

    /// `select` among the resources a filtering selector admits: draws from
    /// the smallest group that holds them all (its kind or one label
    /// filter's values), re-drawing a candidate another part of the
    /// selector refuses; when draws keep missing, the group's members are
    /// weighed one by one.
    pub(super) fn select_among(&mut self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
        let source = self.source(selector)?;
        let k = match self.policy.strategy {
            Strategy::Classic => self.floor() - (self.index.min_score(ctx)? + 100 * SCALE),
            Strategy::First | Strategy::Thompson => 0,
        };
        let total = self.source_total(&source, ctx, k);
        if total <= 0 {
            return None;
        }
        let admitted = |pool: &Self, slot: u32| {
            let r = pool.registry.res(slot);
            selector.admits(&r.id, &r.labels, &r.limits)
        };
        match self.policy.strategy {
            Strategy::First => {
                let first = (0..FILTERED_DRAWS as i64)
                    .map(|i| i * SCALE)
                    .take_while(|&t| t < total)
                    .map(|t| self.source_pick(&source, ctx, k, t))
                    .find(|&slot| admitted(self, slot));
                first.or_else(|| self.scan(&source, ctx, k, selector))
            }
            Strategy::Classic => {
                for _ in 0..FILTERED_DRAWS {
                    let target = self.rng.below(total as u64) as i64;
                    let slot = self.source_pick(&source, ctx, k, target);
                    if admitted(self, slot) {
                        return Some(slot);
                    }
                }
                self.scan(&source, ctx, k, selector)
            }
            Strategy::Thompson => {
                let mut best: Option<(f64, u32)> = None;
                let mut seen = [u32::MAX; THOMPSON_DRAWS];
                let mut found = 0;
                for _ in 0..FILTERED_DRAWS {
                    if found == THOMPSON_DRAWS {
                        break;
                    }
                    let target = self.rng.below(total as u64) as i64;
                    let slot = self.source_pick(&source, ctx, k, target);
                    if seen[..found].contains(&slot) || !admitted(self, slot) {
                        continue;
                    }
                    seen[found] = slot;
                    found += 1;
                    let u = self.thompson_utility(slot, ctx);
                    if best.is_none_or(|(bu, _)| u > bu) {
                        best = Some((u, slot));
                    }
                }
                best.map(|(_, slot)| slot).or_else(|| self.scan(&source, ctx, k, selector))
            }
        }
    }

    /// Where a filtered acquire draws from: the groups of its most
    /// selective part; `None` when some part matches no resource at all.
    fn source(&self, selector: &Selector) -> Option<Source> {
        let groups = self.index.groups();
        let mut best: Option<(u64, Vec<u32>)> = None;
        let mut consider = |mut gs: Vec<u32>| -> Option<()> {
            gs.sort_unstable();
            gs.dedup();
            let size: u64 = gs.iter().map(|&g| u64::from(groups.size(g))).sum();
            if size == 0 {
                return None;
            }
            if best.as_ref().is_none_or(|(s, _)| size < *s) {
                best = Some((size, gs));
            }
            Some(())
        };
        if let Some(kind) = &selector.kind {
            consider(groups.find(GroupRef::Kind(kind)).into_iter().collect())?;
        }
        for f in &selector.labels {
            consider(f.values.iter().filter_map(|v| groups.find(GroupRef::Label(&f.name, v))).collect())?;
        }
        Some(best.map_or(Source::All, |(_, gs)| Source::Groups(gs)))
    }

    fn source_total(&self, source: &Source, ctx: Option<u32>, k: i64) -> i64 {
        match source {
            Source::All => self.index.total(ctx, k),
            Source::Groups(gs) => gs.iter().map(|&g| self.index.groups().total(g, ctx, k)).sum(),
        }
    }

    /// The slot holding the `target`-th unit of the source's total.
    fn source_pick(&self, source: &Source, ctx: Option<u32>, k: i64, mut target: i64) -> u32 {
        match source {
            Source::All => self.index.pick(ctx, k, target),
            Source::Groups(gs) => {
                let groups = self.index.groups();
                for &g in &gs[..gs.len() - 1] {
                    let t = groups.total(g, ctx, k);
                    if target < t {
                        return groups.pick(g, ctx, k, target);
                    }
                    target -= t;
                }
                groups.pick(gs[gs.len() - 1], ctx, k, target)
            }
        }
    }

    /// Weighs every member of the source one by one: the slow path of a
    /// filtered acquire whose draws kept landing on resources it refuses.
    fn scan(&mut self, source: &Source, ctx: Option<u32>, k: i64, selector: &Selector) -> Option<u32> {
        let members: Vec<u32> = match source {
            Source::All => self.registry.iter().map(|(slot, _)| slot).collect(),
            Source::Groups(gs) => gs.iter().flat_map(|&g| self.index.groups().members(g)).collect(),
        };
        let candidates: Vec<(u32, i64)> = members
            .into_iter()
            .filter(|&slot| {
                let r = self.registry.res(slot);
                selector.admits(&r.id, &r.labels, &r.limits)
            })
            .filter_map(|slot| self.leasable_weight(slot, ctx).map(|w| (slot, w + k)))
            .collect();
        if self.policy.strategy == Strategy::First {
            return candidates.iter().map(|&(slot, _)| slot).min();
        }
        let total: i64 = candidates.iter().map(|&(_, w)| w).sum();
        if total <= 0 {
            return None;
        }
        let mut target = self.rng.below(total as u64) as i64;
        for &(slot, w) in &candidates {
            if target < w {
                return Some(slot);
            }
            target -= w;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::Context;
    use crate::index::{ContextSlot, Index};
    use crate::lease::Lease;
    use crate::outcome::{FailureKind, Outcome};
    use crate::policy::Policy;
    use crate::rng::Rng;

    /// The incrementally kept index must equal one rebuilt from scratch.
    fn assert_index_consistent(pool: &mut Pool) {
        let records: Vec<((u32, u32), ContextSlot)> = pool.cells.iter().map(|(k, cc)| (*k, cc.indexed)).collect();
        for cc in pool.cells.values_mut() {
            cc.indexed = ContextSlot::default();
        }
        let mut fresh = Index::new();
        core::mem::swap(&mut fresh, &mut pool.index);
        for slot in 0..pool.registry.slot_count() {
            if pool.registry.get(slot).is_some() {
                pool.reindex(slot);
            }
        }
        let rebuilt = core::mem::replace(&mut pool.index, fresh);
        for (k, record) in records {
            assert_eq!(pool.cells[&k].indexed, record, "record of {k:?}");
            pool.cells.get_mut(&k).unwrap().indexed = record;
        }
        let ctxs = (0..pool.contexts.len() as u32).map(Some).chain([None]);
        for c in ctxs {
            assert_eq!(rebuilt.min_score(c), pool.index.min_score(c), "min score in {c:?}");
            for k in [0, 7 * SCALE, -3 * SCALE] {
                assert_eq!(rebuilt.total(c, k), pool.index.total(c, k), "total in {c:?} with k {k}");
            }
        }
        assert_eq!(rebuilt.available(), pool.index.available());
        assert_groups_consistent(pool);
    }

    /// Every group holds exactly the resources of its kind or label value,
    /// and its totals are the sums of what the main index leases them at.
    fn assert_groups_consistent(pool: &Pool) {
        use alloc::collections::BTreeMap;
        use alloc::string::String;
        let mut expected: BTreeMap<(Option<String>, String), Vec<u32>> = BTreeMap::new();
        for (slot, r) in pool.registry.iter() {
            expected.entry((None, r.id.kind().into())).or_default().push(slot);
            for (n, v) in r.labels.iter() {
                expected.entry((Some(n.into()), v.into())).or_default().push(slot);
            }
        }
        let groups = pool.index.groups();
        for ((name, value), mut slots) in expected {
            let key = match &name {
                None => GroupRef::Kind(&value),
                Some(n) => GroupRef::Label(n, &value),
            };
            let g = groups.find(key).expect("a group for every kind and label value");
            let mut members: Vec<u32> = groups.members(g).collect();
            members.sort_unstable();
            slots.sort_unstable();
            assert_eq!(members, slots, "members of {name:?}={value}");
            let ctxs = (0..pool.contexts.len() as u32).map(Some).chain([None]);
            for c in ctxs {
                for k in [0, 7 * SCALE] {
                    let sum: i64 = slots.iter().filter_map(|&s| pool.leasable_weight(s, c)).map(|w| w + k).sum();
                    assert_eq!(groups.total(g, c, k), sum, "total of {name:?}={value} in {c:?} with k {k}");
                }
            }
        }
    }

    #[test]
    fn incremental_index_matches_a_rebuild() {
        for strategy in [Strategy::Classic, Strategy::Thompson, Strategy::First] {
            let mut pool = Pool::new(Policy { strategy, ..Policy::default() }, 5).unwrap();
            let mut rng = Rng::seeded(11);
            let mut now = 0u64;
            let mut held: Vec<Lease> = Vec::new();
            let ids: Vec<ResourceId> =
                (0..40).map(|i| ResourceId::new("proxy", alloc::format!("p{i}")).unwrap()).collect();
            let ctxs: Vec<Context> = (0..4).map(|i| Context::new(alloc::format!("c{i}")).unwrap()).collect();
            for step in 0..20_000u32 {
                let id = &ids[rng.below(ids.len() as u64) as usize];
                let c = &ctxs[rng.below(ctxs.len() as u64) as usize];
                match rng.below(10) {
                    0 => {
                        let region = ["eu", "us", "ap"][rng.below(3) as usize];
                        let mut labels = alloc::vec![("region".into(), region.into())];
                        if rng.below(2) == 0 {
                            labels.push(("tier".into(), "paid".into()));
                        }
                        let labels = crate::Labels::new(labels).unwrap();
                        let reg = crate::Registration { labels, ..crate::Registration::new(1 + rng.below(3) as u32) };
                        drop(pool.register_with(id.clone(), reg, now))
                    }
                    1 if rng.below(8) == 0 => drop(pool.unregister(id, true, now)),
                    2 | 3 => {
                        if let Ok(l) = pool.acquire(c, now) {
                            held.push(l);
                        }
                    }
                    4 if !held.is_empty() => {
                        let l = held.swap_remove(rng.below(held.len() as u64) as usize);
                        drop(pool.release(l.id, l.token, now));
                    }
                    5..=7 => {
                        let kind = FailureKind::ALL[rng.below(5) as usize];
                        let o = if rng.below(2) == 0 { Outcome::success(1.0) } else { Outcome::failure(kind, 1.0) };
                        drop(pool.report(id, c, o.unwrap(), now));
                    }
                    8 if rng.below(4) == 0 => {
                        let scope = (rng.below(2) == 0).then_some(c);
                        drop(pool.block(id, scope, Some(1 + rng.below(600 * 1_000_000_000)), None, now));
                    }
                    _ => now += rng.below(120 * 1_000_000_000),
                }
                if step % 97 == 0 {
                    assert_index_consistent(&mut pool);
                }
            }
            assert_index_consistent(&mut pool);
        }
    }
}
