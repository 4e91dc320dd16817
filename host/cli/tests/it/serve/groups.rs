//! Quota groups over HTTP: `groups` on register and in the views, the
//! group routes (PUT and DELETE of a group's limits, the list and one
//! group), limits the members share, day windows beside the minute ones,
//! and bad input refused naming the request's field with nothing applied.

use super::*;

fn register(s: &Server, body: Value) -> Reply {
    call("POST", &s.url("/v1/resources"), NONE, Some(body))
}

fn put(s: &Server, name: &str, body: Value) -> Reply {
    call("PUT", &s.url(&format!("/v1/groups/{name}/limits")), NONE, Some(body))
}

fn get(s: &Server, path: &str) -> Reply {
    call("GET", &s.url(path), NONE, None)
}

fn acquire(s: &Server) -> Reply {
    call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "chat"})))
}

#[test]
fn members_share_their_groups_limits_and_the_views_show_both_windows() {
    let dir = tempdir("groups");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    for key in ["k1", "k2"] {
        let body =
            json!({"kind": "key", "value": key, "groups": ["project:acme"], "limits": {"rpd": 100, "tpd": 5000}});
        assert_eq!(register(&s, body).status, 204);
    }
    let views = get(&s, "/v1/resources").json();
    assert_eq!(views[0]["groups"], json!(["project:acme"]));
    assert_eq!((views[0]["limits"]["rpd"].clone(), views[0]["limits"]["tpd"].clone()), (json!(100), json!(5000)));
    assert_eq!(views[0]["usage"], Value::Null, "no rpm or tpm: no minute window counted");
    assert_eq!(views[0]["day_usage"], json!({"grants": 0, "tokens": 0}));
    assert_eq!(views[0].get("day"), None, "the day window shows as `day_usage` only");

    // A group with members and no limits is listed; its windows count nothing.
    let unlimited = json!({"name": "project:acme", "limits": {"rpm": null, "tpm": null, "rpd": null, "tpd": null,
        "concurrency": null, "shared_quota": false}, "members": 2, "leased": 0, "usage": null, "day_usage": null,
        "limited_until_unix_ms": null});
    assert_eq!(get(&s, "/v1/groups").json(), json!([unlimited]));

    let limits = json!({"rpm": 60, "rpd": 1000, "concurrency": 1});
    assert_eq!(put(&s, "project:acme", limits).status, 204);
    let lease = acquire(&s);
    assert_eq!(lease.status, 201, "{}", lease.body);
    let p = acquire(&s).problem(409, "no_resource_available");
    assert_eq!(p["reasons"]["limited"], 2, "the group holds both members back: {p}");
    let mut group = get(&s, "/v1/groups/project:acme").json();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() * 1e3;
    // Its concurrency is spent until the lease ends, at the latest when its 30 s TTL runs out.
    let until = group["limited_until_unix_ms"].take().as_f64().expect("limited while its one lease is live");
    assert!(until > now_ms + 1000.0 && until <= now_ms + 30_000.0, "limited until {until}, now {now_ms}");
    assert_eq!(
        group,
        json!({"name": "project:acme", "limits": {"rpm": 60, "tpm": null, "rpd": 1000, "tpd": null,
            "concurrency": 1, "shared_quota": false}, "members": 2, "leased": 1,
            "usage": {"grants": 1, "tokens": 1}, "day_usage": {"grants": 1, "tokens": 1},
            "limited_until_unix_ms": null})
    );
    let views = get(&s, "/v1/resources").json();
    let mut days: Vec<&Value> = views.as_array().unwrap().iter().map(|v| &v["day_usage"]).collect();
    days.sort_by_key(|d| d["grants"].as_u64());
    assert_eq!(days, [&json!({"grants": 0, "tokens": 0}), &json!({"grants": 1, "tokens": 1})], "each member's own day");

    // DELETE removes the limits; the group stays listed while it has members.
    assert_eq!(call("DELETE", &s.url("/v1/groups/project:acme/limits"), NONE, None).status, 204);
    let second = acquire(&s);
    assert_eq!(second.status, 201, "no group limits any more: {}", second.body);
    let group = get(&s, "/v1/groups/project:acme").json();
    assert_eq!((group["limits"]["concurrency"].clone(), group["leased"].clone()), (Value::Null, json!(2)));
    call("DELETE", &s.url("/v1/groups/project:acme/limits"), NONE, None).problem(404, "not_found");

    // Groups are the tenant's own.
    let other = call("GET", &s.url("/v1/groups"), &[("Repute-Tenant", "globex")], None).json();
    assert_eq!(other, json!([]));
    call("GET", &s.url("/v1/groups/project:acme"), &[("Repute-Tenant", "globex")], None).problem(404, "not_found");
}

