//! `HeldLease`: the holder's handle on one granted lease.
//!
//! The handle keeps the holder's side of invariant I7: a lease counts as
//! held only until its local deadline, `send time + TTL - margin`, where the
//! send time is the clock reading taken just before the acquire or renewal
//! went out. Every way of losing it (a renewal refused, the resource
//! blocked, the tenant's ownership lost, the deadline passed, `max_hold`
//! reached, the pool closed) ends in one place, [`HeldLease::lose`], which
//! tells the listeners once.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use repute_core::{Lease, Secret};

use crate::error::{Error, Result, StoreError};
use crate::ops::PoolOps;
use crate::pool::Pool;
use crate::two_phase::Revoke;

use super::Holder;

/// Why a lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// The local deadline passed without a renewal.
    Expired,
    /// The authority refused the renewal (the lease ended or was superseded).
    Refused,
    /// The resource was blocked (renewals of a blocked resource are refused).
    Blocked,
    /// Another process took the tenant over.
    OwnerLost,
    /// Auto-renewal kept it as long as `max_hold` allows.
    MaxHold,
    /// The pool was closed.
    Closed,
}

impl Loss {
    /// The name every front end shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Loss::Expired => "expired",
            Loss::Refused => "renewal_refused",
            Loss::Blocked => "blocked",
            Loss::OwnerLost => "owner_lost",
            Loss::MaxHold => "max_hold",
            Loss::Closed => "closed",
        }
    }

    /// How a refused renewal loses the lease.
    fn of(e: &Error) -> Loss {
        match e {
            Error::Blocked => Loss::Blocked,
            Error::NotOwner { .. } | Error::Store(StoreError::StaleEpoch { .. }) => Loss::OwnerLost,
            Error::Closed => Loss::Closed,
            _ => Loss::Refused,
        }
    }
}

/// What `release` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The lease was held up to the release.
    Held,
    /// It had been lost, and the holder had been told (a failed renewal, a
    /// loss callback, a look at `lost`).
    Lost,
    /// It had been lost without anyone telling the holder: work done under
    /// it was not protected to the end. A front end that wraps a block in
    /// the lease reports this as `LeaseExpired`.
    LostUnseen,
}

/// Called once, from the thread that found the loss, with no lock held.
pub type Listener = Box<dyn FnOnce(Loss) + Send>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Held,
    Released,
    Lost(Loss),
}

/// Auto-renewal of one lease.
#[derive(Debug, Clone, Copy)]
struct Auto {
    /// When `max_hold` ends the lease (pool clock), if it is capped.
    until: Option<u64>,
}

struct State {
    status: Status,
    expires_at: u64,
    deadline: u64,
    /// The clock reading before the last grant or renewal was sent.
    sent: u64,
    listeners: Vec<Listener>,
    auto: Option<Auto>,
    /// The holder has been told of the loss.
    told: bool,
    /// How `release` found the lease, once it ran.
    released_as: Option<Released>,
    /// Why it was lost, kept after a release.
    loss: Option<Loss>,
}

/// A lease as its holder has it. Shared (`Arc`) between the binding's
/// object and, while it is auto-renewed or listened to, the pool's watcher.
pub struct HeldLease {
    holder: Arc<Holder>,
    /// As granted; its `expires_at` is superseded by the state's.
    lease: Lease,
    state: Mutex<State>,
    /// Serialises renewals and the release of this handle, so that a
    /// renewal in flight cannot resurrect a lease released meanwhile.
    op: Mutex<()>,
    /// The resource's secret: brought by the holder's own acquires, asked
    /// for on first use by a lease adopted from elsewhere (a probe, a
    /// resume, a grant over a front end's own connection).
    secret: OnceLock<Option<Secret>>,
}

impl std::fmt::Debug for HeldLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLease").field("lease", &self.lease).field("status", &self.state().status).finish()
    }
}

/// What ended a renewal: nothing (renewed), or the loss it caused.
enum Renewal {
    Renewed,
    /// The store did not answer; the lease holds until its deadline.
    Unavailable(Error),
    Lost(Error),
}

