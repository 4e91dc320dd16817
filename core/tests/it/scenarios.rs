//! Scenario tests: each pins one documented rule with exact values.

use crate::common::*;
use repute_core::{
    CellState, Context, Error, EventKind, FailureKind, LeaseKind, Outcome, Policy, Pool, RateLimit, Refusal,
    RejectReason, ResourceId, ResourceKey, SnapshotError, Strategy,
};

// ---- 1. domain validation ----

#[test]
fn ids_are_validated_with_field_and_rule() {
    let e = |r: Result<ResourceId, Error>| r.unwrap_err();
    assert_eq!(e(ResourceId::new("", "x")), Error::InvalidInput { field: "resource.kind", rule: "must not be empty" });
    assert_eq!(
        e(ResourceId::new("proxy", "")),
        Error::InvalidInput { field: "resource.value", rule: "must not be empty" }
    );
    assert_eq!(
        e(ResourceId::new("proxy", "a".repeat(257))),
        Error::InvalidInput { field: "resource.value", rule: "must be at most 256 bytes" }
    );
    assert!(ResourceId::new("proxy", "a".repeat(256)).is_ok());
    assert_eq!(
        e(ResourceId::new("pro\nxy", "x")),
        Error::InvalidInput { field: "resource.kind", rule: "must not contain control characters" }
    );
    // Kind is an open namespace.
    assert_eq!(ResourceId::new("gpu-worker", "w1").unwrap().kind(), "gpu-worker");
    assert_eq!(
        Context::new("*").unwrap_err(),
        Error::InvalidInput { field: "context", rule: "\"*\" is reserved for the global layer" }
    );
    assert_eq!(Context::new("").unwrap_err(), Error::InvalidInput { field: "context", rule: "must not be empty" });
    assert!(Context::new("\u{7f}").is_err());
}

#[test]
fn outcomes_and_kinds_are_validated() {
    assert_eq!(
        Outcome::success(f64::NAN).unwrap_err(),
        Error::InvalidInput { field: "latency", rule: "must be a finite number" }
    );
    assert_eq!(
        Outcome::failure(FailureKind::Slow, -1.0).unwrap_err(),
        Error::InvalidInput { field: "latency", rule: "must be >= 0" }
    );
    assert!(Outcome::success(f64::INFINITY).is_err());
    assert!(Outcome::success(0.0).is_ok());
    assert_eq!(FailureKind::parse("tls_handshake").unwrap(), FailureKind::TlsHandshake);
    assert_eq!(FailureKind::parse("dns").unwrap_err().code(), "invalid_input");
    for k in FailureKind::ALL {
        assert_eq!(FailureKind::parse(k.as_str()).unwrap(), k);
    }
}

#[test]
fn policy_is_validated() {
    let bad = |p: Policy| Pool::new(p, 1).unwrap_err();
    assert_eq!(
        bad(Policy { max_exponent: 22, ..Policy::default() }),
        Error::InvalidInput { field: "policy.max_exponent", rule: "must be in 0..=21" }
    );
    assert!(Pool::new(Policy { max_exponent: 21, ..Policy::default() }, 1).is_ok());
    for floor in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            bad(Policy { exploration_floor: floor, ..Policy::default() }),
            Error::InvalidInput { field: "policy.exploration_floor", rule: "must be finite and > 0" }
        );
    }
    assert_eq!(
        bad(Policy { rate_limit: Some(RateLimit { rate: 0.0, burst: 1 }), ..Policy::default() }),
        Error::InvalidInput { field: "policy.rate_limit.rate", rule: "must be finite and > 0" }
    );
    let mut pool = first_pool();
    assert_eq!(
        pool.register(rid("a"), 0, 0).unwrap_err(),
        Error::InvalidInput { field: "permits", rule: "must be in 1..=1024" }
    );
    assert_eq!(Strategy::parse("nope").unwrap_err().code(), "invalid_input");
}

#[test]
fn defaults_match_reputation_pool() {
    let p = Policy::default();
    assert_eq!((p.window, p.cool_after, p.recover_after, p.max_exponent), (10, 3, 2, 6));
    assert_eq!(p.exploration_floor, 1.0);
    assert_eq!(p.probe_ttl, 15 * S);
}

// ---- 2. score ----

