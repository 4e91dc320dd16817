//! The naive way to scale out, and why it is wrong: each process keeps its
//! own pool and they share whole-pool snapshots, as with the Java library.
//! These tests assert that the harness SEES the failures: double grants when
//! two processes restore the same snapshot, and acknowledged reports lost
//! when they save it back.

use std::time::Duration;

use repute_tests::checker::{reports_held, Report};
use repute_tests::downstream;
use repute_tests::http::{Client, Cluster};
use repute_tests::naive_checkpoint::NaiveCheckpoints;
use repute_tests::server::Server;
use repute_tests::services::{connect, pg_url};
use repute_tests::unique;
use repute_tests::workload::{Config, Running};
use serde_json::{json, Value};

fn memory_server() -> Server {
    Server::start(&["--no-auth", "--store", "memory"].map(String::from))
}

fn client(server: &Server, tenant: &str) -> Client {
    Client::new(&Cluster::new(vec![server.base().to_owned()]), tenant, 0, Duration::from_secs(5))
}

/// Sends and expects `status`; returns the body as JSON (`null` when empty).
fn expect(client: &mut Client, method: &str, path: &str, body: Option<&Value>, status: u16) -> Value {
    let (server, r) = client.send(method, path, body).unwrap_or_else(|e| panic!("{method} {path}: {e:?}"));
    assert_eq!(r.status, status, "{method} {server}{path}: {}", r.body);
    if r.body.is_empty() {
        Value::Null
    } else {
        r.json()
    }
}

/// A pool with one resource of one permit, exported as the Java library
/// checkpoints it: the whole pool, without its leases. A lease had been
/// granted, so the permit's fence counter stands at 1.
fn one_permit_snapshot(tenant: &str) -> Value {
    let origin = memory_server();
    let mut c = client(&origin, tenant);
    expect(&mut c, "POST", "/v1/resources", Some(&json!({"kind": "proxy", "value": "only", "permits": 1})), 204);
    let lease = expect(&mut c, "POST", "/v1/leases", Some(&json!({"context": "example.com"})), 201);
    assert_eq!(lease["token"], 1);
    expect(&mut c, "GET", "/v1/snapshot?format=json&leases=false", None, 200)
}

/// A fresh `--store memory` process that restored `snapshot` for `tenant`.
fn restored(snapshot: &Value, tenant: &str) -> Server {
    let server = memory_server();
    expect(&mut client(&server, tenant), "PUT", "/v1/snapshot", Some(snapshot), 204);
    server
}

#[test]
fn one_snapshot_restored_by_two_processes_grants_one_permit_twice() {
    let pg = pg_url();
    let tenant = unique("naive");
    let snapshot = one_permit_snapshot(&tenant);
    let (a, b) = (restored(&snapshot, &tenant), restored(&snapshot, &tenant));
    let table = unique("naive_downstream");
    downstream::create_table(&pg, &table);

    let cluster = Cluster::new(vec![a.base().to_owned(), b.base().to_owned()]);
    let config = Config {
        tenant,
        workers: 2,
        grants: 40,
        contexts: 1,
        hold: (Duration::from_millis(5), Duration::from_millis(15)),
        long_hold: None,
        timeout: Duration::from_secs(5),
        downstream_url: pg,
        downstream_table: table,
        stall: Duration::from_secs(20),
        cost: None,
    };
    let records = Running::start(config, &cluster).finish();
    let report = Report::new("naive: one snapshot restored by two processes", &records, None);
    println!("{report}");

    for server in [&a, &b] {
        assert!(records.grants.iter().any(|g| g.server == server.base()), "{} granted nothing", server.base());
    }
    // Both processes continue the permit's fence counter from the same
    // snapshot, so both mint token 2 (and 3, ...): fencing cannot tell them apart.
    assert!(report.duplicate_tokens > 0, "expected duplicate tokens\n{report}");
    assert!(report.double_grants() > 0, "expected double grants\n{report}");
}

#[test]
fn unconditional_checkpoints_lose_the_first_writers_reports() {
    let pg = pg_url();
    let tenant = unique("naive");
    let snapshot = one_permit_snapshot(&tenant);
    let (a, b) = (restored(&snapshot, &tenant), restored(&snapshot, &tenant));
    let report = |server: &Server, context: &str, outcome: &str, times: usize| {
        let mut c = client(server, &tenant);
        let body =
            json!({"kind": "proxy", "value": "only", "context": context, "outcome": outcome, "latency_ms": 20.0});
        for _ in 0..times {
            expect(&mut c, "POST", "/v1/outcomes", Some(&body), 204);
        }
    };
    report(&a, "a.example", "success", 5);
    report(&b, "b.example", "slow", 3);

    let mut db = connect(&pg);
    let checkpoints = NaiveCheckpoints::create(&mut db, &unique("naive_checkpoints"));
    for server in [&a, &b] {
        let json = expect(&mut client(server, &tenant), "GET", "/v1/snapshot?format=json", None, 200);
        checkpoints.save(&mut db, &tenant, &json.to_string());
    }

    // What a process that opens the pool next sees.
    let stored: Value = serde_json::from_str(&checkpoints.load(&mut db, &tenant)).expect("a JSON snapshot");
    let next = restored(&stored, &tenant);
    let cells = expect(&mut client(&next, &tenant), "GET", "/v1/resources/proxy/only/cells", None, 200);
    let contexts: Vec<&str> =
        cells.as_array().expect("a list of cells").iter().filter_map(|c| c["context"].as_str()).collect();
    let held = reports_held(&mut client(&next, &tenant));
    println!("stored after both checkpoints: contexts {contexts:?}, {held} of 8 acknowledged reports");
    assert_eq!(contexts, ["b.example"], "a's context should be gone: {cells}");
    assert_eq!(held, 3, "8 reports were acknowledged, only b's 3 should survive");
}
