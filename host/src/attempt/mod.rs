//! The attempt protocol: one request of a user's HTTP client carried by the
//! pool's resources, once for every adapter (httpx, aiohttp, requests,
//! undici, ...), which only convert. Sans-IO like the core: the adapter
//! acquires (each waits its own way, on the selector and time this gives),
//! sends the request by the [`Route`] the lease gives, and says what came
//! back; [`Attempts`] reads it through the resource's profile, reports,
//! releases, and says what to do next ([`Step`]).
//!
//! Whom to blame. A result the profile reads as the resource's (a 429, a
//! ban, a dead key, a refused connection) is reported at once and the
//! request moves to another resource. A result that may be the request's
//! own (a 4xx the table reads as the resource working, a proxied site's
//! 5xx, an API's provider unreachable) is held back while one other
//! resource tries: when that one gives the same status, the request is at
//! fault, neither resource is reported and the answer is the caller's;
//! when it answers otherwise, the held result is reported as the profile
//! reads it. An API provider's passing failure (a 500, a 503, Anthropic's
//! 529) blames no one: the request tries again while its attempts and
//! time last.
//!
//! A success is delivered with its lease still held ([`Step::Stream`]), so
//! a streamed body keeps its resource's permit until the caller has read or
//! closed it; [`Attempts::finished`] then reports and releases. From
//! [`Attempts::begin`] on, the pool's watcher renews the lease: a call or a
//! body that outlasts the lease's TTL (an LLM's long answer, a download)
//! must not let the authority hand its permit to a second holder.

mod blame;
mod target;
#[cfg(test)]
mod tests;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::SystemTime;

use repute_core::{FailureKind, Outcome, ResourceId, Selector, MAX_EXCLUDE, SECOND};

use crate::error::{selector_error, Error, Result};
use crate::holder::{refusal_hint, HeldLease, Holder};
use crate::ops::PoolOps;
use crate::profile::{HttpAnswer, Profile};

pub use blame::Judged;
pub use target::{context_of, route, Route};

/// Attempts one request may make at most.
pub const MAX_ATTEMPTS: u32 = 16;
/// Attempts when the caller names no number: the first, another resource
/// after a resource's fault, and a third to tell a request's own fault.
pub const DEFAULT_ATTEMPTS: u32 = 3;
/// How long an attempt's lease is renewed at most (ns): a response its
/// caller never reads to the end nor closes frees its permit then.
pub const MAX_HOLD: u64 = 10 * 60 * SECOND;

/// How an adapter's requests try: what may carry them, how often and for
/// how long; each request starts from it with its own context.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The caller's selector; the protocol adds what it tried to `exclude`.
    pub selector: Selector,
    /// 1..=[`MAX_ATTEMPTS`].
    pub attempts: u32,
    /// For the whole request, waits for a lease included (ns); `None`: no limit.
    pub timeout: Option<u64>,
}

impl Default for Plan {
    /// Any resource, [`DEFAULT_ATTEMPTS`], no time limit.
    fn default() -> Plan {
        Plan { selector: Selector::default(), attempts: DEFAULT_ATTEMPTS, timeout: None }
    }
}

impl Plan {
    /// The plan checked once, for `holder`'s pool: an adapter's, from which
    /// each request starts with its context and nothing checked again.
    pub fn checked(self, holder: Arc<Holder>) -> Result<CheckedPlan> {
        self.check()?;
        Ok(CheckedPlan { holder, plan: self })
    }

    /// Refuses a bad part naming it: `attempts`, `timeout`, the
    /// selector's parts as [`selector_error`] names them.
    fn check(&self) -> Result<()> {
        if !(1..=MAX_ATTEMPTS).contains(&self.attempts) {
            return Err(Error::invalid("attempts", "must be in 1..=16"));
        }
        if self.timeout == Some(0) {
            return Err(Error::invalid("timeout", "must be > 0"));
        }
        self.selector.validate().map_err(|e| selector_error(e.into()))
    }
}

/// A [`Plan`] checked once ([`Plan::checked`]), with the pool it is for.
#[derive(Debug, Clone)]
pub struct CheckedPlan {
    holder: Arc<Holder>,
    plan: Plan,
}

impl CheckedPlan {
    /// One request's attempts, counted in `context`.
    pub fn start(&self, context: impl Into<String>) -> Attempts {
        let (holder, plan) = (self.holder.clone(), self.plan.clone());
        let deadline = plan.timeout.map(|t| holder.now().saturating_add(t));
        Attempts {
            holder,
            context: context.into(),
            excluded: plan.selector.exclude.len(),
            selector: plan.selector,
            attempts: plan.attempts,
            deadline,
            made: 0,
            current: None,
            held_back: None,
        }
    }
}