impl HeldLease {
    pub(crate) fn new(holder: Arc<Holder>, lease: Lease, sent: u64) -> Arc<HeldLease> {
        let deadline = holder.deadline(sent, lease.ttl);
        let state = State {
            status: Status::Held,
            expires_at: lease.expires_at,
            deadline,
            sent,
            listeners: Vec::new(),
            auto: None,
            told: false,
            released_as: None,
            loss: None,
        };
        Arc::new(HeldLease { holder, lease, state: Mutex::new(state), op: Mutex::new(()), secret: OnceLock::new() })
    }

    /// A lease granted with its resource's secret
    /// ([`crate::PoolOps::acquire_with_secret`]): [`Self::secret`] asks the
    /// pool nothing more.
    pub(crate) fn with_secret(holder: Arc<Holder>, lease: Lease, sent: u64, secret: Option<Secret>) -> Arc<HeldLease> {
        let held = HeldLease::new(holder, lease, sent);
        held.secret.get_or_init(|| secret);
        held
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn op(&self) -> MutexGuard<'_, ()> {
        self.op.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease as granted (id, token, resource, context, permit, kind, TTL).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    pub fn holder(&self) -> &Arc<Holder> {
        &self.holder
    }

    /// The secret the lease's resource was registered with (an API key,
    /// say), if any: as the acquire brought it, or asked of the pool on the
    /// first call, then kept, so it stays readable after the lease ends.
    /// An error (the resource was unregistered first, the pool closed) is
    /// not kept: a later call asks again.
    pub fn secret(&self) -> Result<Option<Secret>> {
        if let Some(secret) = self.secret.get() {
            return Ok(secret.clone());
        }
        let id = &self.lease.resource;
        let fetched = self.holder.with(|p| p.secret(id.kind(), id.value()))?;
        Ok(self.secret.get_or_init(|| fetched).clone())
    }

    /// When the authority lets the lease lapse (pool clock), as of the last renewal.
    pub fn expires_at(&self) -> u64 {
        self.state().expires_at
    }

    /// The local deadline (pool clock): before `expires_at` by the margin.
    pub fn deadline(&self) -> u64 {
        self.state().deadline
    }

    /// True while the lease may be relied on: not released, not lost, and
    /// the local deadline has not passed.
    pub fn valid(&self) -> bool {
        let s = self.state();
        s.status == Status::Held && self.holder.now() < s.deadline && !self.holder.is_closed()
    }

    /// Ns left until the local deadline; 0 once the lease is not valid.
    pub fn expires_in(&self) -> u64 {
        let s = self.state();
        match s.status {
            Status::Held => s.deadline.saturating_sub(self.holder.now()),
            _ => 0,
        }
    }

    pub fn released(&self) -> bool {
        self.state().status == Status::Released
    }

    /// How `release` found the lease, once it ran.
    pub fn released_as(&self) -> Option<Released> {
        self.state().released_as
    }

    /// Why the lease was lost, once it was, released since or not (a
    /// deadline that passed unseen counts from the first look at it).
    pub fn lost(&self) -> Option<Loss> {
        self.check_deadline();
        let mut s = self.state();
        s.told |= s.loss.is_some();
        s.loss
    }

    /// Notices a loss no call reported: the deadline passed, or the pool closed.
    fn check_deadline(&self) {
        let (held, passed) = {
            let s = self.state();
            (s.status == Status::Held, self.holder.now() >= s.deadline)
        };
        if held && self.holder.is_closed() {
            self.lose(Loss::Closed);
        } else if held && passed {
            self.lose(Loss::Expired);
        }
    }

    /// The one way a held lease becomes lost: the status changes once and
    /// the listeners run once, outside every lock.
    pub(crate) fn lose(&self, loss: Loss) {
        tell(loss, self.mark_lost(loss));
    }

    /// Marks a held lease lost and hands back the listeners to tell; none
    /// when it was no longer held.
    fn mark_lost(&self, loss: Loss) -> Vec<Listener> {
        let mut s = self.state();
        if s.status != Status::Held {
            return Vec::new();
        }
        s.status = Status::Lost(loss);
        s.loss = Some(loss);
        s.told = !s.listeners.is_empty();
        std::mem::take(&mut s.listeners)
    }

    /// Runs `listener` once when the lease is lost; at once if it already
    /// is. A released lease is never lost, so its listeners never run. A
    /// deadline passing is noticed by the pool's watcher.
    pub fn on_lost(self: &Arc<Self>, listener: Listener) {
        self.check_deadline();
        let now = {
            let mut s = self.state();
            match s.status {
                Status::Held => {
                    s.listeners.push(listener);
                    None
                }
                Status::Lost(loss) => Some((listener, loss)),
                Status::Released => return,
            }
        };
        match now {
            Some((listener, loss)) => listener(loss),
            None => self.holder.watch.add(&self.holder, self),
        }
    }

    /// Renews the lease from a thread of the pool's own, at a third of its
    /// TTL, until it is released or lost; with `max_hold` (ns from now), it
    /// then ends: lost as `Loss::MaxHold`, and its permit released.
    pub fn auto_renew(self: &Arc<Self>, max_hold: Option<u64>) {
        let until = max_hold.map(|h| self.holder.now().saturating_add(h));
        self.state().auto = Some(Auto { until });
        self.holder.watch.add(&self.holder, self);
    }

    /// Extends the lease by its TTL from now. Any failure, or a call after
    /// the local deadline, loses the lease for good: the authority may have
    /// handed the permit on. A lost lease is refused with `LeaseExpired`.
    pub fn renew(&self) -> Result<()> {
        let _op = self.op();
        let e = match self.renew_locked() {
            Renewal::Renewed => return Ok(()),
            Renewal::Unavailable(e) => {
                self.lose(Loss::Refused);
                e
            }
            Renewal::Lost(e) => e,
        };
        self.state().told = true;
        Err(e)
    }

    /// One renewal, under `op`; a refusal has lost the lease already.
    fn renew_locked(&self) -> Renewal {
        let status = self.state().status;
        match status {
            Status::Released => return Renewal::Lost(Error::invalid("lease", "is released")),
            Status::Lost(_) => return Renewal::Lost(Error::LeaseExpired),
            Status::Held => {}
        }
        let sent = self.holder.now();
        if sent >= self.state().deadline {
            self.lose(Loss::Expired);
            return Renewal::Lost(Error::LeaseExpired);
        }
        match self.holder.with(|p| p.renew(self.lease.id, self.lease.token)) {
            Ok(renewed) => {
                let mut s = self.state();
                if s.status == Status::Held {
                    s.expires_at = renewed.expires_at;
                    s.deadline = self.holder.deadline(sent, renewed.ttl);
                    s.sent = sent;
                }
                Renewal::Renewed
            }
            Err(e @ Error::Store(StoreError::Unavailable(_))) => Renewal::Unavailable(e),
            Err(e) => {
                self.lose(Loss::of(&e));
                Renewal::Lost(e)
            }
        }
    }

    /// Ends the lease and frees its permit, and says whether it was still
    /// held. A lost lease (or one the pool had ended) raises nothing: its
    /// grant is still revoked at the authority, conditionally on its token,
    /// so a permit the authority still holds for it frees at once and a
    /// newer holder is never touched. Calling it again does nothing. An
    /// error (the store did not answer) leaves the lease as it was, for the
    /// holder to retry.
    pub fn release(&self) -> Result<Released> {
        self.release_by(|p, l| p.release(l.id, l.token)).map(|(held, _)| held)
    }

    /// `release` with the pool's part done by `end` (a front end that sends
    /// the revoke on its own connection passes the deferred release); its
    /// answer comes back when the pool still had the lease.
    pub fn release_by<R>(&self, end: impl FnOnce(&mut Pool, &Lease) -> Result<R>) -> Result<(Released, Option<R>)> {
        let _op = self.op();
        if let Some(released) = self.state().released_as {
            return Ok((released, None));
        }
        let answer = self.holder.with(|p| match end(p, &self.lease) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.is_lease_gone() => {
                let revoke = Revoke {
                    resource: self.lease.resource.clone(),
                    permit: self.lease.permit,
                    token: self.lease.token,
                };
                p.revoke(&revoke).map(|()| None)
            }
            Err(e) => Err(e),
        });
        let answer = answer?;
        let released = {
            let mut s = self.state();
            let in_time = self.holder.now() < s.deadline;
            let released = match (s.status, &answer) {
                (Status::Held, Some(_)) if in_time => Released::Held,
                (Status::Lost(_), _) if s.told => Released::Lost,
                _ => Released::LostUnseen,
            };
            s.status = Status::Released;
            s.released_as = Some(released);
            s.listeners.clear();
            released
        };
        self.holder.notify_freed();
        Ok((released, answer))
    }

