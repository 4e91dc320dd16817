//! Resource keys: a compact name for one registration of a resource, so a
//! host can cache the resource id it stands for instead of receiving the
//! id's strings with every lease.

/// One registration of a resource in one pool: the slot it occupies and a
/// serial no other registration of that pool ever gets. Slots are reused
/// after an unregister and renumbered by a restore; serials are not, so a
/// key cached before either names nothing afterwards rather than whatever
/// took the slot. Keys are not part of snapshots: a pool built from one
/// numbers its registrations afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceKey {
    pub slot: u32,
    pub serial: u64,
}
