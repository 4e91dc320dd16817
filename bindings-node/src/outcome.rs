//! Outcomes and cooling rules from JavaScript values: ms to nanoseconds,
//! header pairs to the host's lookup. The mappings themselves live in the host.

use std::time::SystemTime;

use napi_derive::napi;
use repute_host::{http_outcome, parse_outcome, retry_after_header, Error, Outcome};

use crate::errors::invalid;
use crate::units::ms_to_ns;

/// What `reportSuccess`, `reportFailure` and `reportHttp` send, after
/// `index.js` turned the headers into `[name, value]` pairs.
#[napi(object, object_to_js = false)]
pub struct OutcomeSpec {
    /// A failure kind's name; absent for a success or an HTTP answer.
    pub failure: Option<String>,
    pub latency_ms: f64,
    /// With `rate_limited` or `quota_exhausted`: the provider's wait.
    pub retry_after_ms: Option<f64>,
    /// The upstream's HTTP status, mapped by the host's table.
    pub status: Option<u32>,
    pub headers: Option<Vec<Vec<String>>>,
}

pub(crate) fn outcome(spec: &OutcomeSpec) -> Result<Outcome, Error> {
    let Some(status) = spec.status else {
        let retry_after = spec.retry_after_ms.map(|ms| ms_to_ns("retryAfterMs", ms)).transpose()?;
        return parse_outcome(spec.failure.as_deref(), spec.latency_ms, retry_after);
    };
    let status = u16::try_from(status).map_err(|_| invalid("status", "must be an HTTP status code in 100..=599"))?;
    let pairs = spec.headers.as_deref().unwrap_or_default();
    if pairs.iter().any(|p| p.len() != 2) {
        return Err(invalid("headers", "must be [name, value] pairs"));
    }
    let retry = retry_after_header(pairs.iter().map(|p| (p[0].as_str(), p[1].as_str())));
    http_outcome(status, retry, spec.latency_ms, SystemTime::now())
}

/// One entry of `cooldowns: { timeout: { baseMs, coolAfter, maxExponent } }`.
#[napi(object, object_to_js = false)]
pub struct CooldownConfig {
    pub base_ms: Option<f64>,
    pub cool_after: Option<u32>,
    pub max_exponent: Option<u32>,
}
