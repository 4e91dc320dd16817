//! Milliseconds (JavaScript) to and from nanoseconds (the core's clock).

use repute_host::Error;

const NS_PER_MS: f64 = 1_000_000.0;

/// A duration or instant in ms as core nanoseconds. Refuses what has no
/// exact meaning as a clock reading (NaN, infinities, negatives, or more than
/// `u64` nanoseconds) instead of saturating into a surprising value.
pub(crate) fn ms_to_ns(field: &str, ms: f64) -> Result<u64, Error> {
    let ns = ms * NS_PER_MS;
    if !ns.is_finite() || ns < 0.0 || ns >= u64::MAX as f64 {
        return Err(Error::InvalidInput {
            field: field.to_owned(),
            rule: "must be a finite number of milliseconds >= 0".to_owned(),
        });
    }
    Ok(ns.round() as u64)
}

pub(crate) fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}
