//! SQLite as the durable store: a pool stopped and opened again on the same
//! file gets its reputation, blocklist and fence counters back; tokens keep
//! increasing; a second owner of the same tenant is refused; the permit
//! table keeps every grant and release through `kill -9` (I1).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use repute_host::providers::{SqliteStorage, Storage};
use repute_host::{
    CellState, Error, ManualClock, Outcome, Policy, Pool, PoolOps, Providers, StoreError, Strategy, TenantConfig,
    SECOND,
};

/// A fresh database path under the system temp dir, removed on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> TempDb {
        let dir = std::env::temp_dir().join(format!("repute-host-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir.join("pool.db"))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn open(db: &TempDb, tenant: &str, clock: &ManualClock) -> repute_host::Result<Pool> {
    let providers = Providers::sqlite(&db.0, tenant, Arc::new(clock.clone()))?;
    Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers)
}

#[test]
fn state_and_fences_survive_a_restart() {
    let db = TempDb::new("restart");
    let clock = ManualClock::new(SECOND);
    let mut tokens = Vec::new();
    {
        let mut p = open(&db, "shop", &clock).unwrap();
        p.register("proxy", "a", 1).unwrap();
        p.register("proxy", "b", 1).unwrap();
        p.block("proxy", "b", None, None, Some("abuse report")).unwrap();
        for _ in 0..3 {
            let lease = p.acquire("x.com").unwrap();
            assert_eq!(lease.resource.value(), "a", "b is blocked");
            tokens.push(lease.token);
            p.release(lease.id, lease.token).unwrap();
        }
        let timeout =
            Outcome::Failure { kind: repute_host::FailureKind::Timeout, latency_ms: 5000.0, retry_after: None };
        p.report("proxy", "a", "y.com", &timeout).unwrap();
        assert_eq!(p.checkpoint(false), Ok(1));
        // After the checkpoint: a token the checkpoint does not know about,
        // and two reports that only the log has.
        let lease = p.acquire("x.com").unwrap();
        tokens.push(lease.token);
        p.report("proxy", "a", "y.com", &timeout).unwrap();
        p.report("proxy", "a", "y.com", &timeout).unwrap();

        // While this pool is open, nobody else may own the tenant.
        let second = Providers::sqlite(&db.0, "shop", Arc::new(clock.clone()));
        assert!(matches!(&second, Err(Error::NotOwner { owner }) if owner.contains("shop")), "{second:?}");
        // Another tenant of the same file is independent.
        open(&db, "other", &clock).unwrap().register("proxy", "z", 1).unwrap();
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");

    // A new owner, with a clock that starts over as a new process's would.
    let clock = ManualClock::new(7);
    let mut p = open(&db, "shop", &clock).unwrap();
    let names: Vec<String> = p.resources().unwrap().iter().map(|r| r.resource.to_string()).collect();
    assert_eq!(names, ["proxy:a", "proxy:b"]);
    let b = &p.resources().unwrap()[1];
    assert_eq!(b.block.as_ref().and_then(|b| b.reason.as_deref()), Some("abuse report"));
    // Three timeouts in y.com: one from the checkpoint, two replayed from the log.
    let cell = p.cells("proxy", "a").unwrap().remove(1);
    assert_eq!((cell.observations, cell.consecutive_failures), (3, 3));
    assert_eq!(cell.state, CellState::Cooling);

    // The lease taken after the checkpoint still holds "a": its holder may
    // still be using it, so the permit is refused until that lease's TTL
    // (30 s) has passed on the new owner's clock.
    assert!(matches!(p.acquire("x.com"), Err(Error::NoResourceAvailable { .. })));
    clock.advance(30 * SECOND);
    let lease = p.acquire("x.com").unwrap();
    let highest = *tokens.iter().max().unwrap();
    assert!(lease.token > highest, "token {} must exceed every earlier token ({tokens:?})", lease.token);
}

#[test]
fn a_report_made_with_the_release_is_logged_as_a_report_is() {
    let db = TempDb::new("report-and-release");
    let clock = ManualClock::new(SECOND);
    let token = {
        let mut p = open(&db, "shop", &clock).unwrap();
        p.register("proxy", "a", 1).unwrap();
        let lease = p.acquire("x.com").unwrap();
        let timeout =
            Outcome::Failure { kind: repute_host::FailureKind::Timeout, latency_ms: 5000.0, retry_after: None };
        p.report_and_release(lease.id, lease.token, &timeout).unwrap();
        lease.token
    };
    // No checkpoint: the log alone brings the report back.
    let mut p = open(&db, "shop", &clock).unwrap();
    let cells = p.cells("proxy", "a").unwrap();
    let cell = cells.iter().find(|c| c.context.as_ref().map(|c| c.as_str()) == Some("x.com")).unwrap();
    assert_eq!((cell.observations, cell.consecutive_failures), (1, 1));
    assert!(p.leases().unwrap().is_empty());
    let next = p.acquire("y.com").unwrap();
    assert_eq!((next.resource.value(), next.token), ("a", token + 1));
}

#[test]
fn checkpoints_are_compare_and_set() {
    let db = TempDb::new("cas");
    let mut storage = SqliteStorage::open(&db.0, "t").unwrap();
    assert_eq!(storage.save(b"one", 0, 0), Ok(1));
    assert_eq!(storage.save(b"two", 0, 0), Err(StoreError::Conflict { expected: 0, found: 1 }));
    assert_eq!(storage.save(b"two", 1, 0), Ok(2));
    assert_eq!(storage.load().unwrap().map(|c| c.bytes), Some(b"two".to_vec()));
    let epoch = storage.epoch();
    drop(storage);
    // Each owner gets a higher epoch.
    assert_eq!(reopen(&db, "t").epoch(), epoch + 1);
}

/// Opens the storage a dropped one held. The lock file's descriptor is
/// close-on-exec, but a child another test forks holds it from its fork to
/// its exec: a refusal then lasts microseconds, so a few tries see it end.
fn reopen(db: &TempDb, tenant: &str) -> SqliteStorage {
    for _ in 0..100 {
        match SqliteStorage::open(&db.0, tenant) {
            Err(repute_host::Error::NotOwner { .. }) => std::thread::sleep(std::time::Duration::from_millis(10)),
            other => return other.unwrap(),
        }
    }
    panic!("the lock of a dropped storage was never released");
}

#[test]
fn a_pool_that_saved_behind_another_writers_back_is_refused() {
    let db = TempDb::new("writer");
    let clock = ManualClock::new(1);
    let mut first = open(&db, "t", &clock).unwrap();
    first.register("proxy", "a", 1).unwrap();
    assert_eq!(first.checkpoint(false), Ok(1));
    let providers = first.close().expect("providers");
    drop(providers);

    // A second pool takes over and saves; then a stale writer that still
    // expects version 1 is refused, loudly, and overwrites nothing.
    let mut second = open(&db, "t", &clock).unwrap();
    second.register("proxy", "b", 1).unwrap();
    assert_eq!(second.checkpoint(false), Ok(2));
    drop(second);
    let mut stale = reopen(&db, "t");
    assert_eq!(stale.save(b"stale", 1, 0), Err(StoreError::Conflict { expected: 1, found: 2 }));
    assert_ne!(stale.load().unwrap().unwrap().bytes, b"stale");
}

/// A [`PoolSet`](repute_host::PoolSet) driven from async code runs its
/// SQLite calls on tokio's blocking pool, so a slow disk never stalls an
/// executor thread.
#[derive(Clone)]
struct AsyncPoolSet(Arc<repute_host::PoolSet>);

impl AsyncPoolSet {
    async fn open_tenant(&self, tenant: &str, config: TenantConfig, providers: Providers) -> repute_host::Result<()> {
        let (set, tenant) = (self.0.clone(), tenant.to_owned());
        tokio::task::spawn_blocking(move || set.open_tenant(&tenant, config, providers)).await.unwrap()
    }

    async fn with<R: Send + 'static>(
        &self,
        tenant: &str,
        f: impl FnOnce(&mut repute_host::TenantPool<'_>) -> R + Send + 'static,
    ) -> repute_host::Result<R> {
        let (set, tenant) = (self.0.clone(), tenant.to_owned());
        tokio::task::spawn_blocking(move || set.with(&tenant, f)).await.unwrap()
    }
}

#[test]
fn the_async_face_runs_sqlite_calls_off_the_executor() {
    let db = TempDb::new("async");
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let set = AsyncPoolSet(Arc::new(repute_host::PoolSet::new(2, Default::default()).unwrap()));
        for tenant in ["a", "b"] {
            let providers = Providers::sqlite(&db.0, tenant, Arc::new(ManualClock::new(1))).unwrap();
            let config = TenantConfig { durable: true, ..TenantConfig::default() };
            set.open_tenant(tenant, config, providers).await.unwrap();
            set.with(tenant, |p| p.register("proxy", "a", 1)).await.unwrap().unwrap();
        }
        let lease = set.with("a", |p| p.acquire("x.com")).await.unwrap().unwrap();
        assert_eq!(lease.token, 1);
        assert_eq!(set.with("b", |p| p.checkpoint(true)).await.unwrap(), Ok(1));
        let missing = set.with("c", |p| p.stats()).await;
        assert_eq!(missing.unwrap_err().code(), "invalid_input");
    });
}

