//! The default path: cells come back without user code, the provider's own
//! signals (rate limits, quotas, refused credentials) are honoured exactly,
//! cooldowns only ever extend, and a refusal says why.

use crate::common::*;
use repute_core::{
    CellState, CoolingRule, Error, EventKind, FailureKind, LeaseKind, Outcome, Policy, Pool, Recovery, Refusal,
    Strategy, SECOND as S,
};

fn pool_with(policy: Policy, resources: &[&str]) -> Pool {
    let mut pool = Pool::new(Policy { strategy: Strategy::First, ..policy }, 7).unwrap();
    for r in resources {
        pool.register(rid(r), 1, 0).unwrap();
    }
    pool
}

fn wait(kind: FailureKind, seconds: u64) -> Outcome {
    Outcome::failure_retry_after(kind, 20.0, seconds * S).unwrap()
}

fn cool(pool: &mut Pool, resource: &str, kind: FailureKind, now: u64) {
    for _ in 0..3 {
        pool.report(&rid(resource), &ctx("x"), fail(kind), now).unwrap();
    }
}

fn refusal(pool: &mut Pool, context: &str, now: u64) -> Refusal {
    match pool.acquire(&ctx(context), now) {
        Err(Error::NoResourceAvailable(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn traffic_recovery_is_the_default() {
    assert_eq!(Policy::default().recovery, Recovery::Traffic);
    assert!(!Policy::default().fail_open);
}

#[test]
fn a_ban_costs_minutes_where_a_trial_is_the_way_back() {
    for (recovery, base, cool_after) in
        [(Recovery::Traffic, 300, 1), (Recovery::Probe, 300, 1), (Recovery::Classic, 3600, 3)]
    {
        let policy = Policy { recovery, ..Policy::default() };
        assert_eq!(policy.rule(FailureKind::Blocked).base, base * S, "{recovery:?}");
        assert_eq!(policy.rule(FailureKind::Blocked).cool_after, cool_after, "{recovery:?}");
        assert_eq!(policy.rule(FailureKind::Timeout).base, 60 * S, "{recovery:?}");
        assert_eq!(policy.rule(FailureKind::Timeout).cool_after, 3, "{recovery:?}");
    }
}

#[test]
fn every_cause_comes_back_through_one_trial_lease_at_a_time() {
    let bases = [
        (FailureKind::ConnectionReset, 120),
        (FailureKind::TlsHandshake, 300),
        (FailureKind::Timeout, 60),
        (FailureKind::Blocked, 300),
        (FailureKind::Slow, 30),
    ];
    for (kind, base) in bases {
        let mut pool = pool_with(Policy::default(), &["a"]);
        cool(&mut pool, "a", kind, 0);
        // Three failures in a row: the third cools for base × 2², except a
        // ban, which cooled at the first and is not lengthened by reports of
        // the same incident while it runs.
        let end = if kind == FailureKind::Blocked { base * S } else { 4 * base * S };
        assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].cooling_until, Some(end), "{kind:?}");
        if kind == FailureKind::Blocked {
            // No early trial in the first thirtieth of a ban (a transient
            // cause would give one at once, below).
            assert_eq!(refusal(&mut pool, "x", end / 30 - 1).cooling, 1, "{kind:?}");
        }
        assert!(pool.due_for_probe(end).is_empty(), "{kind:?}: traffic recovery lists nothing for probes");
        assert!(pool.cells(&rid("a"), end).unwrap()[1].half_open);
        let trial = pool.acquire(&ctx("x"), end).unwrap();
        assert_eq!(trial.kind, LeaseKind::Trial, "{kind:?}");
        // One trial at a time: the refusal names the trial's end.
        pool.register(rid("b"), 1, end).unwrap();
        pool.block(&rid("b"), None, None, None, end).unwrap();
        assert_eq!(
            refusal(&mut pool, "x", end),
            Refusal {
                registered: 2,
                blocked: 1,
                cooling: 1,
                retry_after: Some(30 * S),
                expected_after: Some(30 * S),
                ..Refusal::default()
            }
        );
        pool.report(&rid("a"), &ctx("x"), ok(), end).unwrap();
        pool.release(trial.id, trial.token, end).unwrap();
        assert_eq!(pool.cells(&rid("a"), end).unwrap()[1].state, CellState::Recovering, "{kind:?}");
        assert_eq!(pool.acquire(&ctx("x"), end).unwrap().kind, LeaseKind::Client, "{kind:?}");
    }
}

#[test]
fn a_failed_trial_recools_with_the_next_exponent() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    cool(&mut pool, "a", FailureKind::Timeout, 0);
    let trial = pool.acquire(&ctx("x"), 240 * S).unwrap();
    assert_eq!(trial.kind, LeaseKind::Trial);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 241 * S).unwrap();
    let c = &pool.cells(&rid("a"), 241 * S).unwrap()[1];
    assert_eq!((c.consecutive_failures, c.cooling_until), (4, Some(241 * S + 480 * S)));
}

