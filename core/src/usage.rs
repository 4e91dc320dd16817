//! What a resource (or one of its contexts) has used of its limits, and the
//! rule a grant is judged by: grants and tokens in the last minute, the last
//! grant and the uses of its life.
//!
//! The rule (`judge`) is written once, here: the pool runs it on its own
//! window (`Usage`) and the host's in-process authorities on theirs, each
//! through `Used`. The PostgreSQL and Redis authorities run the same rule in
//! the store's atomic step (SQL and Lua); the table in `cases` holds every
//! form to the same answers.
//!
//! The pool's window keeps one entry per span of `BUCKET` (a 1024th of the
//! window): a grant joins the newest entry while that entry's first grant
//! is less than a bucket old. An entry leaves the window when its newest
//! grant does, so merging only ever holds grants back longer, by less than
//! a bucket: the window never admits more than a limit, and at most about
//! 1026 entries are in it whatever the rate.

use alloc::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::limits::{spacing, Limits, WINDOW};

#[cfg(any(test, feature = "workload"))]
pub mod cases;

/// Entries a window holds at most (a snapshot may carry no more).
pub(crate) const MAX_WINDOW_ENTRIES: usize = 1026;
/// The span of grant times one window entry gathers.
const BUCKET: u64 = WINDOW / 1024;

/// The rule's answer to one grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The grant may be made now.
    Admitted,
    /// The grant may be made at this instant, not before.
    Until(u64),
    /// `max_uses` are spent: never again.
    Spent,
    /// The cost is over `tpm`: it never fits, though a smaller one may.
    Oversized,
}

/// Grants of a window made up to `at`, and their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub at: u64,
    pub grants: u64,
    pub tokens: u64,
}

/// What one scope has used of its limits, as the rule reads it: each
/// keeper stores its window its own way (the pool merges grants into
/// entries, an authority keeps each grant).
pub trait Used {
    /// Grants in the window.
    fn grants(&self) -> u64;
    /// Tokens the window's grants count against `tpm`.
    fn tokens(&self) -> u64;
    /// When the newest grant was made.
    fn last(&self) -> Option<u64>;
    /// Grants ever.
    fn uses(&self) -> u64;
    /// The window, oldest first, without what left it by the instant judged.
    fn slices(&self) -> impl Iterator<Item = Slice> + '_;
}

/// The rule: a grant of `cost` under `limits` at `now`. `max_uses` spent
/// answers `Spent`; else the grant waits for the earliest instant `>= now`
/// at which `min_interval` has passed since the newest grant, the window
/// holds fewer than `rpm` grants and `cost` more tokens fit under `tpm`
/// (grants leave the window `WINDOW` after they were made). A cost over
/// `tpm` is `Oversized`. An `rpm`'s spacing is not applied here: callers
/// judge by `Limits::paced` where they want it.
pub fn judge(limits: &Limits, used: &impl Used, cost: u64, now: u64) -> Verdict {
    if limits.max_uses.is_some_and(|m| used.uses() >= m) {
        return Verdict::Spent;
    }
    let mut at = now;
    if let (Some(gap), Some(last)) = (limits.min_interval, used.last()) {
        at = at.max(last.saturating_add(gap));
    }
    if let Some(rpm) = limits.rpm.map(u64::from) {
        if used.grants() + 1 > rpm {
            at = at.max(freed_at(used, used.grants() + 1 - rpm, |s| s.grants));
        }
    }
    if let Some(tpm) = limits.tpm {
        if cost > tpm {
            return Verdict::Oversized;
        }
        if used.tokens() + cost > tpm {
            at = at.max(freed_at(used, used.tokens() + cost - tpm, |s| s.tokens));
        }
    }
    if at > now {
        Verdict::Until(at)
    } else {
        Verdict::Admitted
    }
}

/// When the oldest slices holding `needed` of what `of` counts leave the
/// window. Never past its end for a grant the limits can admit: `needed`
/// is at most what the window holds when `rpm >= 1` and `cost <= tpm`.
fn freed_at(used: &impl Used, needed: u64, of: impl Fn(&Slice) -> u64) -> u64 {
    let mut freed = 0;
    for s in used.slices() {
        freed += of(&s);
        if freed >= needed {
            return s.at.saturating_add(WINDOW);
        }
    }
    u64::MAX
}

