//! What a resource (or one of its contexts, or a group of resources) has
//! used of its limits, and the rule a grant is judged by: grants and tokens
//! in the last minute and the last day, the last grant and the uses of its
//! life.
//!
//! The rule (`judge`) is written once, here: the pool runs it on its own
//! windows (`Usage`) and the host's in-process authorities on theirs, each
//! through `Used`. The PostgreSQL and Redis authorities run the same rule in
//! the store's atomic step (SQL and Lua); the table in `cases` holds every
//! form to the same answers.
//!
//! A window (`Buckets`) keeps one entry per 1024th of its span: a grant
//! joins the newest entry while that entry's first grant is less than a
//! bucket old. An entry leaves the window when its newest grant does, so
//! merging only ever holds grants back longer, by less than a bucket (59 ms
//! of the minute, 84.4 s of the day): the window never admits more than a
//! limit, and at most about 1026 entries are in it whatever the rate.

use alloc::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::limits::{spacing, Limits, DAY, WINDOW};

#[cfg(any(test, feature = "workload"))]
pub mod cases;

/// Entries a window holds at most (a snapshot may carry no more).
pub(crate) const MAX_WINDOW_ENTRIES: usize = 1026;

/// The rule's answer to one grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The grant may be made now.
    Admitted,
    /// The grant may be made at this instant, not before.
    Until(u64),
    /// `max_uses` are spent: never again.
    Spent,
    /// The cost is over `tpm` or `tpd`: it never fits, though a smaller one may.
    Oversized,
}

/// Grants of a window made up to `at`, and their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub at: u64,
    pub grants: u64,
    pub tokens: u64,
}

/// One window's counts as the rule reads them: each keeper stores its
/// window its own way (the pool merges grants into entries, an authority
/// keeps each grant of the minute).
pub trait Counted {
    /// Grants in the window.
    fn grants(&self) -> u64;
    /// Tokens the window's grants count.
    fn tokens(&self) -> u64;
    /// The window, oldest first, without what left it by the instant judged.
    fn slices(&self) -> impl Iterator<Item = Slice> + '_;
}

/// What one scope has used of its limits, as the rule reads it.
pub trait Used {
    /// When the newest grant was made.
    fn last(&self) -> Option<u64>;
    /// Grants ever.
    fn uses(&self) -> u64;
    /// The grants an `rpm` or `tpm` counts: the last `WINDOW`.
    fn minute(&self) -> impl Counted + '_;
    /// The grants an `rpd` or `tpd` counts: the last `DAY`.
    fn day(&self) -> impl Counted + '_;
}

impl<T: Counted> Counted for &T {
    fn grants(&self) -> u64 {
        (**self).grants()
    }

    fn tokens(&self) -> u64 {
        (**self).tokens()
    }

    fn slices(&self) -> impl Iterator<Item = Slice> + '_ {
        (**self).slices()
    }
}

/// The rule: a grant of `cost` under `limits` at `now`. `max_uses` spent
/// answers `Spent`; else the grant waits for the earliest instant `>= now`
/// at which `min_interval` has passed since the newest grant, the minute
/// holds fewer than `rpm` grants and `cost` more tokens fit under `tpm`,
/// and the day likewise under `rpd` and `tpd` (grants leave a window its
/// span after they were made). A cost over `tpm` or `tpd` is `Oversized`.
/// An `rpm`'s spacing is not applied here: callers judge by
/// `Limits::paced` where they want it.
pub fn judge(limits: &Limits, used: &impl Used, cost: u64, now: u64) -> Verdict {
    if limits.max_uses.is_some_and(|m| used.uses() >= m) {
        return Verdict::Spent;
    }
    let mut at = now;
    if let (Some(gap), Some(last)) = (limits.min_interval, used.last()) {
        at = at.max(last.saturating_add(gap));
    }
    let spans = [(limits.rpm, limits.tpm, WINDOW), (limits.rpd, limits.tpd, DAY)];
    for (rate, tokens, span) in spans {
        if rate.is_none() && tokens.is_none() {
            continue;
        }
        let free = if span == WINDOW {
            free_at(rate, tokens, &used.minute(), span, cost)
        } else {
            free_at(rate, tokens, &used.day(), span, cost)
        };
        match free {
            Some(free) => at = at.max(free),
            None => return Verdict::Oversized,
        }
    }
    if at > now {
        Verdict::Until(at)
    } else {
        Verdict::Admitted
    }
}

