//! Usage limits of a resource (`Limits`, with the `ContextLimits` each of
//! its contexts has apart) and what it has used of them (`Usage`): grants
//! and tokens in the last minute, the last grant, the uses of its life and
//! whether they retired it.
//!
//! The window keeps one entry per span of `BUCKET` (a 1024th of the window):
//! a grant joins the newest entry while that entry's first grant is less
//! than a bucket old. An entry leaves the window when its newest grant
//! does, so merging only ever holds grants back longer, by less than a
//! bucket: the window never admits more than a limit, and at most about
//! 1026 entries are in it whatever the rate.

use alloc::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time::SECOND;

/// The span `rpm` and `tpm` count over.
pub const WINDOW: u64 = 60 * SECOND;
/// Highest `rpm` accepted.
pub const MAX_RPM: u32 = 100_000;
/// Entries a window holds at most (a snapshot may carry no more).
pub(crate) const MAX_WINDOW_ENTRIES: usize = 1026;
/// The span of grant times one window entry gathers.
const BUCKET: u64 = WINDOW / 1024;

/// Usage limits of one resource; durations in ns. The default has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// At most this many grants in any 60 s.
    pub rpm: Option<u32>,
    /// At most this many tokens (each grant's cost, reconciled to its use) in any 60 s.
    pub tpm: Option<u64>,
    /// At least this long between two grants.
    pub min_interval: Option<u64>,
    /// At most this many grants ever; then the resource is retired.
    pub max_uses: Option<u64>,
    /// Retired this long after registration.
    pub max_age: Option<u64>,
    /// Limits each (resource, context) has on its own, beside the
    /// resource-wide ones: providers that count a key's quota per model or
    /// per endpoint.
    pub per_context: ContextLimits,
}

/// Usage limits of one resource in each one context (durations in ns): an
/// acquire for a context counts against the resource's limits and against
/// its context's. The default has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextLimits {
    /// At most this many grants for one context in any 60 s.
    pub rpm: Option<u32>,
    /// At most this many tokens for one context in any 60 s.
    pub tpm: Option<u64>,
    /// At least this long between two grants for one context.
    pub min_interval: Option<u64>,
}

impl ContextLimits {
    /// As resource-wide limits, for counting one context's grants.
    pub fn as_limits(&self) -> Limits {
        Limits { rpm: self.rpm, tpm: self.tpm, min_interval: self.min_interval, ..Limits::default() }
    }

    /// Whether grants must be counted per context at all.
    pub fn counted(&self) -> bool {
        *self != ContextLimits::default()
    }
}

/// The least time between two grants under `rpm` and `min_interval`: a
/// minute's requests are spread over the minute, one every `WINDOW / rpm`,
/// rather than spent in a burst. Providers enforce a per-minute limit over
/// shorter slices (OpenAI's guide: 60,000 rpm may be enforced as 1,000
/// requests per second), so a burst within the minute's count still meets
/// 429s; spacing grants evenly never exceeds any slice's share, and the
/// minute's count is reached all the same.
fn spacing(rpm: Option<u32>, min_interval: Option<u64>) -> Option<u64> {
    let pace = rpm.map(|r| WINDOW / u64::from(r));
    match (pace, min_interval) {
        (Some(p), Some(m)) => Some(p.max(m)),
        (p, m) => p.or(m),
    }
}

impl Limits {
    pub fn validate(&self) -> Result<()> {
        if self.rpm.is_some_and(|r| !(1..=MAX_RPM).contains(&r)) {
            return Err(Error::invalid("limits.rpm", "must be in 1..=100000"));
        }
        if self.tpm == Some(0) {
            return Err(Error::invalid("limits.tpm", "must be > 0"));
        }
        if self.min_interval == Some(0) {
            return Err(Error::invalid("limits.min_interval", "must be > 0"));
        }
        if self.max_uses == Some(0) {
            return Err(Error::invalid("limits.max_uses", "must be > 0"));
        }
        if self.max_age == Some(0) {
            return Err(Error::invalid("limits.max_age", "must be > 0"));
        }
        let c = &self.per_context;
        if c.rpm.is_some_and(|r| !(1..=MAX_RPM).contains(&r)) {
            return Err(Error::invalid("limits.per_context.rpm", "must be in 1..=100000"));
        }
        if c.tpm == Some(0) {
            return Err(Error::invalid("limits.per_context.tpm", "must be > 0"));
        }
        if c.min_interval == Some(0) {
            return Err(Error::invalid("limits.per_context.min_interval", "must be > 0"));
        }
        Ok(())
    }

