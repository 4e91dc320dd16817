//! Acquire filters (kind, labels, exclude), the resources it tries first
//! (prefer, affinity) and the secret a resource carries.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use repute_core::{
    Error, FailureKind, LabelFilter, Labels, Policy, Pool, Registration, ResourceId, Secret, Selector, Strategy,
};

const STRATEGIES: [Strategy; 3] = [Strategy::Thompson, Strategy::Classic, Strategy::First];

fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels::new(pairs.iter().map(|(n, v)| (n.to_string(), v.to_string()))).unwrap()
}

fn with_labels(permits: u32, pairs: &[(&str, &str)]) -> Registration {
    Registration { labels: labels(pairs), ..Registration::new(permits) }
}

fn filter(name: &str, values: &[&str]) -> LabelFilter {
    LabelFilter { name: name.into(), values: values.iter().map(|v| v.to_string()).collect() }
}

fn pool(strategy: Strategy) -> Pool {
    Pool::new(Policy { strategy, ..Policy::default() }, 3).unwrap()
}

/// 30 proxies over three regions, two API keys.
fn mixed(strategy: Strategy) -> Pool {
    let mut p = pool(strategy);
    for i in 0..30 {
        let region = ["eu", "us", "ap"][i % 3];
        p.register_with(rid(&format!("p{i}")), with_labels(1, &[("region", region)]), 0).unwrap();
    }
    for k in ["k0", "k1"] {
        p.register_with(ResourceId::new("api-key", k).unwrap(), with_labels(1, &[("tier", "paid")]), 0).unwrap();
    }
    p
}

/// Values granted by `n` acquire/release pairs with `selector`.
fn granted(p: &mut Pool, selector: &Selector, n: usize) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for _ in 0..n {
        let l = p.acquire_with(&ctx("site"), selector, 0).unwrap();
        seen.insert(l.resource.value().to_string());
        p.release(l.id, l.token, 0).unwrap();
    }
    seen
}

#[test]
fn a_kind_filter_hands_out_only_that_kind() {
    for s in STRATEGIES {
        let mut p = mixed(s);
        let keys = Selector { kind: Some("api-key".into()), ..Selector::default() };
        let seen = granted(&mut p, &keys, 200);
        let expected: BTreeSet<String> = match s {
            Strategy::First => ["k0"].map(String::from).into(),
            _ => ["k0", "k1"].map(String::from).into(),
        };
        assert_eq!(seen, expected, "{s:?}");
        let a = p.acquire_with(&ctx("site"), &keys, 0).unwrap();
        let b = p.acquire_with(&ctx("site"), &keys, 0).unwrap();
        assert_ne!(a.resource, b.resource);
        match p.acquire_with(&ctx("site"), &keys, 0) {
            Err(Error::NoResourceAvailable(r)) => {
                assert_eq!((r.registered, r.leased), (2, 2), "the refusal counts only what the selector admits")
            }
            other => panic!("{s:?}: {other:?}"),
        }
        let none = Selector { kind: Some("cookie".into()), ..Selector::default() };
        assert!(
            matches!(p.acquire_with(&ctx("site"), &none, 0), Err(Error::NoResourceAvailable(r)) if r.registered == 0)
        );
    }
}

#[test]
fn label_filters_match_one_of_their_values_and_all_filters_at_once() {
    for s in STRATEGIES {
        let mut p = mixed(s);
        let eu = Selector { labels: vec![filter("region", &["eu"])], ..Selector::default() };
        let seen = granted(&mut p, &eu, 300);
        assert!(seen.iter().all(|v| v[1..].parse::<usize>().unwrap() % 3 == 0), "{s:?}: {seen:?}");
        if s != Strategy::First {
            assert_eq!(seen.len(), 10, "{s:?}: every eu proxy is chosen at times");
        }
        let eu_us = Selector { labels: vec![filter("region", &["eu", "us"])], ..Selector::default() };
        let seen = granted(&mut p, &eu_us, 300);
        assert!(seen.iter().all(|v| v[1..].parse::<usize>().unwrap() % 3 != 2), "{s:?}: {seen:?}");
        let both = Selector {
            kind: Some("proxy".into()),
            labels: vec![filter("region", &["eu"]), filter("tier", &["paid"])],
            ..Selector::default()
        };
        assert!(matches!(p.acquire_with(&ctx("site"), &both, 0), Err(Error::NoResourceAvailable(_))));
    }
}

