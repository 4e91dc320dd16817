//! Whom an attempt's result blames: the resource that carried it, or
//! perhaps the request itself. Read from the profile's table, so the rule
//! of what an answer means stays in one place.

use repute_core::{FailureKind, Outcome};

use crate::error::Result;
use crate::profile::{HttpAnswer, Profile};

/// What one attempt's result says, for the attempt protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    /// The resource carried the request: report the outcome, deliver.
    Worked(Outcome),
    /// The resource's own fault (a 429, a ban, a dead key, a refused
    /// connection): report the outcome at once and try another resource.
    Resource(Outcome),
    /// Maybe the request's own fault (a 4xx the table reads as the
    /// resource working, a proxied site's 5xx, a provider unreachable for
    /// an API key): what the profile would report, held back until a
    /// second resource shows whether the fault repeats.
    Suspect(Option<Outcome>),
    /// Neither the resource's fault nor the request's: the upstream failed
    /// for a moment (an API provider's 408, 500, 502, 503, 504 or
    /// Anthropic's 529, which the profile reads as no key's doing).
    /// Nothing is reported and the request tries again while it may, as
    /// the providers' docs ask of these: every key reaches the same
    /// provider, so a repeat proves nothing about the request.
    Upstream,
}

/// Statuses that, read as no resource's fault, are the upstream's passing
/// failure: the ones OpenAI, Anthropic and Google document as retryable.
const PASSING: [u16; 6] = [408, 500, 502, 503, 504, 529];

/// An answer as the protocol counts it.
pub fn answer(profile: Profile, answer: &HttpAnswer) -> Result<Judged> {
    let outcome = profile.classify(answer)?;
    let status = answer.status;
    Ok(match outcome {
        Some(o @ Outcome::Success { .. }) if status < 400 => Judged::Worked(o),
        Some(o @ Outcome::Success { .. }) => Judged::Suspect(Some(o)),
        None if PASSING.contains(&status) => Judged::Upstream,
        None => Judged::Suspect(None),
        Some(o @ Outcome::Failure { kind: FailureKind::ConnectionReset, .. }) if status >= 500 => {
            Judged::Suspect(Some(o))
        }
        Some(o) => Judged::Resource(o),
    })
}

/// A transport failure (no answer at all) as the protocol counts it: the
/// resource's for a proxy and any other resource the request went through;
/// for an API key, whose request goes to the provider whichever key it
/// carries, the provider's, so a suspect.
pub fn transport(profile: Profile, kind: FailureKind, latency_ms: f64) -> Result<Judged> {
    let outcome = Outcome::failure(kind, latency_ms)?;
    Ok(match profile {
        Profile::ApiKey(_) => Judged::Suspect(Some(outcome)),
        Profile::Generic | Profile::Proxy => Judged::Resource(outcome),
    })
}
