//! Which partition of a tenant holds a context's state, and the names a
//! partition goes by. A tenant too big for one process is split by context:
//! every request and report for a context reaches the one partition that
//! holds its cells, so no process holds or folds the others'. The split
//! must be the same in every process and every build, so it is FNV-1a of
//! the context's name; the log keeps that hash beside each entry, so a
//! partition reads only its own entries under any count of partitions.

use repute_core::Command;

use crate::error::{Error, Result};
use crate::hash::fnv1a;

/// Most partitions a tenant may be split into: a lease id keeps its
/// partition and its owner's epoch in the bits above 32 (see [`Partition::lease_floor`]),
/// and ids must stay below 2^53 for JavaScript clients.
pub const MAX_PARTITIONS: u32 = 64;

/// Refuses a number of partitions outside 1 to [`MAX_PARTITIONS`], naming the `partitions` field.
pub fn check_partitions(partitions: u32) -> Result<()> {
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return Err(Error::invalid("partitions", &format!("must be 1 to {MAX_PARTITIONS}")));
    }
    Ok(())
}

/// The partition, of `partitions` (at least 1), that holds `context`.
pub fn partition_of(context: &str, partitions: u32) -> u32 {
    by_hash(fnv1a(context), partitions)
}

/// The partition, of `partitions`, whose owner granted lease `id` (see
/// [`Partition::lease_floor`]).
pub fn lease_partition(id: u64, partitions: u32) -> u32 {
    by_hash(id >> 32, partitions)
}

/// The tenant a pool serves: a tenant's pool is named after it, a
/// partition's after its tenant and its place (see [`Partition::name`]).
pub fn tenant_of(pool: &str) -> &str {
    pool.split_once('/').map_or(pool, |(tenant, _)| tenant)
}

fn by_hash(hash: u64, partitions: u32) -> u32 {
    (hash % u64::from(partitions.max(1))) as u32
}

/// The hash the log keeps beside an entry about one context (a report, a
/// block or an unblock in a context); `None` for an entry every partition
/// folds (a registration, a group's limits, a block of the whole resource).
pub fn context_hash(command: &Command) -> Option<u64> {
    let context = match command {
        Command::Report { context, .. } => context,
        Command::Block { context: Some(context), .. } | Command::Unblock { context: Some(context), .. } => context,
        _ => return None,
    };
    Some(fnv1a(context.as_str()))
}

/// One partition of a tenant: partition `index` of `count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub tenant: String,
    pub index: u32,
    pub count: u32,
}

impl Partition {
    /// Partition `index` of `count` (1 to [`MAX_PARTITIONS`]).
    pub fn new(tenant: &str, index: u32, count: u32) -> Result<Partition> {
        check_partitions(count)?;
        if index >= count {
            return Err(Error::invalid("partition", "must be below the number of partitions"));
        }
        Ok(Partition { tenant: tenant.to_owned(), index, count })
    }

    /// `TENANT/pINDEXofCOUNT`: the name of its owner lease, checkpoint and
    /// pool. '/' is outside the tenant alphabet, so a partition's name is
    /// never a tenant's, and the count is in it, so a layout of another
    /// count never loads this one's checkpoint or inherits its owner.
    pub fn name(&self) -> String {
        format!("{}/p{}of{}", self.tenant, self.index, self.count)
    }

    /// The partition a name made by [`Partition::name`] names; `None` for a tenant's name.
    pub fn parse(name: &str) -> Option<Partition> {
        let (tenant, part) = name.rsplit_once('/').filter(|(tenant, _)| !tenant.is_empty())?;
        let (index, count) = part.strip_prefix('p')?.split_once("of")?;
        Partition::new(tenant, index.parse().ok()?, count.parse().ok()?).ok()
    }

    /// Whether the log entry with `hash` (see [`context_hash`]) is this partition's to fold.
    pub fn folds(&self, hash: Option<u64>) -> bool {
        hash.is_none_or(|h| by_hash(h, self.count) == self.index)
    }

