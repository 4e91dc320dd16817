//! Leases, blocks, permits and their fences, unregistering, budgets, rate
//! limits and resource keys.

use crate::common::*;
use repute_core::{CellState, Error, EventKind, Policy, Pool, RateLimit, Refusal, RejectReason, ResourceKey, Strategy};

// ---- 7. leases ----

#[test]
fn lease_cycle_with_exact_events() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), S).unwrap();
    assert_eq!((l.permit, l.token, l.granted_at, l.expires_at), (0, 1, S, 31 * S));
    let r = pool.renew(l.id, l.token, 20 * S).unwrap();
    assert_eq!(r.expires_at, 50 * S);
    assert_eq!(pool.renew(l.id, 99, 20 * S).unwrap_err(), Error::StaleLease);
    assert_eq!(pool.release(l.id, 0, 20 * S).unwrap_err(), Error::StaleLease);
    assert_eq!(pool.renew(12345, 1, 20 * S).unwrap_err(), Error::UnknownLease);
    pool.release(l.id, l.token, 21 * S).unwrap();
    assert_eq!(pool.release(l.id, l.token, 21 * S).unwrap_err(), Error::UnknownLease);
    let events = pool.drain_events();
    assert_eq!(names(&events), vec!["registered", "leased", "renewed", "released"]);
    let at: Vec<u64> = events.iter().map(|e| e.at).collect();
    assert_eq!(at, vec![0, S, 20 * S, 21 * S]);
}

#[test]
fn expiry_frees_the_permit_and_emits_lease_expired() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    assert!(
        pool.acquire(&ctx("x"), 29 * S)
            == Err(Error::NoResourceAvailable(Refusal {
                registered: 1,
                leased: 1,
                retry_after: Some(S),
                expected_after: Some(S),
                ..Refusal::default()
            }))
    );
    pool.drain_events();
    let next = pool.acquire(&ctx("x"), 30 * S).unwrap();
    assert_eq!(next.token, 2);
    let events = pool.drain_events();
    assert_eq!(names(&events), vec!["lease_expired", "leased"]);
    assert_eq!(events[0].at, 30 * S);
    assert_eq!(pool.renew(l.id, l.token, 31 * S).unwrap_err(), Error::LeaseExpired);
}

#[test]
fn clock_going_backwards_is_clamped() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 100 * S).unwrap();
    let l = pool.acquire(&ctx("x"), 10 * S).unwrap();
    assert_eq!(l.granted_at, 100 * S);
}

#[test]
fn blocked_resources_are_neither_granted_nor_renewed() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    pool.block(&rid("a"), None, None, Some("abuse report".into()), S).unwrap();
    assert_eq!(pool.renew(l.id, l.token, 2 * S).unwrap_err(), Error::Blocked);
    pool.release(l.id, l.token, 2 * S).unwrap();
    assert_eq!(
        pool.acquire(&ctx("x"), 3 * S),
        Err(Error::NoResourceAvailable(Refusal { registered: 1, blocked: 1, settled: true, ..Refusal::default() }))
    );
    let rejected = pool.drain_events().into_iter().find_map(|e| match e.kind {
        EventKind::Rejected { context, reason } => Some((context, reason)),
        _ => None,
    });
    assert_eq!(rejected, Some((ctx("x"), RejectReason::NoCandidates)));
}

/// A lease granted in a context the pool had not seen still answers to a
/// block of that context placed later (the block is what gives the context
/// its number, after the grant).
#[test]
fn a_context_block_placed_after_the_grant_stops_the_renewal() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("new"), 0).unwrap();
    pool.block(&rid("a"), Some(&ctx("new")), None, None, S).unwrap();
    assert_eq!(pool.renew(l.id, l.token, 2 * S).unwrap_err(), Error::Blocked);
    let other = pool.acquire(&ctx("other"), 2 * S).unwrap_err();
    assert_eq!(
        other,
        Error::NoResourceAvailable(Refusal {
            registered: 1,
            leased: 1,
            retry_after: Some(28 * S),
            expected_after: Some(28 * S),
            ..Refusal::default()
        })
    );
    pool.release(l.id, l.token, 3 * S).unwrap();
    assert_eq!(pool.acquire(&ctx("other"), 3 * S).unwrap().token, 2);
}

// ---- 8. blocklist ----

