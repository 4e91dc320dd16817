//! Which resources an acquire may choose and which it tries first: labels
//! and `where` filters, kind, exclusion, `prefer` and `affinity`, each
//! checked on the component and on the core linked into the host, and the
//! front ends' name for label filters through the holder.

use std::sync::Arc;

use repute_host::linked::LinkedPool;
use repute_host::{
    holder::Field, Error, Holder, LabelFilter, Labels, ManualClock, OpenOptions, Policy, Pool, PoolOps, Providers,
    Registration, Selector, Strategy, TenantConfig,
};

/// Runs `f` on a component pool and on a linked one, both choosing the
/// selectable resource registered earliest.
pub fn on_both(f: impl Fn(&mut dyn PoolOps)) {
    let policy = Policy { strategy: Strategy::First, ..Policy::default() };
    let config = TenantConfig { policy, ..TenantConfig::default() };
    f(&mut Pool::open(config.clone(), Providers::memory()).unwrap());
    f(&mut LinkedPool::open(config, Providers::memory()).unwrap());
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels::new(pairs.iter().map(|(n, v)| (n.to_string(), v.to_string()))).unwrap()
}

/// Three API keys and a proxy, one permit each, registered in this order.
fn keys_and_a_proxy(p: &mut dyn PoolOps) {
    let register = |p: &mut dyn PoolOps, kind: &str, value: &str, pairs: &[(&str, &str)]| {
        let registration = Registration { labels: labels(pairs), ..Registration::new(1) };
        assert_eq!(p.register_with(kind, value, &registration), Ok(true));
    };
    register(p, "key", "k1", &[("region", "eu"), ("tier", "paid")]);
    register(p, "key", "k2", &[("tier", "paid"), ("region", "us")]);
    register(p, "key", "k3", &[("region", "eu"), ("tier", "free")]);
    register(p, "proxy", "p1", &[("region", "eu")]);
}

pub fn filter(name: &str, values: &[&str]) -> LabelFilter {
    LabelFilter { name: name.into(), values: values.iter().map(|v| v.to_string()).collect() }
}

fn filtered(filters: &[LabelFilter]) -> Selector {
    Selector { labels: filters.to_vec(), ..Selector::default() }
}

/// The value an acquire got, its lease released again; `None` when refused
/// for want of a selectable resource.
fn pick(p: &mut dyn PoolOps, selector: &Selector) -> Option<String> {
    match p.acquire_with("shop", selector) {
        Ok(lease) => {
            p.release(lease.id, lease.token).unwrap();
            Some(lease.resource.value().to_owned())
        }
        Err(Error::NoResourceAvailable(_)) => None,
        Err(e) => panic!("{selector:?}: {e}"),
    }
}

fn some(value: &str) -> Option<String> {
    Some(value.to_owned())
}

#[test]
fn a_where_filter_admits_only_resources_with_every_label_at_one_of_its_values() {
    on_both(|p| {
        keys_and_a_proxy(p);
        assert_eq!(pick(p, &filtered(&[filter("region", &["eu"]), filter("tier", &["paid"])])), some("k1"));
        assert_eq!(pick(p, &filtered(&[filter("tier", &["free"]), filter("region", &["eu"])])), some("k3"));
        assert_eq!(pick(p, &filtered(&[filter("region", &["us", "asia"])])), some("k2"));
        assert_eq!(pick(p, &filtered(&[filter("region", &["asia"])])), None);
        assert_eq!(pick(p, &filtered(&[filter("zone", &["a"])])), None, "a resource without the label never matches");
        assert_eq!(pick(p, &filtered(&[filter("region", &["us"]), filter("tier", &["free"])])), None);
        let views: Vec<(String, Vec<(String, String)>)> = p
            .resources()
            .unwrap()
            .iter()
            .map(|v| {
                let labels = v.labels.iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect();
                (v.resource.value().to_owned(), labels)
            })
            .collect();
        let pairs = |p: &[(&str, &str)]| p.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            views,
            [
                ("k1".into(), pairs(&[("region", "eu"), ("tier", "paid")])),
                ("k2".into(), pairs(&[("region", "us"), ("tier", "paid")])),
                ("k3".into(), pairs(&[("region", "eu"), ("tier", "free")])),
                ("p1".into(), pairs(&[("region", "eu")])),
            ],
            "labels sorted by name"
        );
    });
}

