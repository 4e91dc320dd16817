//! The pool: registration, selection, leases, reports, blocklist and timers,
//! driven entirely by the caller's calls and the `now` each call carries.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use hashbrown::{HashMap, HashSet};
use serde::{Deserialize, Serialize};

use crate::authority::{Authority, Local};
use crate::cell::{Cell, CellState, Pause, Phase};
use crate::error::{Error, Result};
use crate::event::{Event, EventKind, RejectReason};
use crate::id::{Context, ResourceId};
use crate::index::{ContextEntry, ContextSlot, GlobalEntry, Index, SCALE};
use crate::key::ResourceKey;
use crate::lease::{Lease, LeaseEntry, LeaseKind};
use crate::outcome::{FailureKind, Outcome};
use crate::permits::Permits;
use crate::policy::{Policy, Strategy};
use crate::ratelimit::Bucket;
use crate::rng::Rng;
use crate::score;

/// Most permits one resource may have.
pub const MAX_PERMITS: u32 = 1024;
/// Longest block reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// Candidates pre-drawn from the index before Thompson sampling among them;
/// 8 rather than 4 so the best resource is rarely missed (see `score::thompson_weight`).
const THOMPSON_DRAWS: usize = 8;
/// Candidates tried per acquire when the authority refuses the chosen permit.
const GRANT_ATTEMPTS: usize = 4;
/// Holder mark, while the next candidate of an acquire is chosen, of a permit the authority said is held elsewhere.
const HELD_ELSEWHERE: u64 = u64::MAX;
/// How many ended lease ids are remembered to answer `LeaseExpired` rather than `UnknownLease`.
const EXPIRED_MEMORY: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub until: Option<u64>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub id: ResourceId,
    /// Names this registration to hosts (see `ResourceKey`).
    pub serial: u64,
    /// Holders and last tokens; counters never shrink, so re-grown permits continue their sequence.
    pub permits: Permits,
    pub block: Option<Block>,
    /// A running `quota_exhausted` pause: not selectable anywhere until it ends.
    pub pause: Option<Pause>,
    pub global: Cell,
    pub contexts: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct ContextCell {
    pub cell: Cell,
    pub block: Option<Block>,
    pub trial: Option<u64>,
    pub probe: Option<u64>,
    pub indexed: ContextSlot,
}

impl ContextCell {
    pub fn new(cell: Cell, block: Option<Block>) -> Self {
        ContextCell { cell, block, trial: None, probe: None, indexed: ContextSlot::default() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Lease(u64),
    Cooldown(u32, u32),
    Block(u32, Option<u32>),
    /// The end of a pause of a resource (`None`) or of one of its cells.
    Pause(u32, Option<u32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Released,
    Expired,
    Revoked,
}

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
    pub leased: u32,
    pub score: i32,
    pub contexts: u32,
    pub block: Option<Block>,
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
}

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
}

/// What the authority's answer to a proposal led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Granted(Lease),
    /// Refused: ask the authority about this permit next.
    Next(Proposal),
}

/// The whole pool. Every method that takes `now` first fires the timers due by
/// then (lease expiry, cooldown ends, block expiry); a `now` earlier than one
/// already seen is treated as that one, so time never runs backwards inside.
#[derive(Debug)]
pub struct Pool {
    pub(crate) authority: Box<dyn Authority>,
    pub(crate) policy: Policy,
    pub(crate) rng: Rng,
    pub(crate) now: u64,
    pub(crate) resources: Vec<Option<Resource>>,
    pub(crate) free_slots: Vec<u32>,
    pub(crate) by_id: HashMap<ResourceId, u32>,
    pub(crate) contexts: Vec<Context>,
    pub(crate) context_ids: HashMap<Context, u32>,
    pub(crate) cells: HashMap<(u32, u32), ContextCell>,
    pub(crate) retired_fences: BTreeMap<ResourceId, Vec<u64>>,
    pub(crate) leases: HashMap<u64, LeaseEntry>,
    pub(crate) next_lease_id: u64,
    /// The serial the next registration gets; never reused while this pool lives.
    pub(crate) next_serial: u64,
    pub(crate) ended: VecDeque<u64>,
    pub(crate) ended_set: HashSet<u64>,
    pub(crate) timers: BTreeSet<(u64, Timer)>,
    pub(crate) probe_due: BTreeSet<(u32, u32)>,
    pub(crate) bucket: Option<Bucket>,
    pub(crate) index: Index,
    pub(crate) events: Vec<Event>,
    /// Events are recorded for `drain_events`; off when nobody reads them.
    pub(crate) record_events: bool,
}

impl Pool {
    pub fn new(policy: Policy, seed: u64) -> Result<Pool> {
        policy.validate()?;
        Ok(Pool::empty(policy, Rng::seeded(seed), 0))
    }