/// What the adapter does after telling an attempt's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Deliver the answer; its lease is still held: call
    /// [`Attempts::finished`] once its body is consumed or closed.
    Stream,
    /// Deliver this answer (or raise this transport error): the request is done.
    Deliver,
    /// Try another resource: acquire again with [`Attempts::selector`].
    Retry,
}

/// What the adapter does after a refused acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Wait (at most this hint, ns, when known) and acquire again.
    Wait(Option<u64>),
    /// Acquire again at once: the selector changed.
    Again,
    /// Stop: deliver the last answer, or raise the refusal if there was none.
    GiveUp,
}

/// What [`Attempts::refused`] answers to `e` without waiting: go back to
/// what the request tried (`back`), or give up when nothing is registered
/// beyond what it `tried`, or when a `suspect` result is held back and the
/// refusal is settled (see [`Attempts::refused`]); `None`: the refusal's
/// hint decides.
fn at_once(e: &Error, back: bool, tried: bool, suspect: bool) -> Option<Refused> {
    match e {
        Error::NoResourceAvailable(_) if back => Some(Refused::Again),
        Error::NoResourceAvailable(r) if r.registered == 0 && tried => Some(Refused::GiveUp),
        _ if suspect && refusal_hint(e).is_some_and(|h| h.settled) => Some(Refused::GiveUp),
        _ => None,
    }
}

/// What was seen on a resource, to tell whether a second one sees the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Status(u16),
    Transport(FailureKind),
}

/// A suspect result, not reported until a second resource tells whose fault it was.
#[derive(Debug)]
struct HeldBack {
    lease: Arc<HeldLease>,
    seen: Seen,
    outcome: Option<Outcome>,
}

/// The attempt in flight.
#[derive(Debug)]
struct Current {
    lease: Arc<HeldLease>,
    started: u64,
    /// The success to report once a streamed body ends.
    worked: Option<f64>,
}

/// One request's attempts. Not shared: an adapter drives it from one task.
#[derive(Debug)]
pub struct Attempts {
    holder: Arc<Holder>,
    context: String,
    selector: Selector,
    /// How many of `selector.exclude` the caller gave; the rest were tried.
    excluded: usize,
    attempts: u32,
    deadline: Option<u64>,
    made: u32,
    current: Option<Current>,
    held_back: Option<HeldBack>,
}

impl Attempts {
    pub fn holder(&self) -> &Arc<Holder> {
        &self.holder
    }

    pub fn context(&self) -> &str {
        &self.context
    }

    /// The selector of the next acquire: the caller's, without what this
    /// request already tried.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Time left for the request (ns); `None`: no limit.
    pub fn remaining(&self) -> Option<u64> {
        self.deadline.map(|d| d.saturating_sub(self.holder.now()))
    }

    /// Attempts begun so far.
    pub fn made(&self) -> u32 {
        self.made
    }

    /// What the next acquire asks the pool for, hashed: two requests with
    /// the same wish are refused or granted alike, so a front end that woke
    /// one for a freed permit, and saw it refused, need not wake the other
    /// (`prefer` and `affinity` only order the choice and are left out).
    pub fn wish(&self) -> u64 {
        let mut h = DefaultHasher::new();
        (crate::holder::wish(&self.context, &self.selector), self.goes_back()).hash(&mut h);
        h.finish()
    }

    fn may_retry(&self) -> bool {
        self.made < self.attempts && self.remaining() != Some(0)
    }

    /// An acquire for the next attempt was refused with `e`: wait, try
    /// again, or stop (when the request's time is up, or the refusal is
    /// settled past it: nothing can be granted in time). When nothing this
    /// request has not tried can be granted, it goes back to what it tried
    /// (one of them may be free now; else their cooldowns and pauses are
    /// the wait), rather than wait for the others while a tried one sits
    /// idle; except while a suspect result waits for a second resource to
    /// judge it. That one waits for a resource another request holds, not
    /// for one that is cooling or paused (a settled refusal): a second
    /// opinion on what is most likely the request's own fault (a 400, a
    /// 404) is not worth a cooldown, which a request with no time limit
    /// would wait out whole; the suspect result is delivered.
    pub fn refused(&mut self, e: &Error) -> Refused {
        match at_once(e, self.goes_back(), self.tried(), self.held_back.is_some()) {
            Some(Refused::Again) => {
                self.selector.exclude.truncate(self.excluded);
                Refused::Again
            }
            Some(answer) => answer,
            None => match refusal_hint(e) {
                Some(hint) if !self.holder.waiting(self.remaining()).gives_up(hint, self.holder.now()) => {
                    Refused::Wait(hint.retry_after)
                }
                _ => Refused::GiveUp,
            },
        }
    }

