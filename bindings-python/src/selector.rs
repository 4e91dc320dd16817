//! Registrations and selectors from Python values: a `labels` mapping to
//! the core's `Labels`, `secret` to a `Secret`, and `acquire`'s `kind`,
//! `where`, `exclude`, `prefer` and `affinity` to a `Selector`. The rules
//! are the core's, checked when the pool takes the values; the host names
//! a bad label filter `where`, as this API does.

use pyo3::prelude::*;
use pyo3::types::PyString;
use repute_host::{Error, LabelFilter, Labels, Registration, Secret, Selector};

use crate::errors::{invalid, Failure};

/// `register`'s arguments as the host takes them.
pub(crate) fn registration(
    permits: u32,
    labels: Option<&Bound<'_, PyAny>>,
    secret: Option<&str>,
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
        labels: Labels::new(pairs).map_err(Error::from)?,
        secret: secret.map(Secret::new).transpose().map_err(Error::from)?,
    })
}

/// `acquire`'s keyword arguments that choose among the resources, as the
/// host's selector; the core checks its rules at the acquire.
pub(crate) fn selector(
    kind: Option<&str>,
    r#where: Option<&Bound<'_, PyAny>>,
    exclude: Option<&Bound<'_, PyAny>>,
    prefer: Option<&str>,
    affinity: Option<&str>,
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