#[test]
fn exclusion_leaves_out_values_even_when_they_carry_most_of_the_weight() {
    for s in STRATEGIES {
        let mut p = pool(s);
        for i in 0..200 {
            p.register(rid(&format!("p{i}")), 1, 0).unwrap();
        }
        // The draws land on excluded values nearly always; the members are weighed instead.
        let exclude: Vec<String> = (0..64).map(|i| format!("p{i}")).collect();
        let keep: BTreeSet<String> = (64..200).map(|i| format!("p{i}")).collect();
        let sel = Selector { exclude: exclude.clone(), ..Selector::default() };
        let seen = granted(&mut p, &sel, 100);
        assert!(seen.is_subset(&keep), "{s:?}");
        let mut p = pool(s);
        for i in 0..65 {
            p.register(rid(&format!("p{i}")), 1, 0).unwrap();
        }
        let sel = Selector { exclude, ..Selector::default() };
        assert_eq!(granted(&mut p, &sel, 20), ["p64".to_string()].into(), "{s:?}");
    }
}

#[test]
fn prefer_tries_one_resource_first_while_it_is_selectable() {
    for s in STRATEGIES {
        let mut p = mixed(s);
        let sel = Selector { prefer: Some("p7".into()), ..Selector::default() };
        assert_eq!(granted(&mut p, &sel, 20), ["p7".to_string()].into(), "{s:?}");
        let keys = Selector { kind: Some("api-key".into()), prefer: Some("k1".into()), ..Selector::default() };
        assert_eq!(granted(&mut p, &keys, 20), ["k1".to_string()].into(), "{s:?}");
        let held = p.acquire_with(&ctx("site"), &sel, 0).unwrap();
        let other = p.acquire_with(&ctx("site"), &sel, 0).unwrap();
        assert_eq!(held.resource.value(), "p7");
        assert_ne!(other.resource.value(), "p7", "a leased preference gives way");
        // A preference the filters refuse is passed over.
        let refused = Selector { kind: Some("api-key".into()), prefer: Some("p8".into()), ..Selector::default() };
        assert_eq!(p.acquire_with(&ctx("site"), &refused, 0).unwrap().resource.kind(), "api-key");
    }
}

#[test]
fn affinity_returns_the_same_resource_until_it_cannot_then_rebinds() {
    for s in [Strategy::Thompson, Strategy::Classic] {
        let mut p = mixed(s);
        let user = Selector { kind: Some("proxy".into()), affinity: Some("user-42".into()), ..Selector::default() };
        let first = p.acquire_with(&ctx("site"), &user, 0).unwrap();
        p.release(first.id, first.token, 0).unwrap();
        assert_eq!(granted(&mut p, &user, 50), [first.resource.value().to_string()].into(), "{s:?}");
        // Another key binds on its own.
        let other = Selector { affinity: Some("user-7".into()), ..user.clone() };
        let o = p.acquire_with(&ctx("site"), &other, 0).unwrap();
        p.release(o.id, o.token, 0).unwrap();
        // The bound resource blocked: a new one, bound from then on.
        p.block(&first.resource, None, Some(60 * S), None, 0).unwrap();
        let moved = p.acquire_with(&ctx("site"), &user, 0).unwrap();
        assert_ne!(moved.resource, first.resource);
        p.release(moved.id, moved.token, 0).unwrap();
        p.unblock(&first.resource, None, 0).unwrap();
        assert_eq!(granted(&mut p, &user, 30), [moved.resource.value().to_string()].into(), "{s:?}: re-bound");
        // Gone: picked anew.
        p.unregister(&moved.resource, false, 0).unwrap();
        let again = p.acquire_with(&ctx("site"), &user, 0).unwrap();
        assert_ne!(again.resource, moved.resource);
    }
}

#[test]
fn relabelling_moves_a_resource_between_filters() {
    let mut p = mixed(Strategy::Thompson);
    let ap = Selector { labels: vec![filter("region", &["mars"])], ..Selector::default() };
    assert!(p.acquire_with(&ctx("site"), &ap, 0).is_err());
    p.block(&rid("p4"), Some(&ctx("site")), Some(60 * S), None, 0).unwrap();
    assert!(p.register_with(rid("p4"), with_labels(1, &[("region", "mars")]), 0).unwrap());
    assert!(!p.register_with(rid("p4"), with_labels(1, &[("region", "mars")]), 0).unwrap(), "nothing changed");
    // Blocked in "site", free elsewhere: the group keeps the cell's state.
    assert!(p.acquire_with(&ctx("site"), &ap, 0).is_err());
    assert_eq!(p.acquire_with(&ctx("other"), &ap, 0).unwrap().resource, rid("p4"));
    let us = Selector { labels: vec![filter("region", &["us"])], ..Selector::default() };
    assert!(!granted(&mut p, &us, 100).contains("p4"));
    let views: BTreeMap<String, Labels> =
        p.resources().into_iter().map(|v| (v.resource.value().to_string(), v.labels)).collect();
    assert_eq!(views["p4"], labels(&[("region", "mars")]));
    assert_eq!(views["k0"].get("tier"), Some("paid"));
}

