//! Registrations and selectors from Python values: a `labels` mapping to
//! the core's `Labels`, `secret` to a `Secret`, `groups` to `GroupName`s,
//! the usage limits (`rpm`, `tpm`, `rpd`, `tpd`, `min_interval`,
//! `max_uses`, `max_age`, and `per_context`'s `rpm`, `tpm`,
//! `min_interval`) to `Limits`, `set_group`'s to `GroupLimits`, and
//! `acquire`'s `kind`, `where`, `exclude`, `prefer`, `affinity` and `cost`
//! to a `Selector`. The rules are the core's, checked when the pool takes
//! the values; the host names a bad label filter `where`, as this API does,
//! and a bad limit `limits.rpm` (and so on), as every front end does.

use pyo3::prelude::*;
use pyo3::types::PyString;
use repute_host::{
    ContextLimits, Error, GroupLimits, GroupName, LabelFilter, Labels, Limits, Registration, Secret, Selector,
};

use crate::errors::{invalid, Failure};
use crate::time::secs_to_ns;

/// `register`'s usage limits, as given: counts as Python ints, durations in seconds.
pub(crate) struct LimitArgs<'a, 'py> {
    pub(crate) rpm: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tpm: Option<&'a Bound<'py, PyAny>>,
    pub(crate) rpd: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tpd: Option<&'a Bound<'py, PyAny>>,
    pub(crate) min_interval: Option<f64>,
    pub(crate) max_uses: Option<&'a Bound<'py, PyAny>>,
    pub(crate) max_age: Option<f64>,
    /// A mapping with `rpm`, `tpm` and `min_interval` (seconds), each optional.
    pub(crate) per_context: Option<&'a Bound<'py, PyAny>>,
}

fn rpm(field: &str, n: &Bound<'_, PyAny>) -> Result<u32, Failure> {
    n.extract::<u32>().map_err(|_| invalid(field, "must be an integer in 0..2^32"))
}

fn secs(field: &str, s: Option<f64>) -> Result<Option<u64>, Failure> {
    s.map(|s| secs_to_ns(field, s)).transpose()
}

/// `per_context` as `ContextLimits`: only its three keys, each optional.
fn context_limits(mapping: &Bound<'_, PyAny>) -> Result<ContextLimits, Failure> {
    const RULE: &str = "must be a mapping with only the keys rpm, tpm and min_interval";
    let mut limits = ContextLimits::default();
    for (key, value) in items(mapping).map_err(|_| invalid("limits.per_context", RULE))? {
        let given = !value.is_none();
        match key.as_str() {
            "rpm" if given => limits.rpm = Some(rpm("limits.per_context.rpm", &value)?),
            "tpm" if given => limits.tpm = Some(count("limits.per_context.tpm", &value)?),
            "min_interval" if given => {
                let s = value
                    .extract::<f64>()
                    .map_err(|_| invalid("limits.per_context.min_interval", "must be a number of seconds"))?;
                limits.min_interval = secs("limits.per_context.min_interval", Some(s))?;
            }
            "rpm" | "tpm" | "min_interval" => {}
            _ => return Err(invalid("limits.per_context", RULE)),
        }
    }
    Ok(limits)
}

impl LimitArgs<'_, '_> {
    fn limits(&self) -> Result<Limits, Failure> {
        Ok(Limits {
            rpm: self.rpm.map(|n| rpm("limits.rpm", n)).transpose()?,
            tpm: count_or_none("limits.tpm", self.tpm)?,
            rpd: self.rpd.map(|n| rpm("limits.rpd", n)).transpose()?,
            tpd: count_or_none("limits.tpd", self.tpd)?,
            min_interval: secs("limits.min_interval", self.min_interval)?,
            max_uses: count_or_none("limits.max_uses", self.max_uses)?,
            max_age: secs("limits.max_age", self.max_age)?,
            per_context: self.per_context.map(context_limits).transpose()?.unwrap_or_default(),
        })
    }
}

/// A count (tokens, uses) as the host's `u64`, or `InvalidInput` naming `field`.
pub(crate) fn count(field: &str, value: &Bound<'_, PyAny>) -> Result<u64, Failure> {
    value.extract::<u64>().map_err(|_| invalid(field, "must be an integer in 0..2^64"))
}

/// An optional [`count`].
pub(crate) fn count_or_none(field: &str, value: Option<&Bound<'_, PyAny>>) -> Result<Option<u64>, Failure> {
    value.map(|n| count(field, n)).transpose()
}

