//! The HTTP API's one unit of time, milliseconds. The core's views (cells,
//! resources, events) carry instants on the server's monotonic clock in
//! nanoseconds, which mean nothing to a client: they leave as Unix time in
//! milliseconds (`cooling_until` → `cooling_until_unix_ms`), and durations as
//! milliseconds (`ttl` → `ttl_ms`, a limit's `min_interval` →
//! `min_interval_ms`), through one (clock, system time) pair read when the
//! response is built.

use repute_host::{Clock, Wall};
use serde::Serialize;
use serde_json::{Map, Value};

use super::problem::Problem;

/// The instants the core's views name, in ns on the pool clock.
const INSTANTS: [&str; 6] = ["at", "until", "granted_at", "expires_at", "cooling_until", "limited_until"];
/// The durations, in ns (a lease's TTL, a resource's limits).
const DURATIONS: [&str; 3] = ["ttl", "min_interval", "max_age"];

/// A duration the API takes in ms, as core nanoseconds; `field` names it
/// in the refusal.
pub(super) fn nanos(ms: f64, field: &str) -> Result<u64, Problem> {
    if !(ms.is_finite() && (1e-6..=1e12).contains(&ms)) {
        return Err(Problem::invalid(field, "must be a number of milliseconds in [0.000001, 1e12]"));
    }
    Ok((ms * 1e6) as u64)
}

/// `view` as the API shows it.
pub(super) fn http_view(view: &impl Serialize, clock: &dyn Clock) -> Value {
    let wall = Wall::now(clock);
    convert(serde_json::to_value(view).unwrap_or(Value::Null), &wall)
}

fn convert(value: Value, wall: &Wall) -> Value {
    match value {
        Value::Object(fields) => {
            let mut out = Map::with_capacity(fields.len());
            for (key, v) in fields {
                if INSTANTS.contains(&key.as_str()) {
                    let ms = v.as_u64().map(|ns| wall.unix_ms(ns));
                    out.insert(format!("{key}_unix_ms"), ms.map_or(Value::Null, Value::from));
                } else if DURATIONS.contains(&key.as_str()) {
                    out.insert(format!("{key}_ms"), v.as_u64().map_or(Value::Null, |ns| Value::from(ns as f64 / 1e6)));
                } else {
                    out.insert(key, convert(v, wall));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| convert(v, wall)).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn instants_become_unix_ms_and_durations_ms_at_any_depth() {
        // The pool clock read 5 s when the system clock read 1e12 ms.
        let wall = Wall::at(5_000_000_000, 1_000_000_000_000 * 1_000_000);
        let view = json!({
            "at": 6_000_000_000u64,
            "cooling_until": null,
            "block": {"until": 5_500_000_000u64, "reason": "r"},
            "lease": {"ttl": 30_000_000_000u64, "expires_at": 35_000_000_000u64, "token": 7},
            "cells": [{"cooling_until": 7_000_000_000u64}],
        });
        assert_eq!(
            convert(view, &wall),
            json!({
                "at_unix_ms": 1_000_000_001_000.0,
                "cooling_until_unix_ms": null,
                "block": {"until_unix_ms": 1_000_000_000_500.0, "reason": "r"},
                "lease": {"ttl_ms": 30_000.0, "expires_at_unix_ms": 1_000_000_030_000.0, "token": 7},
                "cells": [{"cooling_until_unix_ms": 1_000_000_002_000.0}],
            })
        );
    }
}
