//! Registrations and selectors from JavaScript values: `labels` to the
//! core's `Labels`, `secret` to a `Secret`, `groups` to `GroupName`s,
//! `limits` to `Limits` (ms to ns), `setGroup`'s limits to `GroupLimits`,
//! and an acquire's `kind`, `where`, `exclude`, `prefer`, `affinity`
//! and `cost` (which `lib/options.js` checked for type and turned into label
//! filters) to a `Selector`. The rules are the core's, checked when the
//! pool takes the values; the host names a bad label filter `where`, as
//! this API does (and `errors` spells a bad limit as this API does).

use std::collections::HashMap;

use napi::bindgen_prelude::BigInt;
use napi_derive::napi;
use repute_host::{
    ContextLimits, Error, GroupLimits, GroupName, LabelFilter, Labels, Limits, Registration, Secret, Selector,
};

use crate::args::u64_arg;
use crate::units::ms_to_ns;

/// Label `name` must have one of `values`.
#[napi(object)]
pub struct LabelFilterSpec {
    pub name: String,
    pub values: Vec<String>,
}

/// An acquire's choice among the resources, as `lib/options.js` makes it
/// (and as an attempt's next acquire hands it back).
#[napi(object)]
pub struct SelectorSpec {
    pub kind: Option<String>,
    /// `where`, one filter per label name.
    pub labels: Option<Vec<LabelFilterSpec>>,
    pub exclude: Option<Vec<String>>,
    pub prefer: Option<String>,
    pub affinity: Option<String>,
    /// Tokens the grant reserves against a `tpm` limit.
    pub cost: Option<BigInt>,
}

impl TryFrom<SelectorSpec> for Selector {
    type Error = Error;

    fn try_from(s: SelectorSpec) -> Result<Self, Error> {
        Ok(Selector {
            kind: s.kind,
            labels: s
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(|f| LabelFilter { name: f.name, values: f.values })
                .collect(),
            exclude: s.exclude.unwrap_or_default(),
            prefer: s.prefer,
            affinity: s.affinity,
            cost: s.cost.map(|c| u64_arg("cost", &c)).transpose()?,
        })
    }
}

impl From<&Selector> for SelectorSpec {
    fn from(s: &Selector) -> Self {
        let labels = s.labels.iter().map(|f| LabelFilterSpec { name: f.name.clone(), values: f.values.clone() });
        SelectorSpec {
            kind: s.kind.clone(),
            labels: Some(labels.collect()),
            exclude: Some(s.exclude.clone()),
            prefer: s.prefer.clone(),
            affinity: s.affinity.clone(),
            cost: s.cost.map(BigInt::from),
        }
    }
}

/// `register`'s `limits`, as `index.js` sends them: durations in ms.
#[napi(object, object_to_js = false)]
pub struct LimitsSpec {
    pub rpm: Option<u32>,
    pub tpm: Option<BigInt>,
    pub rpd: Option<u32>,
    pub tpd: Option<BigInt>,
    pub min_interval_ms: Option<f64>,
    pub max_uses: Option<BigInt>,
    pub max_age_ms: Option<f64>,
    pub per_context: Option<ContextLimitsSpec>,
}

/// `limits.perContext`: each context's own limits, durations in ms.
#[napi(object, object_to_js = false)]
pub struct ContextLimitsSpec {
    pub rpm: Option<u32>,
    pub tpm: Option<BigInt>,
    pub min_interval_ms: Option<f64>,
}

impl TryFrom<LimitsSpec> for Limits {
    type Error = Error;

    fn try_from(l: LimitsSpec) -> Result<Self, Error> {
        let count = |field, n: Option<BigInt>| n.map(|n| u64_arg(field, &n)).transpose();
        let ms = |field, ms: Option<f64>| ms.map(|ms| ms_to_ns(field, ms)).transpose();
        Ok(Limits {
            rpm: l.rpm,
            tpm: count("limits.tpm", l.tpm)?,
            rpd: l.rpd,
            tpd: count("limits.tpd", l.tpd)?,
            min_interval: ms("limits.minIntervalMs", l.min_interval_ms)?,
            max_uses: count("limits.maxUses", l.max_uses)?,
            max_age: ms("limits.maxAgeMs", l.max_age_ms)?,
            per_context: match l.per_context {
                None => ContextLimits::default(),
                Some(c) => ContextLimits {
                    rpm: c.rpm,
                    tpm: count("limits.perContext.tpm", c.tpm)?,
                    min_interval: ms("limits.perContext.minIntervalMs", c.min_interval_ms)?,
                },
            },
        })
    }
}

/// `setGroup`'s limits, as `index.js` sends them.
#[napi(object, object_to_js = false)]
pub struct GroupLimitsSpec {
    pub rpm: Option<u32>,
    pub tpm: Option<BigInt>,
    pub rpd: Option<u32>,
    pub tpd: Option<BigInt>,
    pub concurrency: Option<u32>,
    pub shared_quota: Option<bool>,
}

impl TryFrom<GroupLimitsSpec> for GroupLimits {
    type Error = Error;

    /// The ranges are the pool's, checked when it takes the limits (naming
    /// `group.rpm` and so on).
    fn try_from(l: GroupLimitsSpec) -> Result<Self, Error> {
        let count = |field, n: Option<BigInt>| n.map(|n| u64_arg(field, &n)).transpose();
        Ok(GroupLimits {
            rpm: l.rpm,
            tpm: count("group.tpm", l.tpm)?,
            rpd: l.rpd,
            tpd: count("group.tpd", l.tpd)?,
            concurrency: l.concurrency,
            shared_quota: l.shared_quota.unwrap_or(false),
        })
    }
}

/// `register`'s options as the host takes them. A bad group name is the
/// option's `groups`, where the core says `group`.
pub(crate) fn registration(
    permits: u32,
    limits: Option<LimitsSpec>,
    labels: Option<HashMap<String, String>>,
    secret: Option<String>,
    groups: Option<Vec<String>>,
) -> Result<Registration, Error> {
    let groups = groups
        .unwrap_or_default()
        .into_iter()
        .map(|name| {
            GroupName::new(name).map_err(|e| match Error::from(e) {
                Error::InvalidInput { rule, .. } => Error::InvalidInput { field: "groups".into(), rule },
                other => other,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Registration {
        permits,
        limits: limits.map(Limits::try_from).transpose()?.unwrap_or_default(),
        labels: Labels::new(labels.unwrap_or_default())?,
        secret: secret.map(Secret::new).transpose()?,
        groups,
    })
}
