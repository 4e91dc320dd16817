//! Faults injected into a real cluster: three `repute serve` processes on
//! one backend, for every way repute scales out, under a steady workload;
//! and the embedded default, one `repute serve` on a SQLite file (or one
//! Python process holding it through the binding), killed and started again
//! on the same file. Whatever the fault, no permit is ever
//! held twice (I1, I2), no acknowledged report is lost (I4) and no
//! acknowledged release comes back after a restart; the report prints how
//! long the cluster took to recover.
//!
//! Per-resource usage limits (`rpm`, `tpm` with costs reconciled) are held
//! to the same faults on the shared stores: no key over its limit in any
//! 60 s, across the processes, and the limits used up while demand exceeds
//! them.
//!
//! `REPUTE_FAULT_GRANTS` sets the grants per scenario (default 6 000, which
//! keeps the test command's run of every scenario in its time budget; the
//! README's figures are runs of 10 000);
//! `REPUTE_LIMIT_SECONDS` the load of each usage-limit scenario (default 150).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use repute_tests::checker::{live_leases, reports_held, Report, Restart};
use repute_tests::downstream;
use repute_tests::http::{Client, Cluster};
use repute_tests::limits::{Limit, LimitReport, WINDOW};
use repute_tests::proxy::Proxy;
use repute_tests::server::Server;
use repute_tests::services::{pg_url, url_via, Service};
use repute_tests::unique;
use repute_tests::workload::{register, register_keys, register_keys_with, set_group, Config, Running};
use serde_json::json;

/// Scenarios share the services and two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Whole seconds, because etcd leases are: the etcd scenarios then fail
/// over after the same TTL as the PostgreSQL ones.
const OWNER_TTL: Duration = Duration::from_secs(2);
const LEASE_TTL: Duration = Duration::from_secs(2);
const SERVERS: usize = 3;
const RESOURCES: usize = 20;
/// How long a fault lasts: past the owner TTL, so a takeover must happen.
const FAULT_LASTS: Duration = Duration::from_millis(3500);

/// Where a cluster keeps its data and its owner leases.
#[derive(Debug, Clone, Copy)]
enum Setup {
    PostgresSharded,
    PostgresShared,
    RedisShared,
    /// Owner leases in etcd; data and epoch fencing in PostgreSQL.
    EtcdSharded,
    /// Each tenant split by context into `PARTITIONS` partitions, each with
    /// its owner; PostgreSQL the lease authority of all of them.
    PostgresPartitioned,
}

/// Partitions of partitioned mode: as many as servers, so each owns some.
const PARTITIONS: usize = 3;

impl Setup {
    /// The service each server reaches through its own proxy, and so the one
    /// the restart and cut faults take away: the authority that keeps
    /// processes apart (the owner leases, or the leases of shared mode).
    fn proxied(self) -> Service {
        match self {
            Setup::PostgresSharded | Setup::PostgresShared | Setup::PostgresPartitioned => Service::Postgres,
            Setup::RedisShared => Service::Redis,
            Setup::EtcdSharded => Service::Etcd,
        }
    }

    /// `--store`, `--mode` and `--owners` (and `--partitions`) for a server behind `proxy`.
    fn args(self, proxy: &Proxy) -> Vec<String> {
        let via = |service: Service| url_via(&service.url(), proxy.addr());
        let (store, mode, owners) = match self {
            Setup::PostgresSharded => (via(Service::Postgres), "sharded", "store".into()),
            Setup::PostgresShared => (via(Service::Postgres), "shared", "store".into()),
            Setup::RedisShared => (via(Service::Redis), "shared", "store".into()),
            Setup::EtcdSharded => (pg_url(), "sharded", format!("etcd://{}", proxy.addr())),
            Setup::PostgresPartitioned => (via(Service::Postgres), "partitioned", "store".into()),
        };
        let mut args = vec!["--store".into(), store, "--mode".into(), mode.into(), "--owners".into(), owners];
        if let Setup::PostgresPartitioned = self {
            args.extend(["--partitions".into(), PARTITIONS.to_string()]);
        }
        args
    }

