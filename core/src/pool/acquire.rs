//! Selection: the index weights, choosing a candidate, and the acquire
//! protocol (`propose`, then `settle` with the authority's answer).

use alloc::vec::Vec;

use crate::authority::{Claim, GrantAnswer};
use crate::cell::{Cell, Phase};
use crate::error::{Error, Result};
use crate::event::{EventKind, RejectReason};
use crate::id::{Context, ResourceId};
use crate::index::{ContextEntry, GlobalEntry, GroupRef, SCALE};
use crate::key::ResourceKey;
use crate::lease::{Lease, LeaseKind};
use crate::policy::Strategy;
use crate::score;
use crate::selector::Selector;

use super::usage::Refused;
use super::{ContextCell, Pool};

/// Candidates pre-drawn from the index before Thompson sampling among them;
/// 8 rather than 4 so the best resource is rarely missed (see `score::thompson_weight`).
const THOMPSON_DRAWS: usize = 8;
/// Candidates tried per acquire when the authority refuses the chosen permit.
const GRANT_ATTEMPTS: usize = 4;
/// Draws from a filtered source before its members are scanned instead.
const FILTERED_DRAWS: usize = 32;
/// Holder mark, while the next candidate of an acquire is chosen, of a permit the authority said is held elsewhere.
const HELD_ELSEWHERE: u64 = u64::MAX;

/// An acquire waiting for its authority's answer (see `Pool::propose`).
/// The host carries it across the round trip; the pool keeps nothing of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The resource chosen.
    pub resource: ResourceKey,
    /// Its first free permit, the one to ask the authority for.
    pub permit: u32,
    /// The highest token this pool has seen for the permit: the authority's must be greater.
    pub last: u64,
    /// The TTL to grant.
    pub ttl: u64,
    /// When the acquire began.
    pub at: u64,
    /// Permits the authority refused earlier in this acquire.
    pub refused: Vec<(ResourceKey, u32)>,
    /// Chosen by the `fail_open` policy while nothing was selectable.
    pub fail_open: bool,
    /// What the grant counts against the resource's limits at the authority.
    pub claim: Option<Claim>,
}

/// The candidates a filtered acquire draws from.
enum Source {
    /// Every resource (the selector filters on values only).
    All,
    /// The groups of one part of the selector.
    Groups(Vec<u32>),
}

