//! Faults injected into a real cluster: three `repute serve` processes on one
//! PostgreSQL, in each scaled-out mode, under a steady workload. Whatever the
//! fault, no permit is ever held twice (I1, I2) and no acknowledged report is
//! lost (I4); the report prints how long the cluster took to recover.
//!
//! `REPUTE_FAULT_GRANTS` sets the grants per scenario (default 10 000).

use std::sync::Mutex;
use std::time::Duration;

use repute_tests::checker::{reports_held, Report};
use repute_tests::downstream;
use repute_tests::http::{Client, Cluster};
use repute_tests::proxy::Proxy;
use repute_tests::server::Server;
use repute_tests::services::{pg_addr, pg_url, pg_url_via, restart_postgres};
use repute_tests::unique;
use repute_tests::workload::{register, Config, Running};

/// Scenarios share PostgreSQL and two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const OWNER_TTL: Duration = Duration::from_secs(2);
const LEASE_TTL: Duration = Duration::from_secs(2);
const SERVERS: usize = 3;
const RESOURCES: usize = 20;
/// How long a fault lasts: past the owner TTL, so a takeover must happen.
const FAULT_LASTS: Duration = Duration::from_millis(3500);

#[derive(Debug, Clone, Copy)]
enum Mode {
    Sharded,
    Shared,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGSTOP the owner past its owner TTL, then SIGCONT.
    PauseOwner,
    /// SIGKILL the owner and start a replacement.
    KillOwner,
    RestartPostgres,
    /// Cut the owner's connection to PostgreSQL past its owner TTL, then restore it.
    CutOwnerFromPostgres,
}

/// One server behind its own proxy to PostgreSQL.
struct Node {
    server: Option<Server>,
    proxy: Proxy,
}

impl Node {
    fn server(&self) -> &Server {
        self.server.as_ref().expect("the node runs a server")
    }
}

fn serve(mode: Mode, pg: &str, proxy: &Proxy) -> Server {
    let mode = match mode {
        Mode::Sharded => "sharded",
        Mode::Shared => "shared",
    };
    let args = [
        "--no-auth".into(),
        "--store".into(),
        pg_url_via(pg, proxy.addr()),
        "--mode".into(),
        mode.into(),
        "--owner-ttl".into(),
        OWNER_TTL.as_secs_f64().to_string(),
        "--lease-ttl".into(),
        LEASE_TTL.as_secs_f64().to_string(),
        // Checkpoints every second, so every fault lands near one: a stale
        // owner's checkpoint is what would lose another's reports (I4).
        "--checkpoint-every".into(),
        "1".into(),
    ];
    Server::start(&args)
}

fn grants() -> usize {
    std::env::var("REPUTE_FAULT_GRANTS").map_or(10_000, |v| v.parse().expect("REPUTE_FAULT_GRANTS: a number"))
}

fn scenario(mode: Mode, fault: Fault) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pg = pg_url();
    let name = format!("{mode:?} / {fault:?}");
    let tenant = unique(&format!("{mode:?}_{fault:?}"));
    let table = unique("downstream");
    downstream::create_table(&pg, &table);

    let mut nodes: Vec<Node> = (0..SERVERS)
        .map(|_| {
            let proxy = Proxy::start(pg_addr(&pg));
            Node { server: Some(serve(mode, &pg, &proxy)), proxy }
        })
        .collect();
    let cluster = Cluster::new(nodes.iter().map(|n| n.server().base().to_owned()).collect());
    register(&cluster, &tenant, RESOURCES);

    let total = grants();
    let config = Config {
        tenant: tenant.clone(),
        workers: 8,
        grants: total,
        contexts: 4,
        hold: (Duration::ZERO, Duration::from_millis(4)),
        timeout: Duration::from_millis(750),
        downstream_url: pg.clone(),
        downstream_table: table,
        stall: Duration::from_secs(30),
    };
    let running = Running::start(config, &cluster);
    running.wait_for(total / 4);

    let owner = running.last_server();
    let victim = nodes.iter().position(|n| n.server().base() == owner).expect("the owner is one of the servers");
    match fault {
        Fault::PauseOwner => {
            running.fault("owner SIGSTOP");
            nodes[victim].server().pause();
            std::thread::sleep(FAULT_LASTS);
            nodes[victim].server().resume();
        }
        Fault::KillOwner => {
            running.fault("owner SIGKILL");
            nodes[victim].server.take().expect("the node runs a server").kill();
            let replacement = serve(mode, &pg, &nodes[victim].proxy);
            cluster.replace(victim, replacement.base().to_owned());
            nodes[victim].server = Some(replacement);
        }
        Fault::RestartPostgres => {
            running.fault("PostgreSQL restart");
            restart_postgres();
        }
        Fault::CutOwnerFromPostgres => {
            running.fault("owner cut from PostgreSQL");
            nodes[victim].proxy.cut();
            std::thread::sleep(FAULT_LASTS);
            nodes[victim].proxy.restore();
        }
    }

    let records = running.finish();
    // Nobody gets to save a last checkpoint: what was acknowledged must already be durable.
    for node in &mut nodes {
        node.server.take().expect("the node runs a server").kill();
    }
    let fresh = serve(mode, &pg, &nodes[0].proxy);
    let mut client = Client::new(&Cluster::new(vec![fresh.base().to_owned()]), &tenant, 0, Duration::from_secs(5));
    let held = reports_held(&mut client);
    let report = Report::new(&name, &records, Some(held));
    println!("{report}");
    report.assert_correct();
}

#[test]
fn sharded_owner_paused_past_its_ttl() {
    scenario(Mode::Sharded, Fault::PauseOwner);
}

#[test]
fn sharded_owner_killed_and_replaced() {
    scenario(Mode::Sharded, Fault::KillOwner);
}

#[test]
fn sharded_postgres_restarted() {
    scenario(Mode::Sharded, Fault::RestartPostgres);
}

#[test]
fn sharded_owner_cut_from_postgres() {
    scenario(Mode::Sharded, Fault::CutOwnerFromPostgres);
}

#[test]
fn shared_server_paused_past_the_owner_ttl() {
    scenario(Mode::Shared, Fault::PauseOwner);
}

#[test]
fn shared_server_killed_and_replaced() {
    scenario(Mode::Shared, Fault::KillOwner);
}

#[test]
fn shared_postgres_restarted() {
    scenario(Mode::Shared, Fault::RestartPostgres);
}

#[test]
fn shared_server_cut_from_postgres() {
    scenario(Mode::Shared, Fault::CutOwnerFromPostgres);
}
