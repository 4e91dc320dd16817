//! `report_and_release`: what a finished attempt does, in one call, alike
//! through the component and the natively linked core.

use std::sync::Arc;

use repute_host::linked::LinkedPool;
use repute_host::{
    Error, FailureKind, ManualClock, Outcome, Policy, Pool, PoolOps, Providers, Strategy, TenantConfig, SECOND,
};

/// Both sides, `first` picking the lowest slot: "a" before "b".
fn pools() -> Vec<(&'static str, Box<dyn PoolOps>)> {
    let config = || TenantConfig {
        policy: Policy { strategy: Strategy::First, ..Policy::default() },
        ..TenantConfig::default()
    };
    let providers = || Providers::memory_with_clock(Arc::new(ManualClock::new(SECOND)));
    vec![
        ("component", Box::new(Pool::open(config(), providers()).unwrap())),
        ("linked", Box::new(LinkedPool::open(config(), providers()).unwrap())),
    ]
}

/// The (observations, consecutive failures) of a resource's cell for `context`.
fn cell(p: &mut dyn PoolOps, value: &str, context: &str) -> Option<(u64, u32)> {
    let cells = p.cells("proxy", value).unwrap();
    cells
        .iter()
        .find(|c| c.context.as_ref().map(|c| c.as_str()) == Some(context))
        .map(|c| (c.observations, c.consecutive_failures))
}

#[test]
fn reports_on_the_leases_resource_in_its_context_then_frees_its_permit() {
    for (side, mut p) in pools() {
        p.register("proxy", "a", 1).unwrap();
        p.register("proxy", "b", 1).unwrap();
        let lease = p.acquire("x.com").unwrap();
        assert_eq!(lease.resource.value(), "a", "{side}");
        let reset = Outcome::Failure { kind: FailureKind::ConnectionReset, latency_ms: 20.0, retry_after: None };
        p.report_and_release(lease.id, lease.token, &reset).unwrap();
        assert_eq!(cell(p.as_mut(), "a", "x.com"), Some((1, 1)), "{side}: reported in the lease's context");
        assert_eq!(cell(p.as_mut(), "a", "y.com"), None, "{side}");
        assert_eq!(p.lease(lease.id).unwrap(), None, "{side}: released");
        assert!(p.leases().unwrap().is_empty(), "{side}");
        let next = p.acquire("y.com").unwrap();
        assert_eq!((next.resource.value(), next.token), ("a", lease.token + 1), "{side}: a's permit is free");
    }
}

#[test]
fn a_lease_that_is_not_live_is_refused_as_release_refuses_it_and_nothing_is_reported() {
    let success = Outcome::Success { latency_ms: 20.0 };
    for (side, mut p) in pools() {
        p.register("proxy", "a", 1).unwrap();
        let lease = p.acquire("x.com").unwrap();
        assert_eq!(p.report_and_release(lease.id, lease.token + 1, &success), Err(Error::StaleLease), "{side}");
        assert_eq!(p.report_and_release(lease.id + 99, lease.token, &success), Err(Error::UnknownLease), "{side}");
        assert_eq!(cell(p.as_mut(), "a", "x.com"), None, "{side}: nothing reported");
        assert_eq!(p.lease(lease.id).unwrap().map(|l| l.token), Some(lease.token), "{side}: still held");
        p.release(lease.id, lease.token).unwrap();
        assert_eq!(p.report_and_release(lease.id, lease.token, &success), Err(Error::UnknownLease), "{side}");
        assert_eq!(p.release(lease.id, lease.token), Err(Error::UnknownLease), "{side}");
        assert_eq!(cell(p.as_mut(), "a", "x.com"), None, "{side}: nothing reported");
        let bad = Outcome::Success { latency_ms: f64::NAN };
        let again = p.acquire("x.com").unwrap();
        assert!(matches!(p.report_and_release(again.id, again.token, &bad), Err(Error::InvalidInput { .. })), "{side}");
        assert_eq!(p.lease(again.id).unwrap().map(|l| l.id), Some(again.id), "{side}: a bad outcome releases nothing");
    }
}