#[test]
fn a_failure_during_a_running_cooldown_extends_it_and_never_shortens_it() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    cool(&mut pool, "a", FailureKind::Timeout, 0);
    pool.drain_events();
    // A late report of the same incident restarts the same cooldown from now.
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 100 * S).unwrap();
    let c = &pool.cells(&rid("a"), 100 * S).unwrap()[1];
    assert_eq!((c.consecutive_failures, c.cooling_until), (3, Some(340 * S)));
    assert_eq!(cooled(&pool.drain_events()), vec![(340 * S, FailureKind::Timeout)]);
    // A slow (30 s base) ending earlier changes nothing.
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 101 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 101 * S).unwrap()[1].cooling_until, Some(340 * S));
    assert!(pool.drain_events().is_empty());
    // A block (300 s base outside the classic rules) ending later takes over the cause.
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 102 * S).unwrap();
    let c = &pool.cells(&rid("a"), 102 * S).unwrap()[1];
    assert_eq!((c.cooling_until, c.cause), (Some(102 * S + 4 * 300 * S), Some(FailureKind::Blocked)));
}

#[test]
fn classic_recovery_keeps_the_reputation_pool_rules() {
    let mut pool = pool_with(Policy { recovery: Recovery::Classic, ..Policy::default() }, &["a", "b"]);
    cool(&mut pool, "a", FailureKind::Timeout, 0);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 100 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 100 * S).unwrap()[1].cooling_until, Some(240 * S));
    assert_eq!(pool.due_for_probe(240 * S), vec![(rid("a"), ctx("x"))]);
    // Blocked still gets its half-open trial.
    for _ in 0..3 {
        pool.report(&rid("b"), &ctx("x"), fail(FailureKind::Blocked), 240 * S).unwrap();
    }
    assert_eq!(pool.acquire(&ctx("x"), 240 * S + 4 * 3600 * S).unwrap().kind, LeaseKind::Trial);
}

#[test]
fn probe_recovery_lists_every_cause_and_gives_clients_no_trial() {
    let mut pool = pool_with(Policy { recovery: Recovery::Probe, ..Policy::default() }, &["a", "b"]);
    cool(&mut pool, "a", FailureKind::Blocked, 0);
    cool(&mut pool, "b", FailureKind::Slow, 0);
    let end = 4 * 3600 * S;
    assert_eq!(pool.due_for_probe(end), vec![(rid("a"), ctx("x")), (rid("b"), ctx("x"))]);
    assert_eq!(
        refusal(&mut pool, "x", end),
        Refusal { registered: 2, cooling: 2, retry_after: None, expected_after: None, ..Refusal::default() }
    );
    let probe = pool.acquire_for_probe(&rid("a"), &ctx("x"), end).unwrap();
    assert_eq!(probe.kind, LeaseKind::Probe);
    pool.report(&rid("a"), &ctx("x"), ok(), end).unwrap();
    pool.release(probe.id, probe.token, end).unwrap();
    assert_eq!(pool.acquire(&ctx("x"), end).unwrap().resource, rid("a"));
}

