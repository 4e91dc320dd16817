//! Many tenants over a few shards, used from several threads at once.

use std::sync::Arc;

use repute_host::{Error, ManualClock, PoolOps, PoolSet, Providers, ShardLimits, TenantConfig};

#[test]
fn tenants_are_isolated_and_served_in_parallel() {
    let set = Arc::new(PoolSet::new(2, ShardLimits::default()).unwrap());
    let tenants = ["alpha", "beta", "gamma", "delta"];
    for t in tenants {
        let providers = Providers::memory_with_clock(Arc::new(ManualClock::new(1)));
        set.open_tenant(t, TenantConfig::default(), providers).unwrap();
        set.with(t, |p| p.register("proxy", t, 1)).unwrap().unwrap();
    }
    assert_eq!(set.tenants(), ["alpha", "beta", "delta", "gamma"]);

    let workers: Vec<_> = tenants
        .into_iter()
        .map(|t| {
            let set = set.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                for _ in 0..500 {
                    let lease = set.with(t, |p| p.acquire("x.com")).unwrap().unwrap();
                    assert_eq!(lease.resource.value(), t, "a tenant only sees its own resources");
                    assert!(lease.token > last);
                    last = lease.token;
                    set.with(t, |p| p.release(lease.id, lease.token)).unwrap().unwrap();
                }
                last
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), 500);
    }
    for t in tenants {
        let events = set.with(t, |p| p.drain_events()).unwrap().unwrap();
        assert_eq!(events.len(), 1 + 2 * 500, "registered, then leased and released 500 times");
    }
}

#[test]
fn unknown_and_duplicate_tenants_are_refused() {
    let set = PoolSet::new(1, ShardLimits::default()).unwrap();
    let err = set.with("nobody", |p| p.stats()).unwrap_err();
    assert_eq!(err.code(), "invalid_input");
    set.open_tenant("t", TenantConfig::default(), Providers::memory()).unwrap();
    let again = set.open_tenant("t", TenantConfig::default(), Providers::memory());
    assert!(matches!(again, Err(Error::NotOwner { .. })), "{again:?}");
    set.close_tenant("t").unwrap();
    assert!(set.tenants().is_empty());
    set.open_tenant("t", TenantConfig::default(), Providers::memory()).unwrap();
}
