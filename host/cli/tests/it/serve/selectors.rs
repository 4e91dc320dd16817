//! Labels on resources and what an acquire chooses by over HTTP: `kind`,
//! `where`, `exclude`, `prefer`, `affinity`; bad ones refused naming the
//! request's field.

use super::*;

/// A server choosing the earliest registered, with three keys and a proxy.
fn labelled(name: &str) -> Server {
    let s = Server::start(&["--no-auth", "--store", "memory", "--strategy", "first"], &tempdir(name));
    for (kind, value, labels) in [
        ("key", "k1", json!({"region": "eu", "tier": "paid"})),
        ("key", "k2", json!({"tier": "paid", "region": "us"})),
        ("key", "k3", json!({"region": "eu", "tier": "free"})),
        ("proxy", "p1", json!({"region": "eu"})),
    ] {
        let r =
            call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": kind, "value": value, "labels": labels})));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    s
}

/// The value an acquire with this body got (its lease released again), or
/// `None` on a 409.
fn pick(s: &Server, body: Value) -> Option<String> {
    let r = call("POST", &s.url("/v1/leases"), NONE, Some(body));
    if r.status == 409 {
        r.problem(409, "no_resource_available");
        return None;
    }
    assert_eq!(r.status, 201, "{}", r.body);
    let lease = r.json();
    let release = format!("/v1/leases/{}?token={}", lease["id"], lease["token"]);
    assert_eq!(call("DELETE", &s.url(&release), NONE, None).status, 204);
    lease["value"].as_str().map(str::to_owned)
}

fn got(value: &str) -> Option<String> {
    Some(value.to_owned())
}

#[test]
fn views_show_labels_and_acquires_filter_by_kind_where_and_exclude() {
    let s = labelled("filters");
    let views = call("GET", &s.url("/v1/resources"), NONE, None).json();
    let labels: Vec<(&str, &Value)> =
        views.as_array().unwrap().iter().map(|v| (v["resource"]["value"].as_str().unwrap(), &v["labels"])).collect();
    assert_eq!(
        labels,
        [
            ("k1", &json!({"region": "eu", "tier": "paid"})),
            ("k2", &json!({"region": "us", "tier": "paid"})),
            ("k3", &json!({"region": "eu", "tier": "free"})),
            ("p1", &json!({"region": "eu"})),
        ]
    );
    assert_eq!(pick(&s, json!({"context": "c", "where": {"region": "eu", "tier": "paid"}})), got("k1"));
    assert_eq!(pick(&s, json!({"context": "c", "where": {"tier": ["free", "trial"]}})), got("k3"));
    assert_eq!(pick(&s, json!({"context": "c", "where": {"region": ["us", "asia"]}})), got("k2"));
    assert_eq!(pick(&s, json!({"context": "c", "where": {"region": "asia"}})), None);
    assert_eq!(pick(&s, json!({"context": "c", "kind": "proxy"})), got("p1"));
    assert_eq!(pick(&s, json!({"context": "c", "kind": "gpu"})), None);
    assert_eq!(pick(&s, json!({"context": "c", "kind": "key", "exclude": ["k1"]})), got("k2"));
    assert_eq!(pick(&s, json!({"context": "c", "kind": "key", "exclude": ["k1", "k2", "k3"]})), None);
    assert_eq!(pick(&s, json!({"context": "c"})), got("k1"), "no selector: any resource");

    // Registering again replaces the labels.
    let r = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "key", "value": "k3"})));
    assert_eq!(r.status, 204);
    assert_eq!(pick(&s, json!({"context": "c", "where": {"tier": "free"}})), None);
}