    /// The setup of the fresh process that counts the reports a cluster
    /// kept. No process of partitioned mode holds a whole tenant, so a
    /// process of shared mode folds the tenant's whole log instead: every
    /// partition's reports are in it, acknowledged ones included.
    fn counting(self) -> Setup {
        match self {
            Setup::PostgresPartitioned => Setup::PostgresShared,
            setup => setup,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGSTOP the owner (in shared mode, a server) past the owner and lease TTLs, then SIGCONT.
    PauseOwner,
    /// SIGKILL the owner and start a replacement.
    KillOwner,
    /// Restart the setup's proxied service: every server loses it at once.
    RestartService,
    /// Cut the owner's (a server's) connection to the proxied service past the owner and lease TTLs, then restore it.
    CutOwner,
}

/// One server behind its own proxy to the setup's proxied service.
struct Node {
    server: Option<Server>,
    proxy: Proxy,
}

impl Node {
    fn server(&self) -> &Server {
        self.server.as_ref().expect("the node runs a server")
    }
}

fn serve(setup: Setup, proxy: &Proxy) -> Server {
    let mut args = vec![
        "--no-auth".into(),
        "--owner-ttl".into(),
        OWNER_TTL.as_secs_f64().to_string(),
        "--lease-ttl".into(),
        LEASE_TTL.as_secs_f64().to_string(),
        // Checkpoints every second, so every fault lands near one: a stale
        // owner's checkpoint is what would lose another's reports (I4).
        "--checkpoint-every".into(),
        "1".into(),
    ];
    args.extend(setup.args(proxy));
    Server::start(&args)
}

/// `SERVERS` servers, each behind its own proxy to the setup's proxied service.
fn start_cluster(setup: Setup) -> (Vec<Node>, Cluster) {
    let nodes: Vec<Node> = (0..SERVERS)
        .map(|_| {
            let proxy = Proxy::start(setup.proxied().addr());
            Node { server: Some(serve(setup, &proxy)), proxy }
        })
        .collect();
    let cluster = Cluster::new(nodes.iter().map(|n| n.server().base().to_owned()).collect());
    (nodes, cluster)
}

fn grants() -> usize {
    std::env::var("REPUTE_FAULT_GRANTS").map_or(6_000, |v| v.parse().expect("REPUTE_FAULT_GRANTS: a number"))
}

/// Injects `fault` on the node `victim` (the service's restart hits every
/// node), noting it in each of `runs`; returns once the fault is over.
fn inject(setup: Setup, fault: Fault, nodes: &mut [Node], victim: usize, cluster: &Cluster, runs: &[&Running]) {
    let note = |name: &str| runs.iter().for_each(|r| r.fault(name));
    match fault {
        Fault::PauseOwner => {
            note("owner SIGSTOP");
            nodes[victim].server().pause();
            std::thread::sleep(FAULT_LASTS);
            nodes[victim].server().resume();
        }
        Fault::KillOwner => {
            note("owner SIGKILL");
            nodes[victim].server.take().expect("the node runs a server").kill();
            let replacement = serve(setup, &nodes[victim].proxy);
            cluster.replace(victim, replacement.base().to_owned());
            nodes[victim].server = Some(replacement);
        }
        Fault::RestartService => {
            note(&format!("{} restart", setup.proxied()));
            setup.proxied().restart();
        }
        Fault::CutOwner => {
            note(&format!("owner cut from {}", setup.proxied()));
            nodes[victim].proxy.cut();
            std::thread::sleep(FAULT_LASTS);
            nodes[victim].proxy.restore();
        }
    }
}

fn scenario(setup: Setup, fault: Fault) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pg = pg_url();
    let name = format!("{setup:?} / {fault:?}");
    let tenant = unique(&format!("{setup:?}_{fault:?}"));
    let table = unique("downstream");
    downstream::create_table(&pg, &table);

    let (mut nodes, cluster) = start_cluster(setup);
    register(&cluster, &tenant, RESOURCES);

    let total = grants();
    let config = Config::faults(&tenant, total, &pg, table);
    let running = Running::start(config, &cluster);
    running.wait_for(total / 4);

    let owner = running.last_server();
    let victim = nodes.iter().position(|n| n.server().base() == owner).expect("the owner is one of the servers");
    inject(setup, fault, &mut nodes, victim, &cluster, &[&running]);

    let records = running.finish();
    // Nobody gets to save a last checkpoint: what was acknowledged must already be durable.
    for node in &mut nodes {
        node.server.take().expect("the node runs a server").kill();
    }
    let fresh = serve(setup.counting(), &nodes[0].proxy);
    let mut client = Client::new(&Cluster::new(vec![fresh.base().to_owned()]), &tenant, 0, Duration::from_secs(5));
    let held = reports_held(&mut client);
    let report = Report::new(&name, &records, Some(held));
    println!("{report}");
    report.assert_correct();
}

/// API keys per tenant in the usage-limit scenario, one permit each.
const KEYS: usize = 6;
const RPM: u32 = 30;
/// About `RPM` grants a key a minute at the mean use of `COST` (150), so
/// both tenants spend their limits in bursts of the same length.
const TPM: u64 = 4_500;
/// Tokens an acquire of the `tpm` tenant reserves: light and heavy calls,
/// each using between half and all of it.
const COST: (u64, u64) = (100, 300);
/// The rpm of the quota group all `KEYS` keys of the third tenant share
/// (no key has a limit of its own): a project's quota across its keys.
const GROUP_RPM: u32 = 90;
const GROUP: &str = "project-faults";

/// How long the usage-limit scenario keeps its load on:
/// `REPUTE_LIMIT_SECONDS`, default 150. The window is 60 s by contract, so
/// this is the shortest run that holds the faults (two in each of the
/// first two minutes' grants) and 90 s of whole windows to judge, which
/// the delays the faults cause are averaged over. Longer runs judge more
/// windows.
fn limit_load() -> Duration {
    let secs: u64 =
        std::env::var("REPUTE_LIMIT_SECONDS").map_or(150, |v| v.parse().expect("REPUTE_LIMIT_SECONDS: whole seconds"));
    assert!(secs >= 150, "REPUTE_LIMIT_SECONDS: at least 150 (the faults, then whole windows to judge)");
    Duration::from_secs(secs)
}

/// A tenant of the usage-limit scenario: `KEYS` keys with one limit.
struct LimitedTenant {
    limit: Limit,
    keys: Vec<String>,
    config: Config,
}

impl LimitedTenant {
    /// Registers the keys, and the workload that presses on them: acquires
    /// reserving a cost in `cost`, if given.
    fn register(setup: Setup, limit: Limit, cost: Option<(u64, u64)>, cluster: &Cluster, pg: &str) -> LimitedTenant {
        let tenant = unique(&format!("{setup:?}_{}", limit.to_string().replace(' ', "")));
        let keys = match limit {
            Limit::Rpm(rpm) => register_keys(cluster, &tenant, KEYS, &json!({ "rpm": rpm })),
            Limit::Tpm(tpm) => register_keys(cluster, &tenant, KEYS, &json!({ "tpm": tpm })),
            Limit::GroupRpm(rpm) => {
                set_group(cluster, &tenant, GROUP, &json!({ "rpm": rpm }));
                register_keys_with(cluster, &tenant, KEYS, &json!({ "groups": [GROUP] }))
            }
        };
        let table = unique("downstream");
        downstream::create_table(pg, &table);
        let config = Config {
            workers: 4,
            grants: usize::MAX,
            hold: (Duration::from_millis(100), Duration::from_millis(300)),
            // With every key at its limit nothing is granted until the window frees one.
            stall: WINDOW + Duration::from_secs(30),
            cost,
            ..Config::faults(&tenant, 0, pg, table)
        };
        LimitedTenant { limit, keys, config }
    }
}

/// Usage limits, exact across processes: three tenants on one shared-mode
/// cluster of `SERVERS` processes, one with `KEYS` keys at `rpm` `RPM`,
/// one with `KEYS` keys at `tpm` `TPM` whose acquires reserve a cost in
/// `COST` and reconcile what they used, one with `KEYS` keys in one quota
/// group at `GROUP_RPM` (no limit of their own), 4 workers each, every
/// worker asking for a key again as soon as it let one go, so demand stays
/// several times the limits for the whole run. Under the four faults (a
/// server paused past the lease TTL, one killed and replaced, the store
/// restarted, one server cut from it), no key (no group) gets more than its
/// limit in any 60 s and each gets at least `MIN_UTILISATION` of it in the run's
/// windows on average (`limits`, which also says whose clock judges a
/// window and why the mean), and no permit is held twice nor an
/// acknowledged report lost (`checker`).
///
/// Under saturation a limit is spent in a burst at the start of each
/// minute and nothing is granted until the burst's first grants leave the
/// window, so the faults are timed by the `rpm` tenant's grants (a quarter
/// and three quarters into the first and the second minute's burst): they
/// strike while grants are being decided, not in the lull.
fn limits_scenario(setup: Setup) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pg = pg_url();
    let (mut nodes, cluster) = start_cluster(setup);
    let tenants = [(Limit::Rpm(RPM), None), (Limit::Tpm(TPM), Some(COST)), (Limit::GroupRpm(GROUP_RPM), None)]
        .map(|(limit, cost)| LimitedTenant::register(setup, limit, cost, &cluster, &pg));
    let until = Instant::now() + limit_load();
    let runs = tenants.each_ref().map(|t| Running::start(t.config.clone(), &cluster));

