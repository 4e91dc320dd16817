//! The lease cycle over HTTP and what lasts across processes: restarts,
//! owner leases, the probe loop, the SQLite server lock.

use super::*;

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
        json!({"none_registered": false, "blocked": 1, "rate_limited": 1, "cooling": 0, "leased": 0, "limited": 0, "settled": true})
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