#[test]
fn bad_selectors_and_labels_name_their_field() {
    let mut p = mixed(Strategy::First);
    let field = |p: &mut Pool, s: Selector| match p.acquire_with(&ctx("site"), &s, 0) {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(&mut p, Selector { kind: Some(String::new()), ..Selector::default() }), "kind");
    assert_eq!(field(&mut p, Selector { labels: vec![filter("region", &[])], ..Selector::default() }), "labels");
    assert_eq!(field(&mut p, Selector { labels: vec![filter("a b", &["x"])], ..Selector::default() }), "labels");
    let many = (0..65).map(|i| i.to_string()).collect();
    assert_eq!(field(&mut p, Selector { exclude: many, ..Selector::default() }), "exclude");
    assert_eq!(field(&mut p, Selector { prefer: Some("x\n".into()), ..Selector::default() }), "prefer");
    assert_eq!(field(&mut p, Selector { affinity: Some("a".repeat(257)), ..Selector::default() }), "affinity");
    assert!(p.drain_events().iter().all(|e| e.kind.name() != "leased"));
}

#[test]
fn a_secret_is_kept_and_handed_back_but_never_shown() {
    let secret = "sk-live-do-not-print";
    let mut p = pool(Strategy::First);
    let reg = Registration { secret: Some(Secret::new(secret).unwrap()), ..with_labels(1, &[("tier", "paid")]) };
    p.register_with(ResourceId::new("api-key", "key-a").unwrap(), reg, 0).unwrap();
    let id = ResourceId::new("api-key", "key-a").unwrap();
    assert_eq!(p.secret_of(&id).unwrap().map(Secret::expose), Some(secret));
    assert_eq!(p.secret_of(&rid("nope")), Err(Error::UnknownResource));
    let l = p.acquire(&ctx("site"), 0).unwrap();
    assert_eq!(p.lease_secret(l.id).map(Secret::expose), Some(secret), "handed out with the grant");
    p.report(&id, &ctx("site"), fail(FailureKind::RateLimited), 0).unwrap();
    p.release(l.id, l.token, 0).unwrap();
    assert_eq!(p.lease_secret(l.id), None, "only while the lease lives");
    let shown = format!("{:?} {:?} {:?}", p.drain_events(), p.resources(), p.leases());
    let json = p.snapshot_json(0, true);
    assert!(!shown.contains(secret) && !json.contains(secret), "{shown}\n{json}");
    // The binary snapshot keeps it; a restore from JSON has none.
    let bytes = p.snapshot(0, false);
    let mut restored = pool(Strategy::First);
    restored.restore(&bytes, 0).unwrap();
    assert_eq!(restored.secret_of(&id).unwrap().map(Secret::expose), Some(secret));
    assert_eq!(restored.resources()[0].labels, labels(&[("tier", "paid")]));
    restored.restore_json(&json, 0).unwrap();
    assert_eq!(restored.secret_of(&id).unwrap(), None);
    assert_eq!(restored.resources()[0].labels, labels(&[("tier", "paid")]));
    // Re-registering without one removes it.
    assert!(p.register_with(id.clone(), with_labels(1, &[("tier", "paid")]), 0).unwrap());
    assert_eq!(p.secret_of(&id).unwrap(), None);
}

mod properties {
    use super::{ctx, filter, pool, with_labels, BTreeMap, BTreeSet, Error, ResourceId, Selector};
    use proptest::prelude::*;
    use repute_core::Strategy as Pick;

    const VALUES: [&str; 6] = ["v0", "v1", "v2", "v3", "v4", "v5"];
    const REGIONS: [&str; 3] = ["eu", "us", "ap"];

    #[derive(Debug, Clone)]
    enum Cmd {
        /// Register value, as an api-key or a proxy, in a region.
        Register(usize, bool, usize),
        Acquire(usize, SelectorCase),
        Release(usize),
        Block(usize),
        Unregister(usize),
    }

    #[derive(Debug, Clone)]
    struct SelectorCase {
        key: Option<bool>,
        regions: Vec<usize>,
        exclude: Vec<usize>,
        prefer: Option<usize>,
        affinity: Option<usize>,
    }

    impl SelectorCase {
        fn selector(&self) -> Selector {
            Selector {
                kind: self.key.map(|k| if k { "api-key" } else { "proxy" }.to_string()),
                labels: match self.regions.is_empty() {
                    true => Vec::new(),
                    false => vec![filter("region", &self.regions.iter().map(|&r| REGIONS[r]).collect::<Vec<_>>())],
                },
                exclude: self.exclude.iter().map(|&v| VALUES[v].to_string()).collect(),
                prefer: self.prefer.map(|v| VALUES[v].to_string()),
                affinity: self.affinity.map(|a| format!("user-{a}")),
                cost: None,
            }
        }
    }

