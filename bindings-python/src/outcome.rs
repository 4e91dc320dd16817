//! Outcomes and cooling rules from Python values: seconds to nanoseconds,
//! a response's headers to pairs. The mappings themselves live in the host.

use std::time::SystemTime;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use repute_host::holder::Cooldown;
use repute_host::{http_outcome, parse_outcome, retry_after_header, Outcome};

use crate::errors::{invalid, Failure};
use crate::time::secs_to_ns;

/// `report_failure`'s outcome: `failure` by name, `retry_after` in seconds.
pub(crate) fn outcome(failure: Option<&str>, latency: f64, retry_after: Option<f64>) -> Result<Outcome, Failure> {
    let latency_ms = secs_to_ns("latency", latency)? as f64 / 1e6;
    let retry_after = retry_after.map(|s| secs_to_ns("retry_after", s)).transpose()?;
    Ok(parse_outcome(failure, latency_ms, retry_after)?)
}

/// The headers of a response as name/value pairs: a mapping (anything with
/// `items()`: dict, httpx.Headers, requests' and aiohttp's header maps) or
/// an iterable of pairs.
fn header_pairs(headers: &Bound<'_, PyAny>) -> Result<Vec<(String, String)>, Failure> {
    let bad = || invalid("headers", "must be a mapping of str to str, or (str, str) pairs");
    let pairs = match headers.hasattr("items").map_err(|_| bad())? {
        true => headers.call_method0("items").map_err(|_| bad())?,
        false => headers.clone(),
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter().map_err(|_| bad())? {
        let (name, value): (String, String) = pair.and_then(|p| p.extract()).map_err(|_| bad())?;
        out.push((name, value));
    }
    Ok(out)
}

/// `report_http`'s outcome, by the host's status table.
pub(crate) fn http(status: u16, latency: f64, headers: Option<&Bound<'_, PyAny>>) -> Result<Outcome, Failure> {
    let latency_ms = secs_to_ns("latency", latency)? as f64 / 1e6;
    let pairs = headers.map(header_pairs).transpose()?.unwrap_or_default();
    let retry = retry_after_header(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    Ok(http_outcome(status, retry, latency_ms, SystemTime::now())?)
}

/// The `cooldowns` dict read into entries (under the GIL; the host applies
/// them to the policy it builds).
pub(crate) fn cooldowns(cooldowns: &Bound<'_, PyDict>) -> Result<Vec<Cooldown>, Failure> {
    let mut out = Vec::new();
    let keys = "keys are base (seconds), cool_after and max_exponent";
    for (kind, rule) in cooldowns.iter() {
        let kind = kind.cast::<PyString>().map_err(|_| invalid("cooldowns", "keys must be failure kinds"))?;
        let kind = kind.to_str().map_err(|_| invalid("cooldowns", "keys must be failure kinds"))?;
        let rule = rule.cast::<PyDict>().map_err(|_| invalid("cooldowns", "values must be dicts"))?;
        let (mut base, mut cool_after, mut max_exponent) = (None, None, None);
        for (key, value) in rule.iter() {
            let key: String = key.extract().map_err(|_| invalid("cooldowns", keys))?;
            let number = || invalid("cooldowns", "base is a number of seconds; cool_after, max_exponent whole numbers");
            match key.as_str() {
                "base" => base = Some(secs_to_ns("cooldowns.base", value.extract().map_err(|_| number())?)?),
                "cool_after" => cool_after = Some(value.extract().map_err(|_| number())?),
                "max_exponent" => max_exponent = Some(value.extract().map_err(|_| number())?),
                _ => return Err(invalid("cooldowns", keys)),
            }
        }
        out.push(Cooldown { kind: kind.to_owned(), base, cool_after, max_exponent });
    }
    Ok(out)
}