    let burst = RPM as usize * KEYS;
    let faults = [(1, Fault::PauseOwner), (3, Fault::KillOwner), (5, Fault::RestartService), (7, Fault::CutOwner)];
    for (i, (quarters, fault)) in faults.into_iter().enumerate() {
        runs[0].wait_for(burst * quarters / 4);
        inject(setup, fault, &mut nodes, i % SERVERS, &cluster, &runs.each_ref());
    }
    runs.iter().for_each(|r| r.wait_until(until));
    let records = runs.map(Running::stop);

    // As in `scenario`: no last checkpoint, then a fresh process counts the reports.
    for node in &mut nodes {
        node.server.take().expect("the node runs a server").kill();
    }
    let fresh = serve(setup, &nodes[0].proxy);
    let mut judged = Vec::new();
    for (tenant, mut records) in tenants.into_iter().zip(records) {
        let name = format!("{setup:?} / usage limits {} on {KEYS} keys, 4 faults", tenant.limit);
        let mut client =
            Client::new(&Cluster::new(vec![fresh.base().to_owned()]), &tenant.config.tenant, 0, Duration::from_secs(5));
        let held = reports_held(&mut client);
        let limits = LimitReport::new(&name, tenant.limit, &tenant.keys, &records);
        println!("{limits}");
        // The longest gap without a grant measures the limit here, not a failover.
        records.faults.clear();
        let report = Report::new(&name, &records, Some(held));
        println!("{report}");
        judged.push((report, limits));
    }
    for (report, limits) in judged {
        report.assert_correct();
        limits.assert_holds();
    }
}