/// The earliest instant one window of `span` admits a grant of `cost`
/// under `rate` grants and `tokens` (0 when it does now); `None` when the
/// cost is over `tokens` and never fits.
fn free_at(rate: Option<u32>, tokens: Option<u64>, window: &impl Counted, span: u64, cost: u64) -> Option<u64> {
    let mut at = 0;
    if let Some(rate) = rate.map(u64::from) {
        if window.grants() + 1 > rate {
            at = at.max(freed_at(window, window.grants() + 1 - rate, span, |s| s.grants));
        }
    }
    if let Some(limit) = tokens {
        if cost > limit {
            return None;
        }
        if window.tokens() + cost > limit {
            at = at.max(freed_at(window, window.tokens() + cost - limit, span, |s| s.tokens));
        }
    }
    Some(at)
}

/// When the oldest slices holding `needed` of what `of` counts leave a
/// window of `span`. Never past its end for a grant the limits can admit:
/// `needed` is at most what the window holds when a rate is at least 1
/// and the cost fits.
fn freed_at(window: &impl Counted, needed: u64, span: u64, of: impl Fn(&Slice) -> u64) -> u64 {
    let mut freed = 0;
    for s in window.slices() {
        freed += of(&s);
        if freed >= needed {
            return s.at.saturating_add(span);
        }
    }
    u64::MAX
}

/// What a window holds, as the next grant counts it: the grants an `rpm`
/// or `tpm` (an `rpd` or `tpd`) counts in the last `WINDOW` (`DAY`), and
/// their tokens (costs, or what they reconciled to). A view reads it;
/// nothing judges by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub grants: u64,
    pub tokens: u64,
}

/// Grants made from `from` to `at` and their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub from: u64,
    pub at: u64,
    pub grants: u32,
    pub tokens: u64,
}

/// The grants of the last `SPAN` ns, merged into at most about 1026
/// entries (see the module's note), oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buckets<const SPAN: u64> {
    entries: VecDeque<Entry>,
    grants: u64,
    tokens: u64,
}

/// The minute window an `rpm` or `tpm` counts.
pub type MinuteWindow = Buckets<WINDOW>;
/// The day window an `rpd` or `tpd` counts.
pub type DayWindow = Buckets<DAY>;

impl<const SPAN: u64> Buckets<SPAN> {
    /// The span of grant times one entry gathers.
    pub const BUCKET: u64 = SPAN / 1024;

    /// What the window holds at `now`: the entries `expire(now)` would keep.
    pub fn window_at(&self, now: u64) -> Window {
        let kept = self.entries.iter().filter(|e| e.at.saturating_add(SPAN) > now);
        kept.fold(Window::default(), |w, e| Window {
            grants: w.grants + u64::from(e.grants),
            tokens: w.tokens + e.tokens,
        })
    }

    /// Drops the entries whose grants left the window by `now`.
    pub fn expire(&mut self, now: u64) {
        while let Some(e) = self.entries.front().copied() {
            if e.at.saturating_add(SPAN) > now {
                break;
            }
            self.entries.pop_front();
            self.grants -= u64::from(e.grants);
            self.tokens -= e.tokens;
        }
    }

    /// Counts a grant of `cost` tokens at `now`.
    pub fn record(&mut self, cost: u64, now: u64) {
        self.grants += 1;
        self.tokens += cost;
        match self.entries.back_mut() {
            Some(e) if now.saturating_sub(e.from) < Self::BUCKET => {
                e.at = e.at.max(now);
                e.grants += 1;
                e.tokens += cost;
            }
            _ => self.entries.push_back(Entry { from: now, at: now, grants: 1, tokens: cost }),
        }
    }

