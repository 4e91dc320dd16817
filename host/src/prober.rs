//! The probe loop of `recovery = probe`, written once for every front end:
//! which cells to probe, a real probe lease for each (so a probe and a
//! client never share a permit), and what the user's probe found, reported
//! as an outcome before the lease is released. Sans-IO: the front end runs
//! the user's probe (a Python callable, a JavaScript function, an HTTP GET)
//! between [`start_probes`] and [`finish_probe`], with at most as many in
//! flight as it asks for.

use repute_core::{FailureKind, Lease, Outcome};

use crate::error::{Error, Result};
use crate::ops::PoolOps;
use crate::profile::{HttpAnswer, Profiles};

/// What a user's probe said about one resource in one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// Still failing: re-cools the cell for the cause it cooled for.
    Failed,
    /// The HTTP status the probe got, read by the resource's profile like
    /// any reported answer.
    Http(u16),
}

/// Probe leases on up to `max` of the cells due for a probe, in the pool's
/// order. A cell whose resource has no free permit stays due for a later round.
pub fn start_probes<P: PoolOps + ?Sized>(pool: &mut P, max: usize) -> Result<Vec<Lease>> {
    let mut leases = Vec::new();
    for (id, context) in pool.due_for_probe()? {
        if leases.len() >= max {
            break;
        }
        match pool.acquire_for_probe(id.kind(), id.value(), context.as_str()) {
            Ok(lease) => leases.push(lease),
            Err(Error::NoResourceAvailable(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(leases)
}

/// Reports what the probe of `lease` found, then releases the lease. A
/// failed probe re-cools the cell with its own cause (so its base and next
/// exponent apply); a status is read by the kind's profile among
/// `profiles`, and one that says nothing about the resource (a provider's
/// overload) reports nothing, so the cell stays due. A lease that ran out
/// while the probe ran is simply gone.
pub fn finish_probe<P: PoolOps + ?Sized>(
    pool: &mut P,
    profiles: &Profiles,
    lease: &Lease,
    verdict: Verdict,
    latency_ms: f64,
) -> Result<()> {
    let (kind, value, context) = (lease.resource.kind(), lease.resource.value(), lease.context.as_str());
    let outcome = match verdict {
        Verdict::Healthy => Some(Outcome::success(latency_ms)?),
        Verdict::Failed => {
            let cause = pool
                .cells(kind, value)?
                .into_iter()
                .find(|c| c.context.as_ref() == Some(&lease.context))
                .and_then(|c| c.cause)
                .filter(|c| c.is_strike())
                .unwrap_or(FailureKind::Timeout);
            Some(Outcome::failure(cause, latency_ms)?)
        }
        Verdict::Http(status) => profiles.classify(kind, &HttpAnswer::status(status, latency_ms))?,
    };
    if let Some(outcome) = outcome {
        pool.report(kind, value, context, &outcome)?;
    }
    match pool.release(lease.id, lease.token) {
        Err(e) if !e.is_lease_gone() => Err(e),
        _ => Ok(()),
    }
}
