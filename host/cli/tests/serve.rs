//! `repute serve` started for real on a free loopback port and driven over HTTP.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(args: &[&str], dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_repute"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--log", "warn"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("repute starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server { child, base: format!("http://{addr}") }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM, then the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    content_type: String,
    location: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// Asserts an RFC 9457 problem with this status and code; returns it.
    fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.content_type, "application/problem+json");
        let p = self.json();
        assert_eq!(p["type"], format!("urn:repute:problem:{code}"));
        assert_eq!(p["status"], status);
        p
    }
}

fn call(method: &str, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> Reply {
    let mut req = ureq::request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    Reply {
        status: res.status(),
        content_type: res.header("content-type").unwrap_or_default().to_owned(),
        location: res.header("location").map(str::to_owned),
        retry_after: res.header("retry-after").map(str::to_owned),
        body: res.into_string().unwrap(),
    }
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("repute-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const NONE: &[(&str, &str)] = &[];

/// `repute key new --tenant TENANT --keys keys` in `dir`: the key it prints.
fn new_key(dir: &Path, tenant: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["key", "new", "--tenant", tenant, "--keys", "keys"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn full_lease_cycle_and_conflicts() {
    let dir = tempdir("cycle");
    let s = Server::start(&["--no-auth", "--store", "memory", "--strategy", "first"], &dir);
    assert_eq!(call("GET", &s.url("/healthz"), NONE, None).status, 200);
    assert_eq!(call("GET", &s.url("/readyz"), NONE, None).status, 200);
    let r = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": "10.0.0.1:8080"})));
    assert_eq!(r.status, 204, "{}", r.body);

    let r = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "example.com"})));
    assert_eq!(r.status, 201, "{}", r.body);
    let lease = r.json();
    assert_eq!(r.location.as_deref(), Some(format!("/v1/leases/{}", lease["id"]).as_str()));
    assert_eq!((lease["kind"].as_str(), lease["value"].as_str()), (Some("proxy"), Some("10.0.0.1:8080")));
    assert_eq!((lease["token"].as_u64(), lease["permit"].as_u64()), (Some(1), Some(0)));
    assert_eq!(lease["ttl_ms"], 30000.0);
    let id = lease["id"].as_u64().unwrap();

    // Nothing left: 409 problem with Retry-After.
    let r = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "example.com"})));
    let p = r.problem(409, "no_resource_available");
    let retry: u64 = r.retry_after.as_deref().expect("Retry-After").parse().unwrap();
    assert!((1..=30).contains(&retry), "retry after {retry}");
    let wait = p["retry_after_ms"].as_f64().unwrap();
    assert!(wait <= 30_000.0, "{p}");
    // The detail states the same wait, in the field's unit.
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.ends_with(&format!("retry after {} ms)", wait.ceil() as u64)), "{detail}");

    let r = call("POST", &s.url(&format!("/v1/leases/{id}/renewals")), NONE, Some(json!({"token": 1})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["token"], 1);
    call("POST", &s.url(&format!("/v1/leases/{id}/renewals")), NONE, Some(json!({"token": 7})))
        .problem(409, "stale_lease");
    call("DELETE", &s.url(&format!("/v1/leases/{id}?token=7")), NONE, None).problem(409, "stale_lease");
    let r = call(
        "POST",
        &s.url("/v1/outcomes"),
        NONE,
        Some(json!({
            "kind": "proxy", "value": "10.0.0.1:8080", "context": "example.com", "outcome": "success", "latency_ms": 42.0
        })),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(call("DELETE", &s.url(&format!("/v1/leases/{id}?token=1")), NONE, None).status, 204);
    call("DELETE", &s.url(&format!("/v1/leases/{id}?token=1")), NONE, None).problem(404, "unknown_lease");
    call("POST", &s.url(&format!("/v1/leases/{id}/renewals")), NONE, Some(json!({"token": 1})))
        .problem(404, "unknown_lease");

    let cells = call("GET", &s.url("/v1/resources/proxy/10.0.0.1:8080/cells"), NONE, None).json();
    assert_eq!(cells[0]["score"], 5);
    assert_eq!(cells[1]["context"], "example.com");
    let next = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "example.com"}))).json();
    assert_eq!(next["token"], 2);
}

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
fn events_stream_in_order_and_metrics_move() {
    let dir = tempdir("sse");
    let s = Server::start(&["--no-auth", "--store", "memory", "--metrics-tenants"], &dir);
    call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": "a"})));
    let (tx, rx) = mpsc::channel::<(String, Value)>();
    let url = s.url("/v1/events");
    std::thread::spawn(move || {
        let res = ureq::get(&url).call().unwrap();
        assert_eq!(res.header("content-type"), Some("text/event-stream"));
        let mut reader = BufReader::new(res.into_reader());
        let mut name = String::new();
        let mut line = String::new();
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
    // Give the subscription a moment to be in place before the events happen.
    std::thread::sleep(Duration::from_millis(300));
    let lease = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c"}))).json();
    let release = format!("/v1/leases/{}?token={}", lease["id"], lease["token"]);
    assert_eq!(call("DELETE", &s.url(&release), NONE, None).status, 204);
    let (n1, d1) = rx.recv_timeout(Duration::from_secs(10)).expect("leased event");
    let (n2, d2) = rx.recv_timeout(Duration::from_secs(10)).expect("released event");
    assert_eq!((n1.as_str(), n2.as_str()), ("leased", "released"));
    assert_eq!(d1["type"], "leased");
    assert_eq!(d1["lease"]["token"], 1);
    assert_eq!(d2["lease"]["id"], lease["id"]);
    // Instants leave as Unix ms, durations as ms.
    let (at1, at2) = (d1["at_unix_ms"].as_f64().unwrap(), d2["at_unix_ms"].as_f64().unwrap());
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as f64;
    assert!(at1 <= at2 && at2 <= now_ms + 1.0 && now_ms - at1 < 60_000.0, "{at1} {at2} {now_ms}");
    assert_eq!(d1["lease"]["ttl_ms"], 30_000.0);
    assert!(d1.get("at").is_none() && d1["lease"].get("expires_at").is_none());

    call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c"})));
    call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c"})));
    let m = call("GET", &s.url("/metrics"), NONE, None);
    assert_eq!(m.status, 200);
    assert!(m.body.contains("repute_leases_granted_total{tenant=\"default\"} 2"), "{}", m.body);
    assert!(
        m.body.contains("repute_leases_rejected_total{tenant=\"default\",reason=\"no_candidates\"} 1"),
        "{}",
        m.body
    );
    assert!(m.body.contains("repute_leases_live{tenant=\"default\"} 1"), "{}", m.body);
    assert!(
        m.body.contains(
            "repute_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/leases\",status=\"201\"} 2"
        ),
        "{}",
        m.body
    );
}

#[test]
fn checkpoint_survives_a_restart() {
    let dir = tempdir("restart");
    let args = ["--no-auth", "--store", "sqlite:pool.db", "--strategy", "first"];
    let s = Server::start(&args, &dir);
    for v in ["a", "b"] {
        call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": v})));
    }
    call(
        "POST",
        &s.url("/v1/outcomes"),
        NONE,
        Some(json!({"kind": "proxy", "value": "a", "context": "c", "outcome": "slow"})),
    );
    call("PUT", &s.url("/v1/resources/proxy/b/block"), NONE, Some(json!({"reason": "abuse"})));
    let held = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c"}))).json();
    assert_eq!((held["value"].as_str(), held["token"].as_u64()), (Some("a"), Some(1)));
    assert!(s.terminate().success(), "graceful stop exits 0");

    let s = Server::start(&args, &dir);
    let cells = call("GET", &s.url("/v1/resources/proxy/a/cells"), NONE, None).json();
    assert_eq!(cells[1]["score"], -2);
    let resources = call("GET", &s.url("/v1/resources"), NONE, None).json();
    assert_eq!(resources[1]["block"]["reason"], "abuse");
    // The lease came back with a full TTL; its holder can still renew it.
    let r = call("POST", &s.url(&format!("/v1/leases/{}/renewals", held["id"])), NONE, Some(json!({"token": 1})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["expires_in_ms"].as_f64().unwrap() > 29_000.0);
    let release = format!("/v1/leases/{}?token=1", held["id"]);
    assert_eq!(call("DELETE", &s.url(&release), NONE, None).status, 204);
    let next = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "c"}))).json();
    assert_eq!((next["value"].as_str(), next["token"].as_u64()), (Some("a"), Some(2)));
}

