//! The holder's side of an embedded pool, once for every front end that
//! embeds one (the Python and Node bindings): the open options and their
//! defaults ([`OpenOptions`]), the pool handle ([`Holder`]) with its
//! waiting acquire and its close, and the lease handle ([`HeldLease`]) with
//! the local deadline of invariant I7, auto-renewal and the loss signal.
//! Bindings convert values and errors to their language and nothing else,
//! so both behave alike: same defaults, same waits, same errors.

mod lease;
mod line;
mod options;
mod waiting;
mod watch;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use lease::{HeldLease, Loss, Released};
pub use line::{wish, Order};
pub use options::{hold, Cooldown, Field, Names, OpenOptions, DEFAULT_OWNER_TTL};
pub use waiting::{refusal_hint, Hint, Waiting};

use repute_core::{Lease, Selector};

use crate::embedded::EmbeddedPool;
use crate::error::{selector_error, Error, Result};
use crate::ops::PoolOps;
use crate::pool::Pool;
use crate::profile::{HttpAnswer, Profiles};
#[cfg(feature = "redis")]
use crate::providers::RedisWire;
use crate::providers::{Clock, Releases, SystemClock};
use crate::store::Mode;

/// An open pool and whether closing it saves a last checkpoint.
struct Open {
    pool: EmbeddedPool,
    /// Durable stores save one on close, except in shared mode: there every
    /// change is in the log already, and a checkpoint of one copy would only
    /// race the others'.
    last_checkpoint: bool,
}

/// One tenant's embedded pool as its holders use it. Safe to share between
/// threads: every call takes the pool's one lock, and waiting acquires wait
/// with that lock released.
pub struct Holder {
    /// `None` once closed.
    pool: Mutex<Option<Open>>,
    /// Acquires waiting for a permit freed here, in line.
    line: line::Line,
    /// Releases here since open (see [`Holder::releases`]).
    releases: AtomicU64,
    clock: Arc<dyn Clock>,
    /// Fixed margin before a lease's TTL runs out; `None` is a tenth of the TTL.
    margin: Option<u64>,
    /// Mirrors `pool` being `None`, readable without waiting for the lock.
    closed: AtomicBool,
    /// Calls wait for a PostgreSQL or Redis round trip.
    network: bool,
    /// No other process writes this tenant (every mode but shared).
    sole_writer: bool,
    durable: bool,
    watch: Arc<watch::Watch>,
    profiles: Profiles,
    /// Releases in other processes, until the first waiting acquire starts
    /// listening for them (see [`Holder::listen`]).
    elsewhere: Mutex<Option<Box<dyn Releases>>>,
}

impl std::fmt::Debug for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holder").field("closed", &self.is_closed()).field("durable", &self.durable).finish()
    }
}

impl Holder {
    /// Opens the pool the options describe, on `clock` (the system's
    /// monotonic clock when `None`). `names` spells the fields in errors.
    pub fn open(options: OpenOptions, clock: Option<Arc<dyn Clock>>, names: Names) -> Result<Arc<Holder>> {
        let resolved = options.resolve(names)?;
        let clock = clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let store = resolved.store.open()?;
        let shared = store.is_shared() && resolved.sharing.mode == Mode::Shared;
        let last_checkpoint = resolved.config.durable && !shared;
        let mut pool =
            EmbeddedPool::open(&*store, &resolved.sharing, &resolved.tenant, resolved.config, clock.clone())?;
        let releases = if shared { pool.take_releases() } else { None };
        Ok(Arc::new(Holder {
            pool: Mutex::new(Some(Open { pool, last_checkpoint })),
            line: line::Line::default(),
            releases: AtomicU64::new(0),
            clock,
            margin: resolved.margin,
            closed: AtomicBool::new(false),
            network: store.is_shared(),
            sole_writer: !shared,
            durable: resolved.store.durable(),
            watch: Arc::default(),
            profiles: resolved.profiles,
            elsewhere: Mutex::new(releases),
        }))
    }

