//! Quota groups: several resources sharing an rpm, tpm, rpd, tpd or
//! concurrency, as providers count a project's or an account's quota; and
//! day windows on a resource. As the pool enforces them itself and as it
//! takes an authority's refusal.

use crate::common::*;
use repute_core::{
    Error, FailureKind, GrantAnswer, GroupLimits, GroupName, Limits, Outcome, Policy, Pool, Refusal, Registration,
    ResourceId, Selector, Strategy as Pick, DAY, MAX_LIMITED_GROUPS, WINDOW,
};

fn key(v: &str) -> ResourceId {
    ResourceId::new("api-key", v).unwrap()
}

fn group(name: &str) -> GroupName {
    GroupName::new(name).unwrap()
}

fn member(permits: u32, groups: &[&str]) -> Registration {
    Registration { groups: groups.iter().map(|g| group(g)).collect(), ..Registration::new(permits) }
}

fn pool() -> Pool {
    Pool::new(Policy { strategy: Pick::First, ..Policy::default() }, 9).unwrap()
}

/// Three keys of one project.
fn project(limits: GroupLimits, permits: u32) -> Pool {
    let mut p = pool();
    p.set_group(group("project:acme"), limits, 0).unwrap();
    for v in ["a", "b", "c"] {
        p.register_with(key(v), member(permits, &["project:acme"]), 0).unwrap();
    }
    p
}

fn once(p: &mut Pool, now: u64) -> repute_core::Result<String> {
    let l = p.acquire_with(&ctx("api"), &Selector::default(), now)?;
    p.release(l.id, l.token, now)?;
    Ok(l.resource.value().to_string())
}