    fn case() -> impl Strategy<Value = SelectorCase> {
        (
            proptest::option::of(any::<bool>()),
            proptest::collection::vec(0..3usize, 0..3),
            proptest::collection::vec(0..6usize, 0..3),
            proptest::option::of(0..6usize),
            proptest::option::of(0..2usize),
        )
            .prop_map(|(key, regions, exclude, prefer, affinity)| SelectorCase {
                key,
                regions,
                exclude,
                prefer,
                affinity,
            })
    }

    fn cmd() -> impl Strategy<Value = Cmd> {
        prop_oneof![
            2 => (0..6usize, any::<bool>(), 0..3usize).prop_map(|(v, k, r)| Cmd::Register(v, k, r)),
            4 => (0..2usize, case()).prop_map(|(c, s)| Cmd::Acquire(c, s)),
            2 => (0..8usize).prop_map(Cmd::Release),
            1 => (0..6usize).prop_map(Cmd::Block),
            1 => (0..6usize).prop_map(Cmd::Unregister),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// A filtered acquire grants only what its selector admits, and
        /// refuses only when nothing it admits is free and unblocked; a
        /// preferred or bound resource that is free is the one granted.
        #[test]
        fn a_selector_grants_only_what_it_admits_and_refuses_only_when_nothing_is_free(
            strategy in prop_oneof![Just(Pick::Thompson), Just(Pick::Classic), Just(Pick::First)],
            cmds in proptest::collection::vec(cmd(), 1..60),
        ) {
            let mut p = pool(strategy);
            let mut kinds: BTreeMap<usize, (bool, usize)> = BTreeMap::new();
            let mut held: Vec<repute_core::Lease> = Vec::new();
            let mut blocked: BTreeSet<usize> = BTreeSet::new();
            let mut bound: BTreeMap<usize, usize> = BTreeMap::new();
            let id = |v: usize, key: bool| ResourceId::new(if key { "api-key" } else { "proxy" }, VALUES[v]).unwrap();
            for c in cmds {
                match c {
                    Cmd::Register(v, key, r) => {
                        if kinds.get(&v).is_some_and(|&(k, _)| k != key) {
                            continue;
                        }
                        let reg = with_labels(1, &[("region", REGIONS[r])]);
                        if held.iter().all(|l| l.resource != id(v, key)) {
                            p.register_with(id(v, key), reg, 0).unwrap();
                            kinds.insert(v, (key, r));
                        }
                    }
                    Cmd::Acquire(c, case) => {
                        let sel = case.selector();
                        let admitted = |v: usize| {
                            let (key, r) = kinds[&v];
                            case.key.is_none_or(|k| k == key)
                                && (case.regions.is_empty() || case.regions.contains(&r))
                                && !case.exclude.contains(&v)
                        };
                        let free: BTreeSet<usize> = kinds
                            .keys()
                            .copied()
                            .filter(|&v| admitted(v) && !blocked.contains(&v))
                            .filter(|&v| held.iter().all(|l| l.resource.value() != VALUES[v]))
                            .collect();
                        let context = ctx(["c0", "c1"][c]);
                        match p.acquire_with(&context, &sel, 0) {
                            Ok(l) => {
                                let v = VALUES.iter().position(|x| *x == l.resource.value()).unwrap();
                                prop_assert!(free.contains(&v), "granted {v}, free {free:?}");
                                let first = case.affinity.and_then(|a| bound.get(&a).copied()).filter(|b| free.contains(b));
                                let first = first.or(case.prefer.filter(|p| free.contains(p)));
                                if let Some(f) = first {
                                    prop_assert_eq!(v, f, "the bound or preferred resource comes first");
                                }
                                if let Some(a) = case.affinity {
                                    bound.insert(a, v);
                                }
                                held.push(l);
                            }
                            Err(Error::NoResourceAvailable(r)) => {
                                prop_assert!(free.is_empty(), "refused with {free:?} free");
                                let admitted_count = kinds.keys().filter(|&&v| admitted(v)).count() as u32;
                                prop_assert_eq!(r.registered, admitted_count);
                            }
                            Err(e) => prop_assert!(false, "{e:?}"),
                        }
                    }
                    Cmd::Release(i) if !held.is_empty() => {
                        let l = held.swap_remove(i % held.len());
                        p.release(l.id, l.token, 0).unwrap();
                    }
                    Cmd::Release(_) => {}
                    Cmd::Block(v) => {
                        if let Some(&(key, _)) = kinds.get(&v) {
                            p.block(&id(v, key), None, None, None, 0).unwrap();
                            blocked.insert(v);
                        }
                    }
                    Cmd::Unregister(v) => {
                        if let Some((key, _)) = kinds.remove(&v) {
                            p.unregister(&id(v, key), true, 0).unwrap();
                            held.retain(|l| l.resource != id(v, key));
                            blocked.remove(&v);
                            bound.retain(|_, b| *b != v);
                        }
                    }
                }
            }
        }
    }
}
