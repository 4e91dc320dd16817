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
//! rate as a prior worth `PRIOR_STRENGTH` observations:
//!
//! ```text
//! p_global = (1 + s_global) / (2 + s_global + f_global)
//! alpha    = 1 + s_context + PRIOR_STRENGTH · p_global
//! beta     = 1 + f_context + PRIOR_STRENGTH · (1 − p_global)
//! ```

use crate::cell::Cell;
use crate::index::SCALE;

pub(crate) const PRIOR_STRENGTH: f64 = 2.0;

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

/// Beta posterior parameters for Thompson sampling.
pub(crate) fn posterior(context: Option<&Cell>, global: &Cell) -> (f64, f64) {
    let p_global = (1.0 + global.successes) / (2.0 + global.successes + global.failures);
    let (s, f) = context.map_or((0.0, 0.0), |c| (c.successes, c.failures));
    (1.0 + s + PRIOR_STRENGTH * p_global, 1.0 + f + PRIOR_STRENGTH * (1.0 - p_global))
}

/// Thompson utility: the sampled success probability, shaded by latency so that
/// between equally reliable resources the faster one wins (a 1 s EWMA costs 5%).
pub(crate) fn utility(theta: f64, latency_ms: f64) -> f64 {
    theta * (1.0 - 0.1 * latency_ms / (latency_ms + 1000.0))
}

/// Index weight under Thompson: candidates are pre-drawn in proportion to the
/// cube of their posterior mean (plus the floor), then sampled properly.
pub(crate) fn thompson_weight(alpha: f64, beta: f64, floor: i64) -> i64 {
    let mean = alpha / (alpha + beta);
    (mean * mean * mean * SCALE as f64) as i64 + floor
}
