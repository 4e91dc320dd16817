//! What an acquire may choose: a kind, label filters, values to leave out,
//! and a resource to try first (`prefer`, `affinity`).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::id::{check, ResourceId};
use crate::labels::{check_name, Labels};
use crate::limits::Limits;

/// Most label filters in one selector.
pub const MAX_FILTERS: usize = 8;
/// Most values one label filter may list.
pub const MAX_FILTER_VALUES: usize = 16;
/// Most values one selector may exclude.
pub const MAX_EXCLUDE: usize = 64;

/// Label `name` must have one of `values`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelFilter {
    pub name: String,
    pub values: Vec<String>,
}

/// Which resources an acquire may choose, and which it tries first. The
/// default admits every resource, of any kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Only resources of this kind.
    pub kind: Option<String>,
    /// Only resources matching every filter.
    pub labels: Vec<LabelFilter>,
    /// Never resources with these values, of any kind.
    pub exclude: Vec<String>,
    /// Try the resource with this value first (of `kind` when given).
    pub prefer: Option<String>,
    /// Try the resource the last lease with this key got first; a grant
    /// binds the key to its resource.
    pub affinity: Option<String>,
    /// Tokens the grant reserves against a `tpm` limit (1 when none): only
    /// resources whose `tpm` is at least this are admitted.
    pub cost: Option<u64>,
}

impl Selector {
    /// Checks every part against its rule, naming the part that breaks one.
    pub fn validate(&self) -> Result<()> {
        if let Some(kind) = &self.kind {
            check("kind", kind)?;
        }
        if self.labels.len() > MAX_FILTERS {
            return Err(Error::invalid("labels", "must be at most 8 filters"));
        }
        for f in &self.labels {
            check_name(&f.name)?;
            if f.values.is_empty() || f.values.len() > MAX_FILTER_VALUES {
                return Err(Error::invalid("labels", "each filter must list 1..=16 values"));
            }
            for v in &f.values {
                check("labels", v)?;
            }
        }
        if self.exclude.len() > MAX_EXCLUDE {
            return Err(Error::invalid("exclude", "must be at most 64 values"));
        }
        for v in &self.exclude {
            check("exclude", v)?;
        }
        if let Some(p) = &self.prefer {
            check("prefer", p)?;
        }
        if let Some(a) = &self.affinity {
            check("affinity", a)?;
        }
        if self.cost == Some(0) {
            return Err(Error::invalid("cost", "must be > 0"));
        }
        Ok(())
    }

    /// The tokens a grant reserves.
    pub fn cost(&self) -> u64 {
        self.cost.unwrap_or(1)
    }

    /// Whether the selector admits every resource.
    pub fn is_any(&self) -> bool {
        self.kind.is_none() && self.labels.is_empty() && self.exclude.is_empty() && self.cost() == 1
    }

    /// Whether a resource with this id, labels and limits is admitted.
    pub(crate) fn admits(&self, id: &ResourceId, labels: &Labels, limits: &Limits) -> bool {
        [limits.tpm, limits.per_context.tpm].into_iter().flatten().all(|t| self.cost() <= t)
            && self.kind.as_deref().is_none_or(|k| k == id.kind())
            && !self.exclude.iter().any(|v| v == id.value())
            && self.labels.iter().all(|f| labels.get(&f.name).is_some_and(|v| f.values.iter().any(|w| w == v)))
    }
}
