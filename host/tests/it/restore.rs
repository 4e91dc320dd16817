//! I5 across pools: a lease restored from a snapshot keeps its holder, even
//! where the lease authority never saw it granted, and never at the expense
//! of a lease the authority knows to be live.

use std::sync::Arc;

use repute_host::{Clock, Error, ManualClock, Pool, PoolOps, Providers, TenantConfig, SECOND};

fn pool(clock: &Arc<ManualClock>) -> Pool {
    Pool::open(TenantConfig::default(), Providers::memory_with_clock(clock.clone())).unwrap()
}

#[test]
fn a_restored_lease_renews_in_a_new_pool_and_tokens_continue_above_it() {
    let clock = Arc::new(ManualClock::new(0));
    let mut first = pool(&clock);
    first.register("proxy", "a", 1).unwrap();
    for _ in 0..3 {
        let l = first.acquire("example.com").unwrap();
        first.release(l.id, l.token).unwrap();
    }
    let held = first.acquire("example.com").unwrap();
    assert_eq!(held.token, 4);
    let bytes = first.snapshot(true).unwrap();

    clock.advance(5 * SECOND);
    let mut second = pool(&clock);
    second.restore(&bytes).unwrap();
    let renewed = second.renew(held.id, held.token).unwrap();
    assert_eq!((renewed.token, renewed.expires_at), (4, clock.now() + 30 * SECOND));
    assert!(matches!(second.acquire("example.com"), Err(Error::NoResourceAvailable { .. })));
    second.release(held.id, held.token).unwrap();
    assert_eq!(second.acquire("example.com").unwrap().token, 5);
}

#[test]
fn a_restored_token_older_than_the_authoritys_is_refused() {
    let clock = Arc::new(ManualClock::new(0));
    let mut p = pool(&clock);
    p.register("proxy", "a", 1).unwrap();
    let old = p.acquire("example.com").unwrap();
    let bytes = p.snapshot(true).unwrap();
    p.release(old.id, old.token).unwrap();
    let newer = p.acquire("example.com").unwrap();
    p.release(newer.id, newer.token).unwrap();
    // Restoring brings back the lease with token 1, but the authority has issued 2 since.
    p.restore(&bytes).unwrap();
    assert_eq!(p.renew(old.id, old.token).unwrap_err(), Error::LeaseExpired);
    assert_eq!(p.acquire("example.com").unwrap().token, 3);
}
