//! Seconds in Python, nanoseconds in the core: every conversion is here, so
//! every duration argument is checked by the same rule.

use std::time::Duration;

use crate::errors::{invalid, Failure};

pub(crate) fn ns_to_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A non-negative, finite number of seconds as nanoseconds.
pub(crate) fn secs_to_ns(field: &str, seconds: f64) -> Result<u64, Failure> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(invalid(field, "must be a finite number of seconds >= 0"));
    }
    let ns = (seconds * 1e9).round();
    if ns >= u64::MAX as f64 {
        return Err(invalid(field, "must be below 2^64 nanoseconds"));
    }
    Ok(ns as u64)
}

/// A length that zero would make meaningless (a lease nobody can hold).
pub(crate) fn positive_duration(field: &str, seconds: f64) -> Result<Duration, Failure> {
    match secs_to_ns(field, seconds)? {
        0 => Err(invalid(field, "must be > 0")),
        ns => Ok(Duration::from_nanos(ns)),
    }
}
