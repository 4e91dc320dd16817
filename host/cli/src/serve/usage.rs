//! Usage limits as the HTTP API writes them: `limits` of `POST
//! /v1/resources`, durations in milliseconds like every duration of the API.
//! The pool checks the rest; a refusal names the request's field
//! (`limits.rpm`, `limits.min_interval_ms`, ...).

use repute_host::{ContextLimits, Limits};
use schemars::JsonSchema;
use serde::Deserialize;

use super::openapi::schema;
use super::problem::Problem;
use super::units::nanos;

/// A registration's `limits`; each left out is no limit.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct LimitsIn {
    /// At most this many grants in any 60 s.
    #[schemars(with = "Option<schema::Rpm>")]
    rpm: Option<u32>,
    /// At most this many tokens in any 60 s: each grant reserves its
    /// acquire's `cost` (1 by default), and POST /v1/leases/{id}/usage counts
    /// what the lease really used instead.
    #[schemars(with = "Option<schema::Count>")]
    tpm: Option<u64>,
    /// At least this long between two grants.
    #[schemars(with = "Option<schema::Ms>")]
    min_interval_ms: Option<f64>,
    /// At most this many grants ever; then the resource is retired (event
    /// `retired`, view `retired`: `max_uses`).
    #[schemars(with = "Option<schema::Count>")]
    max_uses: Option<u64>,
    /// Retired this long after it was registered (`retired`: `max_age`).
    #[schemars(with = "Option<schema::Ms>")]
    max_age_ms: Option<f64>,
    /// Limits each context of the resource has on its own, beside the ones
    /// above (a provider that counts a key's quota per model or endpoint): a
    /// grant for a context counts against both, and a context over its own
    /// is not selected for that context until it frees up. Counted by the
    /// lease authority like the others.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    per_context: ContextLimitsIn,
}

/// `limits.per_context`: what each context of the resource may use on its own.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct ContextLimitsIn {
    /// At most this many grants for one context in any 60 s.
    #[schemars(with = "Option<schema::Rpm>")]
    rpm: Option<u32>,
    /// At most this many tokens for one context in any 60 s (the acquire's
    /// `cost`, reconciled by POST /v1/leases/{id}/usage).
    #[schemars(with = "Option<schema::Count>")]
    tpm: Option<u64>,
    /// At least this long between two grants for one context.
    #[schemars(with = "Option<schema::Ms>")]
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
            rpd: None,
            tpd: None,
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
