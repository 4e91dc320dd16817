//! A cell's state as a record, and the blocks and pauses that hold a
//! resource or a cell back: taken with times as ages and remainders from
//! `now`, and built back with every value checked.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::cell::{Cell, Pause, Phase, MAX_SCORE, MIN_SCORE};
use crate::outcome::{FailureKind, Outcome, MAX_RETRY_AFTER};
use crate::pace::{Pace, Window, RECENT};
use crate::policy::Policy;
use crate::pool::{Block, MAX_REASON_BYTES};

use super::{counter, invalid, SnapshotError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct BlockRecord {
    remaining: Option<u64>,
    reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WindowEntry {
    failure: Option<FailureKind>,
    latency_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct PauseRecord {
    remaining: u64,
    cause: FailureKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum PhaseRecord {
    Healthy,
    Cooling { remaining: u64, cause: FailureKind },
    Recovering,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct CellRecordData {
    score: i32,
    window: Vec<WindowEntry>,
    consecutive_failures: u32,
    consecutive_successes: u32,
    phase: PhaseRecord,
    successes: f64,
    failures: f64,
    latency_ms: f64,
    observations: u64,
    pause: Option<PauseRecord>,
    /// None while nothing is learned or pending: the count of a period no
    /// limit has ended yet starts again after a restore.
    pace: Option<PaceRecord>,
}

/// A cell's learned pace, its instants as ages and remainders from `now`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PaceRecord {
    rate: Option<f64>,
    /// The window the rate was learned from, as ages of its start and end.
    learned: Option<(u64, u64)>,
    /// A window a limit ended: the age of its start, the remainder to its end.
    pending: Option<(u64, u64)>,
    /// Ages of the send times of the latest answers that got through.
    recent: Vec<u64>,
}

fn pace_out(p: &Pace, now: u64) -> Option<PaceRecord> {
    if p.rate.is_none() && p.pending.is_none() {
        return None;
    }
    let age = |t: u64| now.saturating_sub(t);
    Some(PaceRecord {
        rate: p.rate,
        learned: p.learned.map(|w| (age(w.start), age(w.end))),
        pending: p.pending.map(|w| (age(w.start), w.end.saturating_sub(now))),
        recent: p.recent[..usize::from(p.recent_len)].iter().map(|&t| age(t)).collect(),
    })
}

fn pace_in(p: Option<PaceRecord>, now: u64) -> Result<Pace, SnapshotError> {
    let Some(p) = p else { return Ok(Pace::default()) };
    if p.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(invalid("cell.pace.rate", "must be finite and > 0"));
    }
    if p.learned.is_some_and(|(start, end)| end > start) {
        return Err(invalid("cell.pace.learned", "must end after it starts"));
    }
    if p.pending.is_some_and(|(_, remaining)| remaining > MAX_RETRY_AFTER) {
        return Err(invalid("cell.pace.pending", "must end within 30 days"));
    }
    if p.recent.len() > RECENT {
        return Err(invalid("cell.pace.recent", "must hold at most 8 send times"));
    }
    let mut recent = [0; RECENT];
    for (slot, age) in recent.iter_mut().zip(&p.recent) {
        *slot = now.saturating_sub(*age);
    }
    Ok(Pace {
        rate: p.rate,
        learned: p.learned.map(|(start, end)| Window::restored(now.saturating_sub(start), now.saturating_sub(end))),
        pending: p.pending.map(|(start, end)| Window::restored(now.saturating_sub(start), now.saturating_add(end))),
        recent,
        recent_len: p.recent.len() as u8,
    })
}

pub(super) fn block_out(b: &Option<Block>, now: u64) -> Option<BlockRecord> {
    b.as_ref().map(|b| BlockRecord { remaining: b.until.map(|u| u.saturating_sub(now)), reason: b.reason.clone() })
}

pub(super) fn block_in(b: Option<BlockRecord>, now: u64) -> Result<Option<Block>, SnapshotError> {
    let Some(b) = b else { return Ok(None) };
    if b.remaining == Some(0) {
        return Ok(None);
    }
    if let Some(r) = &b.reason {
        if r.len() > MAX_REASON_BYTES || r.chars().any(char::is_control) {
            return Err(invalid("block.reason", "at most 1024 bytes, no control characters"));
        }
    }
    Ok(Some(Block { until: b.remaining.map(|r| now.saturating_add(r)), reason: b.reason }))
}

pub(super) fn pause_out(p: Option<Pause>, now: u64) -> Option<PauseRecord> {
    p.map(|p| PauseRecord { remaining: p.until.saturating_sub(now), cause: p.cause })
}

/// A pause of `cause` (the one kind that pauses this layer); an ended one is dropped.
pub(super) fn pause_in(p: Option<PauseRecord>, now: u64, cause: FailureKind) -> Result<Option<Pause>, SnapshotError> {
    let Some(p) = p else { return Ok(None) };
    if p.cause != cause {
        return Err(invalid("pause.cause", "must be rate_limited for a cell, quota_exhausted for a resource"));
    }
    if p.remaining > MAX_RETRY_AFTER {
        return Err(invalid("pause.remaining", "must be at most 30 days"));
    }
    Ok((p.remaining > 0).then(|| Pause { until: now.saturating_add(p.remaining), cause }))
}

pub(super) fn cell_out(c: &Cell, now: u64) -> CellRecordData {
    CellRecordData {
        score: c.score,
        window: c
            .window
            .iter()
            .map(|o| WindowEntry {
                failure: match o {
                    Outcome::Success { .. } => None,
                    Outcome::Failure { kind, .. } => Some(*kind),
                },
                latency_ms: o.latency_ms(),
            })
            .collect(),
        consecutive_failures: c.consecutive_failures,
        consecutive_successes: c.consecutive_successes,
        phase: match c.phase {
            Phase::Healthy => PhaseRecord::Healthy,
            Phase::Cooling { until, cause } => PhaseRecord::Cooling { remaining: until.saturating_sub(now), cause },
            Phase::Recovering => PhaseRecord::Recovering,
        },
        successes: c.successes,
        failures: c.failures,
        latency_ms: c.latency_ms,
        observations: c.observations,
        pause: pause_out(c.pause, now),
        pace: pace_out(&c.pace, now),
    }
}

fn finite_nonneg(x: f64, field: &'static str) -> Result<f64, SnapshotError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(invalid(field, "must be finite and >= 0"))
    }
}

pub(super) fn cell_in(d: CellRecordData, now: u64, policy: &Policy) -> Result<Cell, SnapshotError> {
    if !(MIN_SCORE..=MAX_SCORE).contains(&d.score) {
        return Err(invalid("cell.score", "must be in -100..=100"));
    }
    if d.window.len() > policy.window as usize {
        return Err(invalid("cell.window", "must not be longer than policy.window"));
    }
    let mut window = VecDeque::with_capacity(d.window.len());
    for w in d.window {
        let latency_ms = finite_nonneg(w.latency_ms, "cell.window.latency")?;
        window.push_back(match w.failure {
            None => Outcome::Success { latency_ms },
            Some(kind) => Outcome::Failure { kind, latency_ms, retry_after: None },
        });
    }
    if let PhaseRecord::Cooling { cause, .. } = d.phase {
        if !cause.is_strike() {
            return Err(invalid("cell.phase.cause", "only a strike failure kind cools a cell"));
        }
    }
    Ok(Cell {
        score: d.score,
        window,
        consecutive_failures: d.consecutive_failures,
        consecutive_successes: d.consecutive_successes,
        phase: match d.phase {
            PhaseRecord::Healthy => Phase::Healthy,
            PhaseRecord::Cooling { remaining, cause } => Phase::Cooling { until: now.saturating_add(remaining), cause },
            PhaseRecord::Recovering => Phase::Recovering,
        },
        successes: finite_nonneg(d.successes, "cell.successes")?,
        failures: finite_nonneg(d.failures, "cell.failures")?,
        latency_ms: finite_nonneg(d.latency_ms, "cell.latency")?,
        observations: counter(d.observations, "cell.observations")?,
        pause: pause_in(d.pause, now, FailureKind::RateLimited)?,
        pace: pace_in(d.pace, now)?,
    })
}
