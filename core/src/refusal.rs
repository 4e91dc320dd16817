//! Why an acquire found nothing: the refusal an acquire answers with. The
//! scan that counts it needs the pool and lives in `pool::standing`.

use core::fmt;

use serde::{Deserialize, Serialize};

/// An acquire's refusal, resource by resource: each registered resource is
/// counted once, under the first of blocked, rate limited, cooling, leased
/// that holds it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Refusal {
    /// Resources registered; 0 means there was nothing to choose from.
    pub registered: u32,
    /// Blocked everywhere or in this context (`auth_failed` included).
    pub blocked: u32,
    /// Paused for a provider's wait (`rate_limited` here, `quota_exhausted`
    /// anywhere), or spacing its grants here by the rate its limits taught
    /// it (see `crate::pace`).
    pub rate_limited: u32,
    /// Cooling in this context, or cooled and waiting for its one trial or probe.
    pub cooling: u32,
    /// Every permit held (here or, as the authority said, elsewhere).
    pub leased: u32,
    /// Over a usage limit until its window frees up, or retired by its limits.
    pub limited: u32,
    /// Nanoseconds until the first of them may free up, when any end is known.
    pub retry_after: Option<u64>,
    /// Nanoseconds until the first of them is expected to free up: as
    /// `retry_after`, but a ban's early trial does not count (most find the
    /// ban still on; see `Pool::early_due`), its ban's end does. A waiting
    /// acquire sleeps until `retry_after`, so it may take the trial; it gives
    /// up at once when its time ends before a settled `expected_after`,
    /// rather than hold its caller for a trial that will likely fail.
    pub expected_after: Option<u64>,
    /// Nothing this pool knows of can free one sooner than `retry_after`:
    /// none is leased (a release can come at any moment), none waits for a
    /// probe, no lease in flight in this context can report on one, and none
    /// held back by a usage limit has a live lease or a group (whose usage
    /// may free tokens). A waiting acquire whose time ends before a settled
    /// `retry_after` gives up at once instead of waiting out its timeout;
    /// a settled refusal with no `retry_after` (none registered that the
    /// acquire admits, or each blocked or retired for good) ends every
    /// wait at once: nothing but an operator's change would free one.
    pub settled: bool,
}

impl Refusal {
    /// One resource may free up `at`, as expected.
    pub(crate) fn soonest(&mut self, at: Option<u64>, now: u64) {
        if let Some(at) = at {
            let wait = at.saturating_sub(now);
            self.retry_after = Some(earliest(self.retry_after, wait));
            self.expected_after = Some(earliest(self.expected_after, wait));
        }
    }

    /// One resource may free up `at` by a ban's early trial, which is not
    /// expected to succeed.
    pub(crate) fn chance(&mut self, at: u64, now: u64) {
        self.retry_after = Some(earliest(self.retry_after, at.saturating_sub(now)));
    }

    /// `expected_after` where it says more than `retry_after` (a ban's
    /// early trial comes first): what a message names.
    pub fn expected_later(&self) -> Option<u64> {
        self.expected_after.filter(|&e| Some(e) != self.retry_after)
    }
}

fn earliest(known: Option<u64>, wait: u64) -> u64 {
    known.map_or(wait, |r| r.min(wait))
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.registered == 0 {
            return f.write_str("none registered");
        }
        let counts = [
            (self.blocked, "blocked"),
            (self.rate_limited, "rate limited"),
            (self.cooling, "cooling"),
            (self.leased, "leased"),
            (self.limited, "over a usage limit"),
        ];
        let mut first = true;
        for (n, what) in counts.into_iter().filter(|(n, _)| *n > 0) {
            if !first {
                f.write_str(", ")?;
            }
            write!(f, "{n} {what}")?;
            first = false;
        }
        if let Some(ns) = self.retry_after {
            write!(f, "; retry after {} ms", ns.div_ceil(1_000_000))?;
        }
        if let Some(ns) = self.expected_later() {
            write!(f, ", expected after {} ms", ns.div_ceil(1_000_000))?;
        }
        Ok(())
    }
}