#[test]
fn openapi_document_lists_every_route() {
    let dir = tempdir("openapi");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let doc = call("GET", &s.url("/openapi.json"), NONE, None).json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut paths: Vec<&str> = doc["paths"].as_object().unwrap().keys().map(String::as_str).collect();
    paths.sort();
    let mut expected = vec![
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/readyz",
        "/v1/events",
        "/v1/leases",
        "/v1/leases/{id}",
        "/v1/leases/{id}/renewals",
        "/v1/outcomes",
        "/v1/probes",
        "/v1/resources",
        "/v1/resources/{kind}/{value}",
        "/v1/resources/{kind}/{value}/block",
        "/v1/resources/{kind}/{value}/cells",
        "/v1/snapshot",
        "/v1/stats",
    ];
    expected.sort();
    assert_eq!(paths, expected);
    let mut buf = String::new();
    std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json"))
        .unwrap()
        .read_to_string(&mut buf)
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&buf).unwrap(), doc, "served document is the one in the repo");
}

/// Sharded mode with owner leases in etcd and the data in PostgreSQL: the
/// second process answers 421 naming the owner, and takes the tenant over
/// (with what the first one acknowledged) once the owner is killed. Needs
/// the `etcd` feature, which the test command turns on.
#[cfg(feature = "etcd")]
#[test]
fn sharded_on_etcd_answers_not_owner_and_takes_over_from_a_dead_owner() {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
        })
    };
    let (pg, etcd) = (var("REPUTE_TEST_PG_URL"), var("REPUTE_TEST_ETCD_URL"));
    let owners = format!("etcd://{}", etcd.trim_start_matches("http://"));
    let args = ["--no-auth", "--store", &pg, "--mode", "sharded", "--owners", &owners, "--owner-ttl", "1"];
    let dir = tempdir("etcd");
    let (a, b) = (Server::start(&args, &dir), Server::start(&args, &dir));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let tenant = format!("etcd-{}-{nanos:x}", std::process::id());
    let t = [("Repute-Tenant", tenant.as_str())];

    let r = call("POST", &a.url("/v1/resources"), &t, Some(json!({"kind": "proxy", "value": "p1"})));
    assert_eq!(r.status, 204, "{}", r.body);
    let p = call("GET", &b.url("/v1/resources"), &t, None).problem(421, "not_owner");
    assert_eq!(p["owner"], a.base);

    drop(a);
    let killed = std::time::Instant::now();
    let r = loop {
        let r = call("GET", &b.url("/v1/resources"), &t, None);
        if r.status != 421 {
            break r;
        }
        assert!(killed.elapsed() < Duration::from_secs(15), "never taken over: {}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("p1"), "the new owner has what the dead one acknowledged: {}", r.body);
}

#[test]
fn outcomes_speak_http_and_refusals_say_why() {
    let dir = tempdir("outcomes");
    let s = Server::start(&["--no-auth", "--store", "memory", "--strategy", "first"], &dir);
    for v in ["k1", "k2"] {
        let r = call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "api-key", "value": v})));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let report = |body: Value| call("POST", &s.url("/v1/outcomes"), NONE, Some(body));
    let r = report(json!({
        "kind": "api-key", "value": "k1", "context": "gpt", "http_status": 429, "headers": {"Retry-After": "120"}
    }));
    assert_eq!(r.status, 204, "{}", r.body);
    let r = report(json!({"kind": "api-key", "value": "k2", "context": "gpt", "http_status": 401}));
    assert_eq!(r.status, 204, "{}", r.body);
    let cells = call("GET", &s.url("/v1/resources/api-key/k1/cells"), NONE, None).json();
    assert_eq!((cells[1]["state"].as_str(), cells[1]["cause"].as_str()), (Some("cooling"), Some("rate_limited")));
    let r = call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "gpt"})));
    let p = r.problem(409, "no_resource_available");
    assert_eq!(
        p["reasons"],
        json!({"none_registered": false, "blocked": 1, "rate_limited": 1, "cooling": 0, "leased": 0})
    );
    let retry = p["retry_after_ms"].as_f64().unwrap();
    assert!(retry > 119_000.0 && retry <= 120_000.0, "retry after {retry}");
    // Another model is not paused by k1's 429.
    assert_eq!(call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "claude"}))).status, 201);

    let r = report(json!({
        "kind": "api-key", "value": "k1", "context": "gpt", "outcome": "quota_exhausted", "retry_after_ms": 5000
    }));
    assert_eq!(r.status, 204, "{}", r.body);
    let bad = [
        (
            json!({"kind": "api-key", "value": "k1", "context": "gpt", "outcome": "timeout", "retry_after_ms": 5}),
            "retry_after_ms",
            "only rate_limited and quota_exhausted take one",
        ),
        (
            json!({"kind": "api-key", "value": "k1", "context": "gpt", "outcome": "success", "http_status": 200}),
            "outcome",
            "exactly one of outcome and http_status is required",
        ),
        (
            json!({"kind": "api-key", "value": "k1", "context": "gpt"}),
            "outcome",
            "exactly one of outcome and http_status is required",
        ),
        (
            json!({"kind": "api-key", "value": "k1", "context": "gpt", "http_status": 700}),
            "http_status",
            "must be an HTTP status code in 100..=599",
        ),
    ];
    for (body, field, rule) in bad {
        let p = report(body.clone()).problem(400, "invalid_input");
        assert_eq!((p["field"].as_str(), p["rule"].as_str()), (Some(field), Some(rule)), "{body}");
    }
}

