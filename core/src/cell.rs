//! One reputation cell: how a resource has fared in one context (or, for the
//! global layer, everywhere). Holds the reputation-pool 0.5.0 state machine.

use alloc::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::outcome::{FailureKind, Outcome};
use crate::pace::Pace;
use crate::policy::{Policy, Recovery};

pub const MIN_SCORE: i32 = -100;
pub const MAX_SCORE: i32 = 100;

/// The state a caller sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    Healthy,
    Cooling,
    Recovering,
    Blocklisted,
}

impl CellState {
    pub fn as_str(self) -> &'static str {
        match self {
            CellState::Healthy => "healthy",
            CellState::Cooling => "cooling",
            CellState::Recovering => "recovering",
            CellState::Blocklisted => "blocklisted",
        }
    }
}

/// Where the cell is in its cooling cycle. `Cooling` persists after `until`
/// passes: the cell then waits for a half-open trial or a probe to succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Healthy,
    Cooling { until: u64, cause: FailureKind },
    Recovering,
}

/// A wait the provider asked for (`rate_limited`, `quota_exhausted`): the
/// cell (or resource) is not selectable until `until`, then simply is again,
/// with no trial and no effect on the cooling cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pause {
    pub until: u64,
    pub cause: FailureKind,
}

impl Pause {
    /// `current` extended to `until` if that is later: a pause never shortens.
    pub fn extend(current: Option<Pause>, until: u64, cause: FailureKind) -> Option<Pause> {
        match current {
            Some(p) if p.until >= until => None,
            _ => Some(Pause { until, cause }),
        }
    }
}

/// What applying one outcome changed, for events and re-indexing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Transition {
    /// A cooldown began or was extended to this end.
    pub cooled: Option<(u64, FailureKind)>,
    /// The cell's pause began or was extended.
    pub paused: Option<Pause>,
    pub recovered: bool,
    pub left_cooling: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    pub score: i32,
    pub window: VecDeque<Outcome>,
    pub consecutive_failures: u32,
    pub consecutive_successes: u32,
    pub phase: Phase,
    /// Decayed success and failure counts, for Thompson sampling.
    pub successes: f64,
    pub failures: f64,
    /// Exponentially weighted latency in milliseconds; 0 before any observation.
    pub latency_ms: f64,
    pub observations: u64,
    /// A running `rate_limited` pause of this cell.
    pub pause: Option<Pause>,
    /// The rate this cell learned it takes from the limits it met.
    pub pace: Pace,
}

impl Cell {
    pub fn heap_bytes(&self) -> usize {
        crate::footprint::vec::<Outcome>(self.window.capacity())
    }

    pub fn new() -> Self {
        Cell {
            score: 0,
            window: VecDeque::new(),
            consecutive_failures: 0,
            consecutive_successes: 0,
            phase: Phase::Healthy,
            successes: 0.0,
            failures: 0.0,
            latency_ms: 0.0,
            observations: 0,
            pause: None,
            pace: Pace::default(),
        }
    }

    /// Cooldown over but not yet recovered; `Some(cause)` of the cooldown.
    pub fn cooled_out(&self, now: u64) -> Option<FailureKind> {
        match self.phase {
            Phase::Cooling { until, cause } if now >= until => Some(cause),
            _ => None,
        }
    }

    pub fn state(&self) -> CellState {
        match self.phase {
            Phase::Healthy => CellState::Healthy,
            Phase::Cooling { .. } => CellState::Cooling,
            Phase::Recovering => CellState::Recovering,
        }
    }

    /// An answer counted and timed, nothing more. Every answer but a
    /// provider's wait counts so; a failure the context's outage explains
    /// counts only so, which keeps every acknowledged report in the count.
    pub fn observed(&mut self, outcome: &Outcome) {
        let latency = outcome.latency_ms();
        self.latency_ms = if self.observations == 0 { latency } else { 0.8 * self.latency_ms + 0.2 * latency };
        self.observations += 1;
    }