fn refusal<T: std::fmt::Debug>(r: repute_core::Result<T>) -> Refusal {
    match r {
        Err(Error::NoResourceAvailable(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn three_keys_of_one_project_share_its_rpm() {
    let mut p = project(GroupLimits { rpm: Some(6), ..GroupLimits::default() }, 1);
    // Six a minute across the project, whichever key: a burst takes them all.
    let mut granted = 0;
    for t in 0..60 {
        if once(&mut p, t * S).is_ok() {
            granted += 1;
        }
    }
    assert_eq!(granted, 6, "the project's rpm, not three times it");
    let r = refusal(once(&mut p, 59 * S));
    assert_eq!((r.registered, r.limited, r.retry_after), (3, 3, Some(S)), "every member counted as limited");
    assert_eq!(p.stats().available, 0, "a group over its limit takes its members out of selection");
    assert!(once(&mut p, WINDOW).is_ok());
    let view = &p.groups(WINDOW)[0];
    assert_eq!((view.members, view.window.grants, view.limits.rpm), (3, 6, Some(6)), "{view:?}");
    // A key outside the group serves on while the group is full again.
    p.register(key("solo"), 1, WINDOW).unwrap();
    assert_eq!(once(&mut p, WINDOW + S / 2).unwrap(), "solo");
}

#[test]
fn concurrency_caps_live_leases_across_members_and_frees_on_release() {
    let mut p = project(GroupLimits { concurrency: Some(2), ..GroupLimits::default() }, 2);
    let c = ctx("api");
    let any = Selector::default();
    let first = p.acquire_with(&c, &any, 0).unwrap();
    let second = p.acquire_with(&c, &any, 0).unwrap();
    let r = refusal(p.acquire_with(&c, &any, 0));
    assert_eq!((r.limited, r.retry_after), (3, Some(first.ttl)), "until the first member lease expires");
    assert_eq!(p.groups(0)[0].leased, 2);
    p.release(second.id, second.token, S).unwrap();
    let third = p.acquire_with(&c, &any, S).unwrap();
    assert!(refusal(p.acquire_with(&c, &any, S)).limited == 3);
    // An expiry frees the group as a release does.
    let fourth = p.acquire_with(&c, &any, first.expires_at).unwrap();
    assert_eq!(p.leases().len(), 2);
    assert!(p.leases().iter().any(|l| l.id == third.id) && p.leases().iter().any(|l| l.id == fourth.id));
}

#[test]
fn a_group_tpm_counts_reconciled_use_and_a_cost_over_it_never_gates() {
    let mut p = project(GroupLimits { tpm: Some(1000), ..GroupLimits::default() }, 1);
    let c = ctx("api");
    let big = |cost| Selector { cost: Some(cost), ..Selector::default() };
    let a = p.acquire_with(&c, &big(800), 0).unwrap();
    let r = refusal(p.acquire_with(&c, &big(300), S));
    assert_eq!(r.limited, 3, "a cost that does not fit refuses this acquire only");
    assert_eq!(p.stats().available, 2, "the other members stay selectable");
    p.reconcile(a.id, a.token, 200, S).unwrap();
    assert!(p.acquire_with(&c, &big(700), S).is_ok(), "200 used: 800 fit");
    assert!(p.acquire_with(&c, &big(1001), S).is_err(), "over the group's tpm: never");
    assert_eq!(p.groups(S)[0].window.tokens, 900);
}

#[test]
fn day_windows_hold_rpd_and_tpd_for_a_rolling_day() {
    let mut p = pool();
    let limits = Limits { rpd: Some(3), ..Limits::default() };
    p.register_with(key("a"), Registration { limits, ..Registration::new(1) }, 0).unwrap();
    p.set_group(group("free-tier"), GroupLimits { tpd: Some(10), ..GroupLimits::default() }, 0).unwrap();
    p.register_with(key("b"), member(1, &["free-tier"]), 0).unwrap();
    let hour = 3600 * S;
    for t in [0, hour, 2 * hour] {
        assert_eq!(
            p.acquire_with(&ctx("api"), &Selector { prefer: Some("a".into()), ..Selector::default() }, t)
                .map(|l| l.resource.value().to_string())
                .unwrap(),
            "a"
        );
    }
    let views = p.resources();
    assert_eq!((views[0].day.grants, views[0].window.grants), (3, 0), "rpd counts a day, no minute window");
    let b_only = Selector { exclude: vec!["a".into()], cost: Some(4), ..Selector::default() };
    for t in [3 * hour, 3 * hour + S] {
        let l = p.acquire_with(&ctx("api"), &b_only, t).unwrap();
        p.release(l.id, l.token, t).unwrap();
    }
    let r = refusal(p.acquire_with(&ctx("api"), &b_only, 3 * hour + 2 * S));
    // The two grants share a bucket (84.4 s of the day): they leave the
    // day together, with the newer one.
    assert_eq!(r.retry_after, Some(DAY - S), "the group's tpd frees when its grants leave the day");
    assert_eq!(p.groups(0)[0].day, repute_core::Window { grants: 2, tokens: 8 });
    // The day survives a snapshot, in both forms.
    for restored in [true, false] {
        let mut q = pool();
        if restored {
            q.restore(&p.snapshot(3 * hour + 2 * S, true), 0).unwrap();
        } else {
            q.restore_json(&p.snapshot_json(3 * hour + 2 * S, true), 0).unwrap();
        }
        assert_eq!(q.groups(0)[0].day.tokens, 8);
        assert!(q.acquire_with(&ctx("api"), &b_only, 10 * S).is_err(), "still over the tpd after a restore");
        assert_eq!(q.resources()[1].groups, vec![group("free-tier")]);
    }
}

#[test]
fn a_shared_quota_pauses_every_member_on_one_members_quota_exhausted() {
    let shared = GroupLimits { shared_quota: true, ..GroupLimits::default() };
    let mut p = project(shared, 1);
    p.register(key("other"), 1, 0).unwrap();
    let exhausted = Outcome::Failure { kind: FailureKind::QuotaExhausted, retry_after: Some(600 * S), latency_ms: 0.0 };
    p.report(&key("a"), &ctx("api"), exhausted, 0).unwrap();
    let r = refusal(p.acquire_with(
        &ctx("api"),
        &Selector { kind: Some("api-key".into()), exclude: vec!["other".into()], ..Selector::default() },
        S,
    ));
    assert_eq!((r.rate_limited, r.retry_after), (3, Some(599 * S)));
    assert_eq!(once(&mut p, S).unwrap(), "other", "outside the group");
    assert_eq!(once(&mut p, 600 * S).unwrap(), "a", "the pause ends for every member");
    // Without `shared_quota`, one key's quota is its own.
    p.set_group(group("project:acme"), GroupLimits::default(), 600 * S).unwrap();
    p.report(&key("a"), &ctx("api"), exhausted, 600 * S).unwrap();
    assert_eq!(p.stats().available, 3);
}

#[test]
fn an_authoritys_group_limited_answer_gates_every_member() {
    let mut p = project(GroupLimits { rpm: Some(100), ..GroupLimits::default() }, 1);
    let c = ctx("api");
    let any = Selector::default();
    let first = p.propose(&c, &any, 0, &[]).unwrap();
    let claim = first.claim.clone().expect("a group limit is claimed");
    assert_eq!((claim.groups.len(), claim.groups[0].name.as_str()), (1, "project:acme"));
    assert_eq!((claim.groups[0].limits.rpm, claim.groups[0].limits.min_interval), (Some(100), None));
    let settled = p.settle(&c, &any, first, GrantAnswer::GroupLimited(0, 5 * S), &[]);
    assert!(matches!(settled, Err(Error::NoResourceAvailable(_))), "every member is gated: {settled:?}");
    let r = refusal(p.acquire_with(&c, &any, S));
    assert_eq!((r.limited, r.retry_after), (3, Some(4 * S)));
    assert!(once(&mut p, 5 * S).is_ok());
}

#[test]
fn membership_follows_registration_and_bad_groups_name_their_field() {
    let mut p = project(GroupLimits { rpm: Some(1), ..GroupLimits::default() }, 1);
    assert!(once(&mut p, 0).is_ok());
    // Moving "c" out of the project frees it from the project's rpm.
    assert!(p.register_with(key("c"), member(1, &["project:other"]), S).unwrap());
    assert_eq!(once(&mut p, S).unwrap(), "c");
    assert_eq!(
        p.groups(S).iter().map(|g| (g.name.as_str(), g.members)).collect::<Vec<_>>(),
        [("project:acme", 2), ("project:other", 1)]
    );
    p.unregister(&key("c"), false, S).unwrap();
    assert_eq!(p.groups(S).len(), 1, "a group with neither members nor limits is dropped");
    let field = |r: repute_core::Result<bool>| match r {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let nine: Vec<String> = (0..9).map(|i| format!("g{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    assert_eq!(field(p.register_with(key("d"), member(1, &nine), S)), "groups");
    assert_eq!(field(p.register_with(key("d"), member(1, &["x", "x"]), S)), "groups");
    assert_eq!(field(p.set_group(group("g"), GroupLimits { rpd: Some(0), ..GroupLimits::default() }, S)), "group.rpd");
    assert!(GroupName::new("").is_err());
    assert_eq!(p.resources().len(), 2, "nothing half-applied");
}

#[test]
fn limited_groups_are_bounded() {
    let mut p = pool();
    let limits = GroupLimits { rpm: Some(1), ..GroupLimits::default() };
    for i in 0..MAX_LIMITED_GROUPS {
        p.set_group(group(&format!("g{i}")), limits, 0).unwrap();
    }
    assert!(matches!(
        p.set_group(group("one-more"), limits, 0),
        Err(Error::BudgetExhausted { budget: "max_groups", .. })
    ));
    // Removing one's limits makes room.
    assert!(p.set_group(group("g0"), GroupLimits::default(), 0).unwrap());
    assert!(p.set_group(group("one-more"), limits, 0).unwrap());
    assert_eq!(p.groups(0).len(), MAX_LIMITED_GROUPS);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Acquire(u64),
        Release(usize),
        Advance(u64),
        /// Moves a key in or out of the group.
        Regroup(usize, bool),
        Snapshot,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (1u64..40).prop_map(Step::Acquire),
            5 => (0usize..8).prop_map(Step::Release),
            4 => (1u64..20_000).prop_map(|ms| Step::Advance(ms * 1_000_000)),
            1 => (0usize..3, any::<bool>()).prop_map(|(k, g)| Step::Regroup(k, g)),
            1 => Just(Step::Snapshot),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Whatever the order of acquires, releases, expiries, membership
        /// changes and restores: the members never hold more live leases
        /// than the group's concurrency, and no 60 s holds more grants of
        /// members (or more of their tokens) than its rpm (tpm).
        #[test]
        fn a_group_never_admits_past_its_limits(
            rpm in 1u32..12,
            tpm in 40u64..200,
            concurrency in 1u32..4,
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            let limits = GroupLimits { rpm: Some(rpm), tpm: Some(tpm), concurrency: Some(concurrency), ..GroupLimits::default() };
            let mut p = project(limits, 2);
            let (mut now, mut live, mut grants) = (0u64, Vec::new(), Vec::<(u64, u64, bool)>::new());
            let mut members = [true; 3];
            for step in steps {
                match step {
                    Step::Acquire(cost) => {
                        let selector = Selector { cost: Some(cost), ..Selector::default() };
                        if let Ok(l) = p.acquire_with(&ctx("api"), &selector, now) {
                            let member = members[(l.resource.value().as_bytes()[0] - b'a') as usize];
                            grants.push((now, cost, member));
                            live.push(l);
                        }
                    }
                    Step::Release(i) if !live.is_empty() => {
                        let l = live.remove(i % live.len());
                        let _ = p.release(l.id, l.token, now);
                    }
                    Step::Release(_) => {}
                    Step::Advance(ns) => now += ns,
                    Step::Regroup(k, inside) => {
                        let groups: &[&str] = if inside { &["project:acme"] } else { &[] };
                        if p.register_with(key(["a", "b", "c"][k]), member(2, groups), now).is_ok() {
                            members[k] = inside;
                        }
                    }
                    Step::Snapshot => {
                        let mut q = pool();
                        q.restore(&p.snapshot(now, true), now).unwrap();
                        p = q;
                    }
                }
                let leased = p.leases().iter().filter(|l| l.expires_at > now).filter(|l| {
                    members[(l.resource.value().as_bytes()[0] - b'a') as usize]
                }).count() as u32;
                prop_assert!(leased <= concurrency, "{leased} live leases in the group at {now}");
            }
            let counted: Vec<&(u64, u64, bool)> = grants.iter().filter(|g| g.2).collect();
            for (start, _, _) in &counted {
                let window = counted.iter().filter(|g| g.0 >= *start && g.0 < start + WINDOW);
                let (n, tokens) = window.fold((0u64, 0u64), |(n, t), g| (n + 1, t + g.1));
                prop_assert!(n <= u64::from(rpm), "{n} grants in the minute from {start}");
                prop_assert!(tokens <= tpm, "{tokens} tokens in the minute from {start}");
            }
        }
    }
}