    /// The grant made at `at` used `used` tokens, not the `reserved` ones.
    pub fn reconcile(&mut self, at: u64, reserved: u64, used: u64) {
        // The entry holding it is the first that is not older than it.
        let i = self.entries.partition_point(|e| e.at < at);
        let Some(e) = self.entries.get_mut(i) else { return };
        let kept = e.tokens.saturating_sub(reserved).saturating_add(used);
        self.tokens = self.tokens - e.tokens + kept;
        e.tokens = kept;
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.entries.iter()
    }

    /// Entries in the window.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no grant is in the window.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A window of `entries` as `entries()` listed them; `None` unless they
    /// are at most 1026, each counts a grant, and they are oldest first.
    pub fn from_entries(entries: impl IntoIterator<Item = Entry>) -> Option<Self> {
        let mut w = Self::default();
        for e in entries {
            let ordered = w.entries.back().is_none_or(|b| b.at <= e.from);
            if e.grants == 0 || e.from > e.at || !ordered || w.entries.len() == MAX_WINDOW_ENTRIES {
                return None;
            }
            w.grants += u64::from(e.grants);
            w.tokens = w.tokens.checked_add(e.tokens)?;
            w.entries.push_back(e);
        }
        Some(w)
    }

    pub fn heap_bytes(&self) -> usize {
        crate::footprint::vec::<Entry>(self.entries.capacity())
    }
}

impl<const SPAN: u64> Counted for Buckets<SPAN> {
    fn grants(&self) -> u64 {
        self.grants
    }

    fn tokens(&self) -> u64 {
        self.tokens
    }

    fn slices(&self) -> impl Iterator<Item = Slice> + '_ {
        self.entries.iter().map(|e| Slice { at: e.at, grants: u64::from(e.grants), tokens: e.tokens })
    }
}

/// What one resource (a context of it, a group) has used of its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Grants of the last `WINDOW`, where an `rpm` or `tpm` counts them.
    pub minute: MinuteWindow,
    /// Grants of the last `DAY`, where an `rpd` or `tpd` counts them.
    pub day: DayWindow,
    pub last_grant: Option<u64>,
    /// Grants since registration.
    pub uses: u64,
}

impl Usage {
    /// Drops the grants that left either window by `now`.
    pub fn expire(&mut self, now: u64) {
        self.minute.expire(now);
        self.day.expire(now);
    }

    /// `Ok` if `limits` admit a grant of `cost` tokens at `now` (`expire`d
    /// first; an `rpm` also spaces grants, see `Limits::paced`), else when
    /// they may: `Some(at)`, or `None` if never again.
    pub fn admits(&self, limits: &Limits, cost: u64, now: u64) -> core::result::Result<(), Option<u64>> {
        self.allows(&Limits { min_interval: spacing(limits.rpm, limits.min_interval), ..*limits }, cost, now)
    }

    /// `admits` by `limits` as they are, an `rpm` not spread: a group's
    /// window (see `GroupLimits::as_limits`).
    pub fn allows(&self, limits: &Limits, cost: u64, now: u64) -> core::result::Result<(), Option<u64>> {
        match judge(limits, self, cost, now) {
            Verdict::Admitted => Ok(()),
            Verdict::Until(at) => Err(Some(at)),
            Verdict::Spent | Verdict::Oversized => Err(None),
        }
    }

    /// Counts a grant of `cost` tokens at `now` under `limits`: in the
    /// windows they count in only, so that an unlimited span keeps nothing.
    pub fn record(&mut self, limits: &Limits, cost: u64, now: u64) {
        self.uses += 1;
        self.last_grant = Some(now);
        if limits.windowed() {
            self.minute.record(cost, now);
        }
        if limits.daily() {
            self.day.record(cost, now);
        }
    }

