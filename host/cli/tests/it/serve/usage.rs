//! Usage limits over HTTP: `limits` on register and in the views, an
//! acquire's `cost`, the usage route that reconciles it, refusals that
//! count limited resources, the `retired` event, and bad limits, costs and
//! usage refused naming the request's field.

use super::*;

fn register(s: &Server, body: Value) -> Reply {
    call("POST", &s.url("/v1/resources"), NONE, Some(body))
}

fn acquire(s: &Server, body: Value) -> Reply {
    call("POST", &s.url("/v1/leases"), NONE, Some(body))
}

fn usage(s: &Server, lease: &Value, used: Value) -> Reply {
    let body = json!({"token": lease["token"], "used": used});
    call("POST", &s.url(&format!("/v1/leases/{}/usage", lease["id"])), NONE, Some(body))
}

#[test]
fn limits_show_in_views_and_costs_are_reconciled_by_the_usage_route() {
    let dir = tempdir("usage");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let limits = json!({"tpm": 100, "min_interval_ms": 0.5, "max_age_ms": 3_600_000});
    assert_eq!(register(&s, json!({"kind": "key", "value": "k1", "permits": 2, "limits": limits})).status, 204);
    let views = call("GET", &s.url("/v1/resources"), NONE, None).json();
    assert_eq!(
        views[0]["limits"],
        json!({"rpm": null, "tpm": 100, "rpd": null, "tpd": null, "min_interval_ms": 0.5, "max_uses": null,
            "max_age_ms": 3_600_000.0,
            "per_context": {"rpm": null, "tpm": null, "min_interval_ms": null}})
    );
    assert_eq!((views[0]["uses"].clone(), views[0]["retired"].clone()), (json!(0), Value::Null));
    assert_eq!(views[0]["usage"], json!({"grants": 0, "tokens": 0}));

    let first = acquire(&s, json!({"context": "chat", "cost": 80})).json();
    std::thread::sleep(Duration::from_millis(2));
    let p = acquire(&s, json!({"context": "chat", "cost": 30})).problem(409, "no_resource_available");
    assert_eq!(
        p["reasons"],
        // The first grant's usage, reported any moment, may free its tokens.
        json!({"none_registered": false, "blocked": 0, "rate_limited": 0, "cooling": 0, "leased": 0, "limited": 1, "settled": false})
    );
    let retry = p["retry_after_ms"].as_f64().unwrap();
    assert!(retry > 59_000.0 && retry <= 60_000.0, "retry after {retry} ms");
    assert_eq!(p["detail"].as_str().map(|d| d.contains("1 over a usage limit")), Some(true), "{p}");

    // The first lease used 10 of its 80 tokens: 30 more fit.
    assert_eq!(usage(&s, &first, json!(10)).status, 204);
    let second = acquire(&s, json!({"context": "chat", "cost": 30}));
    assert_eq!(second.status, 201, "{}", second.body);
    assert_eq!(call("GET", &s.url("/v1/resources"), NONE, None).json()[0]["uses"], 2);
    // The window holds both grants and their tokens, the first's as it reconciled.
    let one = call("GET", &s.url("/v1/resources?kind=key&value=k1"), NONE, None).json();
    assert_eq!(one[0]["usage"], json!({"grants": 2, "tokens": 40}));
    assert_eq!(one[0].get("window"), None, "the window shows as `usage` only");
    let unlimited = json!({"kind": "key", "value": "k2", "limits": {"max_uses": 5}});
    assert_eq!(register(&s, unlimited).status, 204);
    let views = call("GET", &s.url("/v1/resources?value=k2"), NONE, None).json();
    assert_eq!(views[0]["usage"], Value::Null, "no rpm or tpm: nothing counted");

    let stale = json!({"token": 999, "used": 1});
    let r = call("POST", &s.url(&format!("/v1/leases/{}/usage", first["id"])), NONE, Some(stale));
    r.problem(409, "stale_lease");
    call("POST", &s.url("/v1/leases/77/usage"), NONE, Some(json!({"token": 1, "used": 1})))
        .problem(404, "unknown_lease");
}