    /// Counts `used` tokens for the lease instead of the `cost` its acquire
    /// reserved against the resource's `tpm` (see [`PoolOps::reconcile`]):
    /// while the lease is live, so call it before releasing.
    pub fn reconcile(&self, used: u64) -> Result<()> {
        self.holder.with(|p| p.reconcile(self.lease.id, self.lease.token, used))
    }

    /// Folds one outcome of using the lease into its resource's reputation;
    /// with `usage`, the tokens it used are reconciled first (as
    /// `reconcile`), and a refused reconcile reports nothing.
    pub fn report(&self, outcome: &repute_core::Outcome, usage: Option<u64>) -> Result<()> {
        let (id, context) = (&self.lease.resource, self.lease.context.as_str());
        self.holder.with(|p| {
            if let Some(used) = usage {
                p.reconcile(self.lease.id, self.lease.token, used)?;
            }
            p.report(id.kind(), id.value(), context, outcome)
        })
    }

    /// Reports the upstream's answer to this use, read by the resource's
    /// profile (see [`crate::profile`]), reconciling `usage` first as
    /// `report` does; an answer that says nothing about the resource (a
    /// provider's overload) only reconciles.
    pub fn report_http(&self, answer: &crate::profile::HttpAnswer, usage: Option<u64>) -> Result<()> {
        let outcome = self.holder.profiles().classify(self.lease.resource.kind(), answer)?;
        match (outcome, usage) {
            (Some(outcome), usage) => self.report(&outcome, usage),
            (None, Some(used)) => self.reconcile(used),
            (None, None) => Ok(()),
        }
    }

