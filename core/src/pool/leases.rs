//! The lease table: granting, holding, renewing, releasing and ending leases.

use alloc::collections::VecDeque;
use hashbrown::{HashMap, HashSet};

use crate::authority::{GrantAnswer, GrantRequest};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::id::Context;
use crate::lease::{Lease, LeaseEntry, LeaseKind};

use super::{Pool, Timer};

/// The live leases, the id the next one gets, and a bounded memory of
/// expired ids. Ids only grow; an expired id is remembered so a late holder
/// hears `LeaseExpired`, not `UnknownLease`.
#[derive(Debug)]
pub(crate) struct LeaseTable {
    pub live: HashMap<u64, LeaseEntry>,
    pub next_id: u64,
    ended: VecDeque<u64>,
    ended_set: HashSet<u64>,
}

/// How many ended lease ids are remembered to answer `LeaseExpired` rather than `UnknownLease`.
const EXPIRED_MEMORY: usize = 4096;

impl LeaseTable {
    pub fn new() -> Self {
        LeaseTable { live: HashMap::new(), next_id: 1, ended: VecDeque::new(), ended_set: HashSet::new() }
    }

    /// Ids from here on are at least `floor`.
    pub fn raise_ids(&mut self, floor: u64) {
        self.next_id = self.next_id.max(floor);
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Takes over `other`'s memory of expired ids (a restore keeps what the
    /// replaced pool told holders).
    pub fn take_ended(&mut self, other: &mut LeaseTable) {
        self.ended = core::mem::take(&mut other.ended);
        self.ended_set = core::mem::take(&mut other.ended_set);
    }

    fn remember_expired(&mut self, id: u64) {
        self.ended.push_back(id);
        self.ended_set.insert(id);
        if self.ended.len() > EXPIRED_MEMORY {
            if let Some(old) = self.ended.pop_front() {
                self.ended_set.remove(&old);
            }
        }
    }

    /// The live lease `id` if `token` is its token.
    pub(super) fn find(&self, id: u64, token: u64) -> Result<&LeaseEntry> {
        match self.live.get(&id) {
            Some(e) if e.lease.token == token => Ok(e),
            Some(_) => Err(Error::StaleLease),
            None if self.ended_set.contains(&id) => Err(Error::LeaseExpired),
            None => Err(Error::UnknownLease),
        }
    }

    /// Heap bytes of the table (see `Pool::footprint`).
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        // A lease's context is the caller's, not always the interned one.
        let contexts: usize = self.live.values().map(|e| e.lease.context.heap_bytes()).sum();
        table::<(u64, LeaseEntry)>(self.live.capacity())
            + contexts
            + vec::<u64>(self.ended.capacity())
            + table::<u64>(self.ended_set.capacity())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Released,
    Expired,
    Revoked,
}

impl Pool {
    /// Asks the authority for the first free permit of `slot` (one token of
    /// its limits); `Err(())` if its limits or the authority refuse.
    pub(super) fn grant(
        &mut self,
        slot: u32,
        context: &Context,
        ctx: Option<u32>,
        kind: LeaseKind,
        ttl: u64,
    ) -> core::result::Result<Lease, ()> {
        self.check_limits(slot, context, 1).map_err(|_| ())?;
        let claim = self.claim(slot, context, 1);
        let r = self.registry.res(slot);
        let permit = r.permits.first_free().expect("selected with a free permit");
        let last = r.permits.fences()[permit];
        let request = GrantRequest { ttl, last, claim: claim.as_ref(), view: self.log_view() };
        match self.authority.grant(&r.id, permit as u32, request) {
            GrantAnswer::Granted(token) if token > last => {
                Ok(self.hold(slot, permit, token, context, ctx, kind, ttl, self.now, 1))
            }
            GrantAnswer::Limited(wait) => {
                self.limited_by_authority(slot, wait);
                Err(())
            }
            GrantAnswer::ContextLimited(wait) => {
                self.context_limited_by_authority(slot, context, wait);
                Err(())
            }
            GrantAnswer::GroupLimited(index, wait) => {
                self.group_limited_by_authority(slot, index, wait);
                Err(())
            }
            GrantAnswer::Stale => {
                self.stale_view();
                Err(())
            }
            GrantAnswer::Granted(_) | GrantAnswer::Held => Err(()),
        }
    }