#[test]
fn prefer_and_affinity_are_tried_first_and_an_affinity_rebinds_when_its_resource_is_blocked() {
    let s = labelled("affinity");
    assert_eq!(pick(&s, json!({"context": "c", "prefer": "k3"})), got("k3"));
    assert_eq!(pick(&s, json!({"context": "c", "prefer": "k3", "where": {"tier": "paid"}})), got("k1"));

    assert_eq!(pick(&s, json!({"context": "c", "prefer": "k2", "affinity": "user-7"})), got("k2"));
    assert_eq!(pick(&s, json!({"context": "c", "affinity": "user-7"})), got("k2"), "the same resource again");
    assert_eq!(pick(&s, json!({"context": "c", "affinity": "user-8"})), got("k1"));
    let block = call("PUT", &s.url("/v1/resources/key/k2/block"), NONE, Some(json!({"reason": "revoked"})));
    assert_eq!(block.status, 204);
    assert_eq!(pick(&s, json!({"context": "c", "affinity": "user-7"})), got("k1"), "picked anew");
    assert_eq!(call("DELETE", &s.url("/v1/resources/key/k2/block"), NONE, None).status, 204);
    assert_eq!(pick(&s, json!({"context": "c", "affinity": "user-7"})), got("k1"), "and bound to it");
}

#[test]
fn bad_labels_secrets_and_selectors_are_problems_naming_the_request_field() {
    let s = Server::start(&["--no-auth", "--store", "memory"], &tempdir("bad-selectors"));
    let register = |extra: Value| {
        let mut body = json!({"kind": "key", "value": "k1"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        field_rule(&call("POST", &s.url("/v1/resources"), NONE, Some(body)).problem(400, "invalid_input"))
    };
    assert_eq!(
        register(json!({"labels": {"a b": "x"}})),
        some("labels", "names may hold only ASCII letters, digits, '_', '-' and '.'")
    );
    assert_eq!(register(json!({"labels": {"a": ""}})), some("labels", "must not be empty"));
    assert_eq!(register(json!({"labels": {"a": 5}})), some("labels.a", "invalid type: integer `5`, expected a string"));
    let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("l{i:02}"), json!("v"))).collect();
    assert_eq!(register(json!({ "labels": many })), some("labels", "must be at most 16"));
    assert_eq!(register(json!({"secret": ""})), some("secret", "must not be empty"));
    assert_eq!(register(json!({"secret": "x".repeat(4097)})), some("secret", "must be at most 4096 bytes"));
    assert_eq!(register(json!({"secret": 7})), some("secret", "invalid type: integer `7`, expected a string"));
    assert_eq!(register(json!({"secret": "a\u{0}b"})), some("secret", "must not contain NUL"));

    let acquire = |extra: Value| {
        let mut body = json!({"context": "c"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        field_rule(&call("POST", &s.url("/v1/leases"), NONE, Some(body)).problem(400, "invalid_input"))
    };
    assert_eq!(acquire(json!({"kind": ""})), some("kind", "must not be empty"));
    assert_eq!(acquire(json!({"where": {"tier": []}})), some("where", "each filter must list 1..=16 values"));
    assert_eq!(
        acquire(json!({"where": {"a b": "x"}})),
        some("where", "names may hold only ASCII letters, digits, '_', '-' and '.'")
    );
    assert_eq!(acquire(json!({"where": {"tier": "a\u{7}b"}})), some("where", "must not contain control characters"));
    assert_eq!(
        acquire(json!({"where": {"tier": 5}})),
        some("where.tier", "invalid type: integer `5`, expected a string or an array of strings")
    );
    let nine: serde_json::Map<String, Value> = (0..9).map(|i| (format!("l{i}"), json!("v"))).collect();
    assert_eq!(acquire(json!({ "where": nine })), some("where", "must be at most 8 filters"));
    let exclude: Vec<String> = (0..65).map(|i| format!("v{i}")).collect();
    assert_eq!(acquire(json!({ "exclude": exclude })), some("exclude", "must be at most 64 values"));
    assert_eq!(acquire(json!({"prefer": "a\nb"})), some("prefer", "must not contain control characters"));
    assert_eq!(acquire(json!({"affinity": "u".repeat(257)})), some("affinity", "must be at most 256 bytes"));
    assert_eq!(acquire(json!({"labels": {"tier": "paid"}})), some("labels", "is not a field of this request"));
}