    /// Folds one outcome in. `gated` is false for the global layer, which keeps
    /// score and counters but never cools: it informs, it does not gate.
    pub fn apply(&mut self, outcome: &Outcome, now: u64, policy: &Policy, gated: bool) -> Transition {
        let kind = outcome.kind();
        self.score = (self.score + Policy::score_delta(kind)).clamp(MIN_SCORE, MAX_SCORE);
        let mut t = Transition::default();
        if let (Outcome::Failure { kind, retry_after, .. }, true) =
            (*outcome, kind.is_some_and(|k| k.takes_retry_after()))
        {
            // A provider's "wait" says nothing about how well the resource
            // works: the window, latency and streaks stay.
            if gated && kind == FailureKind::RateLimited {
                let until = now.saturating_add(retry_after.unwrap_or(policy.rule(kind).base));
                self.pace.limited(sent_at(outcome, now), until, now);
                t.paused = Pause::extend(self.pause, until, kind);
                if t.paused.is_some() {
                    self.pause = t.paused;
                }
                // A request that met the limit failed: Thompson, which
                // estimates what a request sent here will get, counts it (no
                // strike, no window entry), so a saturated key sheds load.
                self.successes *= policy.decay;
                self.failures = self.failures * policy.decay + 1.0;
            }
            return t;
        }
        if gated
            && !matches!(kind, Some(FailureKind::ConnectionReset | FailureKind::TlsHandshake | FailureKind::Timeout))
        {
            // An answer came back: the provider's limit let the request through.
            self.pace.passed(sent_at(outcome, now), now);
        }
        self.window.push_back(*outcome);
        while self.window.len() > policy.window as usize {
            self.window.pop_front();
        }
        self.successes *= policy.decay;
        self.failures *= policy.decay;
        match kind {
            None => self.successes += 1.0,
            Some(_) => self.failures += 1.0,
        }
        self.observed(outcome);

        // A refused credential blocks the resource (the pool does that); it is no strike.
        if kind == Some(FailureKind::AuthFailed) {
            return t;
        }
        if !gated {
            match kind {
                None => {
                    self.consecutive_failures = 0;
                    self.consecutive_successes = self.consecutive_successes.saturating_add(1);
                }
                Some(_) => {
                    self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                    self.consecutive_successes = 0;
                }
            }
            return t;
        }
        if let Phase::Cooling { until, .. } = self.phase {
            if now < until {
                // A running cooldown absorbs outcomes: score and window move.
                // Outside the classic rules a failure restarts the cooldown
                // from now (same exponent) when that ends later: a cooldown
                // only ever extends.
                if let (Some(kind), false) = (kind, policy.recovery == Recovery::Classic) {
                    let end = now.saturating_add(policy.cooldown(kind, self.consecutive_failures));
                    if end > until {
                        self.phase = Phase::Cooling { until: end, cause: kind };
                        t.cooled = Some((end, kind));
                    }
                }
                return t;
            }
        }
        match kind {
            Some(kind) => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.consecutive_successes = 0;
                // A failed trial or probe (the cooldown has ended, the cell has
                // not recovered) re-cools whatever its kind's `cool_after`.
                let trial_failed = matches!(self.phase, Phase::Cooling { .. });
                if trial_failed || self.consecutive_failures >= policy.rule(kind).cool_after {
                    let until = now.saturating_add(policy.cooldown(kind, self.consecutive_failures));
                    self.phase = Phase::Cooling { until, cause: kind };
                    t.cooled = Some((until, kind));
                }
            }
            None => {
                self.consecutive_failures = 0;
                self.consecutive_successes = self.consecutive_successes.saturating_add(1);
                match self.phase {
                    Phase::Cooling { .. } => {
                        self.consecutive_successes = 1;
                        self.phase = Phase::Recovering;
                        t.left_cooling = true;
                    }
                    Phase::Recovering | Phase::Healthy => {}
                }
                if self.phase == Phase::Recovering && self.consecutive_successes >= policy.recover_after {
                    self.phase = Phase::Healthy;
                    t.recovered = true;
                }
            }
        }
        t
    }

    /// Share of successes in the window, or `None` before any observation.
    pub fn success_rate(&self) -> Option<f64> {
        if self.window.is_empty() {
            return None;
        }
        let ok = self.window.iter().filter(|o| o.is_success()).count();
        Some(ok as f64 / self.window.len() as f64)
    }
}

/// When the request an outcome reports on was sent: `now` less its latency.
fn sent_at(outcome: &Outcome, now: u64) -> u64 {
    let latency = outcome.latency_ms() * (crate::time::SECOND / 1000) as f64;
    now.saturating_sub(libm::floor(latency) as u64)
}
