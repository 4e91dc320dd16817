//! Refusals as problem+json naming the request's field, and API keys.

use super::*;

#[test]
fn bad_input_is_a_problem_naming_field_and_rule() {
    let dir = tempdir("bad");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let p = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "", "value": "x"})))
        .problem(400, "invalid_input");
    assert_eq!((p["field"].as_str(), p["rule"].as_str()), (Some("kind"), Some("must not be empty")));
    let long = "v".repeat(300);
    let p = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": long})))
        .problem(400, "invalid_input");
    assert_eq!(p["rule"], "must be at most 256 bytes");
    call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": "a"})));
    let p = call(
        "POST",
        &s.url("/v1/outcomes"),
        NONE,
        Some(json!({"kind": "proxy", "value": "a", "context": "x", "outcome": "dns"})),
    )
    .problem(400, "invalid_input");
    assert_eq!(p["field"], "outcome");
    let p = call(
        "POST",
        &s.url("/v1/outcomes"),
        NONE,
        Some(json!({"kind": "proxy", "value": "a", "context": "x", "outcome": "slow", "latency_ms": -1.0})),
    )
    .problem(400, "invalid_input");
    assert_eq!((p["field"].as_str(), p["rule"].as_str()), (Some("latency_ms"), Some("must be >= 0")));
    let p = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "*"}))).problem(400, "invalid_input");
    assert_eq!(p["field"], "context");
    let p = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"ctx": "a"}))).problem(400, "invalid_input");
    assert_eq!(p["field"], "ctx");
    let p = call("DELETE", &s.url("/v1/leases/1"), NONE, None).problem(400, "invalid_input");
    assert_eq!(p["field"], "token");
    let p = call(
        "POST",
        &s.url("/v1/resources"),
        &[("Repute-Tenant", "no spaces")],
        Some(json!({"kind": "p", "value": "a"})),
    )
    .problem(400, "invalid_input");
    assert_eq!(p["field"], "Repute-Tenant");
    call("PUT", &s.url("/v1/snapshot"), NONE, Some(json!({"format": 9}))).problem(422, "invalid_snapshot");
    call("GET", &s.url("/v1/nothing"), NONE, None).problem(404, "not_found");
}

#[test]
fn api_keys_are_bound_to_one_tenant() {
    let dir = tempdir("auth");
    let key = |tenant: &str| new_key(&dir, tenant);
    let acme = key("acme");
    let globex = key("globex");
    let stored = std::fs::read_to_string(dir.join("keys")).unwrap();
    assert!(!stored.contains(&acme) && stored.lines().count() == 2);

    let s = Server::start(&["--store", "memory", "--keys", "keys"], &dir);
    let reg = || Some(json!({"kind": "proxy", "value": "a"}));
    call("POST", &s.url("/v1/resources"), NONE, reg()).problem(401, "unauthorized");
    call("POST", &s.url("/v1/resources"), &[("Authorization", "Bearer rpt_0123")], reg()).problem(401, "unauthorized");
    let bearer = format!("Bearer {acme}");
    call("POST", &s.url("/v1/resources"), &[("Authorization", &bearer), ("Repute-Tenant", "globex")], reg())
        .problem(403, "forbidden");
    assert_eq!(call("POST", &s.url("/v1/resources"), &[("Authorization", &bearer)], reg()).status, 204);
    // Tenants are separate: globex sees nothing of acme's.
    let theirs = call("GET", &s.url("/v1/resources"), &[("X-Api-Key", &globex)], None).json();
    assert_eq!(theirs, json!([]));
    let ours = call("GET", &s.url("/v1/resources"), &[("X-Api-Key", &acme)], None).json();
    assert_eq!(ours.as_array().unwrap().len(), 1);
    // Health and metrics need no key.
    assert_eq!(call("GET", &s.url("/healthz"), NONE, None).status, 200);

    // Without keys the server refuses to start unless told it is local.
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory", "--keys", "missing"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no API keys in missing") && err.contains("--no-auth"), "{err}");
}

