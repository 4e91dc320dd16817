//! The hash of names that processes must agree on.

/// FNV-1a: a hash that is the same in every build, for names that must
/// agree across processes (shard choice, lock files).
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
