//! Outcomes and cooling rules from JavaScript values: ms to nanoseconds,
//! header pairs to the host's lookup. The mappings themselves live in the host.

use std::time::SystemTime;

use napi_derive::napi;
use repute_host::{parse_outcome, Error, HttpAnswer, Outcome};

use crate::errors::invalid;
use crate::units::ms_to_ns;

/// What `reportSuccess`, `reportFailure` and `reportHttp` send, after
/// `lib/options.js` turned the headers into `[name, value]` pairs.
#[napi(object, object_to_js = false)]
pub struct OutcomeSpec {
    /// A failure kind's name; absent for a success or an HTTP answer.
    pub failure: Option<String>,
    pub latency_ms: f64,
    /// With `rate_limited` or `quota_exhausted`: the provider's wait.
    pub retry_after_ms: Option<f64>,
    /// The upstream's HTTP status, read by the kind's profile.
    pub status: Option<u32>,
    pub headers: Option<Vec<Vec<String>>>,
    /// With `status`: the upstream's response body.
    pub body: Option<String>,
}

/// A report as the host takes it: an outcome by name, or an answer for the
/// resource's profile to read.
pub(crate) enum Report {
    Named(Outcome),
    Http(HttpAnswer),
}

pub(crate) fn report(spec: &OutcomeSpec) -> Result<Report, Error> {
    let Some(status) = spec.status else {
        if spec.body.is_some() {
            return Err(invalid("body", "goes with status"));
        }
        let retry_after = spec.retry_after_ms.map(|ms| ms_to_ns("retryAfterMs", ms)).transpose()?;
        return Ok(Report::Named(parse_outcome(spec.failure.as_deref(), spec.latency_ms, retry_after)?));
    };
    let status = u16::try_from(status).map_err(|_| invalid("status", "must be an HTTP status code in 100..=599"))?;
    let pairs = spec.headers.as_deref().unwrap_or_default();
    if pairs.iter().any(|p| p.len() != 2) {
        return Err(invalid("headers", "must be [name, value] pairs"));
    }
    let headers = pairs.iter().map(|p| (p[0].clone(), p[1].clone())).collect();
    let (body, latency_ms, now) = (spec.body.clone(), spec.latency_ms, SystemTime::now());
    Ok(Report::Http(HttpAnswer { status, headers, body, latency_ms, now }))
}

/// One entry of `cooldowns: { timeout: { baseMs, coolAfter, maxExponent } }`.
#[napi(object, object_to_js = false)]
pub struct CooldownConfig {
    pub base_ms: Option<f64>,
    pub cool_after: Option<u32>,
    pub max_exponent: Option<u32>,
}