    /// Whether this request excludes resources it tried.
    fn tried(&self) -> bool {
        self.selector.exclude.len() > self.excluded
    }

    /// Whether a refusal of what this request has not tried sends it back
    /// to what it tried (see [`Self::refused`]).
    fn goes_back(&self) -> bool {
        self.tried() && self.held_back.is_none()
    }

    /// The lease for the next attempt, waiting as [`Holder::acquire`] does
    /// (with `between` run between waits) until the request's time is up;
    /// the refusal when it stops. For front ends that block a thread.
    pub fn acquire<E: From<Error>>(&mut self, mut between: impl FnMut() -> Result<(), E>) -> Result<Arc<HeldLease>, E> {
        loop {
            let (back, tried, suspect) = (self.goes_back(), self.tried(), self.held_back.is_some());
            // A refusal `refused` answers without waiting is not waited out here.
            let worth_waiting = |e: &Error| at_once(e, back, tried, suspect).is_none();
            let got =
                self.holder.acquire_waiting(&self.context, &self.selector, self.remaining(), worth_waiting, || {
                    between().map_err(Stop::Caller)
                });
            match got {
                Ok(lease) => return Ok(lease),
                Err(Stop::Caller(e)) => return Err(e),
                Err(Stop::Pool(e)) => match self.refused(&e) {
                    Refused::Again => continue,
                    Refused::Wait(_) | Refused::GiveUp => return Err(e.into()),
                },
            }
        }
    }

    /// The next attempt: its lease acquired as [`Self::acquire`] waits,
    /// then begun as [`Self::begin`] begins it. One call where a front end
    /// would make two: between two real requests each crossing into the
    /// pool costs more than the work it does (docs/decisions.md).
    pub fn next<E: From<Error>>(&mut self, between: impl FnMut() -> Result<(), E>) -> Result<Route, E> {
        let lease = self.acquire(between)?;
        self.begin(lease).map_err(E::from)
    }

    /// [`Self::next`] without waiting: a refusal is returned as the
    /// acquire gave it, for a front end that waits its own way
    /// ([`Self::refused`] says how).
    pub fn next_now(&mut self) -> Result<Route> {
        let lease = self.holder.acquire_now(&self.context, &self.selector)?;
        self.begin(lease)
    }

    /// The resource of the attempt in flight: a [`Route::Proxy`] goes
    /// through its value.
    pub fn resource(&self) -> Option<&ResourceId> {
        self.current.as_ref().map(|c| &c.lease.lease().resource)
    }

    /// Begins an attempt on `lease` (from an acquire with [`Self::selector`]):
    /// how to send it there. The lease is renewed from now until the
    /// attempt settles or its body ends, [`MAX_HOLD`] at most.
    pub fn begin(&mut self, lease: Arc<HeldLease>) -> Result<Route> {
        self.end_current()?;
        let profile = self.holder.profiles().of(lease.lease().resource.kind());
        // A proxy's route is its value: its secret is not asked for.
        let secret = if profile == Profile::Proxy { None } else { lease.secret()? };
        let value = lease.lease().resource.value();
        if !self.selector.exclude.iter().any(|v| v == value) && self.selector.exclude.len() < MAX_EXCLUDE {
            self.selector.exclude.push(value.to_owned());
        }
        self.made += 1;
        lease.auto_renew(Some(MAX_HOLD));
        self.current = Some(Current { lease, started: self.holder.now(), worked: None });
        Ok(route(profile, secret.as_ref().map(|s| s.expose())))
    }

    /// The answer of the attempt begun last: its status, headers and, for
    /// an error status, its body (only an error's code, type and stated
    /// delay are read). Latency is from `begin` to now, on the pool's clock.
    pub fn answered(&mut self, status: u16, headers: Vec<(String, String)>, body: Option<String>) -> Result<Step> {
        let current =
            self.current.as_ref().ok_or_else(|| Error::invalid("attempt", "must be begun before it is answered"))?;
        let latency_ms = self.latency_ms(current.started);
        let answer = HttpAnswer { status, headers, body, latency_ms, now: SystemTime::now() };
        let judged = blame::answer(self.holder.profiles().of(current.lease.lease().resource.kind()), &answer)?;
        if let Judged::Worked(_) = judged {
            self.report_held_back()?;
            self.current.as_mut().expect("checked").worked = Some(latency_ms);
            return Ok(Step::Stream);
        }
        self.settle(judged, Seen::Status(status))
    }