#[test]
fn registering_again_replaces_the_labels() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let eu = filtered(&[filter("region", &["eu"]), filter("tier", &["free"])]);
        assert_eq!(pick(p, &eu), some("k3"));
        assert_eq!(p.register("key", "k3", 1), Ok(true), "the labels are gone: a change");
        assert_eq!(pick(p, &eu), None);
        assert_eq!(p.register("key", "k3", 1), Ok(false));
    });
}

#[test]
fn a_kind_admits_only_its_resources() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let proxy = Selector { kind: Some("proxy".into()), ..Selector::default() };
        assert_eq!(pick(p, &proxy), some("p1"));
        assert_eq!(pick(p, &Selector { kind: Some("key".into()), ..Selector::default() }), some("k1"));
        assert_eq!(pick(p, &Selector { kind: Some("gpu".into()), ..Selector::default() }), None);
        let held = p.acquire_with("shop", &proxy).unwrap();
        assert_eq!(pick(p, &proxy), None, "the keys are free, the one proxy is not");
        p.release(held.id, held.token).unwrap();
        assert_eq!(pick(p, &Selector::default()), some("k1"), "no kind: any");
    });
}

#[test]
fn excluded_values_are_never_chosen() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let except = |values: &[&str]| Selector {
            kind: Some("key".into()),
            exclude: values.iter().map(|v| v.to_string()).collect(),
            ..Selector::default()
        };
        assert_eq!(pick(p, &except(&["k1"])), some("k2"));
        assert_eq!(pick(p, &except(&["k1", "k2"])), some("k3"));
        assert_eq!(pick(p, &except(&["k1", "k2", "k3"])), None);
        let any_kind = Selector { exclude: vec!["k1".into(), "k2".into(), "k3".into()], ..Selector::default() };
        assert_eq!(pick(p, &any_kind), some("p1"));
    });
}

#[test]
fn a_preferred_resource_is_tried_first_when_selectable_and_admitted() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let prefer = |value: &str| Selector { prefer: Some(value.into()), ..Selector::default() };
        assert_eq!(pick(p, &prefer("k3")), some("k3"));
        assert_eq!(pick(p, &prefer("p1")), some("p1"), "any kind with that value");
        let paid = Selector { labels: vec![filter("tier", &["paid"])], ..prefer("k3") };
        assert_eq!(pick(p, &paid), some("k1"), "k3 does not match: chosen as usual");
        let of_kind = Selector { kind: Some("key".into()), ..prefer("p1") };
        assert_eq!(pick(p, &of_kind), some("k1"), "no key has the value p1");
        assert_eq!(pick(p, &prefer("nothing")), some("k1"));
        let held = p.acquire_with("shop", &prefer("k3")).unwrap();
        assert_eq!(pick(p, &prefer("k3")), some("k1"), "k3 is leased");
        p.release(held.id, held.token).unwrap();
        p.block("key", "k3", None, None, None).unwrap();
        assert_eq!(pick(p, &prefer("k3")), some("k1"), "k3 is blocked");
    });
}

#[test]
fn an_affinity_key_gets_its_resource_again_and_rebinds_when_it_cannot() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let user = |key: &str| Selector { affinity: Some(key.into()), ..Selector::default() };
        let bind = Selector { prefer: Some("k2".into()), ..user("user-7") };
        assert_eq!(pick(p, &bind), some("k2"), "the first grant binds user-7 to k2");
        assert_eq!(pick(p, &user("user-7")), some("k2"), "where k1 would be chosen as usual");
        assert_eq!(pick(p, &user("user-8")), some("k1"), "another key is bound to nothing yet");
        assert_eq!(pick(p, &user("user-8")), some("k1"));

        p.block("key", "k2", None, None, None).unwrap();
        assert_eq!(pick(p, &user("user-7")), some("k1"), "k2 is blocked: chosen anew, and bound");
        p.unblock("key", "k2", None).unwrap();
        assert_eq!(pick(p, &user("user-7")), some("k1"), "the new binding holds");

        let us = Selector { labels: vec![filter("region", &["us"])], ..user("user-7") };
        assert_eq!(pick(p, &us), some("k2"), "k1 does not match: chosen anew");
        assert_eq!(pick(p, &user("user-7")), some("k2"));

        let held = p.acquire_with("shop", &user("user-8")).unwrap();
        assert_eq!(held.resource.value(), "k1");
        let k2 = p.acquire_with("shop", &user("user-7")).unwrap();
        assert_eq!(pick(p, &user("user-7")), some("k3"), "k2 is leased: chosen anew");
        p.release(k2.id, k2.token).unwrap();
        assert_eq!(pick(p, &user("user-7")), some("k3"));
        p.release(held.id, held.token).unwrap();

        p.unregister("key", "k3", false).unwrap();
        assert_eq!(pick(p, &user("user-7")), some("k1"), "its resource is gone: chosen anew");
    });
}

