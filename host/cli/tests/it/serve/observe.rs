//! What a server shows: events, metrics, the OpenAPI document, logs, and
//! `repute bench` driving it.

use super::*;

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
        "/v1/groups",
        "/v1/groups/{name}",
        "/v1/groups/{name}/limits",
        "/v1/leases",
        "/v1/leases/{id}",
        "/v1/leases/{id}/renewals",
        "/v1/leases/{id}/usage",
        "/v1/outcomes",
        "/v1/partitions",
        "/v1/partitions/{index}/handoff",
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

/// The kept document is the one the routes' table and the request and
/// response types make: a route, field or rule changed in the code without
/// regenerating the file fails here.
#[test]
fn openapi_file_is_generated_from_the_routes_and_their_types() {
    let generated = repute_cli::serve::routes::openapi();
    let kept = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json")).unwrap();
    let first_difference = kept.lines().zip(generated.lines()).position(|(k, g)| k != g);
    assert!(
        kept == generated,
        "host/cli/openapi.json differs from what the code generates (first at line {}): run \
         `cargo run --release -p repute-cli -- openapi > host/cli/openapi.json` to regenerate it",
        first_difference.map_or_else(|| kept.lines().count().min(generated.lines().count()) + 1, |i| i + 1)
    );
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

/// Opening a tenant on PostgreSQL waits on the database's blocking client:
/// the event stream, as the first request for a tenant, opens it off the
/// async runtime (it answered nothing before, the worker thread panicking).
#[test]
fn the_event_stream_opens_a_tenant_on_postgres() {
    let dir = tempdir("sse-pg");
    let pg = pg_url();
    let s = Server::start(&["--no-auth", "--store", &pg, "--mode", "shared"], &dir);
    let tenant = unique("events");
    let res = ureq::get(&s.url("/v1/events")).set("Repute-Tenant", &tenant).call().unwrap();
    assert_eq!((res.status(), res.header("content-type")), (200, Some("text/event-stream")));
    drop(res);
    let r = call("GET", &s.url("/v1/resources"), &[("Repute-Tenant", tenant.as_str())], None);
    assert_eq!((r.status, r.body.as_str()), (200, "[]"));
}
