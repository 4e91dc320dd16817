//! The pool: registration, selection, leases, reports, blocklist and timers,
//! driven entirely by the caller's calls and the `now` each call carries.
//!
//! `Pool` composes its state; each module holds one part of it and the
//! operations that keep that part's invariants: `registry` (slots, serials,
//! retired fences), `contexts` (the interned context names), `timers`,
//! `leases`, `select` (the index and choosing a candidate), `acquire` (the
//! propose/settle protocol), `reports`, `blocklist`, `views` (inspection)
//! and `standing` (why an acquire found nothing, and the `fail_open`
//! fallback). The cells (`cells`: chunks, and a table of where each is),
//! keyed by slot and context number, join the registry and the contexts
//! and stay on `Pool`.

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::authority::{Authority, Local};
use crate::error::Result;
use crate::event::{Event, EventKind};
use crate::index::Index;
use crate::policy::Policy;
use crate::ratelimit::Bucket;
use crate::rng::Rng;
use events::Events;
use outage::Outages;

mod acquire;
mod affinity;
mod blocklist;
mod cells;
mod contexts;
mod events;
mod leases;
mod outage;
mod quota;
mod registry;
mod reports;
mod select;
mod standing;
mod timers;
mod usage;
mod views;

pub use acquire::{Proposal, Settled};
pub(crate) use affinity::Affinities;
pub use affinity::MAX_AFFINITIES;
pub(crate) use blocklist::check_block;
pub use blocklist::Block;
pub(crate) use cells::Cells;
pub(crate) use contexts::Contexts;
pub(crate) use leases::LeaseTable;
pub(crate) use quota::QuotaGroups;
pub use quota::{GroupView, MAX_LIMITED_GROUPS};
pub use registry::Registration;
pub(crate) use registry::{ContextCell, Registry};
pub(crate) use timers::{Timer, TimerTable};
pub use views::{CellView, ResourceView, Stats};

/// Most permits one resource may have.
pub const MAX_PERMITS: u32 = 1024;
/// Longest block reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The whole pool. Every method that takes `now` first fires the timers due by
/// then (lease expiry, cooldown ends, block expiry); a `now` earlier than one
/// already seen is treated as that one, so time never runs backwards inside.
#[derive(Debug)]
pub struct Pool {
    pub(crate) authority: Box<dyn Authority>,
    pub(crate) policy: Policy,
    pub(crate) rng: Rng,
    pub(crate) now: u64,
    pub(crate) registry: Registry,
    pub(crate) quota: QuotaGroups,
    pub(crate) contexts: Contexts,
    pub(crate) cells: Cells,
    pub(crate) leases: LeaseTable,
    pub(crate) timers: TimerTable,
    pub(crate) probe_due: BTreeSet<(u32, u32)>,
    pub(crate) bucket: Option<Bucket>,
    pub(crate) index: Index,
    pub(crate) affinities: Affinities,
    pub(crate) events: Events,
    pub(crate) outages: Outages,
    /// Log entries this pool folded or wrote that did not apply (see
    /// `Journal::fold`): each is refused alike in every process, so every
    /// process that read the whole log counts the same.
    refused_entries: u64,
    /// The log position folded into this pool (`Journal`); each grant names
    /// it to the authority, which refuses one judged on an older view of
    /// registrations and groups.
    view: u64,
    /// An authority answered `Stale` since the last `take_stale`.
    stale: bool,
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
            registry: Registry::default(),
            quota: QuotaGroups::default(),
            contexts: Contexts::default(),
            cells: Cells::default(),
            leases: LeaseTable::new(),
            timers: TimerTable::default(),
            probe_due: BTreeSet::new(),
            bucket,
            index: Index::new(),
            affinities: Affinities::default(),
            events: Events::default(),
            outages: Outages::default(),
            refused_entries: 0,
            view: 0,
            stale: false,
        }
    }

    /// Lease ids from here on are at least `floor`. A host opening a tenant
    /// under a new owner epoch passes a floor above any id the previous owner
    /// could have handed out after its last checkpoint, so no id is reused
    /// and a holder from before a crash never names someone else's lease.
    pub fn raise_lease_ids(&mut self, floor: u64) {
        self.leases.raise_ids(floor);
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
        self.events.drain()
    }

    pub fn pending_events(&self) -> usize {
        self.events.pending.len()
    }

    /// Keeps at most `limit` events for `drain_events`, dropping the oldest
    /// first (unbounded by default); 0 records none, so a host that hands
    /// events to nobody saves building them on every operation.
    pub fn set_event_limit(&mut self, limit: usize) {
        self.events.set_limit(limit);
    }

    /// Events dropped so far because `limit` were already waiting.
    pub fn dropped_events(&self) -> u64 {
        self.events.dropped
    }

    /// Counts a log entry that did not apply (`Journal`).
    pub fn count_refused_entry(&mut self) {
        self.refused_entries += 1;
    }

    /// Log entries folded or written that did not apply.
    pub fn refused_entries(&self) -> u64 {
        self.refused_entries
    }

    /// The log position folded into this pool, which its grants name.
    pub fn set_view(&mut self, view: u64) {
        self.view = view;
    }

    pub fn log_view(&self) -> u64 {
        self.view
    }

    /// Whether an authority answered `Stale` since the last call: the log
    /// holds a change this pool has not folded, and its acquire gave up.
    pub fn take_stale(&mut self) -> bool {
        core::mem::take(&mut self.stale)
    }

    /// Notes an authority's `Stale` answer.
    pub(super) fn stale_view(&mut self) {
        self.stale = true;
    }

    pub(super) fn emit(&mut self, at: u64, kind: EventKind) {
        self.events.push(Event { at, kind });
    }
}