/// `set_group`'s limits, as given: counts as Python ints.
pub(crate) struct GroupLimitArgs<'a, 'py> {
    pub(crate) rpm: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tpm: Option<&'a Bound<'py, PyAny>>,
    pub(crate) rpd: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tpd: Option<&'a Bound<'py, PyAny>>,
    pub(crate) concurrency: Option<&'a Bound<'py, PyAny>>,
    pub(crate) shared_quota: bool,
}

impl GroupLimitArgs<'_, '_> {
    /// The host's limits; their ranges are the pool's, checked when it
    /// takes them (naming `group.rpm` and so on, as here).
    pub(crate) fn limits(&self) -> Result<GroupLimits, Failure> {
        Ok(GroupLimits {
            rpm: self.rpm.map(|n| rpm("group.rpm", n)).transpose()?,
            tpm: count_or_none("group.tpm", self.tpm)?,
            rpd: self.rpd.map(|n| rpm("group.rpd", n)).transpose()?,
            tpd: count_or_none("group.tpd", self.tpd)?,
            concurrency: self.concurrency.map(|n| rpm("group.concurrency", n)).transpose()?,
            shared_quota: self.shared_quota,
        })
    }
}

/// `register`'s `groups`: an iterable of names (not one str), each by the
/// core's rules; a refusal names `groups`, the argument.
fn groups(names: &Bound<'_, PyAny>) -> Result<Vec<GroupName>, Failure> {
    let names = strings(names).map_err(|_| invalid("groups", "must be a list of str"))?;
    names
        .into_iter()
        .map(|name| {
            GroupName::new(name).map_err(|e| match Error::from(e) {
                Error::InvalidInput { rule, .. } => invalid("groups", &rule),
                other => Failure::Host(other),
            })
        })
        .collect()
}

/// `register`'s arguments as the host takes them.
pub(crate) fn registration(
    permits: u32,
    limits: &LimitArgs<'_, '_>,
    labels: Option<&Bound<'_, PyAny>>,
    secret: Option<&str>,
    group_names: Option<&Bound<'_, PyAny>>,
) -> Result<Registration, Failure> {
    const RULE: &str = "must be a mapping of str to str";
    let mut pairs = Vec::new();
    if let Some(labels) = labels {
        for (name, value) in items(labels).map_err(|_| invalid("labels", RULE))? {
            let value = value.extract::<String>().map_err(|_| invalid("labels", RULE))?;
            pairs.push((name, value));
        }
    }
    Ok(Registration {
        permits,
        limits: limits.limits()?,
        labels: Labels::new(pairs).map_err(Error::from)?,
        secret: secret.map(Secret::new).transpose().map_err(Error::from)?,
        groups: group_names.map(groups).transpose()?.unwrap_or_default(),
    })
}

/// `acquire`'s keyword arguments that choose among the resources (and the
/// tokens the grant reserves), as the host's selector; the core checks its
/// rules at the acquire.
pub(crate) fn selector(
    kind: Option<&str>,
    r#where: Option<&Bound<'_, PyAny>>,
    exclude: Option<&Bound<'_, PyAny>>,
    prefer: Option<&str>,
    affinity: Option<&str>,
    cost: Option<&Bound<'_, PyAny>>,
) -> Result<Selector, Failure> {
    const WHERE: &str = "must be a mapping of label name to str or list of str";
    let mut labels = Vec::new();
    if let Some(filters) = r#where {
        for (name, values) in items(filters).map_err(|_| invalid("where", WHERE))? {
            let values = match values.cast::<PyString>() {
                Ok(one) => vec![one.to_str().map_err(|_| invalid("where", WHERE))?.to_owned()],
                Err(_) => strings(&values).map_err(|_| invalid("where", WHERE))?,
            };
            labels.push(LabelFilter { name, values });
        }
    }
    let exclude = match exclude {
        Some(values) => strings(values).map_err(|_| invalid("exclude", "must be a list of str"))?,
        None => Vec::new(),
    };
    Ok(Selector {
        kind: kind.map(str::to_owned),
        labels,
        exclude,
        prefer: prefer.map(str::to_owned),
        affinity: affinity.map(str::to_owned),
        cost: count_or_none("cost", cost)?,
    })
}

/// A mapping's items (anything with `items()`), keys as str.
fn items<'py>(mapping: &Bound<'py, PyAny>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    mapping.call_method0("items")?.try_iter()?.map(|pair| pair?.extract()).collect()
}

/// An iterable of str that is not itself a str.
fn strings(values: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if values.is_instance_of::<PyString>() {
        return Err(pyo3::exceptions::PyTypeError::new_err("a str, not a list of str"));
    }
    values.try_iter()?.map(|v| v?.extract()).collect()
}
