//! How long a waiting acquire sleeps between attempts: one plan for the
//! blocking acquire here and for front ends that sleep on their own event
//! loop (asyncio, Node), so every acquire backs off alike.

use std::time::Duration;

use crate::error::{Error, StoreError};

/// The first wait after a refusal. A release in this process wakes waiters
/// at once; expiry, cooldown ends and other processes' releases have no
/// signal, so waits start short.
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest wait between attempts when the pool gives no sooner hint.
const MAX_BACKOFF: Duration = Duration::from_millis(50);
/// Shorter waits cost more in wakeups than they save in latency.
const MIN_WAIT: Duration = Duration::from_micros(50);
/// Waits aimed at the instant the pool said something frees end up to this
/// much after it, the longer-waiting acquires first (see [`Waiting::next`]).
const MAX_STAGGER: Duration = Duration::from_millis(1);
/// How long waiting counts towards going first: a plan waiting this long
/// or longer wakes at the freeing instant itself.
const STAGGER_SPAN: Duration = Duration::from_secs(10);

/// One acquire's waiting state: its deadline on the pool's clock (so a
/// `ManualClock` pool waits for its clock, not for real time) and its backoff.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// When the plan was made: the acquire's first refusal.
    since: u64,
    until: Option<u64>,
    backoff: Duration,
    /// Whether a settled hint can be trusted: the pool is its tenant's only
    /// writer. In shared mode another process's lease or report, which this
    /// pool cannot see, may free a resource sooner.
    sole_writer: bool,
}

/// What a refusal tells a waiting acquire: when to try again, if the pool
/// knows, when a resource is expected to free up (a ban's early trial may
/// come sooner, and mostly fails), and whether that is certain (the refusal
/// is settled: nothing the pool knows of can free a resource sooner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hint {
    pub retry_after: Option<u64>,
    pub expected_after: Option<u64>,
    pub settled: bool,
}

/// The pool's hint of when to try again, if `e` is a refusal worth waiting
/// out (nothing selectable, the rate limit, or a store recovering from a
/// failover); `None` for any other error. A rate limit's wait and a
/// recovery's are settled: they end with time only.
pub fn refusal_hint(e: &Error) -> Option<Hint> {
    let (retry_after, expected_after) = match e {
        Error::NoResourceAvailable(refusal) => (refusal.retry_after, refusal.expected_after),
        Error::RateLimited { retry_after } | Error::Store(StoreError::Recovering { retry_after }) => {
            (Some(*retry_after), Some(*retry_after))
        }
        _ => return None,
    };
    Some(Hint { retry_after, expected_after, settled: e.settled()? })
}

impl Hint {
    /// A hint from a refusal's fields as a front end holds them: a rate
    /// limit's refusal has no `expected_after`, its wait is the expected one.
    pub fn from_fields(retry_after: Option<u64>, expected_after: Option<u64>, settled: bool) -> Hint {
        Hint { retry_after, expected_after: expected_after.or(retry_after), settled }
    }

    /// Whether nothing will free a resource without a change to the pool:
    /// a settled refusal with no end, such as one with nothing registered
    /// that the acquire admits.
    pub fn never(&self) -> bool {
        self.settled && self.retry_after.is_none() && self.expected_after.is_none()
    }

    /// Whether nothing is expected to be granted within `remaining`: a
    /// settled wait that is expected to end after it. Waiting it out would
    /// only hold the caller (and, on a busy loop, a worker) until the
    /// timeout for the same refusal, or for a ban's trial that finds the
    /// ban still on.
    pub fn outlasts(&self, remaining: Option<Duration>) -> bool {
        self.settled
            && matches!((self.expected_after, remaining), (Some(after), Some(left)) if Duration::from_nanos(after) > left)
    }
}

impl Waiting {
    /// A plan for an acquire started at `now` that may wait `timeout` ns
    /// (`None`: without limit), on a pool that is (`sole_writer`) or is not
    /// its tenant's only writer.
    pub fn new(now: u64, timeout: Option<u64>, sole_writer: bool) -> Waiting {
        Waiting { since: now, until: timeout.map(|t| now.saturating_add(t)), backoff: MIN_BACKOFF, sole_writer }
    }

    /// Whether an acquire refused with `hint` at `now` stops: its time is
    /// up, nothing will ever free a resource it may choose (in any mode: a
    /// kind nobody registered is a mistake to report, not a wait), or the
    /// hint says nothing can come before its time is up (trusted only where
    /// this pool is its tenant's only writer).
    pub fn gives_up(&self, hint: Hint, now: u64) -> bool {
        let remaining = self.remaining(now);
        remaining == Some(Duration::ZERO) || hint.never() || (self.sole_writer && hint.outlasts(remaining))
    }

