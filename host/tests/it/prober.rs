//! The host's probe loop (`recovery = probe`) through the component: real
//! probe leases, bounded rounds, outcomes reported with the cell's cause.

use std::sync::Arc;

use repute_host::{
    finish_probe, start_probes, CellState, FailureKind, LeaseKind, ManualClock, Outcome, Policy, Pool, PoolOps,
    Profiles, Providers, Recovery, TenantConfig, Verdict, SECOND,
};

fn probe_pool() -> (Pool, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1));
    let policy = Policy { recovery: Recovery::Probe, ..Policy::default() };
    let config = TenantConfig { policy, seed: 3, durable: false };
    let mut pool = Pool::open(config, Providers::memory_with_clock(clock.clone())).expect("open");
    for r in ["a", "b", "c"] {
        pool.register("proxy", r, 1).unwrap();
        for _ in 0..3 {
            let timeout = Outcome::failure(FailureKind::Timeout, 900.0).unwrap();
            pool.report("proxy", r, "shop", &timeout).unwrap();
        }
    }
    (pool, clock)
}

#[test]
fn rounds_take_real_probe_leases_up_to_the_bound() {
    let (mut pool, clock) = probe_pool();
    assert!(start_probes(&mut pool, 2).unwrap().is_empty(), "nothing is due while cooling");
    clock.advance(240 * SECOND);
    let first = start_probes(&mut pool, 2).unwrap();
    assert_eq!(
        first.iter().map(|l| (l.resource.value(), l.kind)).collect::<Vec<_>>(),
        [("a", LeaseKind::Probe), ("b", LeaseKind::Probe)]
    );
    assert!(pool.acquire("shop").is_err(), "clients get no trial under probe recovery");
    let second = start_probes(&mut pool, 2).unwrap();
    assert_eq!(second.iter().map(|l| l.resource.value()).collect::<Vec<_>>(), ["c"], "probed cells are not due twice");
    finish_probe(&mut pool, &Profiles::default(), &first[0], Verdict::Healthy, 30.0).unwrap();
    finish_probe(&mut pool, &Profiles::default(), &first[1], Verdict::Failed, 900.0).unwrap();
    finish_probe(&mut pool, &Profiles::default(), &second[0], Verdict::Http(503), 12.0).unwrap();
    assert!(pool.leases().unwrap().is_empty(), "every probe lease was released");
    let cell = |pool: &mut Pool, r: &str| pool.cells("proxy", r).unwrap().remove(1);
    assert_eq!(cell(&mut pool, "a").state, CellState::Recovering);
    let b = cell(&mut pool, "b");
    // A failed probe re-cools with the cell's own cause and the next exponent.
    assert_eq!(
        (b.cause, b.consecutive_failures, b.cooling_until),
        (Some(FailureKind::Timeout), 4, Some(1 + 240 * SECOND + 480 * SECOND))
    );
    let c = cell(&mut pool, "c");
    assert_eq!((c.cause, c.consecutive_failures), (Some(FailureKind::ConnectionReset), 4));
    assert_eq!(pool.acquire("shop").unwrap().resource.value(), "a");
}

#[test]
fn a_probe_lease_that_ran_out_is_still_reported() {
    let (mut pool, clock) = probe_pool();
    clock.advance(240 * SECOND);
    let leases = start_probes(&mut pool, 1).unwrap();
    clock.advance(16 * SECOND);
    finish_probe(&mut pool, &Profiles::default(), &leases[0], Verdict::Healthy, 30.0).unwrap();
    assert_eq!(pool.cells("proxy", "a").unwrap()[1].state, CellState::Recovering);
}