/// A one-thread HTTP server answering 200 to paths with "good" in them and
/// 503 to the rest; every request line it saw goes to the channel.
fn probe_target() -> (String, mpsc::Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200) {
            let Ok(mut stream) = stream else { continue };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Read the headers out, so closing does not reset the connection.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let status = if line.contains("good") { "200 OK" } else { "503 Service Unavailable" };
            let _ = tx.send(line.trim().to_owned());
            let _ = std::io::Write::write_all(
                &mut stream,
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes(),
            );
        }
    });
    (format!("http://{addr}"), rx)
}

#[test]
fn the_server_runs_the_probe_loop_with_an_http_probe() {
    let (target, seen) = probe_target();
    let dir = tempdir("probe");
    let url = format!("{target}/probe/{{kind}}/{{value}}?site={{context}}");
    let args = [
        "--no-auth",
        "--store",
        "memory",
        "--recovery",
        "probe",
        "--probe-url",
        &url,
        "--probe-every",
        "0.2",
        "--cooldown",
        "timeout=1:1:0",
    ];
    let s = Server::start(&args, &dir);
    for v in ["good", "bad"] {
        call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": v})));
        let r = call(
            "POST",
            &s.url("/v1/outcomes"),
            NONE,
            Some(json!({"kind": "proxy", "value": v, "context": "a b", "outcome": "timeout", "latency_ms": 1000})),
        );
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let first = seen.recv_timeout(Duration::from_secs(20)).expect("a probe arrives once the cooldown ended");
    assert!(first.starts_with("GET /probe/proxy/") && first.ends_with("?site=a%20b HTTP/1.1"), "{first}");
    let state = |v: &str| call("GET", &s.url(&format!("/v1/resources/proxy/{v}/cells")), NONE, None).json()[1].clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (good, bad) = (state("good"), state("bad"));
        if good["state"] == "recovering" && bad["consecutive_failures"].as_u64() >= Some(2) {
            assert_eq!(bad["cause"], "connection_reset", "a 503 probe re-cools as a reported 503 would");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "probes did not settle: {good} {bad}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(call("GET", &s.url("/v1/leases"), NONE, None).json().as_array().map(Vec::len), Some(0));
    drop(s);
    let p = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--no-auth", "--store", "memory", "--probe-url", &url])
        .output()
        .unwrap();
    assert!(!p.status.success());
    assert!(String::from_utf8_lossy(&p.stderr).contains("--probe-url: goes with --recovery probe"));
}

/// One request over a fresh TCP connection, as sent; the whole answer back.
fn raw(base: &str, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// `call` with a raw body of this content type.
/// A problem's `field` and `rule`.
fn field_rule(p: &Value) -> (Option<String>, Option<String>) {
    (p["field"].as_str().map(str::to_owned), p["rule"].as_str().map(str::to_owned))
}

fn some(field: &str, rule: &str) -> (Option<String>, Option<String>) {
    (Some(field.to_owned()), Some(rule.to_owned()))
}

fn send(method: &str, url: &str, content_type: &str, body: &[u8]) -> Reply {
    let res = match ureq::request(method, url).set("Content-Type", content_type).send_bytes(body) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    Reply {
        status: res.status(),
        content_type: res.header("content-type").unwrap_or_default().to_owned(),
        location: None,
        retry_after: None,
        body: res.into_string().unwrap(),
    }
}

/// The values each label of a metric takes on the page.
fn label_values(page: &str, metric: &str, label: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{metric}{{");
    page.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| {
            let start = l.find(&format!("{label}=\""))? + label.len() + 2;
            Some(l[start..start + l[start..].find('"')?].to_owned())
        })
        .collect()
}

#[test]
fn invented_methods_and_paths_leave_the_metrics_page_bounded() {
    let dir = tempdir("metrics");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    for t in ["acme", "globex"] {
        call("POST", &s.url("/v1/resources"), &[("Repute-Tenant", t)], Some(json!({"kind": "p", "value": "a"})));
        call("POST", &s.url("/v1/leases"), &[("Repute-Tenant", t)], Some(json!({"context": "c"})));
    }
    let invent = |round: usize| {
        for i in round * 1000..(round + 1) * 1000 {
            let method = format!("M{i}{}", "X".repeat(i % 50));
            let path = if i % 2 == 0 { format!("/invented/{i}") } else { "/v1/leases".to_owned() };
            let reply = raw(&s.base, &format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
            assert!(reply.starts_with("HTTP/1.1 40"), "{reply}");
        }
        // Scraped twice, so the page shows its own route's series too.
        call("GET", &s.url("/metrics"), NONE, None);
        call("GET", &s.url("/metrics"), NONE, None).body
    };
    let first = invent(0);
    let page = invent(1);
    // The second 1,000 invented requests add no series: only counts and sums move.
    let digits = |p: &str| p.chars().filter(|c| !c.is_ascii_digit() && *c != '.' && *c != 'e' && *c != '-').count();
    assert_eq!(digits(&page), digits(&first), "the page grew from {} to {} bytes", first.len(), page.len());
    let metric = "repute_http_request_duration_seconds_count";
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(label_values(&page, metric, "method"), set(&["GET", "POST", "other"]));
    assert_eq!(label_values(&page, metric, "route"), set(&["/metrics", "/v1/leases", "/v1/resources", "unmatched"]));
    assert_eq!(label_values(&page, metric, "status"), set(&["200", "201", "204", "404", "405"]));
    // Pool figures are sums: no tenant names unless --metrics-tenants.
    assert!(!page.contains("acme") && !page.contains("globex"), "{page}");
    assert!(page.contains("\nrepute_leases_granted_total{} 2\n"), "{page}");
    assert!(page.contains("\nrepute_leases_live{} 2\n"), "{page}");
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

#[test]
fn slow_and_idle_connections_are_closed_after_the_header_timeout() {
    let dir = tempdir("timeouts");
    let s = Server::start(&["--no-auth", "--store", "memory", "--header-timeout", "1"], &dir);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let closed_within = |stream: &mut std::net::TcpStream, limit: Duration| {
        stream.set_read_timeout(Some(limit)).unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return started.elapsed(),
                Ok(_) => continue,
                Err(e) => panic!("still open after {:?}: {e}", started.elapsed()),
            }
        }
    };
    // Half the headers, then nothing.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut slow, b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let took = closed_within(&mut slow, Duration::from_secs(5));
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    // A finished request on a kept-alive connection, then silence.
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut idle, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut first = [0u8; 17];
    idle.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200 OK\r\n");
    closed_within(&mut idle, Duration::from_secs(5));
    assert_eq!(call("GET", &s.url("/healthz"), NONE, None).status, 200, "the server itself goes on");
}

#[test]
fn operator_caps_hold_and_a_snapshot_import_cannot_lift_them() {
    let dir = tempdir("caps");
    let args = ["--no-auth", "--store", "memory", "--max-resources", "2", "--max-cells", "6", "--rate", "50"];
    let s = Server::start(&args, &dir);
    let reg = |v: &str| call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": v})));
    assert_eq!(reg("a").status, 204);
    assert_eq!(reg("b").status, 204);
    let p = reg("c").problem(422, "budget_exhausted");
    assert_eq!(p["field"], "max_resources");

    let mut snapshot = call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).json();
    assert_eq!(snapshot["policy"]["max_resources"], 2);
    assert_eq!(snapshot["policy"]["rate_limit"], json!({"rate": 50.0, "burst": 50}));
    snapshot["policy"]["max_resources"] = Value::Null;
    snapshot["policy"]["max_cells"] = json!(1_000_000);
    snapshot["policy"]["rate_limit"] = Value::Null;
    let r = call("PUT", &s.url("/v1/snapshot"), NONE, Some(snapshot.clone()));
    assert_eq!(r.status, 204, "{}", r.body);
    reg("c").problem(422, "budget_exhausted");
    let report = |c: usize| {
        let body = json!({"kind": "p", "value": "a", "context": format!("c{c}"), "outcome": "success"});
        call("POST", &s.url("/v1/outcomes"), NONE, Some(body))
    };
    for c in 0..6 {
        assert_eq!(report(c).status, 204, "cell {c} is within --max-cells 6");
    }
    let p = report(6).problem(422, "budget_exhausted");
    assert_eq!(p["field"], "max_cells");
    let policy = call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).json()["policy"].clone();
    assert_eq!((policy["max_resources"].as_u64(), policy["max_cells"].as_u64()), (Some(2), Some(6)));
    assert_eq!(policy["rate_limit"], json!({"rate": 50.0, "burst": 50}));

    // Holding more than the caps allow, or counters that could wrap: refused, nothing changes.
    let before = call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).body;
    let open = Server::start(&["--no-auth", "--store", "memory"], &dir);
    for v in ["x", "y", "z"] {
        call("POST", &open.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": v})));
    }
    let mut three = Vec::new();
    ureq::get(&open.url("/v1/snapshot")).call().unwrap().into_reader().read_to_end(&mut three).unwrap();
    let p = send("PUT", &s.url("/v1/snapshot"), "application/octet-stream", &three).problem(422, "invalid_snapshot");
    assert_eq!(
        (p["field"].as_str(), p["rule"].as_str()),
        (Some("resources"), Some("must not outnumber policy.max_resources"))
    );
    let mut wrap = snapshot.clone();
    wrap["next_lease_id"] = json!(u64::MAX);
    let p = call("PUT", &s.url("/v1/snapshot"), NONE, Some(wrap)).problem(422, "invalid_snapshot");
    assert_eq!(p["field"], "next_lease_id");
    assert_eq!(p["rule"], "must be at most u64::MAX / 2 (a counter this high could wrap)");
    assert_eq!(call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).body, before);
}

#[test]
fn the_default_body_limit_takes_back_a_7500_resource_export() {
    let dir = tempdir("big");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let agent = ureq::agent();
    for i in 0..7500 {
        let r = agent
            .post(&s.url("/v1/resources"))
            .send_json(json!({"kind": "proxy", "value": format!("10.0.{}.{}:8080", i / 256, i % 256)}));
        assert_eq!(r.map(|r| r.status()).ok(), Some(204));
    }
    for (i, outcome) in ["slow", "timeout", "success"].iter().enumerate() {
        let body = json!({"kind": "proxy", "value": format!("10.0.0.{i}:8080"), "context": "c", "outcome": outcome});
        call("POST", &s.url("/v1/outcomes"), NONE, Some(body));
    }
    let export = call("GET", &s.url("/v1/snapshot?format=json"), NONE, None);
    assert!(export.body.len() > 2 << 20, "{} bytes: over the old 2 MiB limit", export.body.len());
    let r = send("PUT", &s.url("/v1/snapshot"), "application/json", export.body.as_bytes());
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(call("GET", &s.url("/v1/stats"), NONE, None).json()["resources"], 7500);
}

#[test]
fn bench_against_a_server_removes_the_resources_it_registered() {
    let dir = tempdir("bench-target");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": "mine"})));
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["bench", "--target", &s.base, "--count", "50", "--resources", "5", "--report"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("errors 0"));
    let left = call("GET", &s.url("/v1/resources"), NONE, None).json();
    let values: Vec<&str> = left.as_array().unwrap().iter().filter_map(|r| r["resource"]["value"].as_str()).collect();
    assert_eq!(values, ["mine"], "only what was there before the run");
}

#[test]
fn a_long_bench_against_a_server_shows_progress_off_a_terminal() {
    let dir = tempdir("bench-progress");
    let s = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["bench", "--target", &s.base, "--duration", "3", "--resources", "5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines[0], format!("bench: registering 5 resources on {}", s.base));
    let progress: Vec<&&str> = lines.iter().filter(|l| l.starts_with("bench: 2 s of 3 s: ")).collect();
    assert_eq!(progress.len(), 1, "{err}");
    assert!(progress[0].ends_with(" pairs/s, errors 0"), "{err}");
    assert!(!err.contains('\u{1b}'), "no bar redraws into a pipe: {err:?}");
}

#[test]
fn a_second_server_on_one_sqlite_file_refuses_to_start_naming_the_first() {
    let dir = tempdir("sqlite-twice");
    let args = ["--no-auth", "--store", "sqlite:pool.db"];
    let first = Server::start(&args, &dir);
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "it never listened: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr).unwrap();
    let pid = first.child.id();
    assert!(
        err.contains(&format!("--store sqlite:pool.db: already served by process {pid} serving {}", first.base)),
        "{err}"
    );
    // Logs off a terminal carry no colour codes.
    assert!(!err.contains('\u{1b}'), "{err:?}");
    drop(first);
    let again = Server::start(&args, &dir);
    assert_eq!(call("GET", &again.url("/healthz"), NONE, None).status, 200, "a stopped server frees the file");
}

#[test]
fn the_rate_flag_limits_acquires_and_logs_carry_no_colour_codes() {
    let dir = tempdir("rate");
    let mut child = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log", "info", "--no-auth", "--store", "memory"])
        .args(["--rate", "0.5", "--burst", "2", "--strategy", "first"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = format!("http://{}", line.trim().strip_prefix("listening on ").unwrap());
    let url = |p: &str| format!("{base}{p}");
    call("POST", &url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": "a", "permits": 10})));
    for _ in 0..2 {
        assert_eq!(call("POST", &url("/v1/leases"), NONE, Some(json!({"context": "c"}))).status, 201);
    }
    let r = call("POST", &url("/v1/leases"), NONE, Some(json!({"context": "c"})));
    let p = r.problem(429, "rate_limited");
    // One token takes 2 s at 0.5/s: the wait is what is left of it.
    let wait = p["retry_after_ms"].as_f64().unwrap();
    assert!(wait > 0.0 && wait <= 2000.0, "{p}");
    assert_eq!(r.retry_after.as_deref(), Some(format!("{}", (wait / 1e3).ceil().max(1.0) as u64).as_str()));
    assert_eq!(p["detail"], format!("rate limited (retry after {} ms)", wait.ceil() as u64));
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    child.wait().unwrap();
    assert!(logs.contains("serving") && logs.contains("stopped"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "colour codes in a redirected log: {logs:?}");
}

#[test]
fn connections_past_the_cap_wait_until_one_is_closed() {
    let dir = tempdir("conn-cap");
    let s = Server::start(&["--no-auth", "--store", "memory", "--max-connections", "2", "--header-timeout", "1"], &dir);
    let addr = s.base.trim_start_matches("http://").to_owned();
    // Two connections that send nothing hold both slots until the header timeout closes them.
    let held: Vec<_> = (0..2).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = std::time::Instant::now();
    assert_eq!(call("GET", &s.url("/healthz"), NONE, None).status, 200);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(700), "served after {waited:?}, while both slots were held");
    drop(held);
    let started = std::time::Instant::now();
    assert_eq!(call("GET", &s.url("/healthz"), NONE, None).status, 200);
    assert!(started.elapsed() < Duration::from_millis(700), "a free slot serves at once");
}

#[test]
fn caps_set_after_a_tenant_was_saved_hold_over_its_checkpoint() {
    let dir = tempdir("caps-later");
    let open = ["--no-auth", "--store", "sqlite:pool.db"];
    let s = Server::start(&open, &dir);
    for v in ["a", "b", "c"] {
        call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": v})));
    }
    let policy = |s: &Server| call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).json()["policy"].clone();
    assert_eq!(policy(&s)["max_resources"], Value::Null);
    assert!(s.terminate().success());

    let s = Server::start(&[&open[..], &["--max-resources", "4", "--rate", "10"]].concat(), &dir);
    let p = policy(&s);
    assert_eq!((p["max_resources"].as_u64(), p["rate_limit"].clone()), (Some(4), json!({"rate": 10.0, "burst": 10})));
    assert_eq!(call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": "d"}))).status, 204);
    call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "p", "value": "e"})))
        .problem(422, "budget_exhausted");
    assert!(s.terminate().success());

    // Holding more than a cap now allows: kept as saved, budgets and all.
    let s = Server::start(&[&open[..], &["--max-resources", "2"]].concat(), &dir);
    assert_eq!(policy(&s)["max_resources"], 4);
    assert_eq!(call("GET", &s.url("/v1/stats"), NONE, None).json()["resources"], 4);
}

#[test]
fn a_tenant_at_its_memory_share_is_refused_growth_and_keeps_working() {
    let dir = tempdir("share");
    let s = Server::start(&["--no-auth", "--store", "memory", "--max-tenant-bytes", "60000"], &dir);
    let register = |v: &str| call("POST", &s.url("/v1/resources"), NONE, Some(json!({"kind": "proxy", "value": v})));
    let stats = || call("GET", &s.url("/v1/stats"), NONE, None).json();
    let mut n = 0;
    while register(&format!("10.0.0.{n}:8080")).status == 204 {
        n += 1;
        assert!(n < 10_000, "never refused");
    }
    let before = stats();
    assert!(before["footprint"].as_u64().unwrap() >= 60000, "{before}");
    assert_eq!(before["resources"], n);
    let p = register("one-more").problem(422, "budget_exhausted");
    assert_eq!(field_rule(&p), some("max_tenant_bytes", "the tenant's pool must hold at most 60000 heap bytes"));
    assert_eq!(stats()["resources"], n, "nothing of a refused request is applied");
    assert_eq!(stats()["footprint"], before["footprint"]);

    // What adds nothing new still runs: registering a known resource again,
    // a report to a cell it has, a lease.
    assert_eq!(register("10.0.0.0:8080").status, 204);
    let report = |context: &str| {
        let body = json!({"kind": "proxy", "value": "10.0.0.0:8080", "context": context, "outcome": "success"});
        call("POST", &s.url("/v1/outcomes"), NONE, Some(body))
    };
    let p = report("new.example").problem(422, "budget_exhausted");
    assert_eq!(p["field"], "max_tenant_bytes");
    let block = json!({"context": "new.example"});
    let p = call("PUT", &s.url("/v1/resources/proxy/10.0.0.0:8080/block"), NONE, Some(block))
        .problem(422, "budget_exhausted");
    assert_eq!(p["field"], "max_tenant_bytes");
    assert_eq!(stats()["cells"], 0);
    assert_eq!(call("POST", &s.url("/v1/leases"), NONE, Some(json!({"context": "new.example"}))).status, 201);
    // A resource that is not registered is still a 404, not a share refusal.
    let body = json!({"kind": "proxy", "value": "nobody", "context": "c", "outcome": "success"});
    call("POST", &s.url("/v1/outcomes"), NONE, Some(body)).problem(404, "unknown_resource");

    // An import is held to the share by the pool it would build; a small one
    // (whose policy names no budget) does not lift the share.
    let other = Server::start(&["--no-auth", "--store", "memory"], &dir);
    for i in 0..2 * n {
        let body = json!({"kind": "proxy", "value": format!("big-{i}")});
        assert_eq!(call("POST", &other.url("/v1/resources"), NONE, Some(body)).status, 204);
    }
    let big = call("GET", &other.url("/v1/snapshot?format=json"), NONE, None);
    let p =
        send("PUT", &s.url("/v1/snapshot"), "application/json", big.body.as_bytes()).problem(422, "budget_exhausted");
    assert_eq!(p["field"], "max_tenant_bytes");
    assert_eq!(stats()["resources"], n, "a refused import leaves the pool as it was");
    let empty = Server::start(&["--no-auth", "--store", "memory"], &dir);
    let small = call("GET", &empty.url("/v1/snapshot?format=json"), NONE, None);
    assert_eq!(send("PUT", &s.url("/v1/snapshot"), "application/json", small.body.as_bytes()).status, 204);
    assert_eq!(stats()["resources"], 0);
    let mut again = 0;
    while register(&format!("again-{again}")).status == 204 {
        again += 1;
        assert!(again < 10_000, "the import lifted the share");
    }
    register("past").problem(422, "budget_exhausted");
}

#[test]
fn the_default_body_limit_fits_the_largest_snapshot_the_budgets_allow() {
    let dir = tempdir("body-limit");
    // 10 resources and 10 cells: repute_core::snapshot::json_bound(10, 10, 10) bytes.
    let s = Server::start(&["--no-auth", "--store", "memory", "--max-resources", "10", "--max-cells", "10"], &dir);
    let limit = 1024 + 10 * (3700 + 1000) + 10 * (4200 + 1000);
    let quoted = |tag: String, len: usize| format!("{tag}{}", "\"".repeat(len - tag.len()));
    let timeout = json!({"outcome": "timeout", "latency_ms": 123456.789});
    for i in 0..10 {
        let (kind, value) = (quoted(format!("k{i}"), 256), quoted(format!("v{i}"), 256));
        let body = json!({"kind": kind, "value": value});
        assert_eq!(call("POST", &s.url("/v1/resources"), NONE, Some(body)).status, 204);
        let mut report = json!({"kind": kind, "value": value, "context": quoted(format!("c{i}"), 256)});
        report.as_object_mut().unwrap().extend(timeout.as_object().unwrap().clone());
        for _ in 0..10 {
            assert_eq!(call("POST", &s.url("/v1/outcomes"), NONE, Some(report.clone())).status, 204);
        }
        let path = format!(
            "/v1/resources/{}/{}/block",
            percent_encoding::utf8_percent_encode(&kind, percent_encoding::NON_ALPHANUMERIC),
            percent_encoding::utf8_percent_encode(&value, percent_encoding::NON_ALPHANUMERIC)
        );
        let block = json!({"reason": quoted(format!("r{i}"), 1024), "duration_ms": 3_600_000});
        assert_eq!(call("PUT", &s.url(&path), NONE, Some(block)).status, 204);
    }
    let export = call("GET", &s.url("/v1/snapshot?format=json"), NONE, None);
    assert!(export.body.len() > 64 << 10, "{} bytes: a limit of the old floor would refuse it", export.body.len());
    assert!(export.body.len() <= limit);
    assert_eq!(send("PUT", &s.url("/v1/snapshot"), "application/json", export.body.as_bytes()).status, 204);
    let p = send("PUT", &s.url("/v1/snapshot"), "application/json", &vec![b' '; limit + 1])
        .problem(413, "payload_too_large");
    assert_eq!(field_rule(&p), some("body", &format!("must be at most {limit} bytes")));

    // A memory share gives 3 bytes of JSON per byte; the flag still overrides.
    let s = Server::start(&["--no-auth", "--store", "memory", "--max-tenant-bytes", "100000"], &dir);
    let p =
        send("PUT", &s.url("/v1/snapshot"), "application/json", &vec![b' '; 300_001]).problem(413, "payload_too_large");
    assert_eq!(p["rule"], "must be at most 300000 bytes");
    let s = Server::start(
        &["--no-auth", "--store", "memory", "--max-tenant-bytes", "100000", "--max-body-bytes", "2000"],
        &dir,
    );
    let p = send("PUT", &s.url("/v1/snapshot"), "application/json", &[b' '; 2001]).problem(413, "payload_too_large");
    assert_eq!(p["rule"], "must be at most 2000 bytes");
}