    /// The soonest the watcher must look at this lease (pool clock): its
    /// deadline, its next renewal, its `max_hold`.
    pub(crate) fn due(&self) -> u64 {
        let s = self.state();
        let renewal = s.auto.map(|a| {
            let next = s.sent.saturating_add(self.lease.ttl / 3);
            a.until.map_or(next, |u| next.min(u))
        });
        renewal.map_or(s.deadline, |r| r.min(s.deadline))
    }

    /// The watcher's turn: renews what is due, ends what must end. Returns
    /// when to look again (pool clock), or `None` once there is nothing left
    /// to watch.
    pub(crate) fn tend(&self, now: u64) -> Option<u64> {
        let (status, deadline, sent, auto) = {
            let s = self.state();
            (s.status, s.deadline, s.sent, s.auto)
        };
        if status != Status::Held {
            return None;
        }
        if self.holder.is_closed() {
            self.lose(Loss::Closed);
            return None;
        }
        if let Some(until) = auto.and_then(|a| a.until) {
            if now >= until {
                // The permit goes back now, before the holder is told to
                // stop, so a listener finds the lease released.
                let listeners = self.mark_lost(Loss::MaxHold);
                drop(self.release());
                tell(Loss::MaxHold, listeners);
                return None;
            }
        }
        if now >= deadline {
            self.lose(Loss::Expired);
            return None;
        }
        let Some(auto) = auto else { return Some(deadline) };
        let due = sent.saturating_add(self.lease.ttl / 3);
        if now >= due {
            let _op = self.op();
            match self.renew_locked() {
                Renewal::Renewed => {}
                // Tried again soon; the deadline still bounds it.
                Renewal::Unavailable(_) => return Some(now.saturating_add(self.lease.ttl / 20).min(deadline)),
                Renewal::Lost(_) => return None,
            }
        }
        let s = self.state();
        let next = s.sent.saturating_add(self.lease.ttl / 3).min(s.deadline);
        Some(auto.until.map_or(next, |u| next.min(u)))
    }
}

/// Runs the listeners of a lease just lost, outside its lock.
fn tell(loss: Loss, listeners: Vec<Listener>) {
    for listener in listeners {
        listener(loss);
    }
}