/// Run by `a_second_process_is_refused` in a child process: tries to take the
/// tenant named by the environment and prints the outcome.
#[test]
#[ignore = "run as a child process by a_second_process_is_refused"]
fn child_opener() {
    let Ok(path) = std::env::var("REPUTE_TEST_CHILD_DB") else { return };
    match Providers::sqlite(&path, "shop", Arc::new(ManualClock::new(1))) {
        Ok(_) => println!("child: opened"),
        Err(e) => println!("child: {}: {e}", e.code()),
    }
}

#[test]
fn a_second_process_is_refused() {
    let db = TempDb::new("process");
    let clock = ManualClock::new(1);
    let child = || {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "sqlite_restart::child_opener", "--nocapture"])
            .env("REPUTE_TEST_CHILD_DB", &db.0)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pool = open(&db, "shop", &clock).unwrap();
    let refused = child();
    assert!(refused.contains("child: not_owner: not owner: process"), "{refused}");
    drop(pool);
    assert!(child().contains("child: opened"), "once the owner is gone, a new process may take over");
}

/// A pool that picks the first free resource in id order, so the tests know
/// which permit each acquire takes.
fn open_first(path: &std::path::Path, clock: &ManualClock) -> repute_host::Result<Pool> {
    let providers = Providers::sqlite(path, "shop", Arc::new(clock.clone()))?;
    let policy = Policy { strategy: Strategy::First, ..Policy::default() };
    Pool::open(TenantConfig { durable: true, policy, ..TenantConfig::default() }, providers)
}