#[test]
fn score_deltas_and_clamp() {
    for (kind, delta) in [
        (FailureKind::Blocked, -30),
        (FailureKind::TlsHandshake, -15),
        (FailureKind::ConnectionReset, -10),
        (FailureKind::Timeout, -5),
        (FailureKind::Slow, -2),
    ] {
        let mut pool = first_pool();
        pool.register(rid("a"), 1, 0).unwrap();
        pool.report(&rid("a"), &ctx("x"), fail(kind), 0).unwrap();
        let cells = pool.cells(&rid("a"), 0).unwrap();
        assert_eq!(cells[0].score, delta, "global cell");
        assert_eq!(cells[1].score, delta, "context cell");
        assert_eq!(cells[0].context, None);
        assert_eq!(cells[1].context, Some(ctx("x")));
    }
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), ok(), 0).unwrap();
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].score, 5);
    for _ in 0..25 {
        pool.report(&rid("a"), &ctx("x"), ok(), 0).unwrap();
    }
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].score, 100);
    for _ in 0..10 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    }
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].score, -100);
}

#[test]
fn window_keeps_the_last_outcomes() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    for _ in 0..9 {
        pool.report(&rid("a"), &ctx("x"), ok(), 0).unwrap();
    }
    // 11 outcomes, window 10: one slow and nine successes remain.
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].success_rate, Some(0.9));
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].observations, 11);
}

// ---- 3. cooling ----

#[test]
fn three_failures_cool_with_doubling_per_kind() {
    for (kind, base) in [
        (FailureKind::Blocked, 3600),
        (FailureKind::TlsHandshake, 300),
        (FailureKind::ConnectionReset, 120),
        (FailureKind::Timeout, 60),
        (FailureKind::Slow, 30),
    ] {
        let mut pool = classic_pool();
        pool.register(rid("a"), 1, 0).unwrap();
        for t in 0..3 {
            pool.report(&rid("a"), &ctx("x"), fail(kind), t * S).unwrap();
        }
        let events = pool.drain_events();
        // base × 2^(3 − 1), from the third failure at t = 2 s.
        assert_eq!(cooled(&events), vec![(2 * S + base * 4 * S, kind)]);
        let c = &pool.cells(&rid("a"), 2 * S).unwrap()[1];
        assert_eq!(c.state, CellState::Cooling);
        assert_eq!((c.consecutive_failures, c.cause), (3, Some(kind)));
    }
}

#[test]
fn failure_while_cooling_moves_score_only() {
    let mut pool = classic_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    }
    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 10 * S).unwrap();
    assert!(pool.drain_events().is_empty());
    let c = &pool.cells(&rid("a"), 10 * S).unwrap()[1];
    assert_eq!((c.score, c.consecutive_failures, c.cooling_until), (-20, 3, Some(240 * S)));
}

#[test]
fn cooldown_exponent_is_capped() {
    let mut pool = Pool::new(Policy { strategy: Strategy::First, max_exponent: 1, ..Policy::default() }, 1).unwrap();
    pool.register(rid("a"), 1, 0).unwrap();
    let mut t = 0;
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), t).unwrap();
    }
    assert_eq!(cooled(&pool.drain_events()), vec![(120 * S, FailureKind::Timeout)]);
    // Each failure after a cooldown ends re-cools at the capped 60 × 2^1.
    for _ in 0..3 {
        t = pool.cells(&rid("a"), t).unwrap()[1].cooling_until.unwrap();
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), t).unwrap();
        assert_eq!(cooled(&pool.drain_events()), vec![(t + 120 * S, FailureKind::Timeout)]);
    }
    assert_eq!(pool.cells(&rid("a"), t).unwrap()[1].consecutive_failures, 6);
}

// ---- 4. recovery ----

#[test]
fn recovery_needs_the_cooldown_to_end_then_consecutive_successes() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    }
    // Cooldown 30 × 4 = 120 s. A success inside it does not count.
    pool.report(&rid("a"), &ctx("x"), ok(), 60 * S).unwrap();
    let c = &pool.cells(&rid("a"), 60 * S).unwrap()[1];
    assert_eq!((c.state, c.consecutive_successes, c.consecutive_failures), (CellState::Cooling, 0, 3));
    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), ok(), 120 * S).unwrap();
    let c = &pool.cells(&rid("a"), 120 * S).unwrap()[1];
    assert_eq!((c.state, c.consecutive_successes, c.consecutive_failures), (CellState::Recovering, 1, 0));
    assert!(pool.drain_events().is_empty());
    pool.report(&rid("a"), &ctx("x"), ok(), 121 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 121 * S).unwrap()[1].state, CellState::Healthy);
    let events = pool.drain_events();
    assert_eq!(names(&events), vec!["recovered"]);
    assert_eq!(events[0].at, 121 * S);
}