    /// Starts hearing of the releases other processes make, once, on a
    /// thread of its own that ends with the pool: each syncs the pool
    /// (which asks the store again about groups at their concurrency) and
    /// wakes the first waiting acquire in line here, as a release here
    /// does. Waiting acquires start it, so a pool that never waits opens no
    /// connection for it.
    fn listen(self: &Arc<Self>) {
        let Some(mut releases) = self.elsewhere.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let holder = Arc::downgrade(self);
        let heard = move || loop {
            let heard = releases.next(watch::MAX_SLEEP);
            let Some(holder) = holder.upgrade().filter(|h| !h.is_closed()) else { return };
            match heard {
                Ok(true) => {
                    // The pool holds a group out until it asks again.
                    let _ = holder.with(|p| p.sync());
                    holder.notify_freed();
                }
                Ok(false) => {}
                Err(_) => {
                    // The store is away: the waiters' backoff still runs.
                    drop(holder);
                    std::thread::sleep(watch::MAX_SLEEP);
                }
            }
        };
        // Without the thread, waiters find frees at their next attempt.
        let _ = std::thread::Builder::new().name("repute-releases".into()).spawn(heard);
    }

    fn lock(&self) -> MutexGuard<'_, Option<Open>> {
        // The host pool is consistent after a panic (it contains traps and
        // refuses half-applied changes), so a poisoned lock is still usable.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one pool operation, if the pool is open and still this
    /// process's to serve: every operation passes here.
    pub fn with<T>(&self, f: impl FnOnce(&mut Pool) -> Result<T>) -> Result<T> {
        let mut guard = self.lock();
        f(guard.as_mut().ok_or(Error::Closed)?.pool.serve()?)
    }

    /// The pool clock's reading: the time base of every instant this pool reports.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// How the answers of each kind's resources are read.
    pub fn profiles(&self) -> &Profiles {
        &self.profiles
    }

    /// Reports an upstream's answer about a resource in `context`, read by
    /// its kind's profile; an answer that says nothing about the resource
    /// (a provider's overload) reports nothing.
    pub fn report_http(&self, kind: &str, value: &str, context: &str, answer: &HttpAnswer) -> Result<()> {
        let outcome = self.profiles.classify(kind, answer)?;
        self.with(|p| match outcome {
            Some(outcome) => p.report(kind, value, context, &outcome),
            None => Ok(()),
        })
    }

    /// The pool's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// True when calls wait for a network store (PostgreSQL, Redis).
    pub fn waits_on_network(&self) -> bool {
        self.network
    }

    /// True when grants and reports write to durable storage.
    pub fn durable(&self) -> bool {
        self.durable
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The tenant's grants and revokes as bytes, for a front end that runs
    /// them on a connection of its own event loop (see [`EmbeddedPool::wire`]).
    #[cfg(feature = "redis")]
    pub fn wire(&self) -> Option<RedisWire> {
        self.lock().as_ref().and_then(|open| open.pool.wire().cloned())
    }

    /// Wakes the first waiting acquire in line that may use a permit just
    /// freed (a release). A waiter joins the line under the pool's lock,
    /// and a release frees its permit under that lock before this runs:
    /// either the waiter saw the permit free, or this finds it in line.
    pub fn notify_freed(&self) {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.line.wake_one();
    }

    /// How many releases have freed a permit here since open, whoever made
    /// them. A front end whose acquires wait outside the holder's line (on
    /// an event loop) reads it after its calls, so that a release made
    /// anywhere (a blocking call on another thread, an adapter's attempts
    /// let go of without an end) wakes one of them too, once.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::SeqCst)
    }

    /// Wakes every waiting acquire: call after anything that may make more
    /// than one resource selectable (a register, an unblock, a restore).
    pub fn notify_changed(&self) {
        self.line.wake_all();
    }

    /// The holder's local deadline for a lease sent at `sent` (I7).
    fn deadline(&self, sent: u64, ttl: u64) -> u64 {
        let margin = self.margin.unwrap_or(ttl / 10).min(ttl);
        sent.saturating_add(ttl - margin)
    }

    /// The handle on a lease the pool granted on a request sent when the
    /// clock read `sent` (read before the request went out, so the local
    /// deadline can only be early).
    pub fn adopt(self: &Arc<Self>, lease: Lease, sent: u64) -> Arc<HeldLease> {
        HeldLease::new(self.clone(), lease, sent)
    }

    /// A grant by `f` (an acquire, a probe acquire, a resume), as a handle.
    pub fn grant(self: &Arc<Self>, f: impl FnOnce(&mut Pool) -> Result<Lease>) -> Result<Arc<HeldLease>> {
        let sent = self.now();
        let lease = self.with(f)?;
        Ok(self.adopt(lease, sent))
    }