#[test]
fn rate_limited_pauses_only_its_cell_for_exactly_the_wait_with_no_strike() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::RateLimited, 30), S).unwrap();
    let events = pool.drain_events();
    assert!(matches!(
        &events[..],
        [e] if e.kind == EventKind::Cooled {
            resource: rid("a"),
            context: Some(ctx("x")),
            until: 31 * S,
            cause: FailureKind::RateLimited,
        }
    ));
    let c = &pool.cells(&rid("a"), S).unwrap()[1];
    assert_eq!(
        (c.state, c.score, c.consecutive_failures, c.cooling_until, c.cause),
        (CellState::Cooling, -6, 1, Some(31 * S), Some(FailureKind::RateLimited))
    );
    assert_eq!(
        refusal(&mut pool, "x", 31 * S - 1),
        Refusal {
            registered: 1,
            rate_limited: 1,
            retry_after: Some(1),
            expected_after: Some(1),
            settled: true,
            ..Refusal::default()
        }
    );
    // Another context of the same resource is not affected.
    assert_eq!(pool.acquire(&ctx("y"), 2 * S).unwrap().kind, LeaseKind::Client);
    pool.release(1, 1, 2 * S).unwrap();
    // Once the wait is over it is simply selectable: no trial.
    let l = pool.acquire(&ctx("x"), 31 * S).unwrap();
    assert_eq!(l.kind, LeaseKind::Client);
    assert_eq!(pool.cells(&rid("a"), 31 * S).unwrap()[1].state, CellState::Healthy);
}

#[test]
fn rate_limited_without_a_wait_takes_the_rule_base() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::RateLimited), 0).unwrap();
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].cooling_until, Some(60 * S));
    let rules = vec![(FailureKind::RateLimited, CoolingRule { base: 5 * S, cool_after: 1, max_exponent: 0 })];
    let mut pool = pool_with(Policy { rules, ..Policy::default() }, &["a"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::RateLimited), 0).unwrap();
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].cooling_until, Some(5 * S));
}

#[test]
fn a_pause_only_ever_extends() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::RateLimited, 30), 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::RateLimited, 10), S).unwrap();
    assert_eq!(pool.cells(&rid("a"), S).unwrap()[1].cooling_until, Some(30 * S));
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::RateLimited, 60), 2 * S).unwrap();
    let c = &pool.cells(&rid("a"), 2 * S).unwrap()[1];
    assert_eq!(c.cooling_until, Some(62 * S));
    // A wait says nothing of how well the resource works.
    assert_eq!((c.score, c.success_rate, c.observations), (-3, None, 0));
    assert!(pool.acquire(&ctx("x"), 61 * S).is_err());
    assert!(pool.acquire(&ctx("x"), 62 * S).is_ok());
}

#[test]
fn quota_exhausted_pauses_the_resource_everywhere() {
    let mut pool = pool_with(Policy::default(), &["a", "b"]);
    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::QuotaExhausted, 600), 0).unwrap();
    assert!(pool.drain_events().iter().any(|e| e.kind
        == EventKind::Cooled {
            resource: rid("a"),
            context: None,
            until: 600 * S,
            cause: FailureKind::QuotaExhausted
        }));
    let global = &pool.cells(&rid("a"), 0).unwrap()[0];
    assert_eq!((global.cooling_until, global.cause), (Some(600 * S), Some(FailureKind::QuotaExhausted)));
    for c in ["x", "y", "z"] {
        assert_eq!(pool.acquire(&ctx(c), S).unwrap().resource, rid("b"), "{c}");
        pool.release(pool.leases()[0].id, pool.leases()[0].token, S).unwrap();
    }
    pool.block(&rid("b"), None, Some(100 * S), None, S).unwrap();
    assert_eq!(
        refusal(&mut pool, "y", 2 * S),
        Refusal {
            registered: 2,
            blocked: 1,
            rate_limited: 1,
            retry_after: Some(99 * S),
            expected_after: Some(99 * S),
            settled: true,
            ..Refusal::default()
        }
    );
    assert_eq!(pool.acquire(&ctx("y"), 600 * S).unwrap().resource, rid("a"));
}

