//! Redis as the shared store, against a real server: the scripts never let
//! two pools hold one permit, tokens rise across restarts and across a
//! server that lost its data, every process folds the log in the same order,
//! the acquire rate limit is shared, and a checkpoint behind the stored one
//! is refused. The exchange (acquire and release run by a caller that owns
//! the connection, as Node's event loop does) beside pools that run the
//! scripts themselves: one permit is never held twice, a release is
//! complete once its revoke ran, a server that lost its scripts is answered
//! with their source, and a broken connection fails what was in flight.
//!
//! Needs `REPUTE_TEST_REDIS_URL` (see `scripts/services.sh`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use repute_host::providers::{Address, Done, Exchange, Redis, Storage};
use repute_host::{
    Backend, EmbeddedPool, Error, Labels, Lease, Limits, Mode, Policy, Pool, PoolOps, Providers, Registration,
    Selector, Sharing, StoreError, Strategy, SystemClock, TenantConfig, SECOND, WINDOW,
};

use crate::shared_store::{shared_store_tests, tenant, Opener};
use crate::usage_limits::{usage_limit_tests, Store};

fn url() -> String {
    std::env::var("REPUTE_TEST_REDIS_URL").expect(
        "REPUTE_TEST_REDIS_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`",
    )
}

fn db() -> Redis {
    Redis::connect(&url()).expect("Redis at REPUTE_TEST_REDIS_URL is reachable (`scripts/services.sh start`)")
}

fn open_with(db: &Redis, tenant: &str, policy: Policy) -> Pool {
    let providers = Providers::redis(db, tenant, 0, Arc::new(SystemClock::new()));
    Pool::open(TenantConfig { policy, durable: true, ..TenantConfig::default() }, providers).unwrap()
}

fn open(db: &Redis, tenant: &str) -> Pool {
    open_with(db, tenant, Policy::default())
}

fn opener() -> Opener {
    let db = db();
    Arc::new(move |tenant, policy| open_with(&db, tenant, policy))
}

/// A store that lost everything (a restart without persistence) looks new
/// but for the log the pool folded: its grants wait out the leases it may
/// have granted, and its tokens start above the server's clock.
#[test]
fn tokens_never_go_back_even_when_redis_loses_its_data() {
    let db = db();
    let t = tenant("loss");
    let ttl = SECOND / 2;
    let mut pool = open_with(&db, &t, Policy { lease_ttl: ttl, ..Policy::default() });
    pool.register("proxy", "only", 1).unwrap();
    let mut highest = 0;
    for _ in 0..5 {
        let lease = pool.acquire("shop").unwrap();
        highest = lease.token;
        pool.release(lease.id, lease.token).unwrap();
    }
    assert_eq!(highest, 5, "a new tenant's tokens start at 1");
    assert_eq!(pool.checkpoint(false).unwrap(), 1);
    let mut conn = redis::Client::open(url()).unwrap().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("repute:{{{t}}}:*")).query(&mut conn).unwrap();
    let _: () = redis::cmd("DEL").arg(&keys).query(&mut conn).unwrap();
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
    let wait = match pool.acquire("shop") {
        Err(Error::Store(StoreError::Recovering { retry_after })) => retry_after,
        other => panic!("the leases the lost data held are waited out first: {other:?}"),
    };
    assert!(wait <= ttl, "{wait} ns");
    std::thread::sleep(Duration::from_nanos(wait));
    let reseeded = pool.acquire("shop").unwrap();
    assert!(reseeded.token > clock, "{} above the clock at the loss ({clock} µs)", reseeded.token);
    pool.release(reseeded.id, reseeded.token).unwrap();
    let lease = pool.acquire("shop").unwrap();
    assert_eq!(lease.token, reseeded.token + 1);
}

/// A replica of the test server, on a free port, killed when dropped; the
/// copy of the data it receives is written to the temporary directory and
/// removed with it.
struct Replica(std::process::Child, std::path::PathBuf);

