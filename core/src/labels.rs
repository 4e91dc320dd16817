//! Labels: the names and values a resource carries for acquire filters
//! (`region` = `eu`), validated once when it is registered.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Most labels one resource may carry.
pub const MAX_LABELS: usize = 16;
/// Longest label name, in bytes.
pub const MAX_LABEL_NAME_BYTES: usize = 64;

/// A resource's labels, sorted by name, names unique.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    /// Labels from name/value pairs in any order. A name must be 1..=64
    /// bytes of ASCII letters, digits, `_`, `-` and `.`; a value 1..=256
    /// bytes without control characters; at most 16, no name twice.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Result<Labels> {
        let mut pairs: Vec<(String, String)> = pairs.into_iter().collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let labels = Labels(pairs);
        labels.check()?;
        Ok(labels)
    }

    /// Re-checks labels that arrived through deserialization, which bypasses `new`.
    pub(crate) fn check(&self) -> Result<()> {
        if self.0.len() > MAX_LABELS {
            return Err(Error::invalid("labels", "must be at most 16"));
        }
        for (i, (name, value)) in self.0.iter().enumerate() {
            check_name(name)?;
            crate::id::check("labels", value)?;
            if i > 0 && self.0[i - 1].0 >= *name {
                return Err(Error::invalid("labels", "names must be unique"));
            }
        }
        Ok(())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The value of label `name`, if the resource has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name)).ok().map(|i| self.0[i].1.as_str())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let strings: usize = self.0.iter().map(|(n, v)| n.capacity() + v.capacity()).sum();
        crate::footprint::vec::<(String, String)>(self.0.capacity()) + strings
    }
}

/// A label name: 1..=64 bytes of ASCII letters, digits, `_`, `-` and `.`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_LABEL_NAME_BYTES {
        return Err(Error::invalid("labels", "names must be 1..=64 bytes"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return Err(Error::invalid("labels", "names may hold only ASCII letters, digits, '_', '-' and '.'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::borrow::ToOwned;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn labels_sort_by_name_and_look_up() {
        let l = Labels::new(pairs(&[("tier", "paid"), ("region", "eu")])).unwrap();
        assert_eq!(l.iter().collect::<Vec<_>>(), [("region", "eu"), ("tier", "paid")]);
        assert_eq!(l.get("tier"), Some("paid"));
        assert_eq!(l.get("zone"), None);
    }

    #[test]
    fn bad_labels_name_the_rule() {
        let rule = |p: &[(&str, &str)]| match Labels::new(pairs(p)) {
            Err(Error::InvalidInput { field, rule }) => (field, rule),
            other => panic!("accepted {other:?}"),
        };
        assert_eq!(rule(&[("a", "1"), ("a", "2")]), ("labels", "names must be unique"));
        assert_eq!(rule(&[("", "1")]), ("labels", "names must be 1..=64 bytes"));
        assert_eq!(rule(&[("a b", "1")]).1, "names may hold only ASCII letters, digits, '_', '-' and '.'");
        assert_eq!(rule(&[("a", "")]), ("labels", "must not be empty"));
        assert_eq!(rule(&[("a", "x\ny")]), ("labels", "must not contain control characters"));
        let many: Vec<(String, String)> = (0..17).map(|i| (alloc::format!("l{i:02}"), "v".to_owned())).collect();
        assert!(matches!(Labels::new(many), Err(Error::InvalidInput { rule: "must be at most 16", .. })));
    }
}
