//! Quota groups: named sets of resources that share limits, as providers
//! count quotas per project or per account rather than per key. A resource
//! names the groups it belongs to when it is registered; a group's limits
//! are set apart (`Pool::set_group`), and a grant counts against its
//! resource's limits and against every group's it belongs to.

use alloc::string::String;
use alloc::sync::Arc;
use core::borrow::Borrow;
use core::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::check;
use crate::limits::{Limits, MAX_RPD, MAX_RPM};

/// Most groups one resource may belong to.
pub const MAX_GROUPS: usize = 8;
/// Highest `concurrency` accepted.
pub const MAX_CONCURRENCY: u32 = 1_000_000;

/// A group's name ("project:acme-prod", "account:provider-x"): the rules of
/// a context's name, under the field `group`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupName(Arc<str>);

impl GroupName {
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        check("group", &name)?;
        Ok(GroupName(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        crate::footprint::arc(self.0.len())
    }

    pub(crate) fn revalidate(&self) -> Result<()> {
        GroupName::new(&*self.0).map(|_| ())
    }
}

impl Borrow<str> for GroupName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a group's members may use together. The default has none: a
/// group without limits only names its members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLimits {
    /// At most this many grants of its members in any 60 s.
    pub rpm: Option<u32>,
    /// At most this many tokens of its members in any 60 s.
    pub tpm: Option<u64>,
    /// At most this many grants of its members in any rolling day.
    pub rpd: Option<u32>,
    /// At most this many tokens of its members in any rolling day.
    pub tpd: Option<u64>,
    /// At most this many live leases across its members.
    pub concurrency: Option<u32>,
    /// A `quota_exhausted` reported on one member pauses every member:
    /// the provider counts the quota for the whole group.
    #[serde(default)]
    pub shared_quota: bool,
}

impl GroupLimits {
    pub fn validate(&self) -> Result<()> {
        if self.rpm.is_some_and(|r| !(1..=MAX_RPM).contains(&r)) {
            return Err(Error::invalid("group.rpm", "must be in 1..=100000"));
        }
        if self.tpm == Some(0) {
            return Err(Error::invalid("group.tpm", "must be > 0"));
        }
        if self.rpd.is_some_and(|r| !(1..=MAX_RPD).contains(&r)) {
            return Err(Error::invalid("group.rpd", "must be in 1..=100000000"));
        }
        if self.tpd == Some(0) {
            return Err(Error::invalid("group.tpd", "must be > 0"));
        }
        if self.concurrency.is_some_and(|c| !(1..=MAX_CONCURRENCY).contains(&c)) {
            return Err(Error::invalid("group.concurrency", "must be in 1..=1000000"));
        }
        Ok(())
    }

    /// The window limits a grant is judged by, here and at the authority.
    /// A group's `rpm` is not spread into a spacing as a resource's is: the
    /// provider counts the members' requests together over its window, and
    /// one grant per `WINDOW / rpm` across a whole project would refuse
    /// every burst of arrivals that its members together have room for
    /// (each member's own `rpm` still spaces its grants).
    pub fn as_limits(&self) -> Limits {
        Limits { rpm: self.rpm, tpm: self.tpm, rpd: self.rpd, tpd: self.tpd, ..Limits::default() }
    }

    /// Whether a grant must be counted against the group at all.
    pub fn counted(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some() || self.rpd.is_some() || self.tpd.is_some()
    }

    /// Whether anything about the group limits its members.
    pub fn limiting(&self) -> bool {
        self.counted() || self.concurrency.is_some() || self.shared_quota
    }
}

/// What a grant claims of one group at the authority: its window limits
/// (paced) and its concurrency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupClaim {
    pub name: GroupName,
    pub limits: Limits,
    pub concurrency: Option<u32>,
}

/// Checks a registration's group names: at most `MAX_GROUPS`, no name twice.
pub(crate) fn check_names(groups: &[GroupName]) -> Result<()> {
    if groups.len() > MAX_GROUPS {
        return Err(Error::invalid("groups", "must name at most 8 groups"));
    }
    for (i, g) in groups.iter().enumerate() {
        if groups[..i].contains(g) {
            return Err(Error::invalid("groups", "must not name a group twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_names_are_checked_field_by_field() {
        let field = |l: GroupLimits| match l.validate() {
            Err(Error::InvalidInput { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(GroupLimits { rpm: Some(0), ..GroupLimits::default() }), "group.rpm");
        assert_eq!(field(GroupLimits { tpd: Some(0), ..GroupLimits::default() }), "group.tpd");
        assert_eq!(field(GroupLimits { rpd: Some(MAX_RPD + 1), ..GroupLimits::default() }), "group.rpd");
        assert_eq!(field(GroupLimits { concurrency: Some(0), ..GroupLimits::default() }), "group.concurrency");
        let l = GroupLimits { rpm: Some(120), concurrency: Some(2), ..GroupLimits::default() };
        assert_eq!(l.as_limits().min_interval, None, "a group's rpm is counted over its window, not spread");
        assert_eq!(l.as_limits().rpm, Some(120));
        assert!(l.limiting() && l.counted() && !GroupLimits::default().limiting());
        assert!(GroupName::new("").is_err() && GroupName::new("a\nb").is_err());
        let names: alloc::vec::Vec<GroupName> =
            (0..9).map(|i| GroupName::new(alloc::format!("g{i}")).unwrap()).collect();
        assert!(check_names(&names[..8]).is_ok());
        assert!(check_names(&names).is_err());
        assert!(check_names(&[names[0].clone(), names[0].clone()]).is_err());
    }
}
