//! How the layers combine and how each strategy weighs a candidate.
//!
//! Layered score: a resource's effective score in a context blends its context
//! cell with its global (`"*"`) cell by how full the context window is:
//!
//! ```text
//! w         = min(n_context, window) / window
//! effective = round(w · score_context + (1 − w) · score_global)
//! ```
//!
//! A resource new to a context (n = 0) starts from its global reputation; once
//! the context has seen a full window of its outcomes, the context alone counts.
//!
//! Thompson posterior: the context's decayed counts plus the global success
//! rate as a prior worth `PRIOR_STRENGTH` observations, with the successes
//! discounted and the failures raised while the cell is on a failure streak
//! (k = its consecutive failures):
//!
//! ```text
//! p_global = (1 + s_global) / (2 + s_global + f_global)
//! alpha    = 1 + s_context · STREAK_DISCOUNT^k + PRIOR_STRENGTH · p_global
//! beta     = 1 + f_context + STREAK_WEIGHT · k  + PRIOR_STRENGTH · (1 − p_global)
//! ```
//!
//! The constants were chosen with `repute simulate` (see host/cli/SIMULATE.md),
//! the benchmark that also made Thompson the default strategy.

use crate::cell::Cell;
use crate::index::SCALE;

pub(crate) const PRIOR_STRENGTH: f64 = 2.0;
/// Decayed counts remember dozens of observations (`Policy::decay`), so a
/// proxy that has just been banned or broken would keep its good record for
/// a dozen more failures. A run of failures is the sign of such a change
/// (two in a row from a 95% resource happen once in 400 tries), so each
/// failure of the current streak keeps only this share of the past successes...
pub(crate) const STREAK_DISCOUNT: f64 = 0.3;
/// ...and counts as this many extra failures. The first success ends the
/// streak and restores the record, so a good resource pays for a rare miss
/// with a single request's worth of caution.
pub(crate) const STREAK_WEIGHT: f64 = 3.0;

/// Effective score: the blend above, rounded half away from zero to an
/// integer like every other score, so the index can bucket it.
pub(crate) fn blended(context: Option<&Cell>, global: &Cell, window: u32) -> i32 {
    match context {
        None => global.score,
        Some(c) => {
            let w = window as i64;
            let n = (c.window.len() as i64).min(w);
            let num = n * c.score as i64 + (w - n) * global.score as i64;
            let rounded = (2 * num.abs() + w) / (2 * w);
            (num.signum() * rounded) as i32
        }
    }
}

/// The resource's success rate over every context, the prior of each cell.
fn global_mean(global: &Cell) -> f64 {
    (1.0 + global.successes) / (2.0 + global.successes + global.failures)
}

/// Beta posterior parameters for Thompson sampling.
pub(crate) fn posterior(context: Option<&Cell>, global: &Cell, now: u64) -> (f64, f64) {
    let p_global = global_mean(global);
    // The cooldown was the price of the streak that caused it: once it has
    // ended the cell is judged on its record, so its one trial comes soon.
    let streak = |c: &Cell| if c.cooled_out(now).is_some() { 0 } else { c.consecutive_failures };
    let (s, f, streak) = context.map_or((0.0, 0.0, 0), |c| (c.successes, c.failures, streak(c)));
    let s = s * powi(STREAK_DISCOUNT, streak);
    let streak = streak as f64;
    (1.0 + s + PRIOR_STRENGTH * p_global, 1.0 + f + STREAK_WEIGHT * streak + PRIOR_STRENGTH * (1.0 - p_global))
}

/// The failure probability a cell's record gives its next answer: the
/// posterior's mean without the streak, which says how the current run of
/// failures is weighed, not how often the cell fails.
pub(crate) fn expected_failure(context: &Cell, global: &Cell) -> f64 {
    let p_global = global_mean(global);
    (1.0 + context.failures + PRIOR_STRENGTH * (1.0 - p_global))
        / (2.0 + context.successes + context.failures + PRIOR_STRENGTH)
}

/// Thompson utility: the sampled success probability, shaded by latency so that
/// between equally reliable resources the faster one wins (a 1 s EWMA costs 5%).
pub(crate) fn utility(theta: f64, latency_ms: f64) -> f64 {
    theta * (1.0 - 0.1 * latency_ms / (latency_ms + 1000.0))
}

/// Index weight under Thompson: candidates are pre-drawn in proportion to
/// `16 · mean⁸` plus the floor, then sampled properly. The pre-draw must put
/// some of the best resources among the candidates nearly every time. With
/// the cube of the mean and a floor worth a perfect resource it was close to
/// uniform: in the simulator's pool of 20 (6 at 95–99%), no top proxy was
/// among the 4 candidates in one acquire out of six, and that was most of
/// Thompson's regret; now (8 candidates) it is about one in 700. The floor
/// still keeps every resource drawable, so stale records get re-explored.
pub(crate) fn thompson_weight(alpha: f64, beta: f64, floor: i64) -> i64 {
    let mean = alpha / (alpha + beta);
    // Squared three times: every reindex weighs each cell, and a general
    // `pow` cost a fifth of an acquire+release pair's instructions.
    let m2 = mean * mean;
    let m4 = m2 * m2;
    (m4 * m4 * 16.0 * SCALE as f64) as i64 + floor
}

/// `base` to the whole power `exp`, by squaring: the streak discount's
/// power is a count of failures, and a general `pow` is many times dearer.
fn powi(base: f64, mut exp: u32) -> f64 {
    let (mut result, mut square) = (1.0, base);
    while exp > 0 {
        if exp & 1 == 1 {
            result *= square;
        }
        square *= square;
        exp >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_power_by_squaring_matches_the_general_power() {
        for exp in (0..=64).chain([100, 619, 1000, u32::MAX]) {
            let (ours, general) = (powi(STREAK_DISCOUNT, exp), libm::pow(STREAK_DISCOUNT, exp as f64));
            assert!((ours - general).abs() <= general * 1e-13, "0.3^{exp}: {ours} vs {general}");
        }
        assert_eq!(powi(2.0, 10), 1024.0);
        assert_eq!(powi(STREAK_DISCOUNT, 0), 1.0);
    }

    #[test]
    fn the_thompson_weight_is_the_eighth_power_of_the_mean() {
        for (alpha, beta) in [(1.0, 1.0), (9.0, 1.0), (99.5, 0.5), (1.0, 30.0)] {
            let mean: f64 = alpha / (alpha + beta);
            let expected = (libm::pow(mean, 8.0) * 16.0 * SCALE as f64) as i64 + 7;
            assert!((thompson_weight(alpha, beta, 7) - expected).abs() <= 1, "{alpha}/{beta}");
        }
    }
}