// ---- 5. half-open and probes ----

#[test]
fn blocked_cause_gives_one_half_open_trial_and_a_failed_trial_recools_for_eight_hours() {
    let mut pool = classic_pool();
    pool.register(rid("a"), 2, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    }
    let four_hours = 3600 * 4 * S;
    assert_eq!(cooled(&pool.drain_events()), vec![(four_hours, FailureKind::Blocked)]);
    assert!(matches!(pool.acquire(&ctx("x"), four_hours - 1), Err(Error::NoResourceAvailable { .. })));
    // Another context is unaffected.
    let other = pool.acquire(&ctx("y"), four_hours - 1).unwrap();
    pool.release(other.id, other.token, four_hours - 1).unwrap();

    let trial = pool.acquire(&ctx("x"), four_hours).unwrap();
    assert_eq!(trial.kind, LeaseKind::Trial);
    // One trial at a time, although a permit is free.
    assert!(matches!(pool.acquire(&ctx("x"), four_hours), Err(Error::NoResourceAvailable { .. })));
    assert!(pool.due_for_probe(four_hours).is_empty());
    let c = &pool.cells(&rid("a"), four_hours).unwrap()[1];
    assert!(!c.half_open && !c.due_for_probe);

    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), four_hours + S).unwrap();
    assert_eq!(cooled(&pool.drain_events()), vec![(four_hours + S + 3600 * 8 * S, FailureKind::Blocked)]);
}

#[test]
fn trial_release_without_report_reopens_the_half_open_slot() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    }
    let t = 3600 * 4 * S;
    let trial = pool.acquire(&ctx("x"), t).unwrap();
    assert!(!pool.cells(&rid("a"), t).unwrap()[1].half_open);
    pool.release(trial.id, trial.token, t).unwrap();
    assert!(pool.cells(&rid("a"), t).unwrap()[1].half_open);
    let again = pool.acquire(&ctx("x"), t).unwrap();
    assert_eq!((again.kind, again.token), (LeaseKind::Trial, 2));
    pool.report(&rid("a"), &ctx("x"), ok(), t).unwrap();
    assert_eq!(pool.cells(&rid("a"), t).unwrap()[1].state, CellState::Recovering);
}

#[test]
fn other_causes_are_due_for_probe_and_probes_take_real_leases() {
    let mut pool = classic_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    }
    assert!(pool.due_for_probe(239 * S).is_empty());
    assert_eq!(pool.due_for_probe(240 * S), vec![(rid("a"), ctx("x"))]);
    // Not half-open: clients are not given it.
    assert!(matches!(pool.acquire(&ctx("x"), 240 * S), Err(Error::NoResourceAvailable { .. })));
    let c = &pool.cells(&rid("a"), 240 * S).unwrap()[1];
    assert!(c.due_for_probe && !c.half_open);

    let probe = pool.acquire_for_probe(&rid("a"), &ctx("x"), 240 * S).unwrap();
    assert_eq!((probe.kind, probe.expires_at - probe.granted_at), (LeaseKind::Probe, 15 * S));
    assert!(pool.due_for_probe(240 * S).is_empty());
    assert_eq!(
        pool.acquire_for_probe(&rid("a"), &ctx("x"), 240 * S).unwrap_err(),
        Error::InvalidInput { field: "resource", rule: "is not due for probe in this context" }
    );
    // The probe holds the only permit: no client gets it, in any context.
    assert!(matches!(pool.acquire(&ctx("y"), 240 * S), Err(Error::NoResourceAvailable { .. })));
    // An unreported probe that expires puts the cell back on the probe list.
    assert_eq!(pool.due_for_probe(255 * S), vec![(rid("a"), ctx("x"))]);

    let probe = pool.acquire_for_probe(&rid("a"), &ctx("x"), 255 * S).unwrap();
    pool.report(&rid("a"), &ctx("x"), ok(), 256 * S).unwrap();
    pool.release(probe.id, probe.token, 256 * S).unwrap();
    assert!(pool.due_for_probe(256 * S).is_empty());
    let lease = pool.acquire(&ctx("x"), 256 * S).unwrap();
    assert_eq!(lease.kind, LeaseKind::Client);
}

// ---- 6. classic selection ----

