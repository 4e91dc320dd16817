//! Per-resource usage limits: rpm, tpm with costs and reconciled use,
//! min_interval, max_uses and max_age, and the same per (resource,
//! context), as the pool enforces them itself and as it takes an
//! authority's refusal.

use crate::common::*;
use proptest::prelude::*;
use repute_core::{
    ContextLimits, Error, EventKind, GrantAnswer, Limits, Policy, Pool, Refusal, Registration, ResourceId,
    RetireReason, Selector, Settled, Strategy as Pick, WINDOW,
};

fn key(v: &str) -> ResourceId {
    ResourceId::new("api-key", v).unwrap()
}

fn limited(limits: Limits) -> Registration {
    Registration { limits, ..Registration::new(1) }
}

fn pool() -> Pool {
    Pool::new(Policy { strategy: Pick::First, ..Policy::default() }, 9).unwrap()
}

/// Acquires and releases at once; the granted value.
fn once(p: &mut Pool, selector: &Selector, now: u64) -> repute_core::Result<String> {
    let l = p.acquire_with(&ctx("api"), selector, now)?;
    p.release(l.id, l.token, now)?;
    Ok(l.resource.value().to_string())
}

fn refusal(r: repute_core::Result<String>) -> Refusal {
    match r {
        Err(Error::NoResourceAvailable(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn rpm_admits_its_limit_per_minute_and_says_when_the_next_grant_fits() {
    let mut p = pool();
    p.register_with(key("a"), limited(Limits { rpm: Some(3), ..Limits::default() }), 0).unwrap();
    let any = Selector::default();
    // Three a minute are spread over the minute: one every 20 s.
    assert_eq!(once(&mut p, &any, 0).unwrap(), "a");
    assert_eq!(refusal(once(&mut p, &any, S)).retry_after, Some(19 * S));
    for t in [20 * S, 40 * S] {
        assert_eq!(once(&mut p, &any, t).unwrap(), "a");
    }
    let r = refusal(once(&mut p, &any, 41 * S));
    assert_eq!((r.registered, r.limited, r.retry_after), (1, 1, Some(WINDOW - 41 * S)));
    assert_eq!(p.stats().available, 0, "a resource over its limit is out of selection");
    assert!(once(&mut p, &any, WINDOW - 1).is_err());
    assert_eq!(once(&mut p, &any, WINDOW).unwrap(), "a");
    // Another key takes the traffic while one is over its limit: the
    // grant of 20 s is in the window until 80 s, and the next is spaced
    // 20 s from the last.
    p.register(key("b"), 1, WINDOW).unwrap();
    assert_eq!(once(&mut p, &any, WINDOW + 1).unwrap(), "b");
    assert_eq!(once(&mut p, &any, WINDOW + 20 * S).unwrap(), "a");
    assert_eq!(once(&mut p, &any, WINDOW + 20 * S + 1).unwrap(), "b");
    assert_eq!(p.resources()[0].uses, 5);
}

#[test]
fn tpm_reserves_the_cost_and_counts_the_reconciled_use() {
    let mut p = pool();
    p.register_with(key("a"), limited(Limits { tpm: Some(100), ..Limits::default() }), 0).unwrap();
    let big = Selector { cost: Some(60), ..Selector::default() };
    let first = p.acquire_with(&ctx("api"), &big, 0).unwrap();
    p.release(first.id, first.token, 0).unwrap();
    let r = refusal(once(&mut p, &big, S));
    assert_eq!((r.limited, r.retry_after), (1, Some(WINDOW - S)));
    // The tokens it really used are counted instead: 20, so 60 more fit.
    let second = p.acquire_with(&ctx("api"), &Selector { cost: Some(20), ..Selector::default() }, 2 * S).unwrap();
    p.reconcile(second.id, second.token, 5, 2 * S).unwrap();
    assert_eq!(p.reconcile(first.id, first.token, 20, 2 * S), Err(Error::UnknownLease), "released");
    p.release(second.id, second.token, 2 * S).unwrap();
    // 60 + 5 used: 35 left; a cost of 40 waits for the first to leave the window.
    assert!(once(&mut p, &Selector { cost: Some(40), ..Selector::default() }, 3 * S).is_err());
    assert_eq!(once(&mut p, &Selector { cost: Some(35), ..Selector::default() }, WINDOW + 1).unwrap(), "a");
    // A cost above a resource's tpm is never served by it.
    let huge = Selector { cost: Some(101), ..Selector::default() };
    assert_eq!(refusal(once(&mut p, &huge, 10 * WINDOW)).registered, 0);
    assert_eq!(
        p.acquire_with(&ctx("api"), &Selector { cost: Some(0), ..Selector::default() }, 0).unwrap_err(),
        Error::InvalidInput { field: "cost", rule: "must be > 0" }
    );
}

#[test]
fn reconciling_a_grant_lets_its_window_serve_more() {
    let mut p = pool();
    p.register_with(
        key("a"),
        Registration { permits: 4, ..limited(Limits { tpm: Some(100), ..Limits::default() }) },
        0,
    )
    .unwrap();
    let cost = Selector { cost: Some(50), ..Selector::default() };
    let a = p.acquire_with(&ctx("api"), &cost, 0).unwrap();
    let b = p.acquire_with(&ctx("api"), &cost, 0).unwrap();
    assert!(p.acquire_with(&ctx("api"), &Selector { cost: Some(1), ..Selector::default() }, 0).is_err());
    p.reconcile(a.id, a.token, 10, S).unwrap();
    let c = p.acquire_with(&ctx("api"), &Selector { cost: Some(40), ..Selector::default() }, S).unwrap();
    assert_ne!(c.id, b.id);
}

#[test]
fn min_interval_spaces_grants() {
    let mut p = pool();
    p.register_with(key("a"), limited(Limits { min_interval: Some(2 * S), ..Limits::default() }), 0).unwrap();
    let any = Selector::default();
    assert!(once(&mut p, &any, 0).is_ok());
    assert_eq!(refusal(once(&mut p, &any, S)).retry_after, Some(S));
    assert!(once(&mut p, &any, 2 * S).is_ok());
}

#[test]
fn max_uses_and_max_age_retire_a_resource_with_an_event() {
    let mut p = pool();
    p.register_with(key("a"), limited(Limits { max_uses: Some(2), ..Limits::default() }), 0).unwrap();
    p.register_with(key("b"), limited(Limits { max_age: Some(30 * S), ..Limits::default() }), 0).unwrap();
    p.drain_events();
    let keys = Selector { prefer: Some("a".into()), ..Selector::default() };
    assert_eq!(once(&mut p, &keys, 0).unwrap(), "a");
    assert_eq!(once(&mut p, &keys, 0).unwrap(), "a");
    let events = p.drain_events();
    assert_eq!(names(&events), ["leased", "released", "leased", "retired", "released"]);
    assert!(
        matches!(&events[3].kind, EventKind::Retired { resource, reason: RetireReason::MaxUses } if *resource == key("a"))
    );
    assert_eq!(once(&mut p, &keys, S).unwrap(), "b", "a is retired");
    p.drain_events();
    p.advance(30 * S);
    let events = p.drain_events();
    assert!(
        matches!(&events[..], [e] if matches!(&e.kind, EventKind::Retired { reason: RetireReason::MaxAge, .. }) && e.at == 30 * S)
    );
    let r = refusal(once(&mut p, &Selector::default(), 31 * S));
    assert_eq!((r.registered, r.limited, r.retry_after), (2, 2, None));
    let views = p.resources();
    assert_eq!(
        views.iter().map(|v| v.retired).collect::<Vec<_>>(),
        [Some(RetireReason::MaxUses), Some(RetireReason::MaxAge)]
    );
    // New limits judge it afresh.
    p.register_with(key("a"), limited(Limits { max_uses: Some(3), ..Limits::default() }), 31 * S).unwrap();
    assert_eq!(once(&mut p, &Selector::default(), 31 * S).unwrap(), "a");
}

#[test]
fn an_authoritys_limited_answer_keeps_the_resource_out_until_it_said() {
    let mut p = pool();
    for v in ["a", "b"] {
        p.register_with(key(v), limited(Limits { rpm: Some(10), ..Limits::default() }), 0).unwrap();
    }
    let c = ctx("api");
    let any = Selector::default();
    let first = p.propose(&c, &any, 0, &[]).unwrap();
    assert_eq!(first.claim.as_ref().map(|c| (c.limits.rpm, c.cost)), Some((Some(10), 1)));
    let Settled::Next(second) = p.settle(&c, &any, first.clone(), GrantAnswer::Limited(Some(5 * S)), &[]).unwrap()
    else {
        panic!("the other key is free");
    };
    assert_ne!(second.resource, first.resource);
    let Settled::Granted(l) = p.settle(&c, &any, second, GrantAnswer::Granted(1), &[]).unwrap() else { panic!() };
    p.release(l.id, l.token, 0).unwrap();
    // The refused one stays out until the authority's wait ends.
    let r = refusal(once(
        &mut p,
        &Selector { prefer: Some("a".into()), kind: Some("api-key".into()), exclude: vec!["b".into()], ..any.clone() },
        S,
    ));
    assert_eq!(r.retry_after, Some(4 * S));
    assert!(once(&mut p, &Selector { exclude: vec!["b".into()], ..any.clone() }, 5 * S).is_ok());
    // Never again: retired.
    let p2 = p.propose(&c, &Selector { exclude: vec!["b".into()], ..any.clone() }, 11 * S, &[]).unwrap();
    assert!(p.settle(&c, &any, p2, GrantAnswer::Limited(None), &[]).is_ok());
    assert_eq!(p.resources()[0].retired, Some(RetireReason::MaxUses));
}

/// A key limited to 2 grants a minute per context (a model).
fn per_model(rpm: u32) -> Limits {
    Limits { per_context: ContextLimits { rpm: Some(rpm), ..ContextLimits::default() }, ..Limits::default() }
}

/// Acquires for `context` and releases at once; the granted value.
fn once_in(p: &mut Pool, context: &str, selector: &Selector, now: u64) -> repute_core::Result<String> {
    let l = p.acquire_with(&ctx(context), selector, now)?;
    p.release(l.id, l.token, now)?;
    Ok(l.resource.value().to_string())
}

#[test]
fn per_context_rpm_limits_each_context_alone() {
    let mut p = pool();
    p.register_with(key("a"), limited(per_model(2)), 0).unwrap();
    let any = Selector::default();
    // Two a minute in a context: one every 30 s there.
    for t in [0, 30 * S] {
        assert_eq!(once_in(&mut p, "gpt", &any, t).unwrap(), "a");
    }
    let r = refusal(once_in(&mut p, "gpt", &any, 31 * S));
    assert_eq!((r.registered, r.limited, r.retry_after), (1, 1, Some(WINDOW - 31 * S)));
    // Another context of the same key has its own window and spacing.
    assert_eq!(once_in(&mut p, "claude", &any, 31 * S).unwrap(), "a");
    assert_eq!(refusal(once_in(&mut p, "claude", &any, 32 * S)).retry_after, Some(29 * S));
    assert_eq!(p.stats().available, 1, "only the cells are out of selection, not the key");
    // The first grant leaves the gpt window at 60 s.
    assert!(once_in(&mut p, "gpt", &any, WINDOW - 1).is_err());
    assert_eq!(once_in(&mut p, "gpt", &any, WINDOW).unwrap(), "a");
    // A second key takes a context's traffic while the first is over there.
    p.register(key("b"), 1, WINDOW).unwrap();
    assert_eq!(once_in(&mut p, "gpt", &any, WINDOW + 1).unwrap(), "b");
    assert_eq!(once_in(&mut p, "claude", &any, 61 * S).unwrap(), "a");
    assert_eq!(p.resources()[0].uses, 5);
}

#[test]
fn per_context_and_resource_limits_both_hold() {
    let mut p = pool();
    let limits = Limits {
        rpm: Some(3),
        per_context: ContextLimits { tpm: Some(10), min_interval: Some(5 * S), ..ContextLimits::default() },
        ..Limits::default()
    };
    p.register_with(key("a"), limited(limits), 0).unwrap();
    let cost = |c| Selector { cost: Some(c), ..Selector::default() };
    assert_eq!(once_in(&mut p, "x", &cost(6), 0).unwrap(), "a");
    // The resource's rpm spaces its grants 20 s apart in every context; x's
    // own min_interval (5 s) is the shorter wait.
    assert_eq!(refusal(once_in(&mut p, "x", &cost(1), S)).retry_after, Some(19 * S));
    assert_eq!(refusal(once_in(&mut p, "y", &cost(6), S)).retry_after, Some(19 * S));
    assert_eq!(once_in(&mut p, "y", &cost(6), 20 * S).unwrap(), "a");
    // x has 4 tokens left of its 10; a cost of 5 waits for the window.
    assert!(once_in(&mut p, "x", &cost(5), 40 * S).is_err());
    let l = p.acquire_with(&ctx("x"), &cost(4), 40 * S).unwrap();
    // Reconciled to 1: 3 more fit in x.
    p.reconcile(l.id, l.token, 1, 40 * S).unwrap();
    p.release(l.id, l.token, 40 * S).unwrap();
    // The resource-wide rpm (3) is spent in any context.
    let r = refusal(once_in(&mut p, "z", &cost(1), 41 * S));
    assert_eq!((r.limited, r.retry_after), (1, Some(WINDOW - 41 * S)));
    assert_eq!(once_in(&mut p, "x", &cost(3), WINDOW).unwrap(), "a");
    // A cost over a context's tpm is never served.
    assert_eq!(refusal(once_in(&mut p, "w", &cost(11), 10 * WINDOW)).registered, 0);
    // Validation names the per-context field.
    let bad = Limits { per_context: ContextLimits { rpm: Some(0), ..ContextLimits::default() }, ..Limits::default() };
    match p.register_with(key("c"), limited(bad), 0) {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "limits.per_context.rpm"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_authoritys_context_limited_answer_keeps_only_that_cell_out() {
    let mut p = pool();
    p.register_with(key("a"), limited(per_model(10)), 0).unwrap();
    let (gpt, any) = (ctx("gpt"), Selector::default());
    let first = p.propose(&gpt, &any, 0, &[]).unwrap();
    let claim = first.claim.clone().expect("counted per context");
    assert_eq!((claim.limits.per_context.rpm, claim.context), (Some(10), Some(gpt.clone())));
    assert!(p.settle(&gpt, &any, first, GrantAnswer::ContextLimited(5 * S), &[]).is_err(), "no other key");
    assert_eq!(refusal(once_in(&mut p, "gpt", &any, S)).retry_after, Some(4 * S));
    assert_eq!(once_in(&mut p, "claude", &any, S).unwrap(), "a");
    assert_eq!(once_in(&mut p, "gpt", &any, 5 * S).unwrap(), "a");
}

#[test]
fn per_context_usage_survives_a_snapshot() {
    let mut p = pool();
    p.register_with(key("a"), limited(per_model(1)), 0).unwrap();
    assert!(once_in(&mut p, "gpt", &Selector::default(), 0).is_ok());
    for json in [false, true] {
        let mut q = pool();
        if json {
            q.restore_json(&p.snapshot_json(20 * S, false), 100 * S).unwrap();
        } else {
            q.restore(&p.snapshot(20 * S, false), 100 * S).unwrap();
        }
        // 20 s after the snapshot the grant is 40 s old (of its 60).
        assert_eq!(refusal(once_in(&mut q, "gpt", &Selector::default(), 120 * S)).retry_after, Some(20 * S));
        assert!(once_in(&mut q, "claude", &Selector::default(), 120 * S).is_ok());
        assert!(once_in(&mut q, "gpt", &Selector::default(), 140 * S).is_ok());
    }
}

#[test]
fn usage_survives_a_snapshot() {
    let mut p = pool();
    p.register_with(key("a"), limited(Limits { rpm: Some(2), tpm: Some(10), ..Limits::default() }), 0).unwrap();
    assert!(once(&mut p, &Selector::default(), 0).is_ok());
    assert!(once(&mut p, &Selector::default(), 30 * S).is_ok());
    let mut q = pool();
    q.restore(&p.snapshot(30 * S, false), 100 * S).unwrap();
    // 20 s after the restore the first grant is 50 s old (of its 60).
    assert_eq!(refusal(once(&mut q, &Selector::default(), 120 * S)).retry_after, Some(10 * S));
    assert!(once(&mut q, &Selector::default(), 130 * S).is_ok());
    assert_eq!(q.resources()[0].uses, 3);
    let mut q = pool();
    q.restore_json(&p.snapshot_json(30 * S, true), 100 * S).unwrap();
    assert!(once(&mut q, &Selector::default(), 100 * S).is_err(), "the JSON form keeps the window too");
}

#[test]
fn bad_limits_name_their_field() {
    let mut p = pool();
    let field = |p: &mut Pool, l: Limits| match p.register_with(key("a"), limited(l), 0) {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(&mut p, Limits { rpm: Some(0), ..Limits::default() }), "limits.rpm");
    assert_eq!(field(&mut p, Limits { rpm: Some(100_001), ..Limits::default() }), "limits.rpm");
    assert_eq!(field(&mut p, Limits { tpm: Some(0), ..Limits::default() }), "limits.tpm");
    assert_eq!(field(&mut p, Limits { min_interval: Some(0), ..Limits::default() }), "limits.min_interval");
    assert_eq!(field(&mut p, Limits { max_uses: Some(0), ..Limits::default() }), "limits.max_uses");
    assert_eq!(field(&mut p, Limits { max_age: Some(0), ..Limits::default() }), "limits.max_age");
    assert!(p.resources().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Under any demand, no 60 s window holds more grants of a key than its
    /// rpm (or more tokens than its tpm), no two grants are closer than
    /// 60 s / rpm, and a key is never idle while demand waits, its window
    /// has room and its spacing has passed, but for the grants a window
    /// entry holds back: up to a 1024th of the window past their minute.
    #[test]
    fn no_window_holds_more_than_the_limits_and_none_wastes_room(
        rpm in 1u32..20,
        tpm in 5u64..200,
        gaps in proptest::collection::vec(0u64..4_000, 50..400),
        costs in proptest::collection::vec(1u64..5, 400),
    ) {
        let mut p = pool();
        p.register_with(key("a"), limited(Limits { rpm: Some(rpm), tpm: Some(tpm), ..Limits::default() }), 0).unwrap();
        let mut now = 0u64;
        let mut grants: Vec<(u64, u64)> = Vec::new();
        for (gap, cost) in gaps.iter().zip(&costs) {
            now += gap * 1_000_000;
            let sel = Selector { cost: Some(*cost), ..Selector::default() };
            let in_window = |g: &[(u64, u64)], span: u64| g.iter().filter(|(t, _)| t + span > now).fold((0u64, 0u64), |(n, s), (_, c)| (n + 1, s + c));
            let (n, used) = in_window(&grants, WINDOW);
            let (held, held_used) = in_window(&grants, WINDOW + WINDOW / 1024);
            let spaced = grants.last().is_none_or(|(t, _)| now >= t + WINDOW / u64::from(rpm));
            match once(&mut p, &sel, now) {
                Ok(_) => {
                    grants.push((now, *cost));
                    prop_assert!(n < u64::from(rpm) && used + cost <= tpm, "granted over a limit: {n} grants, {used} tokens");
                    prop_assert!(spaced, "granted closer than 60 s / {rpm}");
                }
                Err(Error::NoResourceAvailable(_)) => {
                    prop_assert!(held + 1 > u64::from(rpm) || held_used + cost > tpm || !spaced, "refused with room: {held} grants, {held_used}+{cost} tokens");
                }
                Err(e) => prop_assert!(false, "{e:?}"),
            }
        }
    }
}
