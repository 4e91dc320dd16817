//! How long a waiting acquire sleeps between attempts: one plan for the
//! blocking acquire here and for front ends that sleep on their own event
//! loop (asyncio, Node), so every acquire backs off alike.

use std::time::Duration;

use crate::error::Error;

/// The first wait after a refusal. A release in this process wakes waiters
/// at once; expiry, cooldown ends and other processes' releases have no
/// signal, so waits start short.
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest wait between attempts when the pool gives no sooner hint.
const MAX_BACKOFF: Duration = Duration::from_millis(50);
/// Shorter waits cost more in wakeups than they save in latency.
const MIN_WAIT: Duration = Duration::from_micros(50);

/// One acquire's waiting state: its deadline on the pool's clock (so a
/// `ManualClock` pool waits for its clock, not for real time) and its backoff.
#[derive(Debug, Clone)]
pub struct Waiting {
    until: Option<u64>,
    backoff: Duration,
}

/// The pool's hint of when to try again, if `e` is a refusal worth waiting
/// out (nothing selectable, or the rate limit); `None` for any other error.
pub fn refusal_hint(e: &Error) -> Option<Option<u64>> {
    match e {
        Error::NoResourceAvailable(refusal) => Some(refusal.retry_after),
        Error::RateLimited { retry_after } => Some(Some(*retry_after)),
        _ => None,
    }
}

impl Waiting {
    /// A plan for an acquire started at `now` that may wait `timeout` ns (`None`: without limit).
    pub fn new(now: u64, timeout: Option<u64>) -> Waiting {
        Waiting { until: timeout.map(|t| now.saturating_add(t)), backoff: MIN_BACKOFF }
    }

    /// After a refusal with the pool's `hint` (ns): how long to sleep
    /// before the next attempt, or `None` once the time is up (the refusal
    /// is then the answer).
    pub fn next(&mut self, hint: Option<u64>, now: u64) -> Option<Duration> {
        let remaining = self.until.map(|u| Duration::from_nanos(u.saturating_sub(now)));
        if remaining == Some(Duration::ZERO) {
            return None;
        }
        let mut wait = self.backoff.min(hint.map_or(MAX_BACKOFF, Duration::from_nanos)).max(MIN_WAIT);
        if let Some(remaining) = remaining {
            wait = wait.min(remaining);
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backs_off_to_the_ceiling_and_never_past_the_hint_or_the_deadline() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut w = Waiting::new(0, None);
        let waits: Vec<_> = (0..8).map(|_| w.next(None, 0).unwrap()).collect();
        assert_eq!(waits, [ms(1), ms(2), ms(4), ms(8), ms(16), ms(32), ms(50), ms(50)]);
        assert_eq!(w.next(Some(3_000_000), 0), Some(ms(3)));
        assert_eq!(w.next(Some(0), 0), Some(MIN_WAIT));

        let mut w = Waiting::new(1_000, Some(10_000_000));
        assert_eq!(w.next(None, 1_000), Some(ms(1)));
        assert_eq!(w.next(None, 9_500_000), Some(Duration::from_nanos(501_000)));
        assert_eq!(w.next(None, 10_001_000), None);
    }
}