#[test]
fn classic_weights_are_score_minus_min_plus_floor() {
    let mut pool = Pool::new(Policy { strategy: Strategy::Classic, ..Policy::default() }, 42).unwrap();
    for (name, successes) in [("a", 2), ("b", 0), ("c", 0)] {
        pool.register(rid(name), 1, 0).unwrap();
        for _ in 0..successes {
            pool.report(&rid(name), &ctx("x"), ok(), 0).unwrap();
        }
    }
    pool.report(&rid("c"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    pool.report(&rid("c"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    pool.report(&rid("c"), &ctx("x"), ok(), 0).unwrap();
    // Scores 10, 0, 1 → weights (10 − 0 + 1), (0 + 1), (1 + 1) = 11 : 1 : 2.
    let scores: Vec<i32> = ["a", "b", "c"].iter().map(|n| pool.cells(&rid(n), 0).unwrap()[0].score).collect();
    assert_eq!(scores, vec![10, 0, 1]);
    let n = 28_000;
    let mut counts = [0u32; 3];
    for i in 0..n {
        let l = pool.acquire(&ctx("x"), i).unwrap();
        counts[["a", "b", "c"].iter().position(|v| *v == l.resource.value()).unwrap()] += 1;
        pool.release(l.id, l.token, i).unwrap();
    }
    for (count, expected) in counts.iter().zip([11.0 / 14.0, 1.0 / 14.0, 2.0 / 14.0]) {
        let share = *count as f64 / n as f64;
        assert!((share - expected).abs() < 0.01, "share {share} vs {expected}");
    }
}

#[test]
fn first_strategy_takes_the_earliest_registered_selectable() {
    let mut pool = first_pool();
    for v in ["c", "a", "b"] {
        pool.register(rid(v), 1, 0).unwrap();
    }
    let l1 = pool.acquire(&ctx("x"), 0).unwrap();
    let l2 = pool.acquire(&ctx("x"), 0).unwrap();
    assert_eq!((l1.resource.value(), l2.resource.value()), ("c", "a"));
}

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
        Err(Error::NoResourceAvailable(Refusal { registered: 1, blocked: 1, ..Refusal::default() }))
    );
    let rejected = pool.drain_events().into_iter().find_map(|e| match e.kind {
        EventKind::Rejected { context, reason } => Some((context, reason)),
        _ => None,
    });
    assert_eq!(rejected, Some((ctx("x"), RejectReason::NoCandidates)));
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

// ---- 12. layered score ----

#[test]
fn a_context_starts_from_the_global_score_and_takes_over() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..10 {
        pool.report(&rid("a"), &ctx("x"), ok(), 0).unwrap();
    }
    pool.report(&rid("a"), &ctx("y"), fail(FailureKind::Timeout), 0).unwrap();
    let cells = pool.cells(&rid("a"), 0).unwrap();
    // Global 50 − 5 = 45; y has 1 of 10 observations: 0.1 × (−5) + 0.9 × 45 = 40.
    assert_eq!(cells[0].score, 45);
    assert_eq!(cells[2].context, Some(ctx("y")));
    assert_eq!(cells[2].effective_score, 40.0);
    for _ in 0..9 {
        pool.report(&rid("a"), &ctx("y"), fail(FailureKind::Slow), 0).unwrap();
    }
    let cells = pool.cells(&rid("a"), 0).unwrap();
    assert_eq!((cells[2].score, cells[2].effective_score), (-23, -23.0));
}

// ---- 13. thompson ----

#[test]
fn thompson_prefers_what_works_in_the_context() {
    let mut pool = Pool::new(Policy { strategy: Strategy::Thompson, ..Policy::default() }, 3).unwrap();
    for v in ["good", "bad1", "bad2", "bad3"] {
        pool.register(rid(v), 1, 0).unwrap();
    }
    let mut good = 0;
    for i in 0..2000u64 {
        let l = pool.acquire(&ctx("x"), i).unwrap();
        let outcome = if l.resource.value() == "good" { ok() } else { fail(FailureKind::Slow) };
        good += (l.resource.value() == "good") as u32;
        pool.report(&l.resource, &ctx("x"), outcome, i).unwrap();
        pool.release(l.id, l.token, i).unwrap();
    }
    assert!(good > 1700, "good chosen {good} of 2000");
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

// ---- 17. snapshots ----

#[test]
fn corrupt_truncated_foreign_and_newer_snapshots_are_refused_and_change_nothing() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    let good = pool.snapshot(0, true);
    let mut other = first_pool();
    other.register(rid("z"), 1, 0).unwrap();
    let before = other.snapshot(0, true);

    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let mut newer = good.clone();
    newer[8] = 3;
    let mut older = good.clone();
    older[8] = 1;
    let cases: Vec<(Vec<u8>, SnapshotError)> = vec![
        (corrupt, SnapshotError::Checksum),
        (good[..good.len() - 3].to_vec(), SnapshotError::Truncated),
        (good[..12].to_vec(), SnapshotError::Truncated),
        (b"PK\x03\x04 definitely a zip".to_vec(), SnapshotError::Foreign),
        (Vec::new(), SnapshotError::Truncated),
        (newer, SnapshotError::UnsupportedVersion { found: 3, supported: 2 }),
        (older, SnapshotError::UnsupportedVersion { found: 1, supported: 2 }),
    ];
    for (bytes, expected) in cases {
        assert_eq!(other.restore(&bytes, 0).unwrap_err(), Error::Snapshot(expected));
        assert_eq!(other.snapshot(0, true), before);
    }
    assert_eq!(other.restore_json("{\"format\": 9}", 0).unwrap_err().code(), "invalid_snapshot");
    assert_eq!(other.restore_json("not json", 0).unwrap_err(), Error::Snapshot(SnapshotError::Malformed));
    assert_eq!(other.snapshot(0, true), before);
}

/// The same header over another body and flags, with a matching length and checksum.
fn reframe(snapshot: &[u8], body: &[u8], flags: u16) -> Vec<u8> {
    let mut out = snapshot[..10].to_vec();
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn trailing_bytes_unknown_flags_and_wrapping_counters_are_refused_and_change_nothing() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.register(rid("gone"), 1, 0).unwrap();
    pool.unregister(&rid("gone"), false, 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    let good = pool.snapshot(0, true);
    assert_eq!(reframe(&good, &good[20..], 1), good, "reframing alone changes nothing");
    let json: serde_json::Value = serde_json::from_str(&pool.snapshot_json(0, true)).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut j = json.clone();
        f(&mut j);
        j.to_string()
    };
    let over = repute_core::snapshot::MAX_COUNTER + 1;
    assert_eq!(over, 1 << 63);
    let mut trailing = good[20..].to_vec();
    trailing.push(0);
    let rule = "must be at most u64::MAX / 2 (a counter this high could wrap)";
    let invalid = |field, rule| Error::Snapshot(SnapshotError::Invalid { field, rule });

    let mut other = first_pool();
    other.register(rid("z"), 1, 0).unwrap();
    let before = other.snapshot(0, true);
    let binary = [
        (reframe(&good, &trailing, 1), invalid("body", "must end where its data ends (trailing bytes)")),
        (reframe(&good, &good[20..], 1 | 4), invalid("flags", "unknown flag bits are set")),
        (reframe(&good, &good[20..], 0x8001), invalid("flags", "unknown flag bits are set")),
    ];
    for (bytes, expected) in binary {
        assert_eq!(other.restore(&bytes, 0).unwrap_err(), expected);
        assert_eq!(Pool::from_snapshot(&bytes, 0).unwrap_err(), expected);
        assert_eq!(other.snapshot(0, true), before);
    }
    let json_cases = [
        (edit(&|j| j["next_lease_id"] = over.into()), invalid("next_lease_id", rule)),
        (edit(&|j| j["next_lease_id"] = u64::MAX.into()), invalid("next_lease_id", rule)),
        (edit(&|j| j["resources"][0]["fences"][0] = over.into()), invalid("resource.fences", rule)),
        (edit(&|j| j["retired_fences"][0][1][0] = u64::MAX.into()), invalid("retired_fences", rule)),
        (edit(&|j| j["resources"][0]["global"]["observations"] = over.into()), invalid("cell.observations", rule)),
    ];
    for (text, expected) in json_cases {
        assert_eq!(other.restore_json(&text, 0).unwrap_err(), expected, "{text}");
        assert_eq!(other.snapshot(0, true), before);
    }

    // At the bound itself the counters are taken, and the pool goes on from there.
    let top = repute_core::snapshot::MAX_COUNTER;
    let at_bound = edit(&|j| {
        j["next_lease_id"] = top.into();
        j["resources"][0]["fences"][0] = (top - 1).into();
        j["leases"] = serde_json::json!([]);
    });
    other.restore_json(&at_bound, 0).unwrap();
    let l = other.acquire(&ctx("x"), 0).unwrap();
    assert_eq!((l.id, l.token), (top, top));
}

#[test]
fn caps_hold_a_restored_policy_to_the_operator_budgets() {
    use repute_core::snapshot::{capped, CappedInput, Caps};
    let mut open = first_pool();
    for v in ["a", "b", "c"] {
        open.register(rid(v), 1, 0).unwrap();
    }
    let three = open.snapshot(0, false);
    let caps = Caps { max_resources: Some(5), max_cells: Some(8), rate_limit: Some(RateLimit { rate: 2.0, burst: 3 }) };
    let bytes = capped(CappedInput::Binary(&three), &caps).unwrap();
    let mut restored = Pool::from_snapshot(&bytes, 0).unwrap();
    let policy: serde_json::Value =
        serde_json::from_str::<serde_json::Value>(&restored.snapshot_json(0, false)).unwrap()["policy"].clone();
    assert_eq!((policy["max_resources"].as_u64(), policy["max_cells"].as_u64()), (Some(5), Some(8)));
    assert_eq!(policy["rate_limit"], serde_json::json!({"rate": 2.0, "burst": 3}));
    // A tighter budget in the snapshot stays; the JSON form is capped the same way.
    let tight = Policy { strategy: Strategy::First, max_resources: Some(4), ..Policy::default() };
    let mut small = Pool::new(tight, 7).unwrap();
    small.register(rid("a"), 1, 0).unwrap();
    let json = small.snapshot_json(0, false);
    let restored_json = Pool::from_snapshot(&capped(CappedInput::Json(&json), &caps).unwrap(), 0).unwrap();
    assert_eq!(restored_json.policy().max_resources, Some(4));
    // More resources than the cap allows: refused, not truncated.
    let two = Caps { max_resources: Some(2), ..Caps::default() };
    assert_eq!(
        capped(CappedInput::Binary(&three), &two).unwrap_err(),
        SnapshotError::Invalid { field: "resources", rule: "must not outnumber policy.max_resources" }
    );
    restored.register(rid("d"), 1, 0).unwrap();
    restored.register(rid("e"), 1, 0).unwrap();
    assert!(matches!(
        restored.register(rid("f"), 1, 0).unwrap_err(),
        Error::BudgetExhausted { budget: "max_resources", limit: 5 }
    ));
}

#[test]
fn restored_leases_get_their_full_ttl_from_the_restore_instant() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    let bytes = pool.snapshot(25 * S, true);
    let mut restored = Pool::from_snapshot(&bytes, 1000 * S).unwrap();
    let back = restored.lease(l.id, 1000 * S).unwrap();
    assert_eq!((back.token, back.expires_at), (l.token, 1030 * S));
    assert!(restored.acquire(&ctx("x"), 1029 * S).is_err());
    assert_eq!(restored.renew(l.id, l.token, 1029 * S).unwrap().expires_at, 1059 * S);
    // Without leases the permit is free, and the next token still goes up.
    let mut bare = Pool::from_snapshot(&pool.snapshot(25 * S, false), 0).unwrap();
    assert_eq!(bare.acquire(&ctx("x"), 0).unwrap().token, 2);
}

#[test]
fn cooldowns_are_rebased_on_the_restoring_clock() {
    let mut pool = classic_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    }
    let bytes = pool.snapshot(40 * S, false);
    let mut restored = Pool::from_snapshot(&bytes, 5000 * S).unwrap();
    assert_eq!(restored.cells(&rid("a"), 5000 * S).unwrap()[1].cooling_until, Some(5200 * S));
    assert_eq!(restored.due_for_probe(5200 * S), vec![(rid("a"), ctx("x"))]);
}

#[test]
fn json_view_round_trips_to_identical_bytes() {
    let mut pool = Pool::new(Policy::default(), 9).unwrap();
    for v in ["a", "b"] {
        pool.register(rid(v), 2, 0).unwrap();
    }
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    pool.block(&rid("b"), Some(&ctx("y")), Some(9 * S), Some("rate limited upstream".into()), 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    let bin = pool.snapshot(S, true);
    let json = pool.snapshot_json(S, true);
    assert_eq!(repute_core::snapshot::binary_to_json(&bin).unwrap(), json);
    assert_eq!(repute_core::snapshot::json_to_binary(&json).unwrap(), bin);
    let mut other = first_pool();
    other.restore_json(&json, S).unwrap();
    assert_eq!(other.snapshot(S, true), bin);
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
