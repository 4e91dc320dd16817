//! A resource's secret over HTTP: the 201 answer of a grant carries it, and
//! nothing else the server says or writes does.

use super::*;

const SECRET: &str = "sk-live-0123456789abcdef";

/// SSE lines as they arrive, until the stream ends.
fn subscribe(url: String) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let res = ureq::get(&url).call().unwrap();
        let mut reader = BufReader::new(res.into_reader());
        let mut line = String::new();
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if tx.send(std::mem::take(&mut line)).is_err() {
                return;
            }
        }
    });
    rx
}

#[test]
fn only_the_201_of_a_grant_carries_the_secret() {
    let dir = tempdir("secrets");
    let mut child = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log", "debug", "--no-auth", "--store", "sqlite:pool.db"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = format!("http://{}", line.trim().strip_prefix("listening on ").unwrap());
    let url = |p: &str| format!("{base}{p}");
    let events = subscribe(url("/v1/events"));
    std::thread::sleep(Duration::from_millis(300));

    let key = json!({"kind": "key", "value": "k1", "labels": {"tier": "paid"}, "secret": SECRET});
    assert_eq!(call("POST", &url("/v1/resources"), NONE, Some(key)).status, 204);
    assert_eq!(call("POST", &url("/v1/resources"), NONE, Some(json!({"kind": "key", "value": "k2"}))).status, 204);

    let granted = call("POST", &url("/v1/leases"), NONE, Some(json!({"context": "api", "prefer": "k1"})));
    assert_eq!(granted.status, 201, "{}", granted.body);
    let lease = granted.json();
    assert_eq!((lease["value"].as_str(), lease["secret"].as_str()), (Some("k1"), Some(SECRET)));
    let plain = call("POST", &url("/v1/leases"), NONE, Some(json!({"context": "api", "prefer": "k2"}))).json();
    assert_eq!(plain["value"], "k2");
    assert!(plain.get("secret").is_none(), "no secret, no field: {plain}");

    let (id, token) = (lease["id"].as_u64().unwrap(), lease["token"].as_u64().unwrap());
    let mut said = vec![
        call("GET", &url(&format!("/v1/leases/{id}")), NONE, None),
        call("GET", &url("/v1/leases"), NONE, None),
        call("POST", &url(&format!("/v1/leases/{id}/renewals")), NONE, Some(json!({"token": token}))),
        call("GET", &url("/v1/resources"), NONE, None),
        call("GET", &url("/v1/snapshot?format=json"), NONE, None),
        call("GET", &url("/v1/stats"), NONE, None),
        call("GET", &url("/metrics"), NONE, None),
    ];
    let resources = said[3].json();
    assert_eq!(resources[0]["labels"], json!({"tier": "paid"}));
    assert!(said[0].json().get("secret").is_none());
    let leased = call("DELETE", &url("/v1/resources/key/k1"), NONE, None);
    leased.problem(409, "leased");
    said.push(leased);
    let long = format!("{SECRET}{}", "x".repeat(4096));
    let too_long =
        call("POST", &url("/v1/resources"), NONE, Some(json!({"kind": "key", "value": "k3", "secret": long})));
    too_long.problem(400, "invalid_input");
    said.push(too_long);
    let typed =
        call("POST", &url("/v1/resources"), NONE, Some(json!({"kind": "key", "value": "k3", "secret": [SECRET]})));
    typed.problem(400, "invalid_input");
    said.push(typed);
    for reply in &said {
        assert!(!reply.body.contains("sk-live"), "{}", reply.body);
    }
    let binary = ureq::get(&url("/v1/snapshot")).call().unwrap();
    let mut bytes = Vec::new();
    binary.into_reader().read_to_end(&mut bytes).unwrap();
    assert!(bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "the binary snapshot keeps the secret");
    assert_eq!(call("DELETE", &url(&format!("/v1/leases/{id}?token={token}")), NONE, None).status, 204);

    let mut frames = String::new();
    let waited = std::time::Instant::now();
    while !frames.contains("event: released") && waited.elapsed() < Duration::from_secs(10) {
        if let Ok(line) = events.recv_timeout(Duration::from_millis(100)) {
            frames.push_str(&line);
        }
    }
    assert!(frames.contains("event: registered") && frames.contains("event: leased"), "{frames}");
    assert!(!frames.contains("sk-live"), "{frames}");

    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    child.wait().unwrap();
    assert!(logs.contains("request") && logs.contains("stopped"), "{logs}");
    assert!(!logs.contains("sk-live"), "{logs}");
}

/// On PostgreSQL at `debug`, where its client logs each statement's
/// parameters (kept at `info` whatever `--log` says), and a registration's
/// parameters hold the secret.
/// A secret with a NUL, which PostgreSQL cannot keep in the log's JSON, is
/// refused naming `secret` before anything is written.
#[test]
fn no_log_line_carries_the_secret_on_postgres() {
    let dir = tempdir("secrets-pg");
    let pg = pg_url();
    let (s, log) = Server::start_logged(&["--no-auth", "--store", &pg, "--mode", "shared"], &dir, "debug");
    let tenant = unique("secrets");
    let t = [("Repute-Tenant", tenant.as_str())];
    let body = json!({"kind": "key", "value": "k1", "secret": SECRET});
    assert_eq!(call("POST", &s.url("/v1/resources"), &t, Some(body)).status, 204);
    let lease = call("POST", &s.url("/v1/leases"), &t, Some(json!({"context": "chat"})));
    assert_eq!((lease.status, lease.json()["secret"].as_str()), (201, Some(SECRET)));
    let nul = json!({"kind": "key", "value": "k2", "secret": "a\u{0}b"});
    let p = call("POST", &s.url("/v1/resources"), &t, Some(nul)).problem(400, "invalid_input");
    assert_eq!(field_rule(&p), some("secret", "must not contain NUL"));
    let views = call("GET", &s.url("/v1/resources"), &t, None).json();
    assert_eq!(views.as_array().map(Vec::len), Some(1), "nothing of the refused registration applied");
    assert!(s.terminate().success());
    let lines: Vec<String> = log.iter().collect();
    assert!(!lines.is_empty());
    let leaked: Vec<&String> = lines.iter().filter(|l| l.contains(SECRET)).collect();
    assert!(leaked.is_empty(), "{leaked:#?}");
}