#[test]
fn auth_failed_blocks_everywhere_until_unblocked() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    pool.drain_events();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::AuthFailed), 0).unwrap();
    let reason = Some("auth_failed".to_string());
    assert!(pool
        .drain_events()
        .iter()
        .any(|e| e.kind
            == EventKind::Blocklisted { resource: rid("a"), context: None, until: None, reason: reason.clone() }));
    assert_eq!(
        refusal(&mut pool, "y", 1_000_000 * S),
        Refusal { registered: 1, blocked: 1, settled: true, ..Refusal::default() }
    );
    let c = &pool.cells(&rid("a"), 0).unwrap()[1];
    assert_eq!((c.score, c.consecutive_failures, c.state), (-30, 0, CellState::Blocklisted));
    assert!(pool.unblock(&rid("a"), None, 2_000_000 * S).unwrap());
    assert!(pool.acquire(&ctx("y"), 2_000_000 * S).is_ok());
}

#[test]
fn retry_after_is_refused_where_it_means_nothing() {
    assert_eq!(
        Outcome::failure_retry_after(FailureKind::Timeout, 1.0, S).unwrap_err(),
        Error::InvalidInput { field: "retry_after", rule: "only rate_limited and quota_exhausted take one" }
    );
    assert_eq!(
        Outcome::failure_retry_after(FailureKind::RateLimited, 1.0, 31 * 24 * 3600 * S).unwrap_err(),
        Error::InvalidInput { field: "retry_after", rule: "must be at most 30 days" }
    );
    assert_eq!(FailureKind::parse("rate_limited"), Ok(FailureKind::RateLimited));
    assert_eq!(FailureKind::parse("auth_failed"), Ok(FailureKind::AuthFailed));
}

