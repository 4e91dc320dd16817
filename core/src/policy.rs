//! Every tunable of the pool, with the reputation-pool 0.5.0 values as defaults
//! (except the strategy and the Thompson decay, which that library lacks).
//! Durations are nanoseconds of the monotonic clock the caller passes in.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use alloc::vec::Vec;

use crate::outcome::{FailureKind, MAX_RETRY_AFTER};
use crate::time::SECOND;

/// How a candidate is chosen among the selectable ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// reputation-pool 0.5.0: weighted random, weight = score − min score + exploration floor.
    Classic,
    /// Thompson sampling on decayed success/failure counts (see `score::posterior`).
    Thompson,
    /// The selectable resource registered earliest; deterministic, for tests.
    First,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Classic => "classic",
            Strategy::Thompson => "thompson",
            Strategy::First => "first",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "classic" => Ok(Strategy::Classic),
            "thompson" => Ok(Strategy::Thompson),
            "first" => Ok(Strategy::First),
            _ => Err(Error::invalid("policy.strategy", "must be one of classic, thompson, first")),
        }
    }
}

/// How a cell whose cooldown ended comes back into service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Client traffic gets one trial lease at a time, whatever the cause:
    /// no user code is needed for a pool to heal.
    Traffic,
    /// Every cooled-out cell waits in `due_for_probe` for a probe (the host
    /// can run the loop with a probe the user supplies).
    Probe,
    /// reputation-pool 0.5.0: a trial for `blocked`, a probe for anything else;
    /// outcomes during a running cooldown move the score and window only.
    Classic,
}

impl Recovery {
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::Traffic => "traffic",
            Recovery::Probe => "probe",
            Recovery::Classic => "classic",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "traffic" => Ok(Recovery::Traffic),
            "probe" => Ok(Recovery::Probe),
            "classic" => Ok(Recovery::Classic),
            _ => Err(Error::invalid("policy.recovery", "must be one of traffic, probe, classic")),
        }
    }

    /// A cell cooled for `cause` takes one client trial once its cooldown ended.
    pub fn half_open(self, cause: FailureKind) -> bool {
        match self {
            Recovery::Traffic => true,
            Recovery::Probe => false,
            Recovery::Classic => cause == FailureKind::Blocked,
        }
    }

    /// A cell cooled for `cause` is listed for a probe once its cooldown ended.
    pub fn probes(self, cause: FailureKind) -> bool {
        match self {
            Recovery::Traffic => false,
            Recovery::Probe => true,
            Recovery::Classic => cause != FailureKind::Blocked,
        }
    }
}

/// How one failure kind cools a cell: after `cool_after` consecutive
/// failures, for `base × 2^min(failures − 1, max_exponent)`. For
/// `rate_limited` and `quota_exhausted` only `base` counts: the pause taken
/// when the provider gave no `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoolingRule {
    pub base: u64,
    pub cool_after: u32,
    pub max_exponent: u32,
}

/// Token bucket on acquire: `rate` tokens per second, at most `burst` stored.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    pub rate: f64,
    pub burst: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub strategy: Strategy,
    /// Outcomes remembered per cell.
    pub window: u32,
    /// Consecutive failures that cool a cell.
    pub cool_after: u32,
    /// Consecutive successes after a cooldown that make a cell healthy again.
    pub recover_after: u32,
    /// Cap on the doubling of cooldowns (allowed 0..=21).
    pub max_exponent: u32,
    /// Added to every classic weight so the worst candidate keeps a chance.
    pub exploration_floor: f64,
    pub lease_ttl: u64,
    pub probe_ttl: u64,
    /// Per-observation decay of the Thompson counts; lower forgets faster.
    /// 0.98 remembers about 50 observations: sharp enough to stop exploring
    /// mediocre resources, and a busy cell still turns over within minutes.
    pub decay: f64,
    pub max_resources: Option<u32>,
    pub max_cells: Option<u32>,
    pub rate_limit: Option<RateLimit>,
    pub recovery: Recovery,
    /// When nothing is selectable, grant the candidate whose cooldown or
    /// pause ends soonest (a `fail_open` lease) rather than nothing.
    /// Blocks are never crossed.
    pub fail_open: bool,
    /// Per-kind cooling rules that replace the defaults (`cooldown_base`,
    /// `cool_after`, `max_exponent`); at most one per kind, none for `auth_failed`.
    pub rules: Vec<(FailureKind, CoolingRule)>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            // Thompson won every scenario of `repute simulate` (host/cli/SIMULATE.md).
            strategy: Strategy::Thompson,
            window: 10,
            cool_after: 3,
            recover_after: 2,
            max_exponent: 6,
            exploration_floor: 1.0,
            lease_ttl: 30 * SECOND,
            probe_ttl: 15 * SECOND,
            decay: 0.98,
            max_resources: None,
            max_cells: None,
            rate_limit: None,
            recovery: Recovery::Traffic,
            fail_open: false,
            rules: Vec::new(),
        }
    }
}

