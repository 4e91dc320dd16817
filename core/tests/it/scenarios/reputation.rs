//! Validation, scores, cooling, recovery, probes and selection.

use crate::common::*;
use repute_core::{
    CellState, Context, Error, FailureKind, LeaseKind, Outcome, Policy, Pool, RateLimit, ResourceId, Strategy,
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

/// Six exits with a record of twenty answers through each on "shop".
fn six_exits_with_a_record() -> (Pool, Vec<ResourceId>, u64) {
    let mut pool = first_pool();
    let exits: Vec<ResourceId> = ["a", "b", "c", "d", "e", "f"].into_iter().map(rid).collect();
    let mut t = 0;
    for e in &exits {
        pool.register(e.clone(), 1, 0).unwrap();
    }
    for _ in 0..20 {
        for e in &exits {
            pool.report(e, &ctx("shop"), ok(), t).unwrap();
            t += S / 100;
        }
    }
    (pool, exits, t)
}

#[test]
fn a_site_failing_through_every_exit_cools_none_of_them() {
    let (mut pool, exits, mut t) = six_exits_with_a_record();
    pool.drain_events();
    // The site fails every other answer through b–f, and three in a row
    // through a: each would cool a alone.
    for _ in 0..3 {
        for e in &exits[1..] {
            pool.report(e, &ctx("shop"), fail(FailureKind::ConnectionReset), t).unwrap();
            pool.report(e, &ctx("shop"), ok(), t + S / 10).unwrap();
            t += S / 5;
        }
        pool.report(&exits[0], &ctx("shop"), fail(FailureKind::ConnectionReset), t).unwrap();
    }
    assert!(cooled(&pool.drain_events()).is_empty());
    // The first failure through a came before the others' made an outage
    // plain; the two after it were the site's: observed, not held against a.
    let a = &pool.cells(&exits[0], t).unwrap()[1];
    assert_eq!((a.state, a.consecutive_failures, a.observations), (CellState::Healthy, 1, 23));
    let overall = &pool.cells(&exits[0], t).unwrap()[0];
    assert_eq!((overall.consecutive_failures, overall.observations), (1, 23));
    // The same three through a while the others answer cool it.
    let (mut pool, exits, mut t) = six_exits_with_a_record();
    pool.drain_events();
    for _ in 0..3 {
        for e in &exits[1..] {
            pool.report(e, &ctx("shop"), ok(), t).unwrap();
            t += S / 5;
        }
        pool.report(&exits[0], &ctx("shop"), fail(FailureKind::ConnectionReset), t).unwrap();
    }
    assert_eq!(cooled(&pool.drain_events()).len(), 1);
}

#[test]
fn exits_that_die_together_cool_while_the_others_answer() {
    let (mut pool, exits, mut t) = six_exits_with_a_record();
    pool.drain_events();
    // d, e and f die; a, b and c go on answering.
    for _ in 0..3 {
        for (i, e) in exits.iter().enumerate() {
            let outcome = if i < 3 { ok() } else { fail(FailureKind::ConnectionReset) };
            pool.report(e, &ctx("shop"), outcome, t).unwrap();
            t += S / 5;
        }
    }
    assert_eq!(cooled(&pool.drain_events()).len(), 3);
    for e in &exits[3..] {
        assert_eq!(pool.cells(e, t).unwrap()[1].state, CellState::Cooling, "{e:?}");
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
