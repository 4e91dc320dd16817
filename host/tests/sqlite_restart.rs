//! SQLite as the durable store: a pool stopped and opened again on the same
//! file gets its reputation, blocklist and fence counters back; tokens keep
//! increasing; a second owner of the same tenant is refused.

use std::path::PathBuf;
use std::sync::Arc;

use repute_host::providers::{SqliteStorage, Storage};
use repute_host::{CellState, Error, ManualClock, Outcome, Pool, PoolOps, Providers, StoreError, TenantConfig, SECOND};

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

    let lease = p.acquire("x.com").unwrap();
    let highest = *tokens.iter().max().unwrap();
    assert!(lease.token > highest, "token {} must exceed every earlier token ({tokens:?})", lease.token);
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
    assert_eq!(SqliteStorage::open(&db.0, "t").unwrap().epoch(), epoch + 1);
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
    let mut stale = SqliteStorage::open(&db.0, "t").unwrap();
    assert_eq!(stale.save(b"stale", 1, 0), Err(StoreError::Conflict { expected: 1, found: 2 }));
    assert_ne!(stale.load().unwrap().unwrap().bytes, b"stale");
}

#[test]
fn the_async_face_runs_sqlite_calls_off_the_executor() {
    let db = TempDb::new("async");
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let set = repute_host::AsyncPoolSet::new(repute_host::PoolSet::new(2, Default::default()).unwrap());
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
            .args(["--ignored", "--exact", "child_opener", "--nocapture"])
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