#[test]
fn every_refusal_is_problem_json_naming_the_request_field() {
    let dir = tempdir("refusals");
    let s = Server::start(&["--no-auth", "--store", "memory", "--max-body-bytes", "1000"], &dir);

    let p = call("GET", &s.url("/v1/leases/abc"), NONE, None).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("id", "must be an integer in 0..=18446744073709551615"));
    let p = call("GET", &s.url("/v1/leases/18446744073709551616"), NONE, None).problem(400, "invalid_input");
    assert_eq!(p["field"], "id");
    let p = call("DELETE", &s.url("/v1/leases/1?token=x"), NONE, None).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("token", "invalid digit found in string"));
    let p = call("DELETE", &s.url("/v1/resources/p/a?force=maybe"), NONE, None).problem(400, "invalid_input");
    assert_eq!(p["field"], "force");
    let p = call("GET", &s.url("/v1/snapshot?leases=2"), NONE, None).problem(400, "invalid_input");
    assert_eq!(p["field"], "leases");

    let r = call("PATCH", &s.url("/v1/leases"), NONE, None);
    r.problem(405, "method_not_allowed");
    let allow = ureq::request("PATCH", &s.url("/v1/leases")).call().unwrap_err();
    let ureq::Error::Status(405, res) = allow else { panic!("{allow}") };
    assert_eq!(res.header("allow"), Some("POST,GET,HEAD"));
    call("GET", &s.url("/v2/nothing"), NONE, None).problem(404, "not_found");

    let big = json!({"kind": "p", "value": "v".repeat(2000)});
    let p = call("POST", &s.url("/v1/resources"), NONE, Some(big)).problem(413, "payload_too_large");
    assert_eq!(field_rule(&p), some("body", "must be at most 1000 bytes"));
    let p =
        send("PUT", &s.url("/v1/snapshot"), "application/octet-stream", &[0u8; 5000]).problem(413, "payload_too_large");
    assert_eq!(p["field"], "body");

    let p = send("POST", &s.url("/v1/leases"), "application/json", b"{\"context\": ").problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("body", "must be valid JSON: EOF while parsing a value"));
    let p = send("POST", &s.url("/v1/leases"), "text/plain", b"{}").problem(415, "invalid_input");
    assert_eq!(p["field"], "body");
    let p = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": 5}))).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("context", "invalid type: integer `5`, expected a string"));
    let p = call("POST", &s.url("/v1/leases"), NONE, Some(json!({}))).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("context", "is required"));
    let p = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c", "ctx": "a"})))
        .problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("ctx", "is not a field of this request"));
    let p = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": "a", "permits": -1})))
        .problem(400, "invalid_input");
    assert_eq!(p["field"], "permits");
    let p = call("PUT", &s.url("/v1/resources/p/a/block"), NONE, Some(json!({"duration_ms": 0})))
        .problem(400, "invalid_input");
    assert_eq!(p["field"], "duration_ms");
    let p = call(
        "POST",
        &s.url("/v1/outcomes"),
        NONE,
        Some(json!({"kind": "p", "value": "a", "context": "x", "outcome": "slow", "latency_ms": "fast"})),
    )
    .problem(400, "invalid_input");
    assert_eq!(p["field"], "latency_ms");
}

#[test]
fn a_lower_case_bearer_works_new_keys_are_seen_without_a_restart_and_metrics_can_want_a_key() {
    let dir = tempdir("keys");
    let key = |tenant: &str| new_key(&dir, tenant);
    let acme = key("acme");
    let s = Server::start(&["--store", "memory", "--keys", "keys", "--metrics-auth"], &dir);
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} {acme}");
        assert_eq!(call("GET", &s.url("/v1/resources"), &[("Authorization", &auth)], None).status, 200, "{scheme}");
    }
    call("GET", &s.url("/v1/resources"), &[("Authorization", &format!("Basic {acme}"))], None)
        .problem(401, "unauthorized");

    call("GET", &s.url("/metrics"), NONE, None).problem(401, "unauthorized");
    let metrics = call("GET", &s.url("/metrics"), &[("X-Api-Key", &acme)], None);
    assert_eq!(
        (metrics.status, metrics.content_type.as_str()),
        (200, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    );

    let globex = key("globex");
    let auth = format!("Bearer {globex}");
    let added = std::time::Instant::now();
    loop {
        let r = call("GET", &s.url("/v1/resources"), &[("Authorization", &auth)], None);
        if r.status == 200 {
            break;
        }
        r.problem(401, "unauthorized");
        assert!(added.elapsed() < Duration::from_secs(5), "the new key was never seen");
        std::thread::sleep(Duration::from_millis(100));
    }
}
