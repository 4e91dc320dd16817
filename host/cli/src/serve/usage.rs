//! Usage limits as the HTTP API writes them: `limits` of `POST
//! /v1/resources`, durations in milliseconds like every duration of the API.
//! The pool checks the rest; a refusal names the request's field
//! (`limits.rpm`, `limits.min_interval_ms`, ...).

use repute_host::{ContextLimits, Limits};
use serde::Deserialize;

use super::problem::Problem;
use super::units::nanos;

/// A registration's `limits`; each left out is no limit.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsIn {
    rpm: Option<u32>,
    tpm: Option<u64>,
    min_interval_ms: Option<f64>,
    max_uses: Option<u64>,
    max_age_ms: Option<f64>,
    #[serde(default)]
    per_context: ContextLimitsIn,
}

/// `limits.per_context`: what each context of the resource may use on its own.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextLimitsIn {
    rpm: Option<u32>,
    tpm: Option<u64>,
    min_interval_ms: Option<f64>,
}

fn ms(v: Option<f64>, field: &str) -> Result<Option<u64>, Problem> {
    v.map(|ms| nanos(ms, field)).transpose()
}

impl LimitsIn {
    /// The limits in the core's units.
    pub fn into_limits(self) -> Result<Limits, Problem> {
        let c = self.per_context;
        Ok(Limits {
            rpm: self.rpm,
            tpm: self.tpm,
            min_interval: ms(self.min_interval_ms, "limits.min_interval_ms")?,
            max_uses: self.max_uses,
            max_age: ms(self.max_age_ms, "limits.max_age_ms")?,
            per_context: ContextLimits {
                rpm: c.rpm,
                tpm: c.tpm,
                min_interval: ms(c.min_interval_ms, "limits.per_context.min_interval_ms")?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_are_milliseconds_and_each_limit_is_optional() {
        let body = json!({"rpm": 60, "min_interval_ms": 250.5, "max_age_ms": 3_600_000,
            "per_context": {"rpm": 20, "min_interval_ms": 2}});
        let limits = serde_json::from_value::<LimitsIn>(body).unwrap().into_limits().unwrap();
        let expected = Limits {
            rpm: Some(60),
            min_interval: Some(250_500_000),
            max_age: Some(3_600_000_000_000),
            per_context: ContextLimits { rpm: Some(20), min_interval: Some(2_000_000), ..ContextLimits::default() },
            ..Limits::default()
        };
        assert_eq!(limits, expected);
        let p = serde_json::from_value::<LimitsIn>(json!({"min_interval_ms": -1})).unwrap().into_limits().unwrap_err();
        assert_eq!(p.0.field.as_deref(), Some("limits.min_interval_ms"));
        let p = serde_json::from_value::<LimitsIn>(json!({"per_context": {"min_interval_ms": 0}}))
            .unwrap()
            .into_limits()
            .unwrap_err();
        assert_eq!(p.0.field.as_deref(), Some("limits.per_context.min_interval_ms"));
        assert!(serde_json::from_value::<LimitsIn>(json!({"rps": 1})).is_err(), "unknown fields are refused");
        assert!(serde_json::from_value::<LimitsIn>(json!({"per_context": {"max_uses": 1}})).is_err());
    }
}