#[test]
fn limits_of_a_group_without_members_are_kept_and_listed() {
    let dir = tempdir("groups-limits");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    assert_eq!(put(&s, "account:x", json!({"tpd": 1_000_000, "shared_quota": true})).status, 204);
    assert_eq!(put(&s, "account:x", json!({"tpd": 1_000_000, "shared_quota": true})).status, 204, "again: no change");
    let groups = get(&s, "/v1/groups").json();
    assert_eq!(groups[0]["name"], "account:x");
    assert_eq!(groups[0]["members"], 0);
    assert_eq!(groups[0]["day_usage"], json!({"grants": 0, "tokens": 0}));
    assert_eq!(groups[0]["usage"], Value::Null);
    // A body of no limits removes them, as DELETE does; a group of neither members nor limits is gone.
    assert_eq!(put(&s, "account:x", json!({})).status, 204);
    assert_eq!(get(&s, "/v1/groups").json(), json!([]));
    get(&s, "/v1/groups/account:x").problem(404, "not_found");
    call("DELETE", &s.url("/v1/groups/account:x/limits"), NONE, None).problem(404, "not_found");
}

#[test]
fn bad_groups_and_group_limits_are_refused_naming_the_field() {
    let dir = tempdir("groups-input");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let refused = |body: Value| field_rule(&register(&s, body).problem(400, "invalid_input"));
    let reg = |groups: Value| json!({"kind": "key", "value": "k1", "groups": groups});
    let nine: Vec<String> = (0..9).map(|i| format!("g{i}")).collect();
    assert_eq!(refused(reg(json!(nine))).0.as_deref(), Some("groups"));
    assert_eq!(refused(reg(json!(["a", "a"]))).0.as_deref(), Some("groups"));
    assert_eq!(refused(reg(json!([""]))), some("groups", "must not be empty"));
    assert_eq!(refused(reg(json!("a"))).0.as_deref(), Some("groups"));
    let limits = |l: Value| json!({"kind": "key", "value": "k1", "limits": l});
    assert_eq!(refused(limits(json!({"rpd": 0}))), some("limits.rpd", "must be in 1..=100000000"));
    assert_eq!(refused(limits(json!({"tpd": 0}))), some("limits.tpd", "must be > 0"));
    assert_eq!(get(&s, "/v1/resources").json(), json!([]), "nothing was registered");

    let refused = |name: &str, body: Value| field_rule(&put(&s, name, body).problem(400, "invalid_input"));
    assert_eq!(refused("g", json!({"rpm": 0})), some("rpm", "must be in 1..=100000"));
    assert_eq!(refused("g", json!({"rpd": 100_000_001})), some("rpd", "must be in 1..=100000000"));
    assert_eq!(refused("g", json!({"tpm": 0})), some("tpm", "must be > 0"));
    assert_eq!(refused("g", json!({"tpd": 0})), some("tpd", "must be > 0"));
    assert_eq!(refused("g", json!({"concurrency": 0})), some("concurrency", "must be in 1..=1000000"));
    assert_eq!(refused("g", json!({"rpm": 10, "concurrency": 0})).0.as_deref(), Some("concurrency"));
    assert_eq!(refused("g", json!({"max_uses": 1})), some("max_uses", "is not a field of this request"));
    assert_eq!(refused("g", json!({"shared_quota": "yes"})).0.as_deref(), Some("shared_quota"));
    assert_eq!(refused("%09", json!({"rpm": 1})), some("name", "must not contain control characters"));
    assert_eq!(get(&s, "/v1/groups").json(), json!([]), "nothing was applied");
    get(&s, "/v1/groups/%09").problem(400, "invalid_input");
    let r = call("PATCH", &s.url("/v1/groups/g"), NONE, Some(json!({})));
    r.problem(405, "method_not_allowed");
}
