//! Usage limits of a resource (`Limits`, with the `ContextLimits` each of
//! its contexts has apart) and why they retired it. What a resource used of
//! them, and the rule a grant is judged by, are `crate::usage`'s.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time::SECOND;

/// The span `rpm` and `tpm` count over.
pub const WINDOW: u64 = 60 * SECOND;
/// The span `rpd` and `tpd` count over: a rolling day.
pub const DAY: u64 = 24 * 60 * 60 * SECOND;
/// Highest `rpm` accepted.
pub const MAX_RPM: u32 = 100_000;
/// Highest `rpd` accepted.
pub const MAX_RPD: u32 = 100_000_000;

/// Usage limits of one resource; durations in ns. The default has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// At most this many grants in any 60 s.
    pub rpm: Option<u32>,
    /// At most this many tokens (each grant's cost, reconciled to its use) in any 60 s.
    pub tpm: Option<u64>,
    /// At most this many grants in any rolling day.
    pub rpd: Option<u32>,
    /// At most this many tokens in any rolling day.
    pub tpd: Option<u64>,
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
pub(crate) fn spacing(rpm: Option<u32>, min_interval: Option<u64>) -> Option<u64> {
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
        if self.rpd.is_some_and(|r| !(1..=MAX_RPD).contains(&r)) {
            return Err(Error::invalid("limits.rpd", "must be in 1..=100000000"));
        }
        if self.tpd == Some(0) {
            return Err(Error::invalid("limits.tpd", "must be > 0"));
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
        self.windowed() || self.daily() || self.min_interval.is_some() || self.max_uses.is_some()
    }

    /// Whether a grant joins the minute window: an `rpm` or `tpm` counts it.
    pub fn windowed(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some()
    }

    /// Whether a grant joins the day window: an `rpd` or `tpd` counts it.
    pub fn daily(&self) -> bool {
        self.rpd.is_some() || self.tpd.is_some()
    }

    /// Whether a grant counts tokens: a `tpm` or `tpd`, resource-wide, or a
    /// `tpm` per context.
    pub fn weighed(&self) -> bool {
        self.tpm.is_some() || self.tpd.is_some() || self.per_context.tpm.is_some()
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
