//! Outcomes and cooling rules from Python values: seconds to nanoseconds,
//! a response's headers to pairs. The mappings themselves live in the host.

use std::time::SystemTime;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use repute_host::holder::Cooldown;
use repute_host::profile::{reads_header, MAX_ERROR_BODY};
use repute_host::{parse_outcome, HttpAnswer, Outcome};

use crate::errors::{invalid, Failure};
use crate::time::secs_to_ns;

/// `report_failure`'s outcome: `failure` by name, `retry_after` in seconds.
pub(crate) fn outcome(failure: Option<&str>, latency: f64, retry_after: Option<f64>) -> Result<Outcome, Failure> {
    let latency_ms = secs_to_ns("latency", latency)? as f64 / 1e6;
    let retry_after = retry_after.map(|s| secs_to_ns("retry_after", s)).transpose()?;
    Ok(parse_outcome(failure, latency_ms, retry_after)?)
}

/// The headers of a response a profile reads, as name/value pairs, from a
/// mapping (anything with `items()`: dict, httpx.Headers, requests' and
/// aiohttp's header maps) or an iterable of pairs. Every pair is checked;
/// only those `reads_header` names are copied.
fn header_pairs(headers: &Bound<'_, PyAny>) -> Result<Vec<(String, String)>, Failure> {
    let bad = || invalid("headers", "must be a mapping of str to str, or (str, str) pairs");
    // Pairs (an adapter's `multi_items()`) first: asking a list for
    // `items` raises and formats an AttributeError on every answer.
    let pairs_already = headers.is_instance_of::<PyList>() || headers.is_instance_of::<PyTuple>();
    let pairs = if pairs_already || !headers.hasattr("items").map_err(|_| bad())? {
        headers.clone()
    } else {
        headers.call_method0("items").map_err(|_| bad())?
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter().map_err(|_| bad())? {
        let (name, value): (Bound<'_, PyString>, Bound<'_, PyString>) =
            pair.and_then(|p| p.extract()).map_err(|_| bad())?;
        let (name, value) = (name.to_str().map_err(|_| bad())?, value.to_str().map_err(|_| bad())?);
        if reads_header(name) {
            out.push((name.to_owned(), value.to_owned()));
        }
    }
    Ok(out)
}

/// `report_http`'s answer, read under the GIL, for the host's profile
/// tables to read without it.
pub(crate) fn answer(
    status: u16,
    latency: f64,
    headers: Option<&Bound<'_, PyAny>>,
    body: Option<&Bound<'_, PyAny>>,
) -> Result<HttpAnswer, Failure> {
    let latency_ms = secs_to_ns("latency", latency)? as f64 / 1e6;
    let headers = headers.map(header_pairs).transpose()?.unwrap_or_default();
    let body = body.map(body_text).transpose()?.flatten();
    Ok(HttpAnswer { status, headers, body, latency_ms, now: SystemTime::now() })
}

/// A response body as text: str, or bytes as UTF-8 (invalid sequences
/// replaced). A body longer than an error body can be is not copied: the
/// tables would not read it.
fn body_text(body: &Bound<'_, PyAny>) -> Result<Option<String>, Failure> {
    let bad = || invalid("body", "must be str or bytes");
    if let Ok(text) = body.cast::<PyString>() {
        let text = text.to_str().map_err(|_| bad())?;
        return Ok((text.len() <= MAX_ERROR_BODY).then(|| text.to_owned()));
    }
    let bytes = body.cast::<PyBytes>().map_err(|_| bad())?.as_bytes();
    Ok((bytes.len() <= MAX_ERROR_BODY).then(|| String::from_utf8_lossy(bytes).into_owned()))
}

/// The `profiles` dict as `(kind, profile)` pairs (the host checks them).
pub(crate) fn profiles(profiles: &Bound<'_, PyDict>) -> Result<Vec<(String, String)>, Failure> {
    let bad = || invalid("profiles", "must be a dict of kind to profile name, both str");
    profiles.iter().map(|(k, v)| Ok((k.extract().map_err(|_| bad())?, v.extract().map_err(|_| bad())?))).collect()
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