impl Policy {
    pub fn validate(&self) -> Result<()> {
        if !(1..=1024).contains(&self.window) {
            return Err(Error::invalid("policy.window", "must be in 1..=1024"));
        }
        if self.cool_after == 0 {
            return Err(Error::invalid("policy.cool_after", "must be >= 1"));
        }
        if self.recover_after == 0 {
            return Err(Error::invalid("policy.recover_after", "must be >= 1"));
        }
        if self.max_exponent > 21 {
            return Err(Error::invalid("policy.max_exponent", "must be in 0..=21"));
        }
        if !(self.exploration_floor.is_finite() && self.exploration_floor > 0.0) {
            return Err(Error::invalid("policy.exploration_floor", "must be finite and > 0"));
        }
        if self.exploration_floor > 1_000_000.0 {
            return Err(Error::invalid("policy.exploration_floor", "must be <= 1000000"));
        }
        if self.lease_ttl == 0 {
            return Err(Error::invalid("policy.lease_ttl", "must be > 0"));
        }
        if self.probe_ttl == 0 {
            return Err(Error::invalid("policy.probe_ttl", "must be > 0"));
        }
        if !(self.decay.is_finite() && self.decay > 0.0 && self.decay <= 1.0) {
            return Err(Error::invalid("policy.decay", "must be in (0, 1]"));
        }
        if let Some(rl) = self.rate_limit {
            if !(rl.rate.is_finite() && rl.rate > 0.0) {
                return Err(Error::invalid("policy.rate_limit.rate", "must be finite and > 0"));
            }
            if rl.burst == 0 {
                return Err(Error::invalid("policy.rate_limit.burst", "must be >= 1"));
            }
        }
        for (i, (kind, rule)) in self.rules.iter().enumerate() {
            if *kind == FailureKind::AuthFailed {
                return Err(Error::invalid("policy.rules", "auth_failed blocks and has no cooling rule"));
            }
            if self.rules[..i].iter().any(|(k, _)| k == kind) {
                return Err(Error::invalid("policy.rules", "must name each failure kind at most once"));
            }
            if rule.base == 0 || rule.base > MAX_RETRY_AFTER {
                return Err(Error::invalid("policy.rules.base", "must be > 0 and at most 30 days"));
            }
            if rule.cool_after == 0 {
                return Err(Error::invalid("policy.rules.cool_after", "must be >= 1"));
            }
            if rule.max_exponent > 21 {
                return Err(Error::invalid("policy.rules.max_exponent", "must be in 0..=21"));
            }
        }
        Ok(())
    }

    /// Score change of one outcome, as in reputation-pool 0.5.0.
    pub fn score_delta(kind: Option<FailureKind>) -> i32 {
        match kind {
            None => 5,
            Some(FailureKind::Blocked) => -30,
            Some(FailureKind::TlsHandshake) => -15,
            Some(FailureKind::ConnectionReset) => -10,
            Some(FailureKind::Timeout) => -5,
            Some(FailureKind::Slow) => -2,
            Some(FailureKind::RateLimited | FailureKind::QuotaExhausted) => -1,
            Some(FailureKind::AuthFailed) => -30,
        }
    }

    /// Default base cooldown of a failure kind, before doubling (for
    /// `rate_limited` and `quota_exhausted`: the pause without a `retry_after`).
    pub fn cooldown_base(kind: FailureKind) -> u64 {
        SECOND
            * match kind {
                FailureKind::Blocked | FailureKind::QuotaExhausted | FailureKind::AuthFailed => 3600,
                FailureKind::TlsHandshake => 300,
                FailureKind::ConnectionReset => 120,
                FailureKind::Timeout | FailureKind::RateLimited => 60,
                FailureKind::Slow => 30,
            }
    }

    /// The cooling rule in force for `kind`: its override, else the defaults.
    /// Where a trial is the way back (any recovery but `classic`), `blocked`
    /// starts at 300 s rather than an hour, so a short ban costs minutes, and
    /// cools at the first report: a site's refusal is one answer, not a
    /// streak to wait for (each further refusal doubles the cooldown, a
    /// successful trial ends the streak).
    pub fn rule(&self, kind: FailureKind) -> CoolingRule {
        let (base, cool_after) = match (kind, self.recovery) {
            (FailureKind::Blocked, Recovery::Traffic | Recovery::Probe) => (300 * SECOND, 1),
            _ => (Self::cooldown_base(kind), self.cool_after),
        };
        self.rules.iter().find(|(k, _)| *k == kind).map(|(_, r)| *r).unwrap_or(CoolingRule {
            base,
            cool_after,
            max_exponent: self.max_exponent,
        })
    }

    /// base(kind) × 2^min(consecutive_failures − 1, max_exponent), by `kind`'s rule.
    pub fn cooldown(&self, kind: FailureKind, consecutive_failures: u32) -> u64 {
        let rule = self.rule(kind);
        let exp = consecutive_failures.saturating_sub(1).min(rule.max_exponent);
        rule.base.saturating_mul(1 << exp)
    }
}