/// What the authority's answer to a proposal led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Granted(Lease),
    /// Refused: ask the authority about this permit next.
    Next(Proposal),
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
        let out = r.limited.is_some() || r.retired.is_some();
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
    fn first_choice(&self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
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
    fn select_among(&mut self, ctx: Option<u32>, selector: &Selector) -> Option<u32> {
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

    /// Grants the best lease for `context` under the pool's strategy, asking
    /// the pool's authority in turn for each candidate it tries.
    pub fn acquire(&mut self, context: &Context, now: u64) -> Result<Lease> {
        self.acquire_with(context, &Selector::default(), now)
    }

    /// `acquire` among the resources `selector` admits, trying its
    /// `affinity` and `prefer` resources first.
    pub fn acquire_with(&mut self, context: &Context, selector: &Selector, now: u64) -> Result<Lease> {
        let mut proposal = self.propose(context, selector, now, &[])?;
        loop {
            let r = self.registry.res(proposal.resource.slot);
            let answer =
                self.authority.grant(&r.id, proposal.permit, proposal.ttl, proposal.last, proposal.claim.as_ref());
            // A proposal this call just made needs no checking.
            let slot = proposal.resource.slot;
            match self.settle_slot(slot, context, selector, proposal, answer, &[])? {
                Settled::Granted(lease) => return Ok(lease),
                Settled::Next(next) => proposal = next,
            }
        }
    }

    /// The first half of an acquire whose authority answers later (a host
    /// that must not wait on the network inside a call): the permit to ask
    /// the authority for. Nothing is held until `settle`, so a proposal the
    /// host drops costs nothing; the pool's own rate limit is checked here
    /// and spent by the grant. `in_flight` are the permits of the host's
    /// other proposals still waiting for an answer: they are not proposed
    /// again, so acquires in flight together do not contend for one permit.
    pub fn propose(
        &mut self,
        context: &Context,
        selector: &Selector,
        now: u64,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Proposal> {
        selector.validate()?;
        self.advance(now);
        if let (Some(limit), Some(bucket)) = (self.policy.rate_limit, self.bucket.as_mut()) {
            if let Err(retry_after) = bucket.check(&limit, self.now).and_then(|()| match self.authority.admit(&limit) {
                Some(retry_after) => Err(retry_after),
                None => Ok(()),
            }) {
                let context = context.clone();
                self.emit(self.now, EventKind::Rejected { context, reason: RejectReason::RateLimited });
                return Err(Error::RateLimited { retry_after });
            }
        }
        match self.propose_next(context, selector, self.now, in_flight, Vec::new()) {
            Some(proposal) => Ok(proposal),
            None => Err(self.no_candidates(context, selector)),
        }
    }

    /// The second half: the authority's answer for `proposal` (`None`: held
    /// elsewhere). A token grants the lease, dated from the proposal so its
    /// deadline counts from before the round trip (I7). A refusal moves on
    /// to the next candidate, with every refused permit of this acquire
    /// and the `in_flight` ones set aside, until the attempts run out.
    pub fn settle(
        &mut self,
        context: &Context,
        selector: &Selector,
        proposal: Proposal,
        answer: GrantAnswer,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Settled> {
        selector.validate()?;
        let slot = self.proposed_slot(&proposal)?;
        self.settle_slot(slot, context, selector, proposal, answer, in_flight)
    }

    /// `settle` for a proposal known to name `slot` and a permit it has.
    pub(super) fn settle_slot(
        &mut self,
        slot: u32,
        context: &Context,
        selector: &Selector,
        proposal: Proposal,
        answer: GrantAnswer,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Settled> {
        let token = match answer {
            GrantAnswer::Granted(token) if token > proposal.last => Some(token),
            GrantAnswer::Limited(wait) => {
                self.limited_by_authority(slot, wait);
                None
            }
            GrantAnswer::ContextLimited(wait) => {
                self.context_limited_by_authority(slot, context, wait);
                None
            }
            GrantAnswer::Granted(_) | GrantAnswer::Held => None,
        };
        if let Some(token) = token {
            let r = self.registry.res(slot);
            if r.permits.holder(proposal.permit as usize).is_some() {
                return Err(Error::invalid("proposal", "names a permit that is held"));
            }
            if r.permits.fences()[proposal.permit as usize] != proposal.last {
                return Err(Error::invalid("proposal", "was overtaken by a newer token for its permit"));
            }
            // A trial while the context's cell is half-open, else a client lease.
            let ctx = self.contexts.id(context);
            let cooled = ctx.and_then(|c| self.cells.get(&(slot, c))).and_then(|cc| cc.cell.cooled_out(self.now));
            let kind = match (proposal.fail_open, cooled) {
                (true, _) => LeaseKind::FailOpen,
                (false, Some(_)) => LeaseKind::Trial,
                (false, None) => LeaseKind::Client,
            };
            let cost = selector.cost();
            let lease =
                self.hold(slot, proposal.permit as usize, token, context, ctx, kind, proposal.ttl, proposal.at, cost);
            if let Some(b) = self.bucket.as_mut() {
                b.take();
            }
            if let Some(key) = &selector.affinity {
                self.affinities.bind(key, proposal.resource);
            }
            return Ok(Settled::Granted(lease));
        }
        let mut refused = proposal.refused;
        refused.push((proposal.resource, proposal.permit));
        if refused.len() >= GRANT_ATTEMPTS {
            return Err(self.no_candidates(context, selector));
        }
        let aside: Vec<(ResourceKey, u32)> = refused.iter().chain(in_flight).copied().collect();
        match self.propose_next(context, selector, proposal.at, &aside, refused) {
            Some(next) => Ok(Settled::Next(next)),
            None => Err(self.no_candidates(context, selector)),
        }
    }

    /// The next candidate with the `aside` permits marked held while it is
    /// chosen; its permit is read before they are freed, as it may be
    /// another permit of a resource set aside.
    pub(super) fn propose_next(
        &mut self,
        context: &Context,
        selector: &Selector,
        at: u64,
        aside: &[(ResourceKey, u32)],
        refused: Vec<(ResourceKey, u32)>,
    ) -> Option<Proposal> {
        let held: Vec<(u32, usize)> = aside
            .iter()
            .filter(|(key, _)| self.resource_at(*key).is_some())
            .map(|&(key, permit)| (key.slot, permit as usize))
            .filter(|&(slot, permit)| {
                permit < self.registry.res(slot).permits.count()
                    && self.registry.res(slot).permits.holder(permit).is_none()
            })
            .collect();
        for &(slot, permit) in &held {
            self.registry.res_mut(slot).permits.hold(permit, HELD_ELSEWHERE);
            self.reindex(slot);
        }
        let ctx = self.contexts.id(context);
        let cost = selector.cost();
        // A candidate its limits refuse leaves selection until they admit it
        // again, or, refused for this cost only, is set aside like `held`.
        let mut chosen = None;
        let mut too_dear: Vec<(u32, usize)> = Vec::new();
        for _ in 0..GRANT_ATTEMPTS {
            let candidate = match self.first_choice(ctx, selector) {
                Some(slot) => Some(slot),
                None if selector.is_any() => self.select(ctx),
                None => self.select_among(ctx, selector),
            };
            let Some(slot) = candidate else { break };
            match self.check_limits(slot, context, cost) {
                Ok(()) => {
                    chosen = Some((slot, false));
                    break;
                }
                Err(Refused::Gated) => {}
                Err(Refused::Cost) => {
                    let free: Vec<usize> = self.registry.res(slot).permits.free_permits().collect();
                    for permit in free {
                        self.registry.res_mut(slot).permits.hold(permit, HELD_ELSEWHERE);
                        too_dear.push((slot, permit));
                    }
                    self.reindex(slot);
                }
            }
        }
        if chosen.is_none() && self.policy.fail_open {
            chosen = self.least_bad(ctx, selector).map(|slot| (slot, true));
        }
        let next = chosen.map(|(slot, fail_open)| self.proposal(slot, context, at, refused, fail_open, cost));
        for (slot, permit) in too_dear {
            self.registry.res_mut(slot).permits.free(permit);
            self.reindex(slot);
        }
        for (slot, permit) in held {
            self.registry.res_mut(slot).permits.free(permit);
            self.reindex(slot);
        }
        next
    }

    pub(super) fn proposal(
        &self,
        slot: u32,
        context: &Context,
        at: u64,
        refused: Vec<(ResourceKey, u32)>,
        fail_open: bool,
        cost: u64,
    ) -> Proposal {
        let r = self.registry.res(slot);
        let permit = r.permits.first_free().expect("selected with a free permit");
        Proposal {
            resource: ResourceKey { slot, serial: r.serial },
            permit: permit as u32,
            last: r.permits.fences()[permit],
            ttl: self.policy.lease_ttl,
            at,
            refused,
            fail_open,
            claim: self.claim(slot, context, cost),
        }
    }

    /// The slot a proposal names, if it still names what this pool proposed.
    pub(super) fn proposed_slot(&self, proposal: &Proposal) -> Result<u32> {
        let Some(r) = self.resource_at(proposal.resource).map(|_| self.registry.res(proposal.resource.slot)) else {
            return Err(Error::UnknownResource);
        };
        if proposal.permit as usize >= r.permits.count() {
            return Err(Error::invalid("proposal", "names a permit the resource does not have"));
        }
        if proposal.at > self.now || proposal.ttl != self.policy.lease_ttl {
            return Err(Error::invalid("proposal", "was not made by this pool"));
        }
        Ok(proposal.resource.slot)
    }

    pub(super) fn no_candidates(&mut self, context: &Context, selector: &Selector) -> Error {
        let refusal = self.refusal(context, selector);
        let context = context.clone();
        self.emit(self.now, EventKind::Rejected { context, reason: RejectReason::NoCandidates });
        Error::NoResourceAvailable(refusal)
    }

    /// Takes a real lease on a cell that is due for probe, so that a probe and
    /// a client never hold the same permit.
    pub fn acquire_for_probe(&mut self, id: &ResourceId, context: &Context, now: u64) -> Result<Lease> {
        self.advance(now);
        let slot = self.registry.slot_of(id)?;
        let ctx = self.contexts.id(context);
        let due = ctx.filter(|&c| self.probe_due.contains(&(slot, c)) && !self.blocked(slot, Some(c)));
        let Some(ctx) = due else {
            return Err(Error::invalid("resource", "is not due for probe in this context"));
        };
        if !self.registry.res(slot).permits.any_free() {
            return Err(Error::NoResourceAvailable(self.refusal_of(slot, Some(ctx))));
        }
        self.grant(slot, context, Some(ctx), LeaseKind::Probe, self.policy.probe_ttl)
            .map_err(|_| Error::NoResourceAvailable(self.refusal_of(slot, Some(ctx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{ContextSlot, Index};
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