    /// Records a granted lease on `permit` of `slot`, dated `at`, that
    /// reserved `cost` tokens, and counts it against the resource's limits.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn hold(
        &mut self,
        slot: u32,
        permit: usize,
        token: u64,
        context: &Context,
        ctx: Option<u32>,
        kind: LeaseKind,
        ttl: u64,
        at: u64,
        cost: u64,
    ) -> Lease {
        let r = self.registry.res_mut(slot);
        let id = self.leases.take_id();
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
        self.timers.arm(lease.expires_at, Timer::Lease(id));
        let limits = self.registry.res(slot).limits;
        let grouped = self.groups_count(slot);
        let counted_at = (limits.counted() || limits.per_context.counted() || grouped).then_some(self.now);
        let cost = if limits.weighed() || self.groups_weigh(slot) { cost } else { 0 };
        self.leases.live.insert(id, LeaseEntry { lease: lease.clone(), slot, ctx, cost, counted_at });
        self.reindex(slot);
        self.emit(at, EventKind::Leased { lease: lease.clone() });
        self.count_grant(slot, context, cost);
        // A cell that learned a pace is the one it had before this grant:
        // a cell the grant's count made has learned nothing.
        if let Some(c) = ctx {
            self.pace_cell(slot, c);
        }
        lease
    }

    /// Extends a live lease by its TTL from `now`. Refused for a blocked resource.
    pub fn renew(&mut self, id: u64, token: u64, now: u64) -> Result<Lease> {
        self.advance(now);
        let e = self.leases.find(id, token)?;
        let ctx = e.ctx(&self.contexts);
        if self.blocked(e.slot, ctx) {
            return Err(Error::Blocked);
        }
        let l = &e.lease;
        // A newer token for the permit (restored from a later snapshot, or
        // issued after this lease's snapshot was taken) means this holder
        // was superseded, whoever the authority is.
        let superseded = self.registry.res(e.slot).permits.fences()[l.permit as usize] > l.token;
        if superseded || !self.authority.extend(&l.resource, l.permit, l.token, l.ttl) {
            self.end_lease(id, End::Expired, self.now);
            return Err(Error::LeaseExpired);
        }
        let e = self.leases.live.get_mut(&id).expect("checked live");
        self.timers.disarm(e.lease.expires_at, Timer::Lease(id));
        e.lease.expires_at = self.now.saturating_add(e.lease.ttl);
        let lease = e.lease.clone();
        self.timers.arm(lease.expires_at, Timer::Lease(id));
        self.emit(self.now, EventKind::Renewed { lease: lease.clone() });
        Ok(lease)
    }

    /// Ends a live lease and frees its permit.
    pub fn release(&mut self, id: u64, token: u64, now: u64) -> Result<()> {
        self.advance(now);
        let l = &self.leases.find(id, token)?.lease;
        self.authority.revoke(&l.resource, l.permit, l.token);
        self.end_lease(id, End::Released, self.now);
        Ok(())
    }

    /// The live lease `id` with `token`, refused as `release` refuses it:
    /// what a caller reports on before it releases (`report-and-release` in the WIT).
    pub fn held(&mut self, id: u64, token: u64, now: u64) -> Result<&Lease> {
        self.advance(now);
        Ok(&self.leases.find(id, token)?.lease)
    }

    /// The live lease with this id, if any.
    pub fn lease(&mut self, id: u64, now: u64) -> Option<Lease> {
        self.advance(now);
        self.leases.live.get(&id).map(|e| e.lease.clone())
    }

    pub(super) fn end_lease(&mut self, id: u64, how: End, at: u64) {
        let Some(entry) = self.leases.live.remove(&id) else { return };
        let ctx = entry.ctx(&self.contexts);
        let LeaseEntry { lease, slot, .. } = entry;
        self.timers.disarm(lease.expires_at, Timer::Lease(id));
        self.registry.res_mut(slot).permits.free(lease.permit as usize);
        self.group_lease_ended(slot);
        if let Some(ctx) = ctx {
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
            self.leases.remember_expired(id);
        }
        self.reindex(slot);
        let kind = match how {
            End::Released => EventKind::Released { lease },
            End::Expired => EventKind::LeaseExpired { lease },
            End::Revoked => EventKind::Revoked { lease },
        };
        self.emit(at, kind);
    }
}
