//! Registrations and selectors from JavaScript values: `labels` to the
//! core's `Labels`, `secret` to a `Secret`, and an acquire's `kind`,
//! `where`, `exclude`, `prefer` and `affinity` (which `index.js` checked
//! for type and turned into label filters) to a `Selector`. The rules are
//! the core's, checked when the pool takes the values; the host names a
//! bad label filter `where`, as this API does.

use std::collections::HashMap;

use napi_derive::napi;
use repute_host::{Error, LabelFilter, Labels, Registration, Secret, Selector};

/// Label `name` must have one of `values`.
#[napi(object, object_to_js = false)]
pub struct LabelFilterSpec {
    pub name: String,
    pub values: Vec<String>,
}

/// An acquire's choice among the resources, as `index.js` sends it.
#[napi(object, object_to_js = false)]
pub struct SelectorSpec {
    pub kind: Option<String>,
    /// `where`, one filter per label name.
    pub labels: Option<Vec<LabelFilterSpec>>,
    pub exclude: Option<Vec<String>>,
    pub prefer: Option<String>,
    pub affinity: Option<String>,
}

impl From<SelectorSpec> for Selector {
    fn from(s: SelectorSpec) -> Self {
        Selector {
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
        }
    }
}

/// `register`'s options as the host takes them.
pub(crate) fn registration(
    permits: u32,
    labels: Option<HashMap<String, String>>,
    secret: Option<String>,
) -> Result<Registration, Error> {
    Ok(Registration {
        permits,
        labels: Labels::new(labels.unwrap_or_default())?,
        secret: secret.map(Secret::new).transpose()?,
    })
}
