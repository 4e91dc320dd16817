//! Usage limits as the HTTP API writes them: `limits` of `POST
//! /v1/resources`, durations in milliseconds like every duration of the API,
//! and a quota group's limits, the body of `PUT /v1/groups/{name}/limits`. The pool
//! checks the rest; a refusal names the request's field (`limits.rpm`,
//! `limits.min_interval_ms`, a group's `rpm`, ...).

use repute_host::{ContextLimits, GroupLimits, Limits, Window};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

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
    /// At most this many grants in any rolling day (24 h), for a provider's
    /// daily quota.
    #[schemars(with = "Option<schema::Rpd>")]
    rpd: Option<u32>,
    /// At most this many tokens in any rolling day, counted as `tpm` counts them.
    #[schemars(with = "Option<schema::Count>")]
    tpd: Option<u64>,
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
            rpd: self.rpd,
            tpd: self.tpd,
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

/// The body of `PUT /v1/groups/{name}/limits`: what the group's members may use
/// together; each left out is no limit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupLimitsIn {
    /// At most this many grants of its members in any 60 s.
    #[schemars(with = "Option<schema::Rpm>")]
    rpm: Option<u32>,
    /// At most this many tokens of its members in any 60 s (their acquires'
    /// `cost`, reconciled by POST /v1/leases/{id}/usage).
    #[schemars(with = "Option<schema::Count>")]
    tpm: Option<u64>,
    /// At most this many grants of its members in any rolling day (24 h).
    #[schemars(with = "Option<schema::Rpd>")]
    rpd: Option<u32>,
    /// At most this many tokens of its members in any rolling day.
    #[schemars(with = "Option<schema::Count>")]
    tpd: Option<u64>,
    /// At most this many live leases across its members.
    #[schemars(with = "Option<schema::Concurrency>")]
    concurrency: Option<u32>,
    /// A `quota_exhausted` outcome reported on one member pauses every
    /// member: the provider counts the quota for the whole group.
    #[serde(default)]
    shared_quota: bool,
}

impl GroupLimitsIn {
    /// The limits, checked by the pool's rules before any of them is
    /// applied; a refusal names the body's field (`rpm`, not the pool's
    /// `group.rpm`).
    pub fn into_limits(self) -> Result<GroupLimits, Problem> {
        let limits = GroupLimits {
            rpm: self.rpm,
            tpm: self.tpm,
            rpd: self.rpd,
            tpd: self.tpd,
            concurrency: self.concurrency,
            shared_quota: self.shared_quota,
        };
        limits.validate().map_err(|e| match repute_host::Error::from(e) {
            repute_host::Error::InvalidInput { field, rule } => {
                Problem::invalid(field.strip_prefix("group.").unwrap_or(&field), rule)
            }
            other => Problem::from(other),
        })?;
        Ok(limits)
    }
}

/// What a window holds, as a resource's or a group's view shows it (`usage`
/// for the minute, `day_usage` for the day): its grants and their tokens
/// (a resource's as its lease authority counts them for the next grant), or
/// null where no limit of that window applies (`counted` false), since a
/// count nothing is judged by would only mislead.
pub fn shown(counted: bool, window: &Window) -> Value {
    match counted {
        true => json!({"grants": window.grants, "tokens": window.tokens}),
        false => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn group_limits_are_checked_naming_the_bodys_field() {
        let body = json!({"rpm": 600, "tpd": 1_000_000, "concurrency": 4, "shared_quota": true});
        let limits = serde_json::from_value::<GroupLimitsIn>(body).unwrap().into_limits().unwrap();
        let expected = GroupLimits {
            rpm: Some(600),
            tpd: Some(1_000_000),
            concurrency: Some(4),
            shared_quota: true,
            ..GroupLimits::default()
        };
        assert_eq!(limits, expected);
        for (body, field, rule) in [
            (json!({"rpm": 0}), "rpm", "must be in 1..=100000"),
            (json!({"rpd": 100_000_001}), "rpd", "must be in 1..=100000000"),
            (json!({"tpd": 0}), "tpd", "must be > 0"),
            (json!({"concurrency": 0}), "concurrency", "must be in 1..=1000000"),
        ] {
            let p = serde_json::from_value::<GroupLimitsIn>(body).unwrap().into_limits().unwrap_err();
            assert_eq!((p.0.field.as_deref(), p.0.rule.as_deref()), (Some(field), Some(rule)));
        }
        assert!(serde_json::from_value::<GroupLimitsIn>(json!({"min_interval_ms": 1})).is_err());
    }
}