#[test]
fn postgres_shared_usage_limits_hold_across_processes_under_faults() {
    limits_scenario(Setup::PostgresShared);
}

#[test]
fn redis_shared_usage_limits_hold_across_processes_under_faults() {
    limits_scenario(Setup::RedisShared);
}

/// How many times the SQLite scenario kills its server, spread evenly over
/// the run.
const SQLITE_KILLS: usize = 3;

/// A fresh directory for a SQLite file, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve_sqlite(db: &std::path::Path) -> Server {
    Server::start(&[
        "--no-auth".into(),
        "--lease-ttl".into(),
        LEASE_TTL.as_secs_f64().to_string(),
        // As in the cluster scenarios: every kill lands near a checkpoint, and
        // most leases and releases of the moment are not in the last one.
        "--checkpoint-every".into(),
        "1".into(),
        "--store".into(),
        format!("sqlite:{}", db.display()),
    ])
}

/// Who holds the SQLite file in a SQLite scenario.
#[derive(Debug, Clone, Copy)]
enum Holder {
    /// `repute serve --store sqlite:FILE`.
    Server,
    /// A Python process with the binding's `Pool("sqlite:FILE")`.
    Python,
}

impl Holder {
    fn start(self, db: &std::path::Path, tenant: &str) -> Server {
        match self {
            Holder::Server => serve_sqlite(db),
            Holder::Python => Server::python_pool(db, tenant, LEASE_TTL),
        }
    }
}

/// The embedded default under the one fault it has: the process holding
/// the file (a server, or a Python process through the binding) killed
/// with SIGKILL mid-load (`SQLITE_KILLS` times) and started again on the
/// same file, while the workers carry on. What the permit table and the
/// log had acknowledged must survive each kill: permits granted since the
/// last checkpoint stay held until their TTL ends, released ones stay
/// released.
fn sqlite_scenario(holder: Holder) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pg = pg_url();
    let (name, tenant) = match holder {
        Holder::Server => ("SQLite / server SIGKILL and restart", unique("Sqlite_KillServer")),
        Holder::Python => ("SQLite / Python process SIGKILL and restart", unique("Sqlite_KillPython")),
    };
    let table = unique("downstream");
    downstream::create_table(&pg, &table);
    let dir = TempDir(std::env::temp_dir().join(unique("repute-faults-sqlite")));
    std::fs::create_dir_all(&dir.0).expect("a temporary directory");
    let db = dir.0.join("pool.db");

    let mut server = holder.start(&db, &tenant);
    let cluster = Cluster::new(vec![server.base().to_owned()]);
    register(&cluster, &tenant, RESOURCES);

    let total = grants();
    let config = Config {
        // Most workers are mid-way through a long hold when the process is
        // killed: the permits the next process must not hand out again.
        long_hold: Some((50, Duration::from_millis(800))),
        ..Config::faults(&tenant, total, &pg, table)
    };
    let running = Running::start(config, &cluster);
    let mut restarts = Vec::new();
    for kill in 1..=SQLITE_KILLS {
        running.wait_for(total * kill / (SQLITE_KILLS + 1));
        running.fault(match holder {
            Holder::Server => "server SIGKILL",
            Holder::Python => "Python SIGKILL",
        });
        let killed = Instant::now();
        server.kill();
        server = holder.start(&db, &tenant);
        cluster.replace(0, server.base().to_owned());
        let mut client = Client::new(&Cluster::new(vec![server.base().to_owned()]), &tenant, 0, Duration::from_secs(5));
        restarts.push(Restart { killed, live: live_leases(&mut client) });
    }

    let records = running.finish();
    // No last checkpoint: what was acknowledged must already be durable.
    server.kill();
    let fresh = holder.start(&db, &tenant);
    let mut client = Client::new(&Cluster::new(vec![fresh.base().to_owned()]), &tenant, 0, Duration::from_secs(5));
    let held = reports_held(&mut client);
    let mut report = Report::new(name, &records, Some(held));
    report.check_restarts(&records, &restarts);
    println!("{report}");
    report.assert_correct();
    assert!(report.grants >= total, "{name}: {} grants, {total} asked for", report.grants);
}

