//! What a client can make a server hold: timeouts, connection and body
//! limits, operator caps and each tenant's memory share.

use super::*;

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
    let before = ageless(call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).json());
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
    assert_eq!(ageless(call("GET", &s.url("/v1/snapshot?format=json"), NONE, None).json()), before);
}

/// A JSON snapshot without its resources' ages, which grow with the time
/// it is taken at.
fn ageless(mut snapshot: Value) -> Value {
    for r in snapshot["resources"].as_array_mut().expect("resources") {
        r.as_object_mut().expect("a resource").remove("age");
    }
    snapshot
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
    let limit = 1024 + 10 * (14_400 + 1000) + 10 * (4900 + 1000);
    let quoted = |tag: String, len: usize| format!("{tag}{}", "\"".repeat(len - tag.len()));
    let timeout = json!({"outcome": "timeout", "latency_ms": 123456.789});
    for i in 0..10 {
        let (kind, value) = (quoted(format!("k{i}"), 256), quoted(format!("v{i}"), 256));
        // The most labels, longest names and values.
        let labels: serde_json::Map<String, Value> =
            (0..16).map(|l| (format!("{l:02}{}", "n".repeat(62)), json!(quoted(format!("l{l}"), 256)))).collect();
        let body = json!({"kind": kind, "value": value, "labels": labels});
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