/// Run by `grants_and_releases_survive_kill_9` in a child process: holds
/// `proxy:a` (in the checkpoint), releases `proxy:b` after the checkpoint
/// that still lists its lease, takes `proxy:c` after the checkpoint, says
/// so, and waits to be killed.
#[test]
#[ignore = "run as a child process by grants_and_releases_survive_kill_9"]
fn child_holder() {
    let Ok(path) = std::env::var("REPUTE_TEST_CHILD_HOLDER_DB") else { return };
    let clock = ManualClock::new(SECOND);
    let mut p = open_first(path.as_ref(), &clock).unwrap();
    for value in ["a", "b", "c"] {
        p.register("proxy", value, 1).unwrap();
    }
    let a = p.acquire("x.com").unwrap();
    let b = p.acquire("x.com").unwrap();
    assert_eq!(p.checkpoint(true), Ok(1));
    let c = p.acquire("x.com").unwrap();
    p.release(b.id, b.token).unwrap();
    for lease in [&a, &b, &c] {
        println!("child: {} {} {}", lease.resource.value(), lease.id, lease.token);
    }
    println!("child: ready");
    loop {
        std::thread::park();
    }
}

/// One lease as the child printed it: value, id, token. The test harness
/// may have printed its own words before the child's on the same line.
fn parse_child(line: &str) -> Option<(String, u64, u64)> {
    let (_, said) = line.split_once("child: ")?;
    let mut words = said.split(' ');
    let value = words.next()?.to_owned();
    Some((value, words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

/// A child process, killed with SIGKILL (and reaped) when dropped, so a
/// failed assertion leaves none behind.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn grants_and_releases_survive_kill_9() {
    let db = TempDb::new("kill9");
    let mut child = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "sqlite_restart::child_holder", "--nocapture", "--test-threads=1"])
            .env("REPUTE_TEST_CHILD_HOLDER_DB", &db.0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut leases = Vec::new();
    for line in BufReader::new(child.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.ends_with("child: ready") {
            break;
        }
        leases.extend(parse_child(&line));
    }
    let values: Vec<&str> = leases.iter().map(|(v, _, _)| v.as_str()).collect();
    assert_eq!(values, ["a", "b", "c"], "the child's leases, in order");
    drop(child); // SIGKILL: no close, no checkpoint
    let [(_, a_id, a_token), (_, _, b_token), (_, c_id, c_token)] = leases[..] else { unreachable!() };

    let clock = ManualClock::new(7);
    let mut p = open_first(&db.0, &clock).unwrap();
    // The checkpoint listed a and b; b was released after it and stays released.
    let live: Vec<u64> = p.leases().unwrap().iter().map(|l| l.id).collect();
    assert_eq!(live, [a_id]);
    // The restored lease keeps its holder (I5): it renews with its token.
    assert_eq!(p.renew(a_id, a_token).unwrap().token, a_token);
    let b = p.acquire("x.com").unwrap();
    assert_eq!((b.resource.value(), b.token), ("b", b_token + 1), "the released permit is free");
    // Ids go on above any the dead process handed out after its checkpoint,
    // so c's holder names no one else's lease.
    assert!(b.id > c_id, "lease id {} reused (the dead process reached {c_id})", b.id);
    assert_eq!(p.renew(c_id, c_token), Err(Error::UnknownLease));
    p.release(a_id, a_token).unwrap();
    p.release(b.id, b.token).unwrap();

    // Only c is left to choose; it was granted after the checkpoint, and its
    // holder keeps it until the lease's TTL ends.
    p.block("proxy", "a", None, None, None).unwrap();
    p.block("proxy", "b", None, None, None).unwrap();
    assert!(matches!(p.acquire("x.com"), Err(Error::NoResourceAvailable { .. })));
    clock.advance(20 * SECOND);
    assert!(matches!(p.acquire("x.com"), Err(Error::NoResourceAvailable { .. })));
    clock.advance(10 * SECOND);
    let c = p.acquire("x.com").unwrap();
    assert_eq!((c.resource.value(), c.token), ("c", c_token + 1));
}

#[test]
fn a_wall_clock_stepped_back_holds_a_permit_one_ttl_at_most() {
    let db = TempDb::new("stepped");
    let clock = ManualClock::new(SECOND);
    let mut p = open_first(&db.0, &clock).unwrap();
    p.register("proxy", "a", 1).unwrap();
    let lease = p.acquire("x.com").unwrap();
    drop(p);
    // As if the wall clock had run an hour ahead when the lease was granted.
    let raw = rusqlite::Connection::open(&db.0).unwrap();
    let hour = 3600 * SECOND as i64;
    assert_eq!(raw.execute("UPDATE fences SET expires = expires + ?1", [hour]).unwrap(), 1);
    drop(raw);

    let clock = ManualClock::new(1);
    let mut p = open_first(&db.0, &clock).unwrap();
    assert!(matches!(p.acquire("x.com"), Err(Error::NoResourceAvailable { .. })));
    clock.advance(30 * SECOND - 1);
    assert!(matches!(p.acquire("x.com"), Err(Error::NoResourceAvailable { .. })));
    clock.advance(1);
    assert_eq!(p.acquire("x.com").unwrap().token, lease.token + 1);
}

#[test]
fn a_file_from_before_the_permit_holders_opens_and_its_tokens_go_on() {
    let db = TempDb::new("upgrade");
    let raw = rusqlite::Connection::open(&db.0).unwrap();
    raw.execute_batch(
        "CREATE TABLE fences (
             tenant TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, permit INTEGER NOT NULL,
             token INTEGER NOT NULL, PRIMARY KEY (tenant, kind, value, permit)
         ) WITHOUT ROWID;
         INSERT INTO fences VALUES ('shop', 'proxy', 'a', 0, 41);",
    )
    .unwrap();
    drop(raw);
    let clock = ManualClock::new(1);
    let mut p = open_first(&db.0, &clock).unwrap();
    p.register("proxy", "a", 1).unwrap();
    assert_eq!(p.acquire("x.com").unwrap().token, 42);
    drop(p);
    let raw = rusqlite::Connection::open(&db.0).unwrap();
    assert_eq!(raw.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 3);
}