#[test]
fn sqlite_server_killed_and_restarted_on_its_file() {
    sqlite_scenario(Holder::Server);
}

/// Needs a Python with the binding (`REPUTE_TEST_PYTHON`), which exists
/// only once `bindings-python/test.sh` has built it: `./test.sh` runs this
/// test then, by name.
#[test]
#[ignore = "run by ./test.sh after the Python binding is built (REPUTE_TEST_PYTHON)"]
fn sqlite_python_process_killed_and_restarted_on_its_file() {
    sqlite_scenario(Holder::Python);
}

#[test]
fn postgres_sharded_owner_paused_past_its_ttl() {
    scenario(Setup::PostgresSharded, Fault::PauseOwner);
}

#[test]
fn postgres_sharded_owner_killed_and_replaced() {
    scenario(Setup::PostgresSharded, Fault::KillOwner);
}

#[test]
fn postgres_sharded_postgres_restarted() {
    scenario(Setup::PostgresSharded, Fault::RestartService);
}

#[test]
fn postgres_sharded_owner_cut_from_postgres() {
    scenario(Setup::PostgresSharded, Fault::CutOwner);
}

#[test]
fn postgres_shared_server_paused_past_the_lease_ttl() {
    scenario(Setup::PostgresShared, Fault::PauseOwner);
}

#[test]
fn postgres_shared_server_killed_and_replaced() {
    scenario(Setup::PostgresShared, Fault::KillOwner);
}

#[test]
fn postgres_shared_postgres_restarted() {
    scenario(Setup::PostgresShared, Fault::RestartService);
}

#[test]
fn postgres_shared_server_cut_from_postgres() {
    scenario(Setup::PostgresShared, Fault::CutOwner);
}

#[test]
fn postgres_partitioned_owner_paused_past_its_ttl() {
    scenario(Setup::PostgresPartitioned, Fault::PauseOwner);
}

#[test]
fn postgres_partitioned_owner_killed_and_replaced() {
    scenario(Setup::PostgresPartitioned, Fault::KillOwner);
}

#[test]
fn postgres_partitioned_postgres_restarted() {
    scenario(Setup::PostgresPartitioned, Fault::RestartService);
}

#[test]
fn postgres_partitioned_owner_cut_from_postgres() {
    scenario(Setup::PostgresPartitioned, Fault::CutOwner);
}

#[test]
fn redis_shared_server_paused_past_the_lease_ttl() {
    scenario(Setup::RedisShared, Fault::PauseOwner);
}

#[test]
fn redis_shared_server_killed_and_replaced() {
    scenario(Setup::RedisShared, Fault::KillOwner);
}

#[test]
fn redis_shared_redis_restarted() {
    scenario(Setup::RedisShared, Fault::RestartService);
}

#[test]
fn redis_shared_server_cut_from_redis() {
    scenario(Setup::RedisShared, Fault::CutOwner);
}

#[test]
fn etcd_sharded_owner_paused_past_its_ttl() {
    scenario(Setup::EtcdSharded, Fault::PauseOwner);
}

#[test]
fn etcd_sharded_owner_killed_and_replaced() {
    scenario(Setup::EtcdSharded, Fault::KillOwner);
}

#[test]
fn etcd_sharded_etcd_restarted() {
    scenario(Setup::EtcdSharded, Fault::RestartService);
}

#[test]
fn etcd_sharded_owner_cut_from_etcd() {
    scenario(Setup::EtcdSharded, Fault::CutOwner);
}