#[test]
fn block_per_context_and_with_duration() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.block(&rid("a"), Some(&ctx("x")), Some(60 * S), None, 0).unwrap();
    assert!(pool.acquire(&ctx("x"), S).is_err());
    let l = pool.acquire(&ctx("y"), S).unwrap();
    pool.release(l.id, l.token, S).unwrap();
    let cells = pool.cells(&rid("a"), S).unwrap();
    assert_eq!((cells[0].state, cells[1].state), (CellState::Healthy, CellState::Blocklisted));
    pool.drain_events();
    let l = pool.acquire(&ctx("x"), 60 * S).unwrap();
    let events = pool.drain_events();
    assert_eq!(names(&events), vec!["unblocked", "leased"]);
    assert_eq!(events[0].at, 60 * S);
    assert!(matches!(&events[0].kind, EventKind::Unblocked { context: Some(c), .. } if *c == ctx("x")));
    pool.release(l.id, l.token, 60 * S).unwrap();

    pool.block(&rid("a"), None, None, None, 61 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 61 * S).unwrap()[0].state, CellState::Blocklisted);
    assert!(pool.acquire(&ctx("y"), 10_000 * S).is_err());
    assert!(pool.unblock(&rid("a"), None, 10_000 * S).unwrap());
    assert!(!pool.unblock(&rid("a"), None, 10_000 * S).unwrap());
    assert!(pool.acquire(&ctx("y"), 10_000 * S).is_ok());
    assert_eq!(
        pool.block(&rid("a"), None, Some(0), None, 0).unwrap_err(),
        Error::InvalidInput { field: "duration", rule: "must be > 0 (omit it for a permanent block)" }
    );
    assert_eq!(pool.block(&rid("zz"), None, None, None, 0).unwrap_err(), Error::UnknownResource);
}

// ---- 10. permits ----

#[test]
fn permits_have_their_own_fence_sequences() {
    let mut pool = first_pool();
    pool.register(rid("acct"), 3, 0).unwrap();
    let ls: Vec<_> = (0..3).map(|_| pool.acquire(&ctx("x"), 0).unwrap()).collect();
    assert_eq!(ls.iter().map(|l| (l.permit, l.token)).collect::<Vec<_>>(), vec![(0, 1), (1, 1), (2, 1)]);
    assert!(pool.acquire(&ctx("x"), 0).is_err());
    pool.release(ls[1].id, ls[1].token, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    assert_eq!((l.permit, l.token), (1, 2));
    // Lowering permits under a live lease is refused; raising is fine.
    assert_eq!(pool.register(rid("acct"), 1, 0).unwrap_err(), Error::Leased { live: 2 });
    assert!(pool.register(rid("acct"), 4, 0).unwrap());
    assert!(!pool.register(rid("acct"), 4, 0).unwrap());
}

#[test]
fn permits_lowered_to_one_keep_their_counters() {
    let mut pool = first_pool();
    pool.register(rid("acct"), 3, 0).unwrap();
    let ls: Vec<_> = (0..3).map(|_| pool.acquire(&ctx("x"), 0).unwrap()).collect();
    for l in &ls {
        pool.release(l.id, l.token, 0).unwrap();
    }
    assert!(pool.register(rid("acct"), 1, 0).unwrap());
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    assert_eq!((l.permit, l.token), (0, 2));
    assert!(pool.acquire(&ctx("x"), 0).is_err());
    assert!(pool.register(rid("acct"), 3, 0).unwrap());
    let more: Vec<_> = (0..2).map(|_| pool.acquire(&ctx("x"), 0).unwrap()).collect();
    assert_eq!(more.iter().map(|l| (l.permit, l.token)).collect::<Vec<_>>(), vec![(1, 2), (2, 2)]);
}

// ---- 11. fences across snapshot/restore ----

#[test]
fn fences_never_go_back_even_when_restoring_an_older_snapshot() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    pool.release(l.id, l.token, 0).unwrap();
    let old = pool.snapshot(0, false);
    for _ in 0..5 {
        let l = pool.acquire(&ctx("x"), 0).unwrap();
        pool.release(l.id, l.token, 0).unwrap();
    }
    pool.restore(&old, S).unwrap();
    assert_eq!(pool.acquire(&ctx("x"), S).unwrap().token, 7);
    let fresh = Pool::from_snapshot(&pool.snapshot(S, false), S).unwrap();
    let mut fresh = fresh;
    assert_eq!(fresh.acquire(&ctx("x"), S).unwrap().token, 8);
}

// ---- 15. unregister ----

#[test]
fn unregister_refuses_leased_unless_forced_and_fences_continue() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    assert_eq!(pool.unregister(&rid("a"), false, 0).unwrap_err(), Error::Leased { live: 1 });
    pool.drain_events();
    pool.unregister(&rid("a"), true, 0).unwrap();
    assert_eq!(names(&pool.drain_events()), vec!["revoked", "unregistered"]);
    assert_eq!(pool.renew(l.id, l.token, 0).unwrap_err(), Error::UnknownLease);
    assert!(pool.cells(&rid("a"), 0).is_err());
    pool.register(rid("a"), 1, 0).unwrap();
    assert_eq!(pool.acquire(&ctx("x"), 0).unwrap().token, 2);
}

