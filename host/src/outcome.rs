//! Outcomes built from the names every front end uses.

use repute_core::{FailureKind, Outcome};

use crate::error::Result;

/// Builds an outcome from the names every front end uses: no failure kind
/// for a success, else one of the `FailureKind` names; `retry_after` (ns)
/// goes with `rate_limited` or `quota_exhausted`. Latency and wait are
/// checked by the core on the way in, so a bad one is refused by the same
/// rule in the component and in a core linked into the host.
pub fn parse_outcome(failure: Option<&str>, latency_ms: f64, retry_after: Option<u64>) -> Result<Outcome> {
    let kind = failure.map(FailureKind::parse).transpose()?;
    if let Some(wait) = retry_after {
        repute_core::check_retry_after(kind, wait)?;
    }
    Ok(match kind {
        None => Outcome::Success { latency_ms },
        Some(kind) => Outcome::Failure { kind, latency_ms, retry_after },
    })
}
