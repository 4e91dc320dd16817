//! The shared store itself fails over, losing its last second of
//! acknowledged writes: three `repute serve --mode shared` processes on a
//! private store under a steady workload, and then
//!
//! - a Redis primary killed after its replica's link was held for a second,
//!   the replica promoted and the managed endpoint moved to it;
//! - a Redis server (`appendfsync everysec`, no replica) killed and started
//!   again on its files with the last second of its append-only file gone,
//!   as a power cut takes what was still in the page cache;
//! - a PostgreSQL primary stopped at once after its asynchronous standby's
//!   WAL link was held for a second, the standby promoted and the endpoint
//!   moved to it.
//!
//! Every grant, release and log entry of that last second is gone from the
//! store the servers then reach, while the servers, and the holders of the
//! lost grants, remember them. An asynchronous store can lose acknowledged
//! writes, so what was acknowledged is not required to survive (I4); but
//! no permit may be held twice (I1) and no token may repeat or go back
//! (I2), whatever the store forgot. The checker judges only what the
//! clients observed.
//!
//! Each scenario runs `REPUTE_FAILOVER_RUNS` times (default 3), prints every
//! run's numbers, and only then asserts, so a failing scenario still shows
//! its whole table.

use std::fs::OpenOptions;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use repute_tests::checker::Report;
use repute_tests::downstream;
use repute_tests::http::Cluster;
use repute_tests::proxy::Proxy;
use repute_tests::replicated::{aof_incr_file, free_port, lsn, FileSizes, Postgres, Redis, TempDir, PG_USER};
use repute_tests::server::{repute_binary, Server};
use repute_tests::services::pg_url;
use repute_tests::unique;
use repute_tests::workload::{register, Config, Running};

/// Scenarios share two cores and the downstream database: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const SERVERS: usize = 3;
const RESOURCES: usize = 20;
const OWNER_TTL: &str = "2";
const LEASE_TTL: &str = "2";
/// Load before the fault: every server has granted, and leases of every age are live.
const BEFORE: Duration = Duration::from_secs(2);
/// What the store loses: the replication link is held this long before
/// the kill, or the append-only file cut back by this much.
const LOST: Duration = Duration::from_secs(1);
/// Load once the servers can reach the new store: past the lease TTL, so
/// every lease it forgot would have expired by then, and a few seconds of
/// grants more.
const AFTER: Duration = Duration::from_millis(4500);
/// How long the long holders keep each lease: past the time the servers
/// take to reach the new store, well within the holder's deadline (1.6 s).
const LONG_HOLD: Duration = Duration::from_millis(800);
const LONG_HOLDERS: usize = 3;
/// How often the append-only file's size is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Redis 7's multi-part append-only file: a directory of a base and
/// incremental files, and the manifest that names them.
const APPENDDIRNAME: &str = "appendonlydir";

fn runs() -> usize {
    std::env::var("REPUTE_FAILOVER_RUNS").map_or(3, |v| v.parse().expect("REPUTE_FAILOVER_RUNS: a number"))
}

#[derive(Debug, Clone, Copy)]
enum Failover {
    RedisReplicaPromoted,
    RedisAofLastSecondLost,
    PostgresStandbyPromoted,
}

impl Failover {
    fn describe(self) -> &'static str {
        match self {
            Failover::RedisReplicaPromoted => "Redis primary killed, replica promoted (link held 1 s)",
            Failover::RedisAofLastSecondLost => "Redis restarted, last second of its AOF lost",
            Failover::PostgresStandbyPromoted => "PostgreSQL primary stopped, async standby promoted (WAL held 1 s)",
        }
    }

    fn start(self) -> Box<dyn Store> {
        match self {
            Failover::RedisReplicaPromoted => Box::new(RedisPair::start()),
            Failover::RedisAofLastSecondLost => Box::new(RedisAof::start()),
            Failover::PostgresStandbyPromoted => Box::new(PostgresPair::start()),
        }
    }
}

/// A private store behind an endpoint proxy, and the fault that makes it
/// forget its last second.
trait Store {
    /// The `--store` URL, through the endpoint.
    fn url(&self) -> String;

    /// Injects the fault, noting it in `running` when the store dies;
    /// returns once the servers can reach the store that replaces it.
    fn fail(&mut self, running: &Running) -> Loss;
}