    /// Whether there are no limits at all.
    pub fn is_none(&self) -> bool {
        *self == Limits::default()
    }

    /// Whether grants must be counted resource-wide (`max_age` needs no counting).
    pub fn counted(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some() || self.min_interval.is_some() || self.max_uses.is_some()
    }

    /// Whether a grant counts against a `tpm`, resource-wide or per context.
    pub fn weighed(&self) -> bool {
        self.tpm.is_some() || self.per_context.tpm.is_some()
    }

    /// The limits a grant is judged by, here and at the authority: these,
    /// with each `min_interval` raised to the spacing its `rpm` asks (see
    /// `spacing`). Views keep the limits as registered.
    pub fn paced(&self) -> Limits {
        let c = self.per_context;
        Limits {
            min_interval: spacing(self.rpm, self.min_interval),
            per_context: ContextLimits { min_interval: spacing(c.rpm, c.min_interval), ..c },
            ..*self
        }
    }
}

/// Why a resource was retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetireReason {
    MaxUses,
    MaxAge,
}

impl RetireReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RetireReason::MaxUses => "max_uses",
            RetireReason::MaxAge => "max_age",
        }
    }
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
    /// first; an `rpm` also spaces grants, see `spacing`), else when they
    /// may: `Some(at)`, or `None` if never again.
    pub fn admits(&self, limits: &Limits, cost: u64, now: u64) -> core::result::Result<(), Option<u64>> {
        if limits.max_uses.is_some_and(|m| self.uses >= m) {
            return Err(None);
        }
        let mut at = now;
        if let (Some(gap), Some(last)) = (spacing(limits.rpm, limits.min_interval), self.last_grant) {
            at = at.max(last.saturating_add(gap));
        }
        if let Some(rpm) = limits.rpm {
            if self.grants + 1 > u64::from(rpm) {
                at = at.max(self.freed_at(self.grants + 1 - u64::from(rpm), |e| u64::from(e.grants)));
            }
        }
        if let Some(tpm) = limits.tpm {
            if cost > tpm {
                return Err(None);
            }
            if self.tokens + cost > tpm {
                at = at.max(self.freed_at(self.tokens + cost - tpm, |e| e.tokens));
            }
        }
        if at > now {
            Err(Some(at))
        } else {
            Ok(())
        }
    }

    /// When the oldest entries holding `needed` of what `of` counts leave the window.
    fn freed_at(&self, needed: u64, of: impl Fn(&Entry) -> u64) -> u64 {
        let mut freed = 0;
        for e in &self.window {
            freed += of(e);
            if freed >= needed {
                return e.at.saturating_add(WINDOW);
            }
        }
        u64::MAX
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = SECOND;

    #[test]
    fn rpm_admits_until_full_then_says_when_the_oldest_leaves() {
        let limits = Limits { rpm: Some(3), ..Limits::default() };
        let mut u = Usage::default();
        for t in [0, 20 * S, 40 * S] {
            assert_eq!(u.admits(&limits, 1, t), Ok(()));
            u.record(1, t);
        }
        assert_eq!(u.admits(&limits, 1, 50 * S), Err(Some(60 * S)));
        u.expire(60 * S);
        assert_eq!(u.admits(&limits, 1, 60 * S), Ok(()));
    }

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

    #[test]
    fn tpm_counts_costs_and_reconciled_use() {
        let limits = Limits { tpm: Some(100), ..Limits::default() };
        let mut u = Usage::default();
        u.record(60, 0);
        assert_eq!(u.admits(&limits, 50, S), Err(Some(60 * S)));
        u.reconcile(0, 60, 20);
        assert_eq!(u.tokens, 20);
        assert_eq!(u.admits(&limits, 50, S), Ok(()));
        assert_eq!(u.admits(&limits, 101, S), Err(None), "a cost over the limit never fits");
    }

    #[test]
    fn min_interval_and_max_uses() {
        let limits = Limits { min_interval: Some(5 * S), max_uses: Some(2), ..Limits::default() };
        let mut u = Usage::default();
        u.record(1, 0);
        assert_eq!(u.admits(&limits, 1, S), Err(Some(5 * S)));
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