    /// The attempt begun last got no answer: `kind` is what failed
    /// (`connection_reset`, `timeout`, `tls_handshake`, ...).
    pub fn failed(&mut self, kind: FailureKind) -> Result<Step> {
        let current =
            self.current.as_ref().ok_or_else(|| Error::invalid("attempt", "must be begun before it fails"))?;
        let latency_ms = self.latency_ms(current.started);
        let profile = self.holder.profiles().of(current.lease.lease().resource.kind());
        let judged = blame::transport(profile, kind, latency_ms)?;
        self.settle(judged, Seen::Transport(kind))
    }

    /// The delivered success's body ended: read to its end or closed
    /// (`broken` none), or cut by `broken`. Reports and releases.
    pub fn finished(&mut self, broken: Option<FailureKind>) -> Result<()> {
        let Some(current) = self.current.take() else { return Ok(()) };
        let latency_ms =
            current.worked.ok_or_else(|| Error::invalid("attempt", "must be answered before it finishes"))?;
        let outcome = match broken {
            None => Outcome::success(latency_ms)?,
            Some(kind) => Outcome::failure(kind, self.latency_ms(current.started))?,
        };
        // One call reports and releases. A lease that ended meanwhile (the
        // watcher let it go) is reported by name; a failed report is
        // returned once the lease is released.
        let mut reported = None;
        current.lease.release_by(|p, lease| match p.report_and_release(lease.id, lease.token, &outcome) {
            Err(e) if !e.is_lease_gone() => {
                reported = Some(Err(e));
                p.release(lease.id, lease.token)
            }
            done => {
                reported = done.is_ok().then_some(Ok(()));
                done
            }
        })?;
        reported.unwrap_or_else(|| current.lease.report(&outcome, None))
    }

    /// The adapter stops (it delivers, gives up or was cancelled): a held
    /// result no second resource judged is reported as the profile reads
    /// it, and a lease still held is released unreported. Safe to call
    /// more than once.
    pub fn end(&mut self) -> Result<()> {
        let current = self.end_current();
        let held = self.report_held_back();
        current.and(held)
    }

    fn end_current(&mut self) -> Result<()> {
        match self.current.take() {
            Some(current) => current.lease.release().map(drop),
            None => Ok(()),
        }
    }

    fn latency_ms(&self, started: u64) -> f64 {
        self.holder.now().saturating_sub(started) as f64 / 1e6
    }

    fn settle(&mut self, judged: Judged, seen: Seen) -> Result<Step> {
        let current = self.current.take().expect("settled attempts are begun");
        let lease = current.lease;
        match judged {
            Judged::Worked(_) => unreachable!("a success is streamed"),
            Judged::Resource(outcome) => {
                let reported = lease.report(&outcome, None);
                lease.release()?;
                reported?;
                self.report_held_back()?;
            }
            // What is held back stays so: the upstream's failure tells nothing of it.
            Judged::Upstream => {
                lease.release()?;
            }
            Judged::Suspect(outcome) => {
                lease.release()?;
                if let Some(held) = self.held_back.take() {
                    if held.seen == seen {
                        // The same on two resources: the request's own fault.
                        return Ok(Step::Deliver);
                    }
                    report(&held)?;
                }
                self.held_back = Some(HeldBack { lease, seen, outcome });
            }
        }
        if self.may_retry() {
            Ok(Step::Retry)
        } else {
            self.report_held_back()?;
            Ok(Step::Deliver)
        }
    }

    fn report_held_back(&mut self) -> Result<()> {
        match self.held_back.take() {
            Some(held) => report(&held),
            None => Ok(()),
        }
    }
}

/// A request its adapter let go of without ending it (a response nobody
/// closed, a call cancelled where the library runs no hook): its lease goes
/// back now, unreported, instead of being renewed until [`MAX_HOLD`].
impl Drop for Attempts {
    fn drop(&mut self) {
        drop(self.end());
    }
}

/// Reports a held result on its (released) lease's resource and context.
fn report(held: &HeldBack) -> Result<()> {
    let Some(outcome) = &held.outcome else { return Ok(()) };
    let lease = held.lease.lease();
    let (kind, value) = (lease.resource.kind(), lease.resource.value());
    held.lease.holder().with(|p| p.report(kind, value, lease.context.as_str(), outcome))
}

/// Why a blocking acquire stopped: the pool refused, or `between` did.
enum Stop<E> {
    Pool(Error),
    Caller(E),
}

impl<E> From<Error> for Stop<E> {
    fn from(e: Error) -> Self {
        Stop::Pool(e)
    }
}