    /// The best lease for `context` among the resources `selector` admits,
    /// now; a refusal (nothing selectable among them included) is the
    /// error. A bad selector is refused naming its label filters `where`,
    /// as every front end spells them ([`selector_error`]). The grant
    /// brings the resource's secret along, so a holder that sends the
    /// request with it crosses into the pool once.
    pub fn acquire_now(self: &Arc<Self>, context: &str, selector: &Selector) -> Result<Arc<HeldLease>> {
        let sent = self.now();
        let (lease, secret) = self.with(|p| p.acquire_with_secret(context, selector)).map_err(selector_error)?;
        Ok(HeldLease::with_secret(self.clone(), lease, sent, secret))
    }

    /// `acquire_now`, with `None` when nothing `selector` admits is selectable.
    pub fn try_acquire(self: &Arc<Self>, context: &str, selector: &Selector) -> Result<Option<Arc<HeldLease>>> {
        match self.acquire_now(context, selector) {
            Ok(lease) => Ok(Some(lease)),
            Err(Error::NoResourceAvailable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The waiting plan of one acquire that may wait up to `timeout` ns
    /// (`None`: without limit), for front ends that sleep their own way.
    pub fn waiting(self: &Arc<Self>, timeout: Option<u64>) -> Waiting {
        self.listen();
        self.plan(timeout)
    }

    /// A waiting plan made now, for this pool's writers.
    fn plan(&self, timeout: Option<u64>) -> Waiting {
        Waiting::new(self.now(), timeout, self.sole_writer)
    }

    /// The best lease for `context` among the resources `selector` admits,
    /// waiting up to `timeout` ns for one to come free: woken by a release
    /// here, else after the backoff, the pool's retry hint or the timeout
    /// (on the pool's clock), whichever comes first. `between` runs between
    /// waits (a binding checks for interrupts there). On timeout, the last
    /// refusal is the error; errors name fields as `acquire_now`'s do.
    pub fn acquire<E: From<Error>>(
        self: &Arc<Self>,
        context: &str,
        selector: &Selector,
        timeout: Option<u64>,
        between: impl FnMut() -> Result<(), E>,
    ) -> Result<Arc<HeldLease>, E> {
        self.acquire_waiting(context, selector, timeout, |_| true, between)
    }

    /// `acquire`, waiting out only the refusals `worth_waiting` admits (the
    /// attempt protocol stops at once when only what it tried is left).
    pub fn acquire_waiting<E: From<Error>>(
        self: &Arc<Self>,
        context: &str,
        selector: &Selector,
        timeout: Option<u64>,
        worth_waiting: impl Fn(&Error) -> bool,
        mut between: impl FnMut() -> Result<(), E>,
    ) -> Result<Arc<HeldLease>, E> {
        let mut waiting = self.plan(timeout);
        let mut place: Option<line::Place<'_>> = None;
        loop {
            let mut guard = self.lock();
            let sent = self.now();
            let answer = match guard.as_mut() {
                Some(open) => open.pool.serve().and_then(|p| p.acquire_with_secret(context, selector)),
                None => Err(Error::Closed),
            };
            let refusal = match answer {
                Ok((lease, secret)) => {
                    drop(guard);
                    if let Some(place) = place.as_mut() {
                        place.granted();
                    }
                    return Ok(HeldLease::with_secret(self.clone(), lease, sent, secret));
                }
                Err(e) => selector_error(e),
            };
            if let Some(place) = place.as_mut() {
                place.refused();
            }
            let Some(hint) = refusal_hint(&refusal).filter(|_| worth_waiting(&refusal)) else {
                return Err(refusal.into());
            };
            let Some(wait) = waiting.next(hint, self.now()) else { return Err(refusal.into()) };
            let place = place.get_or_insert_with(|| {
                self.listen();
                self.line.place(wish(context, selector))
            });
            let bell = place.lie_down();
            drop(guard);
            place.sleep(&bell, wait);
            between()?;
        }
    }

    /// Closes the pool: a durable store first saves a checkpoint (if
    /// `checkpoint`, and not in shared mode), then the tenant's ownership
    /// is given up. Leases still held count as lost (`Loss::Closed`); later
    /// calls are refused with `Error::Closed`. Closing again does nothing.
    pub fn close(&self, checkpoint: bool) -> Result<()> {
        let open = self.lock().take();
        self.closed.store(true, Ordering::SeqCst);
        self.line.wake_all();
        self.watch.close();
        let Some(mut open) = open else { return Ok(()) };
        let saved = if checkpoint && open.last_checkpoint {
            open.pool.serve().and_then(|p| p.checkpoint(true)).map(drop)
        } else {
            Ok(())
        };
        drop(open.pool.close());
        saved
    }

    /// Lets go of the pool without running any of its destructors: for a
    /// process forked after the pool was opened, where the pool's locks,
    /// instance and connections belong to the parent.
    pub fn abandon(&self) {
        let open = self.pool.lock().unwrap_or_else(|p| p.into_inner()).take();
        std::mem::forget(open);
        self.closed.store(true, Ordering::SeqCst);
    }

    /// The watcher's longest sleep for this pool's clock.
    fn poll(&self) -> Duration {
        if self.clock.follows_real_time() {
            watch::MAX_SLEEP
        } else {
            watch::MANUAL_POLL
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::providers::ManualClock;
    use repute_core::SECOND;

    fn names(field: Field) -> &'static str {
        match field {
            Field::LeaseTtl => "lease_ttl",
            Field::MaxHold => "max_hold",
            Field::AutoRenew => "auto_renew",
            _ => "other",
        }
    }

    fn pool(clock: &ManualClock) -> Arc<Holder> {
        let options =
            OpenOptions { lease_ttl: Some(10 * SECOND), strategy: Some("first".into()), ..Default::default() };
        let holder = Holder::open(options, Some(Arc::new(clock.clone())), names).unwrap();
        holder.with(|p| p.register("proxy", "a", 1)).unwrap();
        holder
    }

    /// How `insufficient_quota` reaches a group: the OpenAI profile reads
    /// the 429's body as `quota_exhausted`, and a group with `shared_quota`
    /// pauses every member on it, since the provider counts that quota for
    /// the whole project.
    #[test]
    fn an_insufficient_quota_answer_pauses_the_keys_whole_project() {
        use repute_core::{GroupLimits, GroupName, Registration};
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let project = GroupName::new("project:acme").unwrap();
        let shared = GroupLimits { shared_quota: true, ..GroupLimits::default() };
        holder.with(|p| p.set_group("project:acme", &shared)).unwrap();
        for key in ["key-1", "key-2"] {
            let registration = Registration { groups: vec![project.clone()], ..Registration::new(1) };
            holder.with(|p| p.register_with("openai", key, &registration)).unwrap();
        }
        let body = r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let answer = HttpAnswer { body: Some(body.into()), ..HttpAnswer::status(429, 30.0) };
        holder.report_http("openai", "key-1", "gpt-4o", &answer).unwrap();
        let openai = Selector { kind: Some("openai".into()), ..Selector::default() };
        let refusal = match holder.with(|p| p.acquire_with("gpt-4o", &openai)) {
            Err(Error::NoResourceAvailable(r)) => r,
            other => panic!("both keys of the project are paused: {other:?}"),
        };
        assert_eq!((refusal.registered, refusal.rate_limited), (2, 2));
        assert!(refusal.retry_after.is_some_and(|wait| wait >= 3_000 * SECOND), "{refusal:?}");
        let other = holder.try_acquire("gpt-4o", &Selector::default()).unwrap().unwrap();
        assert_eq!(other.lease().resource.value(), "a", "a resource outside the project serves on");
    }

    /// The secret comes with the grant, not from a later call: a lease
    /// whose resource is gone before its secret is read still has it.
    #[test]
    fn a_lease_the_holder_acquires_brings_its_secret_along() {
        use repute_core::{Registration, Secret};
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let registration = Registration { secret: Some(Secret::new("sk-one").unwrap()), ..Registration::new(1) };
        holder.with(|p| p.register_with("openai", "key-1", &registration)).unwrap();
        let openai = Selector { kind: Some("openai".into()), ..Selector::default() };
        let now = holder.acquire_now("gpt-4o", &openai).unwrap();
        now.release().unwrap();
        let waited = holder.acquire("gpt-4o", &openai, Some(SECOND), || Ok::<(), Error>(())).unwrap();
        waited.release().unwrap();
        holder.with(|p| p.unregister("openai", "key-1", false)).unwrap();
        for lease in [now, waited] {
            assert_eq!(lease.secret().unwrap().as_ref().map(Secret::expose), Some("sk-one"));
        }
        let proxy = holder.acquire_now("gpt-4o", &Selector::default()).unwrap();
        assert_eq!(proxy.secret(), Ok(None), "a resource without one");
    }

    /// An event loop's waiters learn of releases from this count: a release
    /// counts once, a second call on the same lease does not, and an
    /// expired lease's release does (it frees the permit at the authority).
    #[test]
    fn releases_count_each_lease_released_once() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        assert_eq!(holder.releases(), 0);
        let lease = holder.try_acquire("c", &Selector::default()).unwrap().expect("a is free");
        assert_eq!(holder.releases(), 0, "a grant frees nothing");
        assert_eq!(lease.release(), Ok(Released::Held));
        assert_eq!(lease.release(), Ok(Released::Held), "again: nothing more");
        assert_eq!(holder.releases(), 1);
        let lost = holder.try_acquire("c", &Selector::default()).unwrap().expect("a is free again");
        clock.advance(20 * SECOND);
        assert_eq!(lost.release(), Ok(Released::LostUnseen));
        assert_eq!(holder.releases(), 2, "an expired lease's release still frees its permit");
    }

    #[test]
    fn options_are_checked_under_the_bindings_names() {
        let zero = OpenOptions { lease_ttl: Some(0), ..Default::default() };
        let e = Holder::open(zero, None, names).unwrap_err();
        assert_eq!(e, Error::invalid("lease_ttl", "must be > 0"));
        assert_eq!(hold(false, Some(SECOND), names), Err(Error::invalid("max_hold", "goes with auto_renew")));
        assert_eq!(hold(true, Some(0), names), Err(Error::invalid("max_hold", "must be > 0")));
        assert_eq!(hold(true, None, names), Ok(Some(None)));
    }

    #[test]
    fn a_lost_lease_tells_each_listener_once_and_releases_quietly() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let lease = holder.try_acquire("c", &Selector::default()).unwrap().expect("a is free");
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        lease.on_lost(Box::new(move |loss| {
            assert_eq!(loss, Loss::Blocked);
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        holder.with(|p| p.block("proxy", "a", None, None, None)).unwrap();
        assert_eq!(lease.renew(), Err(Error::Blocked));
        assert_eq!(lease.renew(), Err(Error::LeaseExpired));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(lease.lost(), Some(Loss::Blocked));
        // The holder was told: releasing says so and frees the permit.
        assert_eq!(lease.release(), Ok(Released::Lost));
        assert_eq!(lease.release(), Ok(Released::Lost));
        assert_eq!(holder.with(|p| p.stats()).unwrap().live_leases, 0);
    }

    #[test]
    fn a_deadline_passed_unseen_is_reported_by_the_release() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let lease = holder.try_acquire("c", &Selector::default()).unwrap().unwrap();
        assert_eq!(lease.deadline(), 9 * SECOND);
        clock.advance(9 * SECOND);
        assert!(!lease.valid());
        assert_eq!(lease.release(), Ok(Released::LostUnseen));
        assert!(holder.try_acquire("c", &Selector::default()).unwrap().is_some(), "the permit is free again");
    }

    #[test]
    fn a_waiting_acquire_ends_on_the_pools_clock() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let _held = holder.try_acquire("c", &Selector::default()).unwrap().unwrap();
        let waiter = {
            let holder = holder.clone();
            std::thread::spawn(move || {
                holder.acquire("c", &Selector::default(), Some(SECOND), || Ok::<(), Error>(())).map(|_| ())
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiter.is_finished(), "real time passed, the pool's clock did not");
        clock.advance(SECOND);
        assert!(matches!(waiter.join().unwrap(), Err(Error::NoResourceAvailable(_))));
    }

    #[test]
    fn the_watcher_holds_no_lease_dropped_before_the_next_one_came() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        for _ in 0..200 {
            let lease = holder.try_acquire("c", &Selector::default()).unwrap().expect("a is free");
            lease.auto_renew(Some(SECOND));
            assert!(holder.watch.held() <= 2, "{} watched, one lease live", holder.watch.held());
            lease.release().unwrap();
        }
    }

    #[test]
    fn closing_refuses_later_calls_and_loses_held_leases() {
        let clock = ManualClock::new(0);
        let holder = pool(&clock);
        let lease = holder.try_acquire("c", &Selector::default()).unwrap().unwrap();
        holder.close(true).unwrap();
        holder.close(true).unwrap();
        assert!(!lease.valid());
        assert_eq!(lease.lost(), Some(Loss::Closed));
        assert_eq!(holder.with(|p| p.stats()).unwrap_err(), Error::Closed);
        assert_eq!(lease.release(), Err(Error::Closed));
    }
}
