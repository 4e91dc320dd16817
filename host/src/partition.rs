//! Which partition of a tenant holds a context's state. A tenant too big
//! for one process is split by context: every request and report for a
//! context reaches the one partition that holds its cells, so no process
//! holds or folds the others'. The split must be the same in every process
//! and every build, so it is FNV-1a of the context's name.

use crate::hash::fnv1a;

/// The partition, of `partitions` (at least 1), that holds `context`.
pub fn partition_of(context: &str, partitions: u32) -> u32 {
    (fnv1a(context) % u64::from(partitions.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
