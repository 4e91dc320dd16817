//! Shared mode: every process serves the tenant and folds what the others
//! log. Needs the servers of `scripts/services.sh`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{call, pg_url, redis_url, tempdir, unique, Server};

/// Each process checkpoints the tenant; the store keeps the checkpoint
/// furthest along the log and refuses one behind it. A process behind
/// another's checkpoint says so at debug level, and logs no error.
#[test]
fn a_checkpoint_behind_another_process_is_no_error() {
    let pg = pg_url();
    // Checkpoints every 0.2 s; no sync in the test's time, so the second
    // process stays where it opened while the first logs on.
    let args = ["--no-auth", "--store", &pg, "--mode", "shared", "--checkpoint-every", "0.2", "--sync-every", "60"];
    let dir = tempdir("shared-checkpoints");
    let first = Server::start(&args, &dir);
    let (second, log) = Server::start_logged(&args, &dir, "debug");
    let tenant = unique("shared");
    let t = [("Repute-Tenant", tenant.as_str())];
    let r = call("POST", &first.url("/v1/resources"), &t, Some(json!({"kind": "proxy", "value": "a"})));
    assert_eq!(r.status, 204, "{}", r.body);
    let r = call("GET", &second.url("/v1/resources"), &t, None);
    assert_eq!((r.status, r.json().as_array().map(Vec::len)), (200, Some(1)), "{}", r.body);
    for _ in 0..20 {
        let body = json!({"kind": "proxy", "value": "a", "context": "x.com", "outcome": "success"});
        let r = call("POST", &first.url("/v1/outcomes"), &t, Some(body));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    std::thread::sleep(Duration::from_millis(1200));
    assert!(second.terminate().success());
    let lines: Vec<String> = log.iter().collect();
    let about = |what: &str| lines.iter().filter(|l| l.contains(what) && l.contains(&tenant)).count();
    assert!(about("checkpoint not saved") >= 1, "the second process was behind: {lines:#?}");
    assert_eq!(about("checkpoint failed"), 0, "{lines:#?}");
    assert!(lines.iter().all(|l| !l.contains("ERROR")), "{lines:#?}");
}

/// What `GET /v1/resources` at `server` says of `value`'s groups, once it
/// has folded what the log holds (it syncs every 0.1 s here): polled until
/// it says `want` or 5 s pass.
fn groups_at(server: &Server, t: &[(&str, &str)], value: &str, want: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let views = call("GET", &server.url("/v1/resources"), t, None).json();
        let view = views.as_array().unwrap().iter().find(|v| v["resource"]["value"] == value).cloned();
        let groups = view.map_or(Value::Null, |v| v["groups"].clone());
        if &groups == want || Instant::now() > deadline {
            return groups;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Releases `lease`, a grant's 201 body, at `server`.
fn release(server: &Server, t: &[(&str, &str)], lease: &Value) {
    let path = format!("/v1/leases/{}?token={}", lease["id"].as_u64().unwrap(), lease["token"]);
    assert_eq!(call("DELETE", &server.url(&path), t, None).status, 204);
}

/// Acquires `times` times at `servers` in turn, releasing each grant at
/// once; how many were granted (every other acquire is refused 409
/// `no_resource_available`).
fn grants(servers: &[&Server], t: &[(&str, &str)], times: usize) -> usize {
    let mut granted = 0;
    for i in 0..times {
        let server = servers[i % servers.len()];
        let r = call("POST", &server.url("/v1/leases"), t, Some(json!({"context": "chat"})));
        if r.status == 201 {
            granted += 1;
            release(server, t, &r.json());
        } else {
            r.problem(409, "no_resource_available");
        }
    }
    granted
}

/// One log, one state (I8), on each shared store: a regroup of a key held
/// at one process is refused at every process and applied by none; once
/// it is released, the regroup made at the other process applies at both,
/// and the key's grants count against its new group's rpm at both.
fn a_regroup_applies_everywhere_or_nowhere(store: &str) {
    let args = ["--no-auth", "--store", store, "--mode", "shared", "--sync-every", "0.1"];
    let dir = tempdir("shared-regroup");
    let (s1, s2) = (Server::start(&args, &dir), Server::start(&args, &dir));
    let tenant = unique("regroup");
    let t = [("Repute-Tenant", tenant.as_str())];
    let put = call("PUT", &s1.url("/v1/groups/g2/limits"), &t, Some(json!({"rpm": 3})));
    assert_eq!(put.status, 204, "{}", put.body);
    let k1 = |groups: &[&str]| json!({"kind": "key", "value": "k1", "groups": groups});
    assert_eq!(call("POST", &s1.url("/v1/resources"), &t, Some(k1(&["g1"]))).status, 204);
    assert_eq!(groups_at(&s2, &t, "k1", &json!(["g1"])), json!(["g1"]));
    let lease = call("POST", &s1.url("/v1/leases"), &t, Some(json!({"context": "chat"})));
    assert_eq!(lease.status, 201, "{}", lease.body);
    let lease = lease.json();

    let p = call("POST", &s2.url("/v1/resources"), &t, Some(k1(&["g2"]))).problem(409, "leased");
    assert_eq!(p["detail"], "resource has 1 live lease(s)", "the store counts the lease held at the other process");
    call("DELETE", &s2.url("/v1/resources/key/k1"), &t, None).problem(409, "leased");
    call("POST", &s1.url("/v1/resources"), &t, Some(k1(&["g2"]))).problem(409, "leased");
    std::thread::sleep(Duration::from_millis(400));
    for server in [&s1, &s2] {
        assert_eq!(groups_at(server, &t, "k1", &json!(["g1"])), json!(["g1"]), "refused: applied nowhere");
    }

    release(&s1, &t, &lease);
    assert_eq!(call("POST", &s2.url("/v1/resources"), &t, Some(k1(&["g2"]))).status, 204);
    for server in [&s1, &s2] {
        assert_eq!(groups_at(server, &t, "k1", &json!(["g2"])), json!(["g2"]), "accepted: applied everywhere");
    }
    assert_eq!(grants(&[&s1, &s2], &t, 10), 3, "g2's rpm of 3 across both processes");
    for server in [&s1, &s2] {
        let stats = call("GET", &server.url("/v1/stats"), &t, None).json();
        assert_eq!(stats["refused_entries"], 0, "every entry applied at {}", server.url(""));
    }
    for server in [s1, s2] {
        assert!(server.terminate().success());
    }
}

#[test]
fn a_regroup_applies_everywhere_or_nowhere_on_postgres() {
    a_regroup_applies_everywhere_or_nowhere(&pg_url());
}

#[test]
fn a_regroup_applies_everywhere_or_nowhere_on_redis() {
    a_regroup_applies_everywhere_or_nowhere(&redis_url());
}

/// The store judges a grant against the log's last change of what grants
/// are judged against, whatever the granting process has folded: a process
/// that does not sync (every 60 s here) grants no more than a group's
/// limits set at another process a moment before. Its first grant after
/// the change is refused as stale; it folds the log and asks again.
fn a_process_that_has_not_synced_grants_within_new_group_limits(store: &str) {
    let dir = tempdir("shared-stale");
    let lagging = ["--no-auth", "--store", store, "--mode", "shared", "--sync-every", "60"];
    let (s1, s2) = (Server::start(&lagging, &dir), Server::start(&lagging, &dir));
    let tenant = unique("stale");
    let t = [("Repute-Tenant", tenant.as_str())];
    for key in ["k1", "k2", "k3"] {
        let body = json!({"kind": "key", "value": key, "groups": ["g"]});
        assert_eq!(call("POST", &s1.url("/v1/resources"), &t, Some(body)).status, 204);
    }
    // S2 opens the tenant now, folding the registrations; S1 will not fold
    // what S2 logs next until it is told its view is stale.
    assert_eq!(call("GET", &s2.url("/v1/resources"), &t, None).json().as_array().map(Vec::len), Some(3));
    let put = call("PUT", &s2.url("/v1/groups/g/limits"), &t, Some(json!({"rpm": 2})));
    assert_eq!(put.status, 204, "{}", put.body);
    assert_eq!(grants(&[&s1], &t, 6), 2, "g's rpm of 2, set at the other process");
    let groups = call("GET", &s1.url("/v1/groups/g"), &t, None).json();
    assert_eq!(groups["limits"]["rpm"], 2, "S1 folded the change when its grant was refused as stale");
    for server in [s1, s2] {
        assert!(server.terminate().success());
    }
}

#[test]
fn a_process_that_has_not_synced_grants_within_new_group_limits_on_postgres() {
    a_process_that_has_not_synced_grants_within_new_group_limits(&pg_url());
}

#[test]
fn a_process_that_has_not_synced_grants_within_new_group_limits_on_redis() {
    a_process_that_has_not_synced_grants_within_new_group_limits(&redis_url());
}
