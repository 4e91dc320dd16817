//! How many heap bytes a pool holds: what an operator's per-tenant memory
//! share is counted in, since every tenant of a shard lives in one wasm
//! instance and no allocator can say which tenant a byte belongs to.
//!
//! The count walks the pool's collections by their capacity (what is
//! allocated, not what is in use), with hash tables at their bucket count
//! and B-trees at a bound per entry, so it is an upper bound of the bytes
//! the pool asked its allocator for (the footprint test checks it against a
//! counting allocator on adversarial pools). Allocator overhead per block
//! and fragmentation come on top.

use core::mem::size_of;

/// Bytes of a `hashbrown` table with `capacity` slots of `T`: the buckets
/// (a power of two at least 8/7 of the capacity), one control byte each and
/// one group of trailing control bytes.
pub(crate) fn table<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets =
        if capacity < 8 { (capacity + 1).next_power_of_two() } else { (capacity * 8).div_ceil(7).next_power_of_two() };
    buckets * (size_of::<T>() + 1) + 16
}

/// Bytes of a B-tree with `len` entries of `T`: a node holds 11 entries
/// and, but for the root, at least 5, plus its header and (inner nodes) 12
/// child pointers; over all nodes that stays under three entries' worth of
/// space per entry and one pointer-sized header each.
pub(crate) fn btree<T>(len: usize) -> usize {
    len * (3 * size_of::<T>() + 4 * size_of::<usize>())
}

/// Bytes of a vector (or deque) allocation of `capacity` elements.
pub(crate) fn vec<T>(capacity: usize) -> usize {
    capacity * size_of::<T>()
}

/// Bytes of the allocation behind a shared string of `len` bytes (`Arc<str>`
/// and `Arc<String>`-like: two counters ahead of the data).
pub(crate) fn arc(len: usize) -> usize {
    2 * size_of::<usize>() + len
}