#[test]
fn fail_open_grants_the_cell_whose_wait_ends_soonest_and_never_crosses_a_block() {
    let policy = Policy { fail_open: true, ..Policy::default() };
    let mut pool = pool_with(policy, &["a", "b", "c"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    pool.report(&rid("b"), &ctx("x"), wait(FailureKind::RateLimited, 100), 0).unwrap();
    pool.block(&rid("c"), None, None, None, 0).unwrap();
    let l = pool.acquire(&ctx("x"), S).unwrap();
    assert_eq!((l.resource.value(), l.kind), ("b", LeaseKind::FailOpen));
    let l2 = pool.acquire(&ctx("x"), S).unwrap();
    assert_eq!((l2.resource.value(), l2.kind), ("a", LeaseKind::FailOpen));
    assert_eq!(
        refusal(&mut pool, "x", S),
        Refusal {
            registered: 3,
            blocked: 1,
            rate_limited: 1,
            cooling: 1,
            leased: 0,
            limited: 0,
            // a's ban (300 s) takes an early trial after a thirtieth of it;
            // b's pause (100 s) is expected to end first.
            retry_after: Some(9 * S),
            expected_after: Some(99 * S),
            // The fail-open leases of a and b are live in x.
            settled: false,
        }
    );
    // Without the policy the same pool refuses.
    let mut strict = pool_with(Policy::default(), &["a"]);
    strict.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    assert_eq!(refusal(&mut strict, "x", S).cooling, 1);
}

#[test]
fn a_refusal_is_settled_only_when_nothing_it_knows_of_frees_a_resource_sooner() {
    let mut pool = pool_with(Policy::default(), &["a", "b"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    pool.report(&rid("b"), &ctx("x"), wait(FailureKind::RateLimited, 100), 0).unwrap();
    // A site's refusal (a 300 s ban, tried early after 10 s) and a
    // provider's wait (100 s) end when they end: known to the nanosecond.
    assert_eq!(
        refusal(&mut pool, "x", S),
        Refusal {
            registered: 2,
            rate_limited: 1,
            cooling: 1,
            retry_after: Some(9 * S),
            expected_after: Some(99 * S),
            settled: true,
            ..Refusal::default()
        }
    );
    // A lease of b in another context cannot change where b stands in x.
    let elsewhere = pool.acquire(&ctx("y"), S).unwrap();
    assert!(refusal(&mut pool, "x", S).settled);
    // A lease in x can: its report may come at any moment.
    pool.register(rid("c"), 1, S).unwrap();
    let here = pool.acquire(&ctx("x"), S).unwrap();
    assert_eq!(here.resource.value(), "c");
    let r = refusal(&mut pool, "x", S);
    assert_eq!((r.leased, r.settled), (1, false));
    pool.release(here.id, here.token, S).unwrap();
    pool.release(elsewhere.id, elsewhere.token, S).unwrap();
    pool.unregister(&rid("c"), false, S).unwrap();
    assert!(refusal(&mut pool, "x", S).settled);

    // An early trial in flight may report at any moment.
    let mut pool = pool_with(Policy::default(), &["a"]);
    cool(&mut pool, "a", FailureKind::ConnectionReset, 0);
    assert_eq!(pool.acquire(&ctx("x"), S).unwrap().kind, LeaseKind::Trial);
    assert!(!refusal(&mut pool, "x", S).settled);

    // Waiting for a probe has no known end; nothing registered ends no
    // wait at all: settled, with no end, refused at once by a waiting acquire.
    let mut probed = pool_with(Policy { recovery: Recovery::Probe, ..Policy::default() }, &["a"]);
    cool(&mut probed, "a", FailureKind::Slow, 0);
    assert!(!refusal(&mut probed, "x", 4 * 3600 * S).settled);
    let mut empty = pool_with(Policy::default(), &[]);
    let none = refusal(&mut empty, "x", 0);
    assert_eq!((none.registered, none.settled, none.retry_after, none.expected_after), (0, true, None, None));
}

#[test]
fn a_transient_cooldown_gives_an_acquire_that_finds_nothing_one_early_trial() {
    for kind in [FailureKind::ConnectionReset, FailureKind::TlsHandshake, FailureKind::Timeout, FailureKind::Slow] {
        let mut pool = pool_with(Policy::default(), &["a"]);
        cool(&mut pool, "a", kind, 0);
        let trial = pool.acquire(&ctx("x"), S).unwrap();
        assert_eq!(trial.kind, LeaseKind::Trial, "{kind:?}");
        assert_eq!(pool.cells(&rid("a"), S).unwrap()[1].cooling_until, Some(S), "{kind:?}: its cooldown ended");
        // One trial at a time; another context's cell is not cooling.
        assert_eq!(refusal(&mut pool, "x", S).cooling, 1, "{kind:?}");
        pool.report(&rid("a"), &ctx("x"), ok(), 2 * S).unwrap();
        pool.release(trial.id, trial.token, 2 * S).unwrap();
        assert_eq!(pool.cells(&rid("a"), 2 * S).unwrap()[1].state, CellState::Recovering, "{kind:?}");
    }
}

#[test]
fn a_failed_early_trial_recools_and_the_next_waits_out_the_base_cooldown() {
    let mut pool = pool_with(Policy::default(), &["a"]);
    cool(&mut pool, "a", FailureKind::ConnectionReset, 0);
    let trial = pool.acquire(&ctx("x"), S).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::ConnectionReset), 2 * S).unwrap();
    pool.release(trial.id, trial.token, 2 * S).unwrap();
    let c = &pool.cells(&rid("a"), 2 * S).unwrap()[1];
    assert_eq!((c.consecutive_failures, c.cooling_until), (4, Some(2 * S + 960 * S)));
    // Connection resets cool from a base of 120 s: no early trial before
    // 121 s, and the refusal names that moment, long before the cooldown's
    // end (962 s); nothing else can free the cell sooner.
    let r = refusal(&mut pool, "x", 121 * S - 1);
    assert_eq!((r.cooling, r.retry_after, r.settled), (1, Some(1), true));
    let again = pool.acquire(&ctx("x"), 121 * S).unwrap();
    assert_eq!(again.kind, LeaseKind::Trial);
}

#[test]
fn a_ban_takes_an_early_trial_after_a_thirtieth_of_it_and_backs_off_as_it_doubles() {
    let mut pool = pool_with(Policy::default(), &["a", "b"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    pool.report(&rid("b"), &ctx("x"), wait(FailureKind::RateLimited, 1000), 0).unwrap();
    // The trial is a chance, not an expectation: the ban is expected to
    // hold to its end (300 s), sooner than b's pause (1000 s).
    let r = refusal(&mut pool, "x", 10 * S - 1);
    assert_eq!((r.cooling, r.rate_limited, r.retry_after, r.expected_after), (1, 1, Some(1), Some(290 * S + 1)));
    let trial = pool.acquire(&ctx("x"), 10 * S).unwrap();
    assert_eq!((trial.resource.value(), trial.kind), ("a", LeaseKind::Trial));
    // Still banned: the ban doubles from now, and so does the wait for the next trial.
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 11 * S).unwrap();
    pool.release(trial.id, trial.token, 11 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 11 * S).unwrap()[1].cooling_until, Some(611 * S));
    let r = refusal(&mut pool, "x", 30 * S);
    assert_eq!((r.cooling, r.retry_after, r.expected_after), (1, Some(S), Some(581 * S)));
    let trial = pool.acquire(&ctx("x"), 31 * S).unwrap();
    assert_eq!(trial.kind, LeaseKind::Trial);
    // The ban was lifted: a success ends the streak.
    pool.report(&rid("a"), &ctx("x"), ok(), 32 * S).unwrap();
    pool.release(trial.id, trial.token, 32 * S).unwrap();
    assert_eq!(pool.acquire(&ctx("x"), 32 * S).unwrap().kind, LeaseKind::Client);
}

#[test]
fn no_early_trial_across_a_pause_probe_recovery_or_a_classic_ban() {
    let mut pool = pool_with(Policy::default(), &["b"]);
    pool.report(&rid("b"), &ctx("x"), wait(FailureKind::RateLimited, 100), 0).unwrap();
    assert_eq!(refusal(&mut pool, "x", 99 * S).rate_limited, 1);
    let mut classic = pool_with(Policy { recovery: Recovery::Classic, ..Policy::default() }, &["a"]);
    cool(&mut classic, "a", FailureKind::Blocked, 0);
    let ban = classic.cells(&rid("a"), 0).unwrap()[1].cooling_until.unwrap();
    assert_eq!(refusal(&mut classic, "x", ban - 1).cooling, 1);
    let mut probed = pool_with(Policy { recovery: Recovery::Probe, ..Policy::default() }, &["a"]);
    cool(&mut probed, "a", FailureKind::Timeout, 0);
    assert_eq!(refusal(&mut probed, "x", S).cooling, 1);
}

#[test]
fn cooling_rules_are_configurable_per_kind_and_validated() {
    let rule = CoolingRule { base: 10 * S, cool_after: 1, max_exponent: 1 };
    let mut pool = pool_with(Policy { rules: vec![(FailureKind::Timeout, rule)], ..Policy::default() }, &["a"]);
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    assert_eq!(pool.cells(&rid("a"), 0).unwrap()[1].cooling_until, Some(10 * S));
    let trial = pool.acquire(&ctx("x"), 10 * S).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 10 * S).unwrap();
    pool.release(trial.id, trial.token, 10 * S).unwrap();
    assert_eq!(pool.cells(&rid("a"), 10 * S).unwrap()[1].cooling_until, Some(30 * S), "capped at 2^1");
    // A failed trial re-cools whatever its kind's own `cool_after` (slow: 3).
    let trial = pool.acquire(&ctx("x"), 30 * S).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 30 * S).unwrap();
    pool.release(trial.id, trial.token, 30 * S).unwrap();
    let c = &pool.cells(&rid("a"), 30 * S).unwrap()[1];
    assert_eq!((c.cause, c.cooling_until), (Some(FailureKind::Slow), Some(30 * S + 30 * S * 4)));
    // Slow keeps the defaults: 3 strikes.
    pool.report(&rid("a"), &ctx("y"), fail(FailureKind::Slow), 0).unwrap();
    assert_eq!(pool.cells(&rid("a"), 30 * S).unwrap()[2].state, CellState::Healthy);

    let bad = |rules: Vec<(FailureKind, CoolingRule)>| Pool::new(Policy { rules, ..Policy::default() }, 0).unwrap_err();
    assert_eq!(
        bad(vec![(FailureKind::AuthFailed, rule)]),
        Error::InvalidInput { field: "policy.rules", rule: "auth_failed blocks and has no cooling rule" }
    );
    assert_eq!(
        bad(vec![(FailureKind::Slow, rule), (FailureKind::Slow, rule)]),
        Error::InvalidInput { field: "policy.rules", rule: "must name each failure kind at most once" }
    );
    assert_eq!(
        bad(vec![(FailureKind::Slow, CoolingRule { base: 0, ..rule })]),
        Error::InvalidInput { field: "policy.rules.base", rule: "must be > 0 and at most 30 days" }
    );
    assert_eq!(
        bad(vec![(FailureKind::Slow, CoolingRule { cool_after: 0, ..rule })]),
        Error::InvalidInput { field: "policy.rules.cool_after", rule: "must be >= 1" }
    );
    assert_eq!(
        bad(vec![(FailureKind::Slow, CoolingRule { max_exponent: 22, ..rule })]),
        Error::InvalidInput { field: "policy.rules.max_exponent", rule: "must be in 0..=21" }
    );
}