    /// The first lease id the owner of this partition under `epoch` hands
    /// out: `(epoch × count + index) << 32`, so ids of two partitions, or
    /// of two owners of one, never meet, and any process finds the
    /// partition that granted a lease from its id alone.
    pub fn lease_floor(&self, epoch: u64) -> u64 {
        (epoch * u64::from(self.count) + u64::from(self.index)) << 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::{Context, Outcome, ResourceId};

    #[test]
    fn a_context_has_one_partition_in_every_build() {
        // Pinned: a change of the hash would move every context's state.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        let sites = ["shop.example", "news.example", "api.example", "search.example"];
        assert_eq!(sites.map(|s| partition_of(s, 3)), [1, 2, 2, 1]);
        assert_eq!(sites.map(|s| partition_of(s, 4)), [1, 2, 3, 1]);
        assert_eq!(partition_of("anything", 1), 0);
        assert_eq!(partition_of("anything", 0), 0, "no partitions is one");
    }

    #[test]
    fn contexts_spread_over_the_partitions() {
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            counts[partition_of(&format!("site-{i}.example"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (900..=1100).contains(&c)), "{counts:?}");
    }

    #[test]
    fn a_partition_name_reads_back_and_no_tenant_name_reads_as_one() {
        let p = Partition::new("acme", 2, 3).unwrap();
        assert_eq!(p.name(), "acme/p2of3");
        assert_eq!(Partition::parse("acme/p2of3"), Some(p.clone()));
        assert_eq!((tenant_of("acme/p2of3"), tenant_of("acme")), ("acme", "acme"));
        for name in ["acme", "acme/p3of3", "acme/p1of0", "acme/p1of65", "acme/x1of3", "acme/p1o3", "/p0of1"] {
            assert_eq!(Partition::parse(name), None, "{name}");
        }
        let refused = |r: Result<Partition>| match r {
            Err(Error::InvalidInput { field, .. }) => field,
            other => panic!("expected invalid_input, got {other:?}"),
        };
        assert_eq!(refused(Partition::new("acme", 0, 65)), "partitions");
        assert_eq!(refused(Partition::new("acme", 3, 3)), "partition");
    }

    #[test]
    fn a_lease_id_names_the_partition_that_granted_it() {
        for count in [1, 2, 3, 7, MAX_PARTITIONS] {
            for index in 0..count {
                let p = Partition::new("t", index, count).unwrap();
                for epoch in [1, 2, 1000, 32_767] {
                    let floor = p.lease_floor(epoch);
                    assert!(floor + u64::from(u32::MAX) < 1 << 53, "ids stay exact in JavaScript");
                    for id in [floor, floor + 1, floor + u64::from(u32::MAX)] {
                        assert_eq!(lease_partition(id, count), index);
                    }
                }
            }
        }
        let (a, b) = (Partition::new("t", 0, 3).unwrap(), Partition::new("t", 1, 3).unwrap());
        assert_ne!(a.lease_floor(2), b.lease_floor(2));
        assert!(
            a.lease_floor(3) > a.lease_floor(2) + u64::from(u32::MAX),
            "a later owner's ids are above an earlier one's"
        );
    }

    #[test]
    fn only_entries_about_one_context_belong_to_one_partition() {
        let resource = ResourceId::new("proxy", "p1").unwrap();
        let context = Context::new("shop.example").unwrap();
        let report = Command::Report {
            resource: resource.clone(),
            context: context.clone(),
            outcome: Outcome::success(5.0).unwrap(),
        };
        let hash = context_hash(&report).unwrap();
        let holder = partition_of("shop.example", 3);
        for index in 0..3 {
            assert_eq!(Partition::new("t", index, 3).unwrap().folds(Some(hash)), index == holder);
        }
        let everywhere = Command::Block { resource, context: None, duration: None, reason: None };
        assert_eq!(context_hash(&everywhere), None);
        assert!((0..3).all(|i| Partition::new("t", i, 3).unwrap().folds(None)));
    }
}