/// What a resource's current window holds, as the next grant counts it:
/// the grants an `rpm` or `tpm` counts in the last `WINDOW`, and their
/// tokens (costs, or what they reconciled to). A view reads it; nothing
/// judges by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub grants: u64,
    pub tokens: u64,
}

/// Grants made from `from` to `at` and their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub from: u64,
    pub at: u64,
    pub grants: u32,
    pub tokens: u64,
}

/// What one resource has used of its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Grants of the last `WINDOW`, oldest first.
    pub window: VecDeque<Entry>,
    pub grants: u64,
    pub tokens: u64,
    pub last_grant: Option<u64>,
    /// Grants since registration.
    pub uses: u64,
}

impl Usage {
    /// What the window holds at `now`: the entries `expire(now)` would keep.
    pub fn window_at(&self, now: u64) -> Window {
        let kept = self.window.iter().filter(|e| e.at.saturating_add(WINDOW) > now);
        kept.fold(Window::default(), |w, e| Window {
            grants: w.grants + u64::from(e.grants),
            tokens: w.tokens + e.tokens,
        })
    }

    /// Drops the entries whose grants left the window by `now`.
    pub fn expire(&mut self, now: u64) {
        while let Some(e) = self.window.front().copied() {
            if e.at.saturating_add(WINDOW) > now {
                break;
            }
            self.window.pop_front();
            self.grants -= u64::from(e.grants);
            self.tokens -= e.tokens;
        }
    }

    /// `Ok` if `limits` admit a grant of `cost` tokens at `now` (`expire`d
    /// first; an `rpm` also spaces grants, see `Limits::paced`), else when
    /// they may: `Some(at)`, or `None` if never again.
    pub fn admits(&self, limits: &Limits, cost: u64, now: u64) -> core::result::Result<(), Option<u64>> {
        let paced = Limits { min_interval: spacing(limits.rpm, limits.min_interval), ..*limits };
        match judge(&paced, self, cost, now) {
            Verdict::Admitted => Ok(()),
            Verdict::Until(at) => Err(Some(at)),
            Verdict::Spent | Verdict::Oversized => Err(None),
        }
    }

    /// Counts a grant of `cost` tokens at `now`.
    pub fn record(&mut self, cost: u64, now: u64) {
        self.uses += 1;
        self.last_grant = Some(now);
        self.grants += 1;
        self.tokens += cost;
        match self.window.back_mut() {
            Some(e) if now.saturating_sub(e.from) < BUCKET => {
                e.at = e.at.max(now);
                e.grants += 1;
                e.tokens += cost;
            }
            _ => self.window.push_back(Entry { from: now, at: now, grants: 1, tokens: cost }),
        }
    }

    /// The grant made at `at` used `used` tokens, not the `reserved` ones.
    pub fn reconcile(&mut self, at: u64, reserved: u64, used: u64) {
        // The entry holding it is the first that is not older than it.
        let i = self.window.partition_point(|e| e.at < at);
        let Some(e) = self.window.get_mut(i) else { return };
        let kept = e.tokens.saturating_sub(reserved).saturating_add(used);
        self.tokens = self.tokens - e.tokens + kept;
        e.tokens = kept;
    }

    /// When the resource may be granted again with cost 1, if not now.
    pub fn gate(&self, limits: &Limits, now: u64) -> Option<Option<u64>> {
        self.admits(limits, 1, now).err()
    }

    pub fn heap_bytes(&self) -> usize {
        crate::footprint::vec::<Entry>(self.window.capacity())
    }
}

impl Used for Usage {
    fn grants(&self) -> u64 {
        self.grants
    }

    fn tokens(&self) -> u64 {
        self.tokens
    }

    fn last(&self) -> Option<u64> {
        self.last_grant
    }

    fn uses(&self) -> u64 {
        self.uses
    }

    fn slices(&self) -> impl Iterator<Item = Slice> + '_ {
        self.window.iter().map(|e| Slice { at: e.at, grants: u64::from(e.grants), tokens: e.tokens })
    }
}

