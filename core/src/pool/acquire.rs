//! The acquire protocol: `propose` a candidate, then `settle` with the
//! authority's answer, trying the next candidate on a refusal.

use alloc::vec::Vec;

use crate::authority::{Claim, GrantAnswer, GrantRequest};
use crate::cell::Phase;
use crate::error::{Error, Result};
use crate::event::{EventKind, RejectReason};
use crate::id::{Context, ResourceId};
use crate::key::ResourceKey;
use crate::lease::{Lease, LeaseKind};
use crate::selector::Selector;

use super::usage::Refused;
use super::Pool;

/// Candidates tried per acquire when the authority refuses the chosen permit
/// (held by another process, or another partition, which this pool cannot
/// see): eight rather than four left a third as many requests unserved in
/// `repute simulate --partitions P` (615 against 2 198 at P = 3, seeds 1–5),
/// and costs a round trip only per refusal.
const GRANT_ATTEMPTS: usize = 8;
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
    /// The log position the pool had folded (see `GrantRequest::view`).
    pub view: u64,
}

/// What the authority's answer to a proposal led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Granted(Lease),
    /// Refused: ask the authority about this permit next.
    Next(Proposal),
}

impl Pool {
    /// Grants the best lease for `context` under the pool's strategy, asking
    /// the pool's authority in turn for each candidate it tries.
    pub fn acquire(&mut self, context: &Context, now: u64) -> Result<Lease> {
        self.acquire_with(context, &Selector::default(), now)
    }

    /// `acquire` among the resources `selector` admits, trying its
    /// `affinity` and `prefer` resources first.
    pub fn acquire_with(&mut self, context: &Context, selector: &Selector, now: u64) -> Result<Lease> {
        // The context's number is looked up once and passed along, not
        // looked up by name at every step.
        let ctx = self.contexts.id(context);
        let mut proposal = self.propose_in(context, ctx, selector, now, &[])?;
        loop {
            let r = self.registry.res(proposal.resource.slot);
            let request = GrantRequest {
                ttl: proposal.ttl,
                last: proposal.last,
                claim: proposal.claim.as_ref(),
                view: proposal.view,
            };
            let answer = self.authority.grant(&r.id, proposal.permit, request);
            // A proposal this call just made needs no checking.
            let slot = proposal.resource.slot;
            match self.settle_slot(slot, context, ctx, selector, proposal, answer, &[])? {
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
        self.propose_in(context, self.contexts.id(context), selector, now, in_flight)
    }

    /// `propose` with the context's interned number (`None`: not seen yet).
    fn propose_in(
        &mut self,
        context: &Context,
        ctx: Option<u32>,
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
        match self.propose_next(context, ctx, selector, self.now, in_flight, Vec::new()) {
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
        self.settle_slot(slot, context, self.contexts.id(context), selector, proposal, answer, in_flight)
    }

    /// `settle` for a proposal known to name `slot` and a permit it has;
    /// `ctx` is the context's interned number.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle_slot(
        &mut self,
        slot: u32,
        context: &Context,
        ctx: Option<u32>,
        selector: &Selector,
        proposal: Proposal,
        answer: GrantAnswer,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Settled> {
        let mut ctx = ctx;
        let token = match answer {
            GrantAnswer::Granted(token) if token > proposal.last => Some(token),
            GrantAnswer::Limited(wait) => {
                self.limited_by_authority(slot, wait);
                None
            }
            GrantAnswer::ContextLimited(wait) => {
                // The cell that counts the limit gives a new context its number.
                ctx = self.context_limited_by_authority(slot, context, wait).or(ctx);
                None
            }
            GrantAnswer::GroupLimited(index, wait) => {
                self.group_limited_by_authority(slot, index, wait);
                None
            }
            GrantAnswer::Stale => {
                // Every candidate would be judged on the same old view.
                self.stale_view();
                return Err(self.no_candidates(context, selector));
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
            // A candidate still cooling is an early trial (selection passes
            // cooling cells by): its cooldown ends now.
            if let (Some(cc), false) = (ctx.and_then(|c| self.cells.get_mut(&(slot, c))), proposal.fail_open) {
                if let Phase::Cooling { until, cause } = cc.cell.phase {
                    if until > self.now {
                        cc.cell.phase = Phase::Cooling { until: self.now, cause };
                        cc.early = Some(self.now);
                    }
                }
            }
            // A trial while the context's cell is half-open, else a client lease.
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
        match self.propose_next(context, ctx, selector, proposal.at, &aside, refused) {
            Some(next) => Ok(Settled::Next(next)),
            None => Err(self.no_candidates(context, selector)),
        }
    }

    /// The next candidate with the `aside` permits marked held while it is
    /// chosen; its permit is read before they are freed, as it may be
    /// another permit of a resource set aside.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn propose_next(
        &mut self,
        context: &Context,
        ctx: Option<u32>,
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
        if chosen.is_none() {
            chosen = match self.early_trial(ctx, selector) {
                Some(slot) if self.check_limits(slot, context, cost).is_ok() => Some((slot, false)),
                _ if self.policy.fail_open => self.least_bad(ctx, selector).map(|slot| (slot, true)),
                _ => None,
            };
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
            view: self.log_view(),
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
        let due = ctx.filter(|&c| self.probe_due.contains(&(slot, c)) && !self.held_back(slot, c));
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