    /// The grant made at `at` used `used` tokens, not the `reserved` ones.
    pub fn reconcile(&mut self, at: u64, reserved: u64, used: u64) {
        self.minute.reconcile(at, reserved, used);
        self.day.reconcile(at, reserved, used);
    }

    /// When the resource may be granted again with cost 1, if not now.
    pub fn gate(&self, limits: &Limits, now: u64) -> Option<Option<u64>> {
        self.admits(limits, 1, now).err()
    }

    pub fn heap_bytes(&self) -> usize {
        self.minute.heap_bytes() + self.day.heap_bytes()
    }
}

impl Used for Usage {
    fn last(&self) -> Option<u64> {
        self.last_grant
    }

    fn uses(&self) -> u64 {
        self.uses
    }

    fn minute(&self) -> impl Counted + '_ {
        &self.minute
    }

    fn day(&self) -> impl Counted + '_ {
        &self.day
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
        u.record(&limits, 1, 0);
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
                            u.record(&case.limits, cost, at);
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
        u.record(&limits, 60, 0);
        u.reconcile(0, 60, 20);
        assert_eq!(u.minute.tokens(), 20);
        assert_eq!(u.admits(&limits, 101, S), Err(None), "a cost over the limit never fits");
        let limits = Limits { min_interval: Some(5 * S), max_uses: Some(2), ..Limits::default() };
        u.record(&limits, 1, 5 * S);
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
            u.record(&limits, 1, now);
            assert!(u.minute.len() <= MAX_WINDOW_ENTRIES);
        }
        let grants = u.minute.grants();
        assert!((60_000..=60_000 + 59).contains(&grants), "{grants}");
        // An entry leaves with its newest grant, within a bucket of its first.
        let mut u = Usage::default();
        for i in 0..3000u64 {
            u.record(&limits, 1, i);
        }
        assert_eq!((u.minute.len(), u.minute.grants()), (1, 3000));
        u.expire(WINDOW + 2998);
        assert_eq!(u.minute.grants(), 3000);
        u.expire(WINDOW + 2999);
        assert_eq!((u.minute.grants(), u.minute.tokens()), (0, 0));
        assert!(Limits { rpm: Some(0), ..limits }.validate().is_err());
    }

    /// A day window counts `rpd` and `tpd` over a rolling day in buckets of
    /// a 1024th of it, holding each grant back by less than a bucket.
    #[test]
    fn a_day_window_counts_a_rolling_day_in_bounded_buckets() {
        let limits = Limits { rpd: Some(3), tpd: Some(1000), ..Limits::default() };
        let mut u = Usage::default();
        let hour = 3600 * S;
        for (i, at) in [0, hour, 2 * hour].into_iter().enumerate() {
            assert_eq!(u.admits(&limits, 100, at), Ok(()), "grant {i}");
            u.record(&limits, 100, at);
        }
        assert!(u.minute.is_empty(), "no rpm or tpm: no minute window");
        assert_eq!(u.admits(&limits, 1, 3 * hour), Err(Some(DAY)), "the fourth waits for the first to leave");
        u.expire(DAY);
        assert_eq!(u.admits(&limits, 700, DAY), Ok(()));
        assert_eq!(u.admits(&limits, 900, DAY), Err(Some(DAY + hour)), "tpd: 200 used, 900 more fit an hour on");
        assert_eq!(u.admits(&limits, 1001, DAY), Err(None), "a cost over tpd never fits");
        // A grant a second for two days keeps at most 1026 entries.
        let limits = Limits { rpd: Some(super::super::limits::MAX_RPD), ..Limits::default() };
        let mut u = Usage::default();
        for i in 0..2 * 86_400u64 {
            u.expire(i * S);
            u.record(&limits, 1, i * S);
            assert!(u.day.len() <= MAX_WINDOW_ENTRIES);
        }
        let grants = u.day.grants();
        assert!((86_400..86_400 + 85).contains(&grants), "{grants}");
        assert_eq!(DayWindow::BUCKET, 84_375_000_000);
    }
}
