//! The outcomes route reads an answer by the profile of the resource's
//! kind: `--profile KIND=PROFILE`, else the profile the kind's name names.

use super::*;

#[test]
fn an_answer_is_read_by_the_profile_of_its_kind() {
    let dir = tempdir("profiles");
    let s = Server::start(
        &["--no-auth", "--store", "memory", "--strategy", "first", "--profile", "residential=proxy"],
        &dir,
    );
    for (kind, value) in [("residential", "r1"), ("proxy", "p1"), ("account", "a1"), ("openai", "k1")] {
        let r = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": kind, "value": value})));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let report = |body: Value| call("POST", &s.url("/v1/outcomes"), NONE, Some(body));
    for (kind, value) in [("residential", "r1"), ("proxy", "p1"), ("account", "a1")] {
        let r = report(json!({"kind": kind, "value": value, "context": "shop", "http_status": 403}));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let cell = |kind: &str, value: &str| {
        call("GET", &s.url(&format!("/v1/resources/{kind}/{value}/cells")), NONE, None).json()
    };
    for (kind, value) in [("residential", "r1"), ("proxy", "p1")] {
        let cells = cell(kind, value);
        assert_eq!(
            (cells[1]["state"].as_str(), cells[1]["cause"].as_str()),
            (Some("cooling"), Some("blocked")),
            "{kind}"
        );
    }
    let resources = call("GET", &s.url("/v1/resources"), NONE, None).json();
    let blocked: Vec<_> = resources
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["block"].is_null())
        .map(|r| r["resource"]["value"].clone())
        .collect();
    assert_eq!(blocked, [json!("a1")], "only the generic kind is blocked everywhere: {resources}");
    // The site's ban (300 s) takes an early trial after 10 s, which a
    // client may retry for; it is expected to hold to its end.
    let r = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "shop", "kind": "proxy"})));
    let p = r.problem(409, "no_resource_available");
    let ms = |field: &str| p[field].as_f64().unwrap_or_else(|| panic!("{field}: {p}"));
    assert!((9_000.0..=10_000.0).contains(&ms("retry_after_ms")), "{p}");
    assert!((299_000.0..=300_000.0).contains(&ms("expected_after_ms")), "{p}");

    let quota = r#"{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}}"#;
    let r = report(json!({"kind": "openai", "value": "k1", "context": "gpt-4o", "http_status": 429, "body": quota}));
    assert_eq!(r.status, 204, "{}", r.body);
    let r = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "o3", "kind": "openai"})));
    let p = r.problem(409, "no_resource_available");
    assert_eq!(p["reasons"]["rate_limited"], 1, "the key pauses for every model: {p}");
    assert_eq!(p["retry_after_ms"].as_f64().map(|ms| ms > 3_599_000.0), Some(true), "{p}");

    let r = report(json!({"kind": "openai", "value": "k1", "context": "gpt", "outcome": "timeout", "body": "{}"}));
    let p = r.problem(400, "invalid_input");
    assert_eq!((p["field"].as_str(), p["rule"].as_str()), (Some("body"), Some("goes with http_status")));
}

#[test]
fn a_bad_profile_flag_stops_the_server_with_its_rule() {
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--no-auth", "--store", "memory", "--profile", "residential=socks"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rule = "--profile: must be one of generic, proxy, api-key, openai, anthropic, gemini";
    assert!(stderr.contains(rule), "{stderr}");
}