#[cfg(test)]
mod tests {
    use super::cases::Step;
    use super::*;
    use crate::limits::{ContextLimits, MAX_RPM};
    use crate::time::SECOND;

    const S: u64 = SECOND;

    #[test]
    fn rpm_spreads_the_minute_over_the_minute() {
        let limits = Limits { rpm: Some(120), ..Limits::default() };
        let mut u = Usage::default();
        u.record(1, 0);
        assert_eq!(u.admits(&limits, 1, S / 4), Err(Some(S / 2)), "one every half second");
        assert_eq!(u.admits(&limits, 1, S / 2), Ok(()));
        let slower = Limits { min_interval: Some(S), ..limits };
        assert_eq!(u.admits(&slower, 1, S / 2), Err(Some(S)), "a longer min_interval wins");
        let paced = Limits {
            rpm: Some(6),
            per_context: ContextLimits { rpm: Some(600), ..ContextLimits::default() },
            ..Limits::default()
        };
        assert_eq!((paced.paced().min_interval, paced.paced().per_context.min_interval), (Some(10 * S), Some(S / 10)));
        assert_eq!(Limits::default().paced(), Limits::default(), "no rate, no spacing");
    }

    /// The table every form of the rule answers, against the rule on the
    /// pool's window.
    #[test]
    fn the_shared_cases_hold() {
        for case in cases::CASES {
            let mut u = Usage::default();
            let mut granted = alloc::vec::Vec::new();
            for (i, step) in case.steps.iter().enumerate() {
                match *step {
                    Step::Ask { at, cost, expect } => {
                        u.expire(at);
                        assert_eq!(judge(&case.limits, &u, cost, at), expect, "{}: step {i}", case.name);
                        if expect == Verdict::Admitted {
                            u.record(cost, at);
                            granted.push((at, cost));
                        }
                    }
                    Step::Reconcile { grant, used } => {
                        let (at, cost) = granted[grant];
                        u.reconcile(at, cost, used);
                    }
                }
            }
        }
    }

    /// `admits` speaks the rule's answers as the pool reads them: a
    /// reconcile gives back tokens, and neither spent uses nor a cost over
    /// `tpm` have a wait that ends them.
    #[test]
    fn admits_gives_back_reconciled_tokens_and_reads_never_as_none() {
        let limits = Limits { tpm: Some(100), ..Limits::default() };
        let mut u = Usage::default();
        u.record(60, 0);
        u.reconcile(0, 60, 20);
        assert_eq!(u.tokens, 20);
        assert_eq!(u.admits(&limits, 101, S), Err(None), "a cost over the limit never fits");
        let limits = Limits { min_interval: Some(5 * S), max_uses: Some(2), ..Limits::default() };
        u.record(1, 5 * S);
        assert_eq!(u.admits(&limits, 1, 100 * S), Err(None));
    }

    #[test]
    fn merged_entries_never_admit_more_and_stay_bounded_at_any_rate() {
        let limits = Limits { rpm: Some(MAX_RPM), ..Limits::default() };
        let mut u = Usage::default();
        // 1000 grants a second for 200 s: 60,000 a minute, always admitted.
        for i in 0..200_000u64 {
            let now = i * 1_000_000;
            u.expire(now);
            assert_eq!(u.admits(&limits, 1, now), Ok(()), "refused at {now}");
            u.record(1, now);
            assert!(u.window.len() <= MAX_WINDOW_ENTRIES);
        }
        assert!(u.grants >= 60_000 && u.grants <= 60_000 + 59, "{}", u.grants);
        // An entry leaves with its newest grant, within a bucket of its first.
        let mut u = Usage::default();
        for i in 0..3000u64 {
            u.record(1, i);
        }
        assert_eq!((u.window.len(), u.grants), (1, 3000));
        u.expire(WINDOW + 2998);
        assert_eq!(u.grants, 3000);
        u.expire(WINDOW + 2999);
        assert_eq!((u.grants, u.tokens), (0, 0));
        assert!(Limits { rpm: Some(0), ..limits }.validate().is_err());
    }
}