    pub(crate) fn empty(policy: Policy, rng: Rng, now: u64) -> Pool {
        let bucket = policy.rate_limit.as_ref().map(|l| Bucket::full(l, now));
        Pool {
            authority: Box::new(Local),
            policy,
            rng,
            now,
            resources: Vec::new(),
            free_slots: Vec::new(),
            by_id: HashMap::new(),
            contexts: Vec::new(),
            context_ids: HashMap::new(),
            cells: HashMap::new(),
            retired_fences: BTreeMap::new(),
            leases: HashMap::new(),
            next_lease_id: 1,
            next_serial: 0,
            ended: VecDeque::new(),
            ended_set: HashSet::new(),
            timers: BTreeSet::new(),
            probe_due: BTreeSet::new(),
            bucket,
            index: Index::new(),
            events: Vec::new(),
            record_events: true,
        }
    }

    /// Lease ids from here on are at least `floor`. A host opening a tenant
    /// under a new owner epoch passes a floor above any id the previous owner
    /// could have handed out after its last checkpoint, so no id is reused
    /// and a holder from before a crash never names someone else's lease.
    pub fn raise_lease_ids(&mut self, floor: u64) {
        self.next_lease_id = self.next_lease_id.max(floor);
    }

    /// Puts a lease authority other than the pool's own counters in charge of
    /// granting permits and minting tokens.
    pub fn set_authority(&mut self, authority: Box<dyn Authority>) {
        self.authority = authority;
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Events since the last drain, oldest first.
    pub fn drain_events(&mut self) -> Vec<Event> {
        core::mem::take(&mut self.events)
    }

    pub fn pending_events(&self) -> &[Event] {
        &self.events
    }

    /// Turns event recording on or off (on by default). A host that hands
    /// events to nobody saves building them on every operation.
    pub fn set_record_events(&mut self, on: bool) {
        self.record_events = on;
        if !on {
            self.events.clear();
        }
    }

    fn emit(&mut self, at: u64, kind: EventKind) {
        if self.record_events {
            self.events.push(Event { at, kind });
        }
    }

    fn slot_of(&self, id: &ResourceId) -> Result<u32> {
        self.by_id.get(id).copied().ok_or(Error::UnknownResource)
    }

    pub(crate) fn res(&self, slot: u32) -> &Resource {
        self.resources[slot as usize].as_ref().expect("slot in use")
    }

    fn res_mut(&mut self, slot: u32) -> &mut Resource {
        self.resources[slot as usize].as_mut().expect("slot in use")
    }

    pub(crate) fn take_serial(&mut self) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        serial
    }

    /// The context of this name if the pool has seen it, shared rather than built anew.
    pub fn known_context(&self, name: &str) -> Option<Context> {
        self.context_ids.get(name).map(|&c| self.contexts[c as usize].clone())
    }

    /// The key of the resource a live lease holds.
    pub fn lease_key(&self, lease: u64) -> Option<ResourceKey> {
        let slot = self.leases.get(&lease)?.slot;
        Some(ResourceKey { slot, serial: self.res(slot).serial })
    }

    /// The resource `key` names, while that registration lasts.
    pub fn resource_at(&self, key: ResourceKey) -> Option<&ResourceId> {
        match self.resources.get(key.slot as usize) {
            Some(Some(r)) if r.serial == key.serial => Some(&r.id),
            _ => None,
        }
    }

    // ---- time ----

    /// Fires every timer due by `now`. Called at the start of every operation.
    pub fn advance(&mut self, now: u64) {
        let now = now.max(self.now);
        self.now = now;
        while let Some(&(at, timer)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            self.fire(at, timer);
        }
    }

    /// Lease timers are removed when their lease ends or moves; others may go
    /// stale (replaced block, removed cell) and are recognised here when they fire.
    fn timer_live(&self, at: u64, timer: Timer) -> bool {
        match timer {
            Timer::Lease(id) => self.leases.get(&id).is_some_and(|e| e.lease.expires_at == at),
            Timer::Cooldown(slot, ctx) => self
                .cells
                .get(&(slot, ctx))
                .is_some_and(|cc| matches!(cc.cell.phase, Phase::Cooling { until, .. } if until == at)),
            Timer::Block(slot, None) => matches!(
                self.resources.get(slot as usize),
                Some(Some(r)) if r.block.as_ref().and_then(|b| b.until) == Some(at)
            ),
            Timer::Block(slot, Some(ctx)) => {
                self.cells.get(&(slot, ctx)).is_some_and(|cc| cc.block.as_ref().and_then(|b| b.until) == Some(at))
            }
            Timer::Pause(slot, None) => matches!(
                self.resources.get(slot as usize),
                Some(Some(r)) if r.pause.map(|p| p.until) == Some(at)
            ),
            Timer::Pause(slot, Some(ctx)) => {
                self.cells.get(&(slot, ctx)).is_some_and(|cc| cc.cell.pause.map(|p| p.until) == Some(at))
            }
        }
    }

