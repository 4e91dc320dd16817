//! Leases cross the boundary with a resource key instead of the resource's
//! strings, and the host names the resource from its cache of keys. Every
//! way a slot can come to hold another resource (unregister and register,
//! restore, a rebuild after a trap) must still give leases the right id.

use std::sync::Arc;

use repute_host::{ManualClock, Policy, Pool, PoolOps, Providers, ShardLimits, Strategy, TenantConfig, Variant};

/// `first` picks the lowest slot, so each test knows which slot a lease is on.
fn config() -> TenantConfig {
    TenantConfig { policy: Policy { strategy: Strategy::First, ..Policy::default() }, ..TenantConfig::default() }
}

fn providers() -> Providers {
    Providers::memory_with_clock(Arc::new(ManualClock::new(1)))
}

/// Acquires once in `context` and releases; the value of the resource granted.
fn take(p: &mut Pool, context: &str) -> String {
    let lease = p.acquire(context).unwrap();
    p.release(lease.id, lease.token).unwrap();
    assert_eq!(lease.context.as_str(), context);
    lease.resource.value().to_owned()
}

#[test]
fn a_slot_freed_by_unregister_and_taken_again_names_the_new_resource() {
    let mut p = Pool::open(config(), providers()).unwrap();
    p.register("proxy", "old", 1).unwrap();
    assert_eq!(take(&mut p, "x.com"), "old");
    p.unregister("proxy", "old", false).unwrap();
    p.register("proxy", "new", 1).unwrap();
    assert_eq!(take(&mut p, "x.com"), "new");
    p.register("proxy", "old", 1).unwrap();
    let held = p.acquire("x.com").unwrap();
    assert_eq!((held.resource.value(), held.token), ("new", 2));
    let other = p.acquire("y.com").unwrap();
    assert_eq!((other.resource.value(), other.token), ("old", 2), "old's fences continue");
    let renewed = p.renew(other.id, other.token).unwrap();
    assert_eq!((renewed.resource.value(), renewed.context.as_str()), ("old", "y.com"));
}

#[test]
fn a_restore_that_moves_resources_to_other_slots_names_them_right() {
    let mut p = Pool::open(config(), providers()).unwrap();
    // Slots in registration order: b, a. A snapshot lists them by id: a, b.
    p.register("proxy", "b", 1).unwrap();
    p.register("proxy", "a", 1).unwrap();
    assert_eq!(take(&mut p, "x.com"), "b");
    let bytes = p.snapshot(false).unwrap();
    p.restore(&bytes).unwrap();
    assert_eq!(take(&mut p, "x.com"), "a");
    let json = p.snapshot_json(false).unwrap();
    p.unregister("proxy", "a", false).unwrap();
    assert_eq!(take(&mut p, "x.com"), "b");
    p.restore_json(&json).unwrap();
    assert_eq!(take(&mut p, "x.com"), "a");
}

#[test]
fn a_rebuild_after_a_trap_names_resources_of_the_new_instance() {
    let mut p = Pool::open_variant(config(), providers(), ShardLimits::default(), Variant::Testing).unwrap();
    p.register("proxy", "b", 1).unwrap();
    p.register("proxy", "a", 1).unwrap();
    // Cached: slot 0 of the first instance is b. The rebuilt instance
    // numbers from the snapshot afresh and puts a in slot 0.
    assert_eq!(take(&mut p, "x.com"), "b");
    p.snapshot(true).unwrap();
    assert!(p.register("__trap__", "x", 1).is_err());
    assert_eq!(take(&mut p, "x.com"), "a");
    let first = p.acquire("x.com").unwrap();
    let second = p.acquire("y.com").unwrap();
    assert_eq!((first.resource.value(), second.resource.value()), ("a", "b"));
}