impl Replica {
    fn start() -> Replica {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let master = url().trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let (host, master_port) = master.split_once(':').unwrap();
        let (dir, file) = (std::env::temp_dir(), format!("repute-replica-{port}.rdb"));
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--replicaof", host, master_port])
            .arg("--dir")
            .arg(&dir)
            .args(["--dbfilename", &file])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let replica = Replica(child, dir.join(file));
        let mut conn = loop {
            if let Ok(conn) = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection() {
                break conn;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for _ in 0..500 {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut conn).unwrap();
            if info.contains("master_link_status:up") {
                return replica;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the replica did not sync within 10 s");
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

/// With `wait_replicas`, a grant counts once a replica holds it: with the
/// replica gone, the grant is revoked and refused, and the permit is free
/// at once for a pool that does not wait.
#[test]
fn a_grant_no_replica_confirmed_is_revoked_and_refused() {
    let replica = Replica::start();
    let waiting = Redis::connect(&format!("{}?wait_replicas=1&wait_ms=200", url().trim_end_matches('/'))).unwrap();
    let t = tenant("confirmed");
    let said = db().durability().unwrap_or_default();
    assert!(said.contains("replica(s) and no wait_replicas: a failover loses what they lacked"), "{said}");
    assert_eq!(waiting.durability(), None, "appendfsync always, and grants wait for the replica");
    let mut pool = open(&waiting, &t);
    pool.register("proxy", "only", 1).unwrap();
    let lease = pool.acquire("shop").unwrap();
    pool.renew(lease.id, lease.token).unwrap();
    pool.release(lease.id, lease.token).unwrap();

    drop(replica);
    match pool.acquire("shop") {
        Err(Error::Store(StoreError::Unavailable(why))) => {
            assert!(why.contains("reached 0 of 1 replica(s) within 200 ms"), "{why}")
        }
        other => panic!("a grant no replica holds is refused: {other:?}"),
    }
    let mut plain = open(&db(), &t);
    let lease = plain.acquire("shop").expect("the refused grant was revoked");
    plain.release(lease.id, lease.token).unwrap();
}

/// Another server process now answers for the data (its `run_id` is not
/// the one the tenant's generation record names): a promoted replica or a
/// restart, either of which may have lost the last grants.
#[test]
fn a_new_server_waits_out_the_old_leases_and_lifts_the_token_floor() {
    let opener = opener();
    crate::shared_store::a_new_history_waits_out_its_leases_and_lifts_the_token_floor(&opener, &|t| {
        let mut conn = redis::Client::open(url()).unwrap().get_connection().unwrap();
        let key = format!("repute:{{{t}}}:generation");
        let _: () = redis::cmd("HSET").arg(&key).arg("run").arg("an-earlier-server").query(&mut conn).unwrap();
    });
}

#[test]
fn a_stale_epoch_is_refused_by_the_scripts() {
    let db = db();
    let t = tenant("epoch");
    db.raise_epoch(&t, 3).unwrap();
    let (mut old, _) = db.tenant(&t, 2);
    let register = repute_host::Command::Register {
        resource: repute_host::ResourceId::new("proxy", "p").unwrap(),
        permits: 1,
        limits: Limits::default(),
        labels: Labels::default(),
        secret: None,
        groups: Vec::new(),
    };
    assert_eq!(old.append(&register), Err(StoreError::StaleEpoch { mine: 2, stored: 3 }));
    assert_eq!(old.save(b"bytes", 0, 0), Err(StoreError::StaleEpoch { mine: 2, stored: 3 }));
    let (mut current, _) = db.tenant(&t, 3);
    assert_eq!(current.append(&register), Ok(1));
    db.raise_epoch(&t, 1).unwrap();
    assert_eq!(current.append(&register), Ok(2), "raising never lowers the epoch");
}

shared_store_tests!(opener: opener, db: db, grants: 100);

#[test]
fn a_capped_group_is_shared_fairly_between_processes() {
    let shares = crate::shared_store::a_capped_group_is_shared_fairly_between_processes(&url());
    println!("grants per process under concurrency 2: {shares:?}");
}

/// Each connection a process of its own; the grants' times are the
/// server's, so aging rewrites the windows' scores and the newest grant.
struct Server {
    db: Redis,
    admin: std::sync::Mutex<redis::Connection>,
}

fn server() -> Server {
    Server { db: db(), admin: std::sync::Mutex::new(redis::Client::open(url()).unwrap().get_connection().unwrap()) }
}

impl Server {
    fn keys(conn: &mut redis::Connection, tenant: &str, which: &str) -> Vec<String> {
        redis::cmd("KEYS").arg(format!("repute:{{{tenant}}}:{which}:*")).query(conn).unwrap()
    }
}

impl Store for Server {
    fn connect(&self, tenant: &str) -> Box<dyn repute_host::providers::Fencing> {
        Box::new(self.db.tenant(tenant, 0).1)
    }

    fn now(&self) -> u64 {
        0
    }

    fn age(&self, tenant: &str, ns: u64) {
        let us = (ns / 1_000) as i64;
        let mut conn = self.admin.lock().unwrap();
        for window in Server::keys(&mut conn, tenant, "window") {
            let members: Vec<(String, f64)> =
                redis::cmd("ZRANGE").arg(&window).arg(0).arg(-1).arg("WITHSCORES").query(&mut *conn).unwrap();
            for (member, at) in members {
                let aged = at - us as f64;
                let _: i64 = redis::cmd("ZADD").arg(&window).arg("XX").arg(aged).arg(member).query(&mut *conn).unwrap();
            }
        }
        // The bucketed windows (days, groups' minutes): each entry's times.
        for which in ["day", "gminute", "gday"] {
            for list in Server::keys(&mut conn, tenant, which) {
                let entries: Vec<String> = redis::cmd("LRANGE").arg(&list).arg(0).arg(-1).query(&mut *conn).unwrap();
                for (i, e) in entries.iter().enumerate() {
                    let n: Vec<i64> = e.split(':').map(|x| x.parse().unwrap()).collect();
                    let aged = format!("{}:{}:{}:{}", n[0] - us, n[1] - us, n[2], n[3]);
                    let _: () = redis::cmd("LSET").arg(&list).arg(i).arg(aged).query(&mut *conn).unwrap();
                }
            }
        }
        for which in ["claimed", "group"] {
            for hash in Server::keys(&mut conn, tenant, which) {
                let field = if which == "group" { "last" } else { "at" };
                let _: i64 = redis::cmd("HINCRBY").arg(&hash).arg(field).arg(-us).query(&mut *conn).unwrap();
            }
        }
        for usage in Server::keys(&mut conn, tenant, "usage") {
            let _: i64 = redis::cmd("HINCRBY").arg(&usage).arg("last").arg(-us).query(&mut *conn).unwrap();
        }
    }

    fn kept(&self, tenant: &str) -> Option<usize> {
        let mut conn = self.admin.lock().unwrap();
        let windows = Server::keys(&mut conn, tenant, "window");
        Some(windows.iter().map(|w| redis::cmd("ZCARD").arg(w).query::<usize>(&mut *conn).unwrap()).sum())
    }

    /// Every connection is a process of its own: the next one is the
    /// restart.
    fn restart(&self, _: &str) -> bool {
        true
    }

    fn concurrency_wait(&self, ttl: u64) -> u64 {
        ttl.min(crate::usage_limits::LINE_POLL)
    }
}

usage_limit_tests!(store: server());

/// A server that lost its scripts (a restart, `SCRIPT FLUSH`) is given them
/// again: the release still frees the permit for the next grant.
#[test]
fn a_revoke_the_server_refused_for_a_lost_script_is_sent_again() {
    let db = db();
    let t = tenant("noscript");
    let mut pool = open(&db, &t);
    let mut other = open(&db, &t);
    pool.register("proxy", "only", 1).unwrap();
    other.sync().unwrap();
    let first = pool.acquire("shop").unwrap();
    let mut conn = redis::Client::open(url()).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    pool.release(first.id, first.token).unwrap();
    let second = pool.acquire("shop").expect("the revoke ran with the script loaded again");
    assert_eq!(second.token, first.token + 1);
    let key = format!("repute:{{{t}}}:lease:proxy\u{1f}only\u{1f}0");
    let held: String = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
    assert!(held.starts_with(&format!("{}:", second.token)), "lease key holds {held}");
    assert!(matches!(other.acquire("shop"), Err(repute_host::Error::NoResourceAvailable { .. })));
}

// ---- the exchange ----

fn first() -> TenantConfig {
    TenantConfig { policy: Policy { strategy: Strategy::First, ..Policy::default() }, durable: true, seed: 0 }
}

fn embedded(tenant: &str) -> EmbeddedPool {
    let store = db();
    let sharing = Sharing { mode: Mode::Shared, ..Sharing::default() };
    EmbeddedPool::open(&store, &sharing, tenant, first(), Arc::new(SystemClock::new())).unwrap()
}

/// A pool with its exchange and a connection of its own, driven the way an
/// event loop would: write what the exchange gives, feed back what arrives.
struct Driven {
    pool: EmbeddedPool,
    exchange: Exchange,
    socket: TcpStream,
}

impl Driven {
    fn open(tenant: &str) -> Driven {
        let pool = embedded(tenant);
        let exchange = Exchange::new(pool.wire().expect("a plain Redis URL has a wire").clone());
        let Address { host, port } = exchange.address().clone();
        let socket = TcpStream::connect((host.as_str(), port)).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Driven { pool, exchange, socket }
    }

    /// A fresh tenant named after `name`, with one single-permit resource `a`.
    fn with_one(name: &str) -> Driven {
        let mut driven = Driven::open(&tenant(name));
        driven.pool.serve().unwrap().register("proxy", "a", 1).unwrap();
        driven
    }

    /// Writes what is pending and reads until something finishes.
    fn pump(&mut self) -> Vec<Done> {
        loop {
            let out = self.exchange.take_output();
            self.socket.write_all(&out).unwrap();
            if !self.exchange.busy() {
                return Vec::new();
            }
            let mut buf = [0u8; 4096];
            let n = self.socket.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            let pool = self.pool.serve().unwrap();
            let done = self.exchange.feed(pool, &buf[..n]).unwrap();
            if !done.is_empty() {
                self.socket.write_all(&self.exchange.take_output()).unwrap();
                return done;
            }
        }
    }

    fn acquire(&mut self, context: &str) -> repute_host::Result<Lease> {
        self.exchange.acquire(self.pool.serve()?, 1, context, &Selector::default())?;
        match self.pump().as_slice() {
            [Done::Acquired { op: 1, result }] => result.clone(),
            other => panic!("one acquire finishes: {other:?}"),
        }
    }

    fn release(&mut self, lease: &Lease) -> repute_host::Result<()> {
        if !self.exchange.release(self.pool.serve()?, 2, lease.id, lease.token)? {
            return Ok(());
        }
        match self.pump().as_slice() {
            [Done::Released { op: 2, result }] => result.clone(),
            other => panic!("one release finishes: {other:?}"),
        }
    }
}

fn other_process(tenant: &str) -> Pool {
    open_with(&db(), tenant, first().policy)
}

#[test]
fn a_permit_is_held_by_one_pool_whichever_path_granted_it() {
    let t = tenant("exchange-one");
    let mut driven = Driven::open(&t);
    let mut other = other_process(&t);
    driven.pool.serve().unwrap().register("proxy", "a", 1).unwrap();
    other.register("proxy", "a", 1).unwrap();

    let lease = driven.acquire("shop").unwrap();
    assert_eq!((lease.resource.value(), lease.token), ("a", 1));
    assert!(matches!(other.acquire("shop"), Err(Error::NoResourceAvailable { .. })));

    driven.release(&lease).unwrap();
    let taken = other.acquire("shop").expect("the revoke ran before the release finished");
    assert_eq!(taken.token, 2);
    assert!(matches!(driven.acquire("shop"), Err(Error::NoResourceAvailable { .. })));
    other.release(taken.id, taken.token).unwrap();
    assert_eq!(driven.acquire("shop").unwrap().token, 3);
}

#[test]
fn a_refused_permit_moves_the_acquire_on_to_the_next_candidate() {
    let t = tenant("exchange-next");
    let mut driven = Driven::open(&t);
    let mut other = other_process(&t);
    for pool in [driven.pool.serve().unwrap(), &mut other] {
        pool.register("proxy", "a", 1).unwrap();
        pool.register("proxy", "b", 1).unwrap();
    }
    let held = other.acquire("shop").unwrap();
    assert_eq!(held.resource.value(), "a");
    let lease = driven.acquire("shop").unwrap();
    assert_eq!(lease.resource.value(), "b", "a is held by the other pool");
    assert!(matches!(driven.acquire("shop"), Err(Error::NoResourceAvailable { .. })));
}

#[test]
fn acquires_in_flight_together_take_distinct_permits() {
    let t = tenant("exchange-together");
    let mut driven = Driven::open(&t);
    for value in ["a", "b", "c"] {
        driven.pool.serve().unwrap().register("proxy", value, 1).unwrap();
    }
    for op in 1..=3 {
        driven.exchange.acquire(driven.pool.serve().unwrap(), op, "shop", &Selector::default()).unwrap();
    }
    let mut granted = Vec::new();
    while granted.len() < 3 {
        for done in driven.pump() {
            let Done::Acquired { op, result: Ok(lease) } = done else { panic!("every acquire is granted: {done:?}") };
            granted.push((op, lease.resource.value().to_owned(), lease.token));
        }
    }
    granted.sort();
    let first_try = [(1, "a".to_owned(), 1), (2, "b".to_owned(), 1), (3, "c".to_owned(), 1)];
    assert_eq!(granted, first_try, "with `first`, each would have asked for a without the others set aside");
}

/// A server without the scripts (restarted, or flushed) answers NOSCRIPT:
/// the same call goes again with the script's source. The refusal is fed
/// in here rather than provoked by SCRIPT FLUSH, which would race with the
/// other tests on the server.
#[test]
fn scripts_the_server_lost_are_sent_as_source() {
    let mut driven = Driven::with_one("exchange-noscript");
    driven.exchange.acquire(driven.pool.serve().unwrap(), 1, "shop", &Selector::default()).unwrap();
    let by_hash = driven.exchange.take_output();
    assert!(by_hash.starts_with(b"*37\r\n$7\r\nEVALSHA\r\n"));
    let lost = b"-NOSCRIPT No matching script. Please use EVAL.\r\n";
    assert!(driven.exchange.feed(driven.pool.serve().unwrap(), lost).unwrap().is_empty());
    let again = driven.exchange.take_output();
    assert!(again.starts_with(b"*37\r\n$4\r\nEVAL\r\n"), "{}", String::from_utf8_lossy(&again));
    driven.socket.write_all(&again).unwrap();
    let lease = match driven.pump().as_slice() {
        [Done::Acquired { op: 1, result: Ok(lease) }] => lease.clone(),
        other => panic!("the acquire is granted by the script's source: {other:?}"),
    };
    assert_eq!(lease.token, 1);
    driven.exchange.release(driven.pool.serve().unwrap(), 2, lease.id, lease.token).unwrap();
    driven.exchange.take_output();
    assert!(driven.exchange.feed(driven.pool.serve().unwrap(), lost).unwrap().is_empty());
    let again = driven.exchange.take_output();
    assert!(again.starts_with(b"*8\r\n$4\r\nEVAL\r\n"), "{}", String::from_utf8_lossy(&again));
    driven.socket.write_all(&again).unwrap();
    assert!(matches!(driven.pump().as_slice(), [Done::Released { op: 2, result: Ok(()) }]));
    assert_eq!(driven.acquire("shop").unwrap().token, 2, "the revoke ran");
}

/// The wire's grants and the pool's own scripts count in one place: a
/// grant over the wire of a resource with rpm 2 (one per 30 s), then
/// another process's acquire by its own script is refused with the wait.
#[test]
fn the_exchange_counts_its_grants_against_the_resources_limits() {
    let t = tenant("exchange-limits");
    let started = std::time::Instant::now();
    let mut driven = Driven::open(&t);
    let mut other = other_process(&t);
    let limits = Limits { rpm: Some(2), ..Limits::default() };
    driven.pool.serve().unwrap().register_with("key", "k1", &Registration { limits, ..Registration::new(1) }).unwrap();
    assert_eq!(other.sync().unwrap(), 1);
    let lease = driven.acquire("chat").unwrap();
    driven.release(&lease).unwrap();
    let Err(Error::NoResourceAvailable(r)) = other.acquire("chat") else { panic!("the script refuses a second") };
    assert_eq!((r.registered, r.limited), (1, 1));
    let (wait, elapsed) = (r.retry_after.unwrap(), started.elapsed().as_nanos() as u64);
    let spacing = WINDOW / 2;
    assert!(wait <= spacing && wait >= spacing - elapsed, "retry after {wait} ns, {elapsed} ns after the first");
}

#[test]
fn a_broken_connection_fails_what_was_in_flight() {
    let mut driven = Driven::with_one("exchange-broken");
    driven.exchange.acquire(driven.pool.serve().unwrap(), 9, "shop", &Selector::default()).unwrap();
    assert!(driven.exchange.busy());
    let why = StoreError::Unavailable("redis: connection reset".into());
    match driven.exchange.reset(&why).as_slice() {
        [Done::Acquired { op: 9, result: Err(Error::Store(e)) }] => assert_eq!(e, &why),
        other => panic!("the acquire in flight fails: {other:?}"),
    }
    assert!(!driven.exchange.busy());
    // The next connection starts afresh; the permit was never granted.
    driven.socket = TcpStream::connect(driven.socket.peer_addr().unwrap()).unwrap();
    assert_eq!(driven.acquire("shop").unwrap().token, 1);
}

#[test]
fn a_reply_the_exchange_cannot_read_breaks_the_connection() {
    let mut driven = Driven::with_one("exchange-garbage");
    driven.exchange.acquire(driven.pool.serve().unwrap(), 1, "shop", &Selector::default()).unwrap();
    let fed = driven.exchange.feed(driven.pool.serve().unwrap(), b"*1\r\n");
    assert!(matches!(fed, Err(StoreError::Unavailable(_))), "{fed:?}");
}

#[test]
fn a_shared_rate_limit_keeps_a_pool_to_the_one_call_acquire() {
    let store = db();
    let sharing = Sharing { mode: Mode::Shared, ..Sharing::default() };
    let limited = TenantConfig {
        policy: Policy { rate_limit: Some(repute_host::RateLimit { rate: 10.0, burst: 1 }), ..Policy::default() },
        ..first()
    };
    let pool =
        EmbeddedPool::open(&store, &sharing, &tenant("exchange-limit"), limited, Arc::new(SystemClock::new())).unwrap();
    assert!(pool.wire().is_none());
}