#[test]
fn per_context_limits_count_each_context_apart() {
    let dir = tempdir("per-context");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let limits = json!({"per_context": {"rpm": 1, "min_interval_ms": 1000}});
    assert_eq!(register(&s, json!({"kind": "key", "value": "k1", "permits": 2, "limits": limits})).status, 204);
    let views = call("GET", &s.url("/v1/resources"), NONE, None).json();
    assert_eq!(views[0]["limits"]["per_context"], json!({"rpm": 1, "tpm": null, "min_interval_ms": 1000.0}));
    assert_eq!(acquire(&s, json!({"context": "gpt-4o"})).status, 201);
    let p = acquire(&s, json!({"context": "gpt-4o"})).problem(409, "no_resource_available");
    assert_eq!(p["reasons"]["limited"], 1, "{p}");
    let retry = p["retry_after_ms"].as_f64().unwrap();
    assert!(retry > 59_000.0 && retry <= 60_000.0, "retry after {retry} ms");
    let other = acquire(&s, json!({"context": "o1"}));
    assert_eq!(other.status, 201, "another context of the key has its own window: {}", other.body);
    let bad = json!({"kind": "key", "value": "k2", "limits": {"per_context": {"rpm": 0}}});
    assert_eq!(register(&s, bad).problem(400, "invalid_input")["field"], "limits.per_context.rpm");
    let bad = json!({"kind": "key", "value": "k2", "limits": {"per_context": {"min_interval_ms": -1}}});
    assert_eq!(register(&s, bad).problem(400, "invalid_input")["field"], "limits.per_context.min_interval_ms");
}

#[test]
fn spent_max_uses_retire_a_resource_with_an_event() {
    let dir = tempdir("retired");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    assert_eq!(register(&s, json!({"kind": "key", "value": "k1", "limits": {"max_uses": 1}})).status, 204);
    let (tx, rx) = mpsc::channel::<(String, Value)>();
    let url = s.url("/v1/events");
    std::thread::spawn(move || {
        let res = ureq::get(&url).call().unwrap();
        let mut reader = BufReader::new(res.into_reader());
        let (mut name, mut line) = (String::new(), String::new());
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let l = line.trim_end().to_owned();
            line.clear();
            if let Some(n) = l.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(d) = l.strip_prefix("data: ") {
                if tx.send((name.clone(), serde_json::from_str(d).unwrap())).is_err() {
                    return;
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let lease = acquire(&s, json!({"context": "chat"})).json();
    let release = format!("/v1/leases/{}?token={}", lease["id"], lease["token"]);
    assert_eq!(call("DELETE", &s.url(&release), NONE, None).status, 204);
    let names: Vec<String> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).expect("an event").0).collect();
    assert_eq!(names, ["leased", "retired", "released"]);
    let views = call("GET", &s.url("/v1/resources"), NONE, None).json();
    assert_eq!((views[0]["uses"].clone(), views[0]["retired"].clone()), (json!(1), json!("max_uses")));
    let p = acquire(&s, json!({"context": "chat"})).problem(409, "no_resource_available");
    assert_eq!(p["reasons"]["limited"], 1);
    assert!(p.get("retry_after_ms").is_none(), "a retired resource never frees up: {p}");
    let m = call("GET", &s.url("/metrics"), NONE, None).body;
    assert!(m.contains("repute_resources_retired_total{reason=\"max_uses\"} 1"), "{m}");
}

#[test]
fn bad_limits_costs_and_usage_are_refused_naming_the_field() {
    let dir = tempdir("usage-input");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let refused = |limits: Value| {
        let r = register(&s, json!({"kind": "key", "value": "k1", "limits": limits}));
        field_rule(&r.problem(400, "invalid_input"))
    };
    assert_eq!(refused(json!({"rpm": 0})), some("limits.rpm", "must be in 1..=100000"));
    assert_eq!(refused(json!({"rpm": 100_001})), some("limits.rpm", "must be in 1..=100000"));
    assert_eq!(refused(json!({"tpm": 0})), some("limits.tpm", "must be > 0"));
    assert_eq!(refused(json!({"max_uses": 0})), some("limits.max_uses", "must be > 0"));
    let ms = "must be a number of milliseconds in [0.000001, 1e12]";
    assert_eq!(refused(json!({"min_interval_ms": 0})), some("limits.min_interval_ms", ms));
    assert_eq!(refused(json!({"max_age_ms": -5})), some("limits.max_age_ms", ms));
    assert_eq!(refused(json!({"rps": 1})), some("limits.rps", "is not a field of this request"));
    assert_eq!(refused(json!({"rpm": "ten"})).0.as_deref(), Some("limits.rpm"));
    assert_eq!(call("GET", &s.url("/v1/resources"), NONE, None).json(), json!([]), "nothing was registered");

    assert_eq!(register(&s, json!({"kind": "key", "value": "k1", "limits": {"tpm": 10}})).status, 204);
    let p = acquire(&s, json!({"context": "chat", "cost": 0})).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("cost", "must be > 0"));
    let p = acquire(&s, json!({"context": "chat", "cost": -1})).problem(400, "invalid_input");
    assert_eq!(p["field"], "cost");
    let lease = acquire(&s, json!({"context": "chat", "cost": 10})).json();
    assert_eq!(usage(&s, &lease, json!(-3)).problem(400, "invalid_input")["field"], "used");
    assert_eq!(usage(&s, &lease, json!("all")).problem(400, "invalid_input")["field"], "used");
    let url = s.url(&format!("/v1/leases/{}/usage", lease["id"]));
    let p = call("POST", &url, NONE, Some(json!({"used": 1}))).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("token", "is required"));
}