    fn fire(&mut self, at: u64, timer: Timer) {
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
                self.res_mut(slot).pause = None;
                self.reindex(slot);
            }
            Timer::Pause(slot, Some(ctx)) => {
                self.cells.get_mut(&(slot, ctx)).expect("live timer").cell.pause = None;
                self.reindex(slot);
            }
            Timer::Block(slot, None) => {
                self.res_mut(slot).block = None;
                let resource = self.res(slot).id.clone();
                self.reindex(slot);
                self.emit(at, EventKind::Unblocked { resource, context: None });
            }
            Timer::Block(slot, Some(ctx)) => {
                self.cells.get_mut(&(slot, ctx)).expect("live timer").block = None;
                let resource = self.res(slot).id.clone();
                let context = self.contexts[ctx as usize].clone();
                self.reindex(slot);
                self.emit(at, EventKind::Unblocked { resource, context: Some(context) });
            }
        }
    }

    // ---- index ----

    fn weight(&self, context: Option<&Cell>, global: &Cell) -> i64 {
        match self.policy.strategy {
            Strategy::Classic => (score::blended(context, global, self.policy.window) as i64 + 100) * SCALE,
            Strategy::First => SCALE,
            Strategy::Thompson => {
                let (a, b) = score::posterior(context, global, self.now);
                score::thompson_weight(a, b, self.floor())
            }
        }
    }

    fn floor(&self) -> i64 {
        ((self.policy.exploration_floor * SCALE as f64) as i64).max(1)
    }

    fn gate_open(&self, cc: &ContextCell) -> bool {
        if cc.block.is_some() || cc.cell.pause.is_some() {
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
        let r = self.res(slot);
        let global = match (&r.block, r.pause) {
            (Some(_), _) | (_, Some(_)) => None,
            (None, None) => Some(GlobalEntry {
                bucket: (r.global.score + 100) as u8,
                weight: self.weight(None, &r.global),
                free: r.permits.any_free(),
            }),
        };
        self.index.set_global(slot, global);
        for i in 0..self.res(slot).contexts.len() {
            let r = self.res(slot);
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

    fn select(&mut self, ctx: Option<u32>) -> Option<u32> {
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
                    let r = self.res(slot);
                    let cell = ctx.and_then(|c| self.cells.get(&(slot, c))).map(|cc| &cc.cell);
                    let (a, b) = score::posterior(cell, &r.global, self.now);
                    let latency = cell.unwrap_or(&r.global).latency_ms;
                    let u = score::utility(self.rng.beta(a, b), latency);
                    if best.is_none_or(|(bu, _)| u > bu) {
                        best = Some((u, slot));
                    }
                }
                best.map(|(_, slot)| slot)
            }
        }
    }

    // ---- registration ----

    /// Registers a resource with `permits` concurrent leases. Registering an
    /// existing resource again changes its permits (returns whether anything changed);
    /// lowering them is refused while a removed permit is leased.
    pub fn register(&mut self, id: ResourceId, permits: u32, now: u64) -> Result<bool> {
        if !(1..=MAX_PERMITS).contains(&permits) {
            return Err(Error::invalid("permits", "must be in 1..=1024"));
        }
        self.advance(now);
        if let Some(&slot) = self.by_id.get(&id) {
            let r = self.res(slot);
            let current = r.permits.count() as u32;
            if permits == current {
                return Ok(false);
            }
            let live = r.permits.held_from(permits as usize).count() as u32;
            if live > 0 {
                return Err(Error::Leased { live });
            }
            self.res_mut(slot).permits.resize(permits);
            self.reindex(slot);
            self.emit(self.now, EventKind::Registered { resource: id, permits });
            return Ok(true);
        }
        if let Some(max) = self.policy.max_resources {
            if self.by_id.len() as u32 >= max {
                return Err(Error::BudgetExhausted { budget: "max_resources", limit: max as u64 });
            }
        }
        let fences = self.retired_fences.remove(&id).unwrap_or_default();
        let resource = Resource {
            id: id.clone(),
            serial: self.take_serial(),
            permits: Permits::new(permits, fences),
            block: None,
            pause: None,
            global: Cell::new(),
            contexts: Vec::new(),
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.resources[s as usize] = Some(resource);
                s
            }
            None => {
                self.resources.push(Some(resource));
                (self.resources.len() - 1) as u32
            }
        };
        self.by_id.insert(id.clone(), slot);
        self.reindex(slot);
        self.emit(self.now, EventKind::Registered { resource: id, permits });
        Ok(true)
    }

    /// Removes a resource and its cells. Refused while leased unless `force`,
    /// which revokes the leases; fence counters are kept, so a re-registered
    /// resource continues its token sequence and old holders stay fenced out.
    pub fn unregister(&mut self, id: &ResourceId, force: bool, now: u64) -> Result<()> {
        self.advance(now);
        let slot = self.slot_of(id)?;
        let live: Vec<u64> = self.res(slot).permits.held_from(0).collect();
        if !live.is_empty() && !force {
            return Err(Error::Leased { live: live.len() as u32 });
        }
        for lease in live {
            let l = &self.leases[&lease].lease;
            self.authority.revoke(&l.resource, l.permit, l.token);
            self.end_lease(lease, End::Revoked, self.now);
        }
        let r = self.resources[slot as usize].take().expect("slot in use");
        for ctx in &r.contexts {
            if let Some(mut cc) = self.cells.remove(&(slot, *ctx)) {
                self.index.set_context(slot, *ctx, None, &mut cc.indexed);
            }
            self.probe_due.remove(&(slot, *ctx));
        }
        self.index.set_global(slot, None);
        self.by_id.remove(&r.id);
        self.retired_fences.insert(r.id.clone(), r.permits.into_fences());
        self.free_slots.push(slot);
        self.emit(self.now, EventKind::Unregistered { resource: r.id });
        Ok(())
    }

    // ---- leases ----

    /// Grants the best lease for `context` under the pool's strategy, asking
    /// the pool's authority in turn for each candidate it tries.
    pub fn acquire(&mut self, context: &Context, now: u64) -> Result<Lease> {
        let mut proposal = self.propose(context, now, &[])?;
        loop {
            let r = self.resources[proposal.resource.slot as usize].as_ref().expect("proposed from a slot in use");
            let answer = self.authority.grant(&r.id, proposal.permit, proposal.ttl, proposal.last);
            // A proposal this call just made needs no checking.
            let slot = proposal.resource.slot;
            match self.settle_slot(slot, context, proposal, answer, &[])? {
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
    pub fn propose(&mut self, context: &Context, now: u64, in_flight: &[(ResourceKey, u32)]) -> Result<Proposal> {
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
        match self.propose_next(context, self.now, in_flight, Vec::new()) {
            Some(proposal) => Ok(proposal),
            None => Err(self.no_candidates(context)),
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
        proposal: Proposal,
        answer: Option<u64>,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Settled> {
        let slot = self.proposed_slot(&proposal)?;
        self.settle_slot(slot, context, proposal, answer, in_flight)
    }

    /// `settle` for a proposal known to name `slot` and a permit it has.
    fn settle_slot(
        &mut self,
        slot: u32,
        context: &Context,
        proposal: Proposal,
        answer: Option<u64>,
        in_flight: &[(ResourceKey, u32)],
    ) -> Result<Settled> {
        if let Some(token) = answer.filter(|&t| t > proposal.last) {
            let r = self.res(slot);
            if r.permits.holder(proposal.permit as usize).is_some() {
                return Err(Error::invalid("proposal", "names a permit that is held"));
            }
            if r.permits.fences()[proposal.permit as usize] != proposal.last {
                return Err(Error::invalid("proposal", "was overtaken by a newer token for its permit"));
            }
            // A trial while the context's cell is half-open, else a client lease.
            let ctx = self.context_ids.get(context).copied();
            let cooled = ctx.and_then(|c| self.cells.get(&(slot, c))).and_then(|cc| cc.cell.cooled_out(self.now));
            let kind = match (proposal.fail_open, cooled) {
                (true, _) => LeaseKind::FailOpen,
                (false, Some(_)) => LeaseKind::Trial,
                (false, None) => LeaseKind::Client,
            };
            let lease = self.hold(slot, proposal.permit as usize, token, context, ctx, kind, proposal.ttl, proposal.at);
            if let Some(b) = self.bucket.as_mut() {
                b.take();
            }
            return Ok(Settled::Granted(lease));
        }
        let mut refused = proposal.refused;
        refused.push((proposal.resource, proposal.permit));
        if refused.len() >= GRANT_ATTEMPTS {
            return Err(self.no_candidates(context));
        }
        let aside: Vec<(ResourceKey, u32)> = refused.iter().chain(in_flight).copied().collect();
        match self.propose_next(context, proposal.at, &aside, refused) {
            Some(next) => Ok(Settled::Next(next)),
            None => Err(self.no_candidates(context)),
        }
    }

    /// The next candidate with the `aside` permits marked held while it is
    /// chosen; its permit is read before they are freed, as it may be
    /// another permit of a resource set aside.
    fn propose_next(
        &mut self,
        context: &Context,
        at: u64,
        aside: &[(ResourceKey, u32)],
        refused: Vec<(ResourceKey, u32)>,
    ) -> Option<Proposal> {
        let held: Vec<(u32, usize)> = aside
            .iter()
            .filter(|(key, _)| self.resource_at(*key).is_some())
            .map(|&(key, permit)| (key.slot, permit as usize))
            .filter(|&(slot, permit)| {
                permit < self.res(slot).permits.count() && self.res(slot).permits.holder(permit).is_none()
            })
            .collect();
        for &(slot, permit) in &held {
            self.res_mut(slot).permits.hold(permit, HELD_ELSEWHERE);
            self.reindex(slot);
        }
        let ctx = self.context_ids.get(context).copied();
        let next = match self.select(ctx) {
            Some(slot) => Some(self.proposal(slot, at, refused, false)),
            None if self.policy.fail_open => self.least_bad(ctx).map(|slot| self.proposal(slot, at, refused, true)),
            None => None,
        };
        for (slot, permit) in held {
            self.res_mut(slot).permits.free(permit);
            self.reindex(slot);
        }
        next
    }

    fn proposal(&self, slot: u32, at: u64, refused: Vec<(ResourceKey, u32)>, fail_open: bool) -> Proposal {
        let r = self.res(slot);
        let permit = r.permits.first_free().expect("selected with a free permit");
        Proposal {
            resource: ResourceKey { slot, serial: r.serial },
            permit: permit as u32,
            last: r.permits.fences()[permit],
            ttl: self.policy.lease_ttl,
            at,
            refused,
            fail_open,
        }
    }

    /// The slot a proposal names, if it still names what this pool proposed.
    fn proposed_slot(&self, proposal: &Proposal) -> Result<u32> {
        let Some(r) = self.resource_at(proposal.resource).map(|_| self.res(proposal.resource.slot)) else {
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

    fn no_candidates(&mut self, context: &Context) -> Error {
        let refusal = self.refusal(context);
        let context = context.clone();
        self.emit(self.now, EventKind::Rejected { context, reason: RejectReason::NoCandidates });
        Error::NoResourceAvailable(refusal)
    }

    /// Takes a real lease on a cell that is due for probe, so that a probe and
    /// a client never hold the same permit.
    pub fn acquire_for_probe(&mut self, id: &ResourceId, context: &Context, now: u64) -> Result<Lease> {
        self.advance(now);
        let slot = self.slot_of(id)?;
        let ctx = self.context_ids.get(context).copied();
        let due = ctx.filter(|&c| self.probe_due.contains(&(slot, c)) && !self.blocked(slot, Some(c)));
        let Some(ctx) = due else {
            return Err(Error::invalid("resource", "is not due for probe in this context"));
        };
        if !self.res(slot).permits.any_free() {
            return Err(Error::NoResourceAvailable(self.refusal_of(slot, Some(ctx))));
        }
        self.grant(slot, context, Some(ctx), LeaseKind::Probe, self.policy.probe_ttl)
            .map_err(|_| Error::NoResourceAvailable(self.refusal_of(slot, Some(ctx))))
    }

    /// Asks the authority for the first free permit of `slot`; `Err(permit)` if it refuses.
    fn grant(
        &mut self,
        slot: u32,
        context: &Context,
        ctx: Option<u32>,
        kind: LeaseKind,
        ttl: u64,
    ) -> core::result::Result<Lease, usize> {
        let r = self.resources[slot as usize].as_ref().expect("slot in use");
        let permit = r.permits.first_free().expect("selected with a free permit");
        let last = r.permits.fences()[permit];
        match self.authority.grant(&r.id, permit as u32, ttl, last) {
            Some(token) if token > last => Ok(self.hold(slot, permit, token, context, ctx, kind, ttl, self.now)),
            _ => Err(permit),
        }
    }

    /// Records a granted lease on `permit` of `slot`, dated `at`.
    #[allow(clippy::too_many_arguments)]
    fn hold(
        &mut self,
        slot: u32,
        permit: usize,
        token: u64,
        context: &Context,
        ctx: Option<u32>,
        kind: LeaseKind,
        ttl: u64,
        at: u64,
    ) -> Lease {
        let r = self.resources[slot as usize].as_mut().expect("slot in use");
        let id = self.next_lease_id;
        self.next_lease_id += 1;
        r.permits.hold(permit, id);
        r.permits.set_fence(permit, token);
        let lease = Lease {
            id,
            resource: r.id.clone(),
            context: context.clone(),
            permit: permit as u32,
            token,
            kind,
            granted_at: at,
            expires_at: at.saturating_add(ttl),
            ttl,
        };
        if let Some(cc) = ctx.and_then(|c| self.cells.get_mut(&(slot, c))) {
            match kind {
                LeaseKind::Trial => cc.trial = Some(id),
                LeaseKind::Probe => cc.probe = Some(id),
                LeaseKind::Client | LeaseKind::FailOpen => {}
            }
        }
        if let (LeaseKind::Probe, Some(c)) = (kind, ctx) {
            self.probe_due.remove(&(slot, c));
        }
        self.timers.insert((lease.expires_at, Timer::Lease(id)));
        self.leases.insert(id, LeaseEntry { lease: lease.clone(), slot });
        self.reindex(slot);
        self.emit(at, EventKind::Leased { lease: lease.clone() });
        lease
    }

    fn live_lease<'a>(
        leases: &'a HashMap<u64, LeaseEntry>,
        ended: &HashSet<u64>,
        id: u64,
        token: u64,
    ) -> Result<&'a LeaseEntry> {
        match leases.get(&id) {
            Some(e) if e.lease.token == token => Ok(e),
            Some(_) => Err(Error::StaleLease),
            None if ended.contains(&id) => Err(Error::LeaseExpired),
            None => Err(Error::UnknownLease),
        }
    }

    /// Extends a live lease by its TTL from `now`. Refused for a blocked resource.
    pub fn renew(&mut self, id: u64, token: u64, now: u64) -> Result<Lease> {
        self.advance(now);
        let e = Self::live_lease(&self.leases, &self.ended_set, id, token)?;
        let ctx = self.context_ids.get(&e.lease.context).copied();
        if self.blocked(e.slot, ctx) {
            return Err(Error::Blocked);
        }
        let l = &e.lease;
        // A newer token for the permit (restored from a later snapshot, or
        // issued after this lease's snapshot was taken) means this holder
        // was superseded, whoever the authority is.
        let superseded = self.res(e.slot).permits.fences()[l.permit as usize] > l.token;
        if superseded || !self.authority.extend(&l.resource, l.permit, l.token, l.ttl) {
            self.end_lease(id, End::Expired, self.now);
            return Err(Error::LeaseExpired);
        }
        let e = self.leases.get_mut(&id).expect("checked live");
        self.timers.remove(&(e.lease.expires_at, Timer::Lease(id)));
        e.lease.expires_at = self.now.saturating_add(e.lease.ttl);
        let lease = e.lease.clone();
        self.timers.insert((lease.expires_at, Timer::Lease(id)));
        self.emit(self.now, EventKind::Renewed { lease: lease.clone() });
        Ok(lease)
    }

    /// Ends a live lease and frees its permit.
    pub fn release(&mut self, id: u64, token: u64, now: u64) -> Result<()> {
        self.advance(now);
        let l = &Self::live_lease(&self.leases, &self.ended_set, id, token)?.lease;
        self.authority.revoke(&l.resource, l.permit, l.token);
        self.end_lease(id, End::Released, self.now);
        Ok(())
    }

    /// The live lease with this id, if any.
    pub fn lease(&mut self, id: u64, now: u64) -> Option<Lease> {
        self.advance(now);
        self.leases.get(&id).map(|e| e.lease.clone())
    }

    fn end_lease(&mut self, id: u64, how: End, at: u64) {
        let Some(LeaseEntry { lease, slot }) = self.leases.remove(&id) else { return };
        self.timers.remove(&(lease.expires_at, Timer::Lease(id)));
        self.res_mut(slot).permits.free(lease.permit as usize);
        if let Some(ctx) = self.context_ids.get(&lease.context).copied() {
            let now = self.now;
            if let Some(cc) = self.cells.get_mut(&(slot, ctx)) {
                if cc.trial == Some(id) {
                    cc.trial = None;
                }
                if cc.probe == Some(id) {
                    cc.probe = None;
                    if cc.cell.cooled_out(now).is_some_and(|c| self.policy.recovery.probes(c)) {
                        self.probe_due.insert((slot, ctx));
                    }
                }
            }
        }
        if how == End::Expired {
            self.ended.push_back(id);
            self.ended_set.insert(id);
            if self.ended.len() > EXPIRED_MEMORY {
                if let Some(old) = self.ended.pop_front() {
                    self.ended_set.remove(&old);
                }
            }
        }
        self.reindex(slot);
        let kind = match how {
            End::Released => EventKind::Released { lease },
            End::Expired => EventKind::LeaseExpired { lease },
            End::Revoked => EventKind::Revoked { lease },
        };
        self.emit(at, kind);
    }

    // ---- reports ----

    fn intern(&mut self, context: &Context) -> u32 {
        if let Some(&c) = self.context_ids.get(context) {
            return c;
        }
        let c = self.contexts.len() as u32;
        self.contexts.push(context.clone());
        self.context_ids.insert(context.clone(), c);
        c
    }

    /// The cell of a resource in a context, created (within the cell budget) if new.
    fn cell_for(&mut self, slot: u32, context: &Context) -> Result<u32> {
        if let Some(&c) = self.context_ids.get(context) {
            if self.cells.contains_key(&(slot, c)) {
                return Ok(c);
            }
        }
        if let Some(max) = self.policy.max_cells {
            if self.cells.len() as u32 >= max {
                return Err(Error::BudgetExhausted { budget: "max_cells", limit: max as u64 });
            }
        }
        let c = self.intern(context);
        self.cells.insert((slot, c), ContextCell::new(Cell::new(), None));
        self.res_mut(slot).contexts.push(c);
        Ok(c)
    }

    /// Folds one outcome into the resource's cell for `context` and its global cell.
    pub fn report(&mut self, id: &ResourceId, context: &Context, outcome: Outcome, now: u64) -> Result<()> {
        outcome.revalidate()?;
        self.advance(now);
        let slot = self.slot_of(id)?;
        let ctx = self.cell_for(slot, context)?;
        let now = self.now;
        let policy = &self.policy;
        let r = self.resources[slot as usize].as_mut().expect("slot in use");
        r.global.apply(&outcome, now, policy, false);
        let t = self.cells.get_mut(&(slot, ctx)).expect("cell exists").cell.apply(&outcome, now, policy, true);
        if let Some((until, cause)) = t.cooled {
            self.probe_due.remove(&(slot, ctx));
            self.timers.insert((until, Timer::Cooldown(slot, ctx)));
            self.emit(now, EventKind::Cooled { resource: id.clone(), context: Some(context.clone()), until, cause });
        }
        if let Some(Pause { until, cause }) = t.paused {
            self.timers.insert((until, Timer::Pause(slot, Some(ctx))));
            self.emit(now, EventKind::Cooled { resource: id.clone(), context: Some(context.clone()), until, cause });
        }
        match outcome {
            Outcome::Failure { kind: FailureKind::QuotaExhausted, retry_after, .. } => {
                let until =
                    now.saturating_add(retry_after.unwrap_or(self.policy.rule(FailureKind::QuotaExhausted).base));
                let r = self.res_mut(slot);
                if let Some(pause) = Pause::extend(r.pause, until, FailureKind::QuotaExhausted) {
                    r.pause = Some(pause);
                    self.timers.insert((until, Timer::Pause(slot, None)));
                    let cause = pause.cause;
                    self.emit(now, EventKind::Cooled { resource: id.clone(), context: None, until, cause });
                }
            }
            Outcome::Failure { kind: FailureKind::AuthFailed, .. } => {
                let r = self.res_mut(slot);
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

    // ---- blocklist ----

    fn blocked(&self, slot: u32, ctx: Option<u32>) -> bool {
        self.res(slot).block.is_some()
            || ctx.and_then(|c| self.cells.get(&(slot, c))).is_some_and(|cc| cc.block.is_some())
    }

    /// Blocks a resource everywhere (`context: None`) or in one context, for
    /// `duration` nanoseconds or until unblocked. Live leases run on but are not renewed.
    pub fn block(
        &mut self,
        id: &ResourceId,
        context: Option<&Context>,
        duration: Option<u64>,
        reason: Option<String>,
        now: u64,
    ) -> Result<()> {
        if duration == Some(0) {
            return Err(Error::invalid("duration", "must be > 0 (omit it for a permanent block)"));
        }
        if let Some(r) = &reason {
            if r.len() > MAX_REASON_BYTES {
                return Err(Error::invalid("reason", "must be at most 1024 bytes"));
            }
            if r.chars().any(char::is_control) {
                return Err(Error::invalid("reason", "must not contain control characters"));
            }
        }
        self.advance(now);
        let slot = self.slot_of(id)?;
        let until = duration.map(|d| self.now.saturating_add(d));
        let block = Some(Block { until, reason: reason.clone() });
        let ctx = match context {
            None => {
                self.res_mut(slot).block = block;
                None
            }
            Some(context) => {
                let c = self.cell_for(slot, context)?;
                self.cells.get_mut(&(slot, c)).expect("cell exists").block = block;
                Some(c)
            }
        };
        if let Some(until) = until {
            self.timers.insert((until, Timer::Block(slot, ctx)));
        }
        self.reindex(slot);
        let context = context.cloned();
        self.emit(self.now, EventKind::Blocklisted { resource: id.clone(), context, until, reason });
        Ok(())
    }

    /// Lifts a block; returns whether one was in place.
    pub fn unblock(&mut self, id: &ResourceId, context: Option<&Context>, now: u64) -> Result<bool> {
        self.advance(now);
        let slot = self.slot_of(id)?;
        let lifted = match context {
            None => self.res_mut(slot).block.take().is_some(),
            Some(context) => match self.context_ids.get(context) {
                Some(&c) => self.cells.get_mut(&(slot, c)).is_some_and(|cc| cc.block.take().is_some()),
                None => false,
            },
        };
        if lifted {
            self.reindex(slot);
            let context = context.cloned();
            self.emit(self.now, EventKind::Unblocked { resource: id.clone(), context });
        }
        Ok(lifted)
    }

    // ---- inspection ----

    /// Cells whose cooldown has ended for a cause other than `blocked`, waiting
    /// for a probe; sorted by resource, then context.
    pub fn due_for_probe(&mut self, now: u64) -> Vec<(ResourceId, Context)> {
        self.advance(now);
        let mut due: Vec<_> = self
            .probe_due
            .iter()
            .filter(|&&(slot, c)| !self.blocked(slot, Some(c)))
            .map(|&(slot, c)| (self.res(slot).id.clone(), self.contexts[c as usize].clone()))
            .collect();
        due.sort();
        due
    }

    /// The global cell first, then one per context, sorted by context.
    pub fn cells(&mut self, id: &ResourceId, now: u64) -> Result<Vec<CellView>> {
        self.advance(now);
        let slot = self.slot_of(id)?;
        let r = self.res(slot);
        let now = self.now;
        let mut out = Vec::with_capacity(r.contexts.len() + 1);
        out.push(self.view(&r.global, None, r.block.clone(), r.pause, None, now));
        let mut ctxs: Vec<u32> = r.contexts.clone();
        ctxs.sort_by(|a, b| self.contexts[*a as usize].cmp(&self.contexts[*b as usize]));
        for c in ctxs {
            let cc = &self.cells[&(slot, c)];
            let block = cc.block.clone().or_else(|| r.block.clone());
            out.push(self.view(&cc.cell, Some((slot, c, cc)), block, None, Some(&r.global), now));
        }
        Ok(out)
    }

    fn view(
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
        let slot_pause = ctx.map_or(pause, |(slot, _, _)| self.res(slot).pause);
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
                block.is_none() && self.probe_due.contains(&(slot, c)),
            ),
            None => (false, false),
        };
        CellView {
            context: ctx.map(|(_, c, _)| self.contexts[c as usize].clone()),
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
            .resources
            .iter()
            .flatten()
            .map(|r| ResourceView {
                resource: r.id.clone(),
                permits: r.permits.count() as u32,
                leased: r.permits.held_from(0).count() as u32,
                score: r.global.score,
                contexts: r.contexts.len() as u32,
                block: r.block.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.resource.cmp(&b.resource));
        out
    }

    /// The live leases, sorted by id.
    pub fn leases(&self) -> Vec<Lease> {
        let mut out: Vec<Lease> = self.leases.values().map(|e| e.lease.clone()).collect();
        out.sort_by_key(|l| l.id);
        out
    }

    /// Heap bytes this pool holds, an upper bound of what it asked its
    /// allocator for (see `footprint`): what a host holds a tenant's memory
    /// share to. A walk over every resource, context and retired fence set.
    pub fn footprint(&self) -> u64 {
        use crate::footprint::{btree, table, vec};
        use core::mem::size_of;
        let reason = |b: &Option<Block>| b.as_ref().and_then(|b| b.reason.as_ref()).map_or(0, String::capacity);
        let resources: usize = self
            .resources
            .iter()
            .flatten()
            .map(|r| {
                r.id.heap_bytes()
                    + r.permits.heap_bytes()
                    + reason(&r.block)
                    + r.global.heap_bytes()
                    + vec::<u32>(r.contexts.capacity())
            })
            .sum();
        let contexts: usize = self.contexts.iter().map(Context::heap_bytes).sum();
        let cells: usize = self.cells.values().map(|cc| cc.cell.heap_bytes() + reason(&cc.block)).sum();
        let retired: usize = self.retired_fences.iter().map(|(id, f)| id.heap_bytes() + vec::<u64>(f.capacity())).sum();
        // A lease's context is the caller's, not always the interned one.
        let leases: usize = self.leases.values().map(|e| e.lease.context.heap_bytes()).sum();
        let total = size_of::<Pool>()
            + vec::<Option<Resource>>(self.resources.capacity())
            + resources
            + vec::<u32>(self.free_slots.capacity())
            + table::<(ResourceId, u32)>(self.by_id.capacity())
            + vec::<Context>(self.contexts.capacity())
            + contexts
            + table::<(Context, u32)>(self.context_ids.capacity())
            + table::<((u32, u32), ContextCell)>(self.cells.capacity())
            + cells
            + btree::<(ResourceId, Vec<u64>)>(self.retired_fences.len())
            + retired
            + table::<(u64, LeaseEntry)>(self.leases.capacity())
            + leases
            + vec::<u64>(self.ended.capacity())
            + table::<u64>(self.ended_set.capacity())
            + btree::<(u64, Timer)>(self.timers.len())
            + btree::<(u32, u32)>(self.probe_due.len())
            + self.index.heap_bytes()
            + vec::<Event>(self.events.capacity());
        total as u64
    }

    pub fn stats(&self) -> Stats {
        Stats {
            footprint: self.footprint(),
            resources: self.by_id.len() as u32,
            cells: self.cells.len() as u32,
            contexts: self.contexts.len() as u32,
            live_leases: self.leases.len() as u32,
            available: self.index.available(),
            due_for_probe: self.probe_due.len() as u32,
            now: self.now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    /// The incrementally kept index must equal one rebuilt from scratch.
    fn assert_index_consistent(pool: &mut Pool) {
        let records: Vec<((u32, u32), ContextSlot)> = pool.cells.iter().map(|(k, cc)| (*k, cc.indexed)).collect();
        for cc in pool.cells.values_mut() {
            cc.indexed = ContextSlot::default();
        }
        let mut fresh = Index::new();
        core::mem::swap(&mut fresh, &mut pool.index);
        for slot in 0..pool.resources.len() as u32 {
            if pool.resources[slot as usize].is_some() {
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
                    0 => drop(pool.register(id.clone(), 1 + rng.below(3) as u32, now)),
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