#[test]
fn pauses_survive_a_snapshot_rebased_on_the_restoring_clock() {
    let mut pool = pool_with(Policy::default(), &["a", "b"]);
    pool.report(&rid("a"), &ctx("x"), wait(FailureKind::RateLimited, 30), 0).unwrap();
    pool.report(&rid("b"), &ctx("x"), wait(FailureKind::QuotaExhausted, 50), 0).unwrap();
    let bytes = pool.snapshot(10 * S, false);
    let mut restored = Pool::from_snapshot(&bytes, 1000 * S).unwrap();
    assert_eq!(restored.cells(&rid("a"), 1000 * S).unwrap()[1].cooling_until, Some(1020 * S));
    assert_eq!(restored.cells(&rid("b"), 1000 * S).unwrap()[0].cooling_until, Some(1040 * S));
    assert_eq!(
        refusal(&mut restored, "x", 1019 * S),
        Refusal {
            registered: 2,
            rate_limited: 2,
            retry_after: Some(S),
            expected_after: Some(S),
            settled: true,
            ..Refusal::default()
        }
    );
    assert_eq!(restored.acquire(&ctx("x"), 1020 * S).unwrap().resource, rid("a"));
    let mut json = Pool::new(Policy::default(), 0).unwrap();
    json.restore_json(&pool.snapshot_json(10 * S, false), 0).unwrap();
    assert_eq!(json.snapshot(0, false), Pool::from_snapshot(&bytes, 0).unwrap().snapshot(0, false));
}

/// A probe is a request like any other: a cell whose cooldown has ended
/// while the provider's Retry-After still runs is not due for one until
/// that wait is over (found by the property test of the event log).
#[test]
fn a_probe_waits_for_the_providers_retry_after() {
    let mut pool = pool_with(Policy { recovery: Recovery::Probe, ..Policy::default() }, &["a"]);
    let (a, c) = (rid("a"), ctx("shop.example"));
    for _ in 0..3 {
        pool.report(&a, &c, Outcome::failure(FailureKind::Timeout, 20.0).unwrap(), 0).unwrap();
    }
    assert_eq!(pool.cells(&a, 0).unwrap()[1].cooling_until, Some(240 * S));
    pool.report(&a, &c, wait(FailureKind::RateLimited, 400), 0).unwrap();
    assert!(pool.due_for_probe(300 * S).is_empty());
    assert!(matches!(pool.acquire_for_probe(&a, &c, 300 * S), Err(Error::InvalidInput { field: "resource", .. })));
    assert_eq!(pool.due_for_probe(400 * S), vec![(a.clone(), c.clone())]);
    assert_eq!(pool.acquire_for_probe(&a, &c, 400 * S).unwrap().kind, LeaseKind::Probe);
}