// ---- 16. budgets and rate limits ----

#[test]
fn budgets_refuse_and_change_nothing() {
    let policy = Policy { strategy: Strategy::First, max_resources: Some(2), max_cells: Some(1), ..Policy::default() };
    let mut pool = Pool::new(policy, 1).unwrap();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.register(rid("b"), 1, 0).unwrap();
    let before = pool.snapshot(0, true);
    assert_eq!(
        pool.register(rid("c"), 1, 0).unwrap_err(),
        Error::BudgetExhausted { budget: "max_resources", limit: 2 }
    );
    pool.report(&rid("a"), &ctx("x"), ok(), 0).unwrap();
    let before_cells = pool.snapshot(0, true);
    assert_ne!(before, before_cells);
    assert_eq!(
        pool.report(&rid("a"), &ctx("y"), ok(), 0).unwrap_err(),
        Error::BudgetExhausted { budget: "max_cells", limit: 1 }
    );
    assert_eq!(pool.snapshot(0, true), before_cells);
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[0].score, 5);
}

#[test]
fn token_bucket_limits_acquires() {
    let policy =
        Policy { strategy: Strategy::First, rate_limit: Some(RateLimit { rate: 2.0, burst: 2 }), ..Policy::default() };
    let mut pool = Pool::new(policy, 1).unwrap();
    pool.register(rid("a"), 4, 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    assert_eq!(pool.acquire(&ctx("x"), 0).unwrap_err(), Error::RateLimited { retry_after: S / 2 });
    assert_eq!(pool.acquire(&ctx("x"), S / 4).unwrap_err(), Error::RateLimited { retry_after: S / 4 });
    pool.acquire(&ctx("x"), S / 2).unwrap();
    // A clock that goes backwards mints nothing.
    assert!(matches!(pool.acquire(&ctx("x"), 0), Err(Error::RateLimited { .. })));
}

// ---- 16. resource keys ----

#[test]
fn a_resource_key_names_one_registration_only() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let la = pool.acquire(&ctx("x"), 0).unwrap();
    let ka = pool.lease_key(la.id).unwrap();
    assert_eq!(ka, ResourceKey { slot: 0, serial: 0 });
    assert_eq!(pool.resource_at(ka), Some(&rid("a")));
    pool.unregister(&rid("a"), true, 0).unwrap();
    assert_eq!((pool.lease_key(la.id), pool.resource_at(ka)), (None, None));
    // "b" takes the freed slot under a new serial: the old key names nothing.
    pool.register(rid("b"), 1, 0).unwrap();
    let lb = pool.acquire(&ctx("x"), 0).unwrap();
    let kb = pool.lease_key(lb.id).unwrap();
    assert_eq!(kb, ResourceKey { slot: 0, serial: 1 });
    assert_eq!((pool.resource_at(ka), pool.resource_at(kb)), (None, Some(&rid("b"))));
    pool.register(rid("a"), 1, 0).unwrap();
    assert_eq!(pool.resource_at(ResourceKey { slot: 1, serial: 2 }), Some(&rid("a")));
    // A restore lays resources out by id (a, b) and numbers them after
    // every serial handed out before.
    let bytes = pool.snapshot(0, true);
    pool.restore(&bytes, 0).unwrap();
    assert_eq!((pool.resource_at(kb), pool.resource_at(ResourceKey { slot: 1, serial: 2 })), (None, None));
    assert_eq!(pool.resource_at(ResourceKey { slot: 0, serial: 3 }), Some(&rid("a")));
    assert_eq!(pool.lease_key(lb.id), Some(ResourceKey { slot: 1, serial: 4 }));
    // A pool built from a snapshot numbers its registrations afresh.
    let fresh = Pool::from_snapshot(&bytes, 0).unwrap();
    assert_eq!(fresh.lease_key(lb.id), Some(ResourceKey { slot: 1, serial: 1 }));
}

#[test]
fn a_stale_holder_is_never_told_the_token_that_fences_it_out() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let stale = pool.acquire(&ctx("x"), 0).unwrap();
    let successor = pool.acquire(&ctx("x"), 30 * S).unwrap();
    assert_eq!((stale.token, successor.token), (1, 2));
    assert_eq!(pool.renew(stale.id, stale.token, 31 * S).unwrap_err(), Error::LeaseExpired);
    // Naming the successor's lease with its own token tells it nothing more.
    for e in [
        pool.renew(successor.id, stale.token, 31 * S).unwrap_err(),
        pool.release(successor.id, stale.token, 31 * S).unwrap_err(),
    ] {
        assert_eq!(e, Error::StaleLease);
        assert_eq!(e.to_string(), "stale fencing token");
    }
    assert!(pool.lease(successor.id, 31 * S).is_some(), "the successor still holds its lease");
}