    /// After a refusal with the pool's `hint`: how long to sleep before the
    /// next attempt, or `None` once it [gives up](Waiting::gives_up) (the
    /// refusal is then the answer).
    ///
    /// Every acquire the pool refuses with one hint (a key's pace admits
    /// its next grant then) wakes at that instant, and which of them the
    /// event loop or the scheduler runs first would get the grant: the
    /// order of a lottery, whose slowest requests wait many rounds. So a
    /// wait aimed at the hint ends a little after it, less so the longer
    /// its acquire has waited: at the freeing instant the oldest tries
    /// first, and an event loop runs timers in the order they are due.
    pub fn next(&mut self, hint: Hint, now: u64) -> Option<Duration> {
        if self.gives_up(hint, now) {
            return None;
        }
        let remaining = self.remaining(now);
        let aimed = hint.retry_after.map(Duration::from_nanos).filter(|&h| h <= self.backoff);
        let mut wait = match aimed {
            Some(h) => h + self.stagger(now, h),
            None => self.backoff.min(hint.retry_after.map_or(MAX_BACKOFF, Duration::from_nanos)),
        }
        .max(MIN_WAIT);
        if let Some(remaining) = remaining {
            wait = wait.min(remaining);
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Some(wait)
    }

    /// How long after the freeing instant, `wait` from `now`, this plan tries:
    /// [`MAX_STAGGER`] for one just made, nothing after [`STAGGER_SPAN`].
    fn stagger(&self, now: u64, wait: Duration) -> Duration {
        let waited = Duration::from_nanos(now.saturating_sub(self.since)) + wait;
        MAX_STAGGER.mul_f64(1.0 - waited.min(STAGGER_SPAN).as_secs_f64() / STAGGER_SPAN.as_secs_f64())
    }

    /// The time left at `now`; `None` without a deadline.
    fn remaining(&self, now: u64) -> Option<Duration> {
        self.until.map(|u| Duration::from_nanos(u.saturating_sub(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    fn hint(retry_after: Option<u64>) -> Hint {
        Hint { retry_after, expected_after: retry_after, settled: false }
    }

    #[test]
    fn backs_off_to_the_ceiling_and_never_past_the_hint_or_the_deadline() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut w = Waiting::new(0, None, true);
        let waits: Vec<_> = (0..8).map(|_| w.next(hint(None), 0).unwrap()).collect();
        assert_eq!(waits, [ms(1), ms(2), ms(4), ms(8), ms(16), ms(32), ms(50), ms(50)]);
        // Aimed at the hint, and a stagger after it (below).
        assert_eq!(w.next(hint(Some(3_000_000)), 0), Some(ms(3) + Duration::from_nanos(999_700)));
        assert_eq!(w.next(hint(Some(0)), 20 * SECOND), Some(MIN_WAIT));

        let mut w = Waiting::new(1_000, Some(10_000_000), true);
        assert_eq!(w.next(hint(None), 1_000), Some(ms(1)));
        assert_eq!(w.next(hint(None), 9_500_000), Some(Duration::from_nanos(501_000)));
        assert_eq!(w.next(hint(None), 10_001_000), None);
    }

    #[test]
    fn at_the_freeing_instant_the_longer_waiting_acquire_tries_first() {
        let us = |n: u64| Duration::from_nanos(n * 1_000);
        let (mut older, mut younger) = (Waiting::new(0, None, true), Waiting::new(2 * SECOND, None, true));
        // Both refused at 3 s; something frees 1 ms later.
        let freeing = hint(Some(1_000_000));
        let (first, second) = (older.next(freeing, 3 * SECOND).unwrap(), younger.next(freeing, 3 * SECOND).unwrap());
        assert_eq!(
            (first, second),
            (us(1_000) + Duration::from_nanos(699_900), us(1_000) + Duration::from_nanos(899_900))
        );
        // One that has waited the whole span tries at the instant itself;
        // a wait the hint does not bound (it is past the backoff) has no stagger.
        assert_eq!(Waiting::new(0, None, true).next(freeing, 10 * SECOND), Some(us(1_000)));
        assert_eq!(Waiting::new(0, None, true).next(hint(Some(5_000_000)), 0), Some(us(1_000)));
        // Nor does it outlast the deadline.
        assert_eq!(Waiting::new(0, Some(1_200_000), true).next(freeing, 0), Some(us(1_200)));
    }

    #[test]
    fn gives_up_at_once_when_a_settled_wait_outlasts_the_deadline() {
        let ms = |n: u64| Duration::from_millis(n);
        let settled = |ns: u64| Hint { retry_after: Some(ns), expected_after: Some(ns), settled: true };
        let mut w = Waiting::new(0, Some(10_000_000), true);
        assert_eq!(w.next(settled(10_000_001), 0), None);
        // An unsettled hint (a lease may be released) keeps waiting.
        assert_eq!(w.next(hint(Some(10_000_001)), 0), Some(ms(1)));
        // A settled wait that ends in time is waited for.
        assert_eq!(w.next(settled(10_000_000), 0), Some(ms(2)));
        assert_eq!(w.next(settled(6_000_001), 4_000_000), None);
        // Without a deadline there is nothing to outlast.
        assert_eq!(Waiting::new(0, None, true).next(settled(u64::MAX), 0), Some(ms(1)));
        // Nor when other processes write the tenant too.
        assert_eq!(Waiting::new(0, Some(10_000_000), false).next(settled(10_000_001), 0), Some(ms(1)));
    }

    #[test]
    fn a_settled_refusal_without_an_end_is_never_waited_for() {
        let never = Hint { retry_after: None, expected_after: None, settled: true };
        for sole_writer in [true, false] {
            assert_eq!(Waiting::new(0, None, sole_writer).next(never, 0), None, "sole writer: {sole_writer}");
        }
        // Unsettled, a lease may be released: waited for.
        let open = Hint { settled: false, ..never };
        assert_eq!(Waiting::new(0, None, false).next(open, 0), Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_ban_trial_in_time_keeps_no_one_waiting_for_a_ban_that_ends_too_late() {
        let trial = |expected_after| Hint { retry_after: Some(2_000_000), expected_after, settled: true };
        // The trial comes in time, the ban's end does not: give up at once.
        assert_eq!(Waiting::new(0, Some(10_000_000), true).next(trial(Some(10_000_001)), 0), None);
        // The ban ends in time: sleep until the trial, which may take it back sooner.
        let waited = Waiting::new(0, Some(10_000_000), true).next(trial(Some(10_000_000)), 0);
        assert_eq!(waited, Some(Duration::from_millis(1)));
    }
}