#[test]
fn a_bad_selector_is_refused_naming_its_part_and_the_rule() {
    on_both(|p| {
        keys_and_a_proxy(p);
        let refused = |p: &mut dyn PoolOps, selector: Selector| match p.acquire_with("shop", &selector) {
            Err(Error::InvalidInput { field, rule }) => (field, rule),
            other => panic!("{selector:?} was not refused: {other:?}"),
        };
        let pair = |field: &str, rule: &str| (field.to_owned(), rule.to_owned());
        let kind = Selector { kind: Some(String::new()), ..Selector::default() };
        assert_eq!(refused(p, kind), pair("kind", "must not be empty"));
        assert_eq!(
            refused(p, filtered(&[filter("a b", &["x"])])),
            pair("labels", "names may hold only ASCII letters, digits, '_', '-' and '.'")
        );
        assert_eq!(refused(p, filtered(&[filter("tier", &[])])), pair("labels", "each filter must list 1..=16 values"));
        let many: Vec<LabelFilter> = (0..9).map(|i| filter(&format!("l{i}"), &["x"])).collect();
        assert_eq!(refused(p, filtered(&many)), pair("labels", "must be at most 8 filters"));
        let exclude = Selector { exclude: (0..65).map(|i| format!("v{i}")).collect(), ..Selector::default() };
        assert_eq!(refused(p, exclude), pair("exclude", "must be at most 64 values"));
        let prefer = Selector { prefer: Some("a\nb".into()), ..Selector::default() };
        assert_eq!(refused(p, prefer), pair("prefer", "must not contain control characters"));
        let affinity = Selector { affinity: Some("u".repeat(257)), ..Selector::default() };
        assert_eq!(refused(p, affinity), pair("affinity", "must be at most 256 bytes"));
        assert_eq!(p.stats().unwrap().live_leases, 0, "a refused acquire holds nothing");
    });
}

fn python_names(field: Field) -> &'static str {
    match field {
        Field::LeaseTtl => "lease_ttl",
        _ => "other",
    }
}

#[test]
fn the_holder_names_label_filters_where_as_every_front_end_does() {
    let options = OpenOptions { strategy: Some("first".into()), ..OpenOptions::default() };
    let holder = Holder::open(options, Some(Arc::new(ManualClock::new(0))), python_names).unwrap();
    holder
        .with(|p| {
            keys_and_a_proxy(p);
            Ok(())
        })
        .unwrap();
    let bad = filtered(&[filter("tier", &[])]);
    let rule = "each filter must list 1..=16 values".to_owned();
    let expected = Error::InvalidInput { field: "where".into(), rule };
    assert_eq!(holder.try_acquire("shop", &bad).unwrap_err(), expected);
    assert_eq!(holder.acquire_now("shop", &bad).unwrap_err(), expected);
    assert_eq!(holder.acquire("shop", &bad, Some(1), || Ok::<(), Error>(())).unwrap_err(), expected);
    let none = filtered(&[filter("region", &["asia"])]);
    assert!(holder.try_acquire("shop", &none).unwrap().is_none());
    let lease = holder.try_acquire("shop", &filtered(&[filter("tier", &["free"])])).unwrap().unwrap();
    assert_eq!(lease.lease().resource.value(), "k3");
}