/// What a fault took from the store.
struct Loss {
    /// Writes from here on never reached the store the servers reach after the fault...
    from: Instant,
    /// ...up to here, when the store died.
    killed: Instant,
    /// When the servers could reach its successor: the load runs `AFTER` from here.
    restored: Instant,
    /// Bytes of replication stream, append-only file or WAL the store had
    /// acknowledged and its successor lacks (at least).
    bytes: u64,
}

/// A Redis primary with `appendfsync everysec` and a replica that follows
/// it through `link`; the servers reach the primary through `endpoint`.
struct RedisPair {
    endpoint: Proxy,
    primary: Option<Redis>,
    replica: Redis,
    link: Proxy,
    _dirs: [TempDir; 2],
}

impl RedisPair {
    fn start() -> RedisPair {
        let dirs = [TempDir::new("repute-failover-redis-primary"), TempDir::new("repute-failover-redis-replica")];
        let primary = Redis::start(dirs[0].path(), free_port(), &[("appendonly", "yes"), ("appendfsync", "everysec")]);
        let link = Proxy::start(primary.addr());
        let replica = Redis::start(dirs[1].path(), free_port(), &[]);
        replica.call(&["REPLICAOF", &link.addr().ip().to_string(), &link.addr().port().to_string()]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while replica.info("replication", "master_link_status").as_deref() != Some("up") {
            assert!(Instant::now() < deadline, "the Redis replica did not sync within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let endpoint = Proxy::start(primary.addr());
        RedisPair { endpoint, primary: Some(primary), replica, link, _dirs: dirs }
    }
}

impl Store for RedisPair {
    fn url(&self) -> String {
        format!("redis://{}", self.endpoint.addr())
    }

    fn fail(&mut self, running: &Running) -> Loss {
        self.link.hold();
        let from = Instant::now();
        std::thread::sleep(LOST);
        let primary = self.primary.take().expect("the primary runs");
        let acknowledged = primary.info_number("replication", "master_repl_offset");
        running.fault("Redis primary SIGKILL, replica promoted");
        primary.kill();
        let killed = Instant::now();
        self.link.cut();
        let kept = self.replica.info_number("replication", "master_repl_offset");
        self.replica.call(&["REPLICAOF", "NO", "ONE"]);
        self.endpoint.retarget(self.replica.addr());
        Loss { from, killed, restored: Instant::now(), bytes: acknowledged.saturating_sub(kept) }
    }
}

/// One Redis server with `appendfsync everysec`, its append-only file's
/// incremental part sampled every `SAMPLE_EVERY`.
struct RedisAof {
    endpoint: Proxy,
    redis: Option<Redis>,
    sizes: FileSizes,
    port: u16,
    dir: TempDir,
}

const AOF_CONFIG: &[(&str, &str)] = &[
    ("appendonly", "yes"),
    ("appendfsync", "everysec"),
    ("appenddirname", APPENDDIRNAME),
    // A file cut mid-command loads up to the last whole one, as after a power cut.
    ("aof-load-truncated", "yes"),
    // No rewrite mid-run: the incremental file sampled stays the one written to.
    ("auto-aof-rewrite-percentage", "0"),
];

impl RedisAof {
    fn start() -> RedisAof {
        let dir = TempDir::new("repute-failover-redis-aof");
        let port = free_port();
        let redis = Redis::start(dir.path(), port, AOF_CONFIG);
        let sizes = FileSizes::sample(aof_incr_file(dir.path(), APPENDDIRNAME), SAMPLE_EVERY);
        let endpoint = Proxy::start(redis.addr());
        RedisAof { endpoint, redis: Some(redis), sizes, port, dir }
    }
}

impl Store for RedisAof {
    fn url(&self) -> String {
        format!("redis://{}", self.endpoint.addr())
    }

    fn fail(&mut self, running: &Running) -> Loss {
        running.fault("Redis SIGKILL, last second of its AOF lost, restarted");
        self.redis.take().expect("Redis runs").kill();
        let killed = Instant::now();
        let (from, kept) = self.sizes.at(killed - LOST).expect("the AOF was sampled a second before the kill");
        let incr = aof_incr_file(self.dir.path(), APPENDDIRNAME);
        let file = OpenOptions::new().write(true).open(&incr).unwrap_or_else(|e| panic!("{}: {e}", incr.display()));
        let written = file.metadata().expect("the AOF's size").len();
        file.set_len(kept).unwrap_or_else(|e| panic!("truncate {}: {e}", incr.display()));
        drop(file);
        self.redis = Some(Redis::start(self.dir.path(), self.port, AOF_CONFIG));
        Loss { from, killed, restored: Instant::now(), bytes: written.saturating_sub(kept) }
    }
}

/// A PostgreSQL primary and an asynchronous streaming standby that follows
/// it through `link`; the servers reach the primary through `endpoint`.
struct PostgresPair {
    endpoint: Proxy,
    primary: Option<Postgres>,
    standby: Postgres,
    link: Proxy,
    _dirs: [TempDir; 2],
}

impl PostgresPair {
    fn start() -> PostgresPair {
        let dirs = [TempDir::new("repute-failover-pg-primary"), TempDir::new("repute-failover-pg-standby")];
        let primary = Postgres::primary(dirs[0].path());
        let link = Proxy::start(primary.addr());
        let standby = Postgres::standby(link.addr(), dirs[1].path());
        let mut client = primary.connect("postgres");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let row = client
                .query_one("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &[])
                .expect("pg_stat_replication");
            if row.get::<_, i64>(0) > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "the PostgreSQL standby did not stream within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let endpoint = Proxy::start(primary.addr());
        PostgresPair { endpoint, primary: Some(primary), standby, link, _dirs: dirs }
    }
}

impl Store for PostgresPair {
    fn url(&self) -> String {
        format!("postgres://{PG_USER}@{}/{PG_USER}", self.endpoint.addr())
    }

    fn fail(&mut self, running: &Running) -> Loss {
        let primary = self.primary.take().expect("the primary runs");
        let mut on_primary = primary.connect("postgres");
        let mut on_standby = self.standby.connect("postgres");
        self.link.hold();
        let from = Instant::now();
        std::thread::sleep(LOST);
        let flushed: String =
            on_primary.query_one("SELECT pg_current_wal_flush_lsn()::text", &[]).expect("the primary's WAL").get(0);
        drop(on_primary);
        running.fault("PostgreSQL primary stopped, standby promoted");
        primary.stop_immediately();
        let killed = Instant::now();
        self.link.cut();
        let received: Option<String> =
            on_standby.query_one("SELECT pg_last_wal_receive_lsn()::text", &[]).expect("the standby's WAL").get(0);
        on_standby.execute("SELECT pg_promote(true, 30)", &[]).expect("pg_promote");
        let deadline = Instant::now() + Duration::from_secs(30);
        while on_standby.query_one("SELECT pg_is_in_recovery()", &[]).expect("pg_is_in_recovery").get::<_, bool>(0) {
            assert!(Instant::now() < deadline, "the standby was not promoted within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.endpoint.retarget(self.standby.addr());
        let kept = received.map_or(0, |r| lsn(&r));
        Loss { from, killed, restored: Instant::now(), bytes: lsn(&flushed).saturating_sub(kept) }
    }
}

fn serve(store: &str) -> Server {
    Server::start(&[
        "--no-auth".into(),
        "--mode".into(),
        "shared".into(),
        "--owners".into(),
        "store".into(),
        "--owner-ttl".into(),
        OWNER_TTL.into(),
        "--lease-ttl".into(),
        LEASE_TTL.into(),
        // As in `faults`: a checkpoint every second, so one lands near the fault.
        "--checkpoint-every".into(),
        "1".into(),
        "--store".into(),
        store.into(),
    ])
}

/// `LONG_HOLDERS` workers beside the workload, each holding every lease
/// `LONG_HOLD`: at the fault each holds a lease granted in the last second,
/// which the new store forgot, and is still using it when that store hands
/// its permit out again. Only such a holder can show a permit held twice
/// (I1): the workload's holds are over by then, and show the tokens (I2).
/// Separate workers, so the workload's grants still time the failover.
fn long_holders(tenant: &str, pg: &str, table: String) -> Config {
    Config { workers: LONG_HOLDERS, hold: (LONG_HOLD, LONG_HOLD), ..Config::faults(tenant, usize::MAX, pg, table) }
}

/// One run's judgement and what the fault took.
struct Outcome {
    report: Report,
    loss: Loss,
    /// Grants requested after the loss began and acknowledged before the
    /// store died: decided and acknowledged by a store whose successor
    /// never had them.
    lost_grants: usize,
    /// Grants that arrived after the fault.
    grants_after: usize,
}

fn run(failover: Failover, index: usize) -> Outcome {
    let pg = pg_url();
    let name = format!("{} / run {index}", failover.describe());
    let tenant = unique(&format!("{failover:?}"));
    let table = unique("downstream");
    downstream::create_table(&pg, &table);

    let mut store = failover.start();
    let servers: Vec<Server> = (0..SERVERS).map(|_| serve(&store.url())).collect();
    let cluster = Cluster::new(servers.iter().map(|s| s.base().to_owned()).collect());
    register(&cluster, &tenant, RESOURCES);

    let running = Running::start(Config::faults(&tenant, usize::MAX, &pg, table.clone()), &cluster);
    let holding = Running::start(long_holders(&tenant, &pg, table), &cluster);
    running.wait_for(1);
    running.wait_until(Instant::now() + BEFORE);
    let loss = store.fail(&running);
    running.wait_until(loss.restored + AFTER);
    let mut records = running.stop();
    let held = holding.stop();
    records.grants.extend(held.grants);
    records.counts.add(&held.counts);
    servers.into_iter().for_each(Server::kill);

    let lost_grants = records.grants.iter().filter(|g| g.sent >= loss.from && g.granted <= loss.killed).count();
    let grants_after = records.grants.iter().filter(|g| g.granted > loss.killed).count();
    let report = Report::new(&name, &records, None);
    println!("{report}");
    println!("  {:<34} {:>14}", "store bytes lost (at least)", loss.bytes);
    println!("  {:<34} {:>14}", "acknowledged grants lost", lost_grants);
    println!("  {:<34} {:>14}", "grants after the fault", grants_after);
    Outcome { report, loss, lost_grants, grants_after }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied());
    text.unwrap_or("a panic without a message").to_owned()
}

/// Runs `failover` `runs()` times, prints every run's numbers and a table
/// of them, then asserts I1 and I2 on each: a run that could not finish
/// fails the scenario too, after the table.
fn scenario(failover: Failover) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let outcomes: Vec<Result<Outcome, String>> = (1..=runs())
        .map(|i| catch_unwind(AssertUnwindSafe(|| run(failover, i))).map_err(|p| panic_text(p.as_ref())))
        .collect();

    let (name, binary, runs) = (failover.describe(), repute_binary(), outcomes.len());
    println!("== {name}: {runs} runs of {} in {:.1?} ==", binary.display(), started.elapsed());
    println!(
        "{:>4} {:>7} {:>9} {:>11} {:>12} {:>16} {:>13} {:>11} {:>11}",
        "run",
        "grants",
        "overlaps",
        "dup tokens",
        "regressions",
        "gap after fault",
        "grants after",
        "bytes lost",
        "acked lost"
    );
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Ok(Outcome { report: r, loss, lost_grants, grants_after }) => {
                let gap = r.failover.first().map_or(Duration::ZERO, |(_, gap)| *gap);
                let gap = if *grants_after == 0 { "no grant".to_owned() } else { format!("{gap:.2?}") };
                println!(
                    "{:>4} {:>7} {:>9} {:>11} {:>12} {:>16} {:>13} {:>11} {:>11}",
                    i + 1,
                    r.grants,
                    r.overlaps,
                    r.duplicate_tokens,
                    r.token_regressions,
                    gap,
                    grants_after,
                    loss.bytes,
                    lost_grants
                );
            }
            Err(e) => println!("{:>4} did not finish: {e}", i + 1),
        }
    }
    for outcome in &outcomes {
        match outcome {
            Ok(o) => o.report.assert_exclusive(),
            Err(e) => panic!("{}: a run did not finish: {e}", failover.describe()),
        }
    }
}

#[test]
fn redis_primary_killed_and_replica_promoted_after_its_link_was_held() {
    scenario(Failover::RedisReplicaPromoted);
}

#[test]
fn redis_restarted_with_the_last_second_of_its_aof_lost() {
    scenario(Failover::RedisAofLastSecondLost);
}

#[test]
fn postgres_primary_stopped_and_async_standby_promoted_after_its_wal_link_was_held() {
    scenario(Failover::PostgresStandbyPromoted);
}
