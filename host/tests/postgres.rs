//! PostgreSQL as the shared store, against a real server: the database, not
//! the client, refuses stale owners and second writers; the permit table
//! never lets two pools hold one permit; tokens rise across restarts; every
//! process folds the log in the same order; owner leases move only after
//! they expire, with a higher epoch.
//!
//! Needs `REPUTE_TEST_PG_URL` (see `scripts/services.sh`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use repute_host::providers::{Claim, OwnerStore, Postgres, Storage};
use repute_host::{
    Error, Outcome, Policy, Pool, PoolOps, Providers, RateLimit, StoreError, SystemClock, TenantConfig, SECOND,
};

fn url() -> String {
    std::env::var("REPUTE_TEST_PG_URL")
        .expect("REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
}

fn db() -> Postgres {
    Postgres::connect(&url()).expect("PostgreSQL at REPUTE_TEST_PG_URL is reachable (`scripts/services.sh start`)")
}

/// A tenant name no earlier run used: the database outlives test runs.
fn tenant(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{name}-{}-{nanos:x}", std::process::id())
}

fn open(db: &Postgres, tenant: &str, epoch: u64) -> Pool {
    let providers = Providers::postgres(db, tenant, epoch, Arc::new(SystemClock::new()));
    Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers).unwrap()
}

fn ok() -> Outcome {
    Outcome::Success { latency_ms: 10.0 }
}

fn claimed(claim: Claim) -> u64 {
    match claim {
        Claim::Owned { epoch, .. } => epoch,
        other => panic!("expected to own the tenant, got {other:?}"),
    }
}

#[test]
fn a_deposed_owner_is_refused_by_the_database() {
    let db = db();
    let t = tenant("deposed");
    let ttl = Duration::from_millis(300);
    let mut owners = db.owners();
    let first = claimed(owners.claim(&t, "a", "http://a", ttl).unwrap());
    let mut a = open(&db, &t, first);
    a.register("proxy", "p1", 1).unwrap();
    a.report("proxy", "p1", "shop", &ok()).unwrap();
    assert_eq!(a.checkpoint(true).unwrap(), 1);

    // A is paused past its owner lease; B takes the tenant over.
    std::thread::sleep(ttl + Duration::from_millis(100));
    let second = claimed(db.owners().claim(&t, "b", "http://b", ttl).unwrap());
    assert_eq!(second, first + 1);
    let mut b = open(&db, &t, second);
    assert_eq!(b.cells("proxy", "p1").unwrap()[0].observations, 1, "B folded A's acknowledged report");

    // A wakes up: its log append and its checkpoint carry the old epoch.
    let stale = Error::Store(StoreError::StaleEpoch { mine: first, stored: second });
    assert_eq!(a.report("proxy", "p1", "shop", &ok()), Err(stale.clone()));
    assert_eq!(a.checkpoint(true), Err(stale));
    assert_eq!(owners.renew(&t, "a", first, ttl).unwrap(), None, "the old owner cannot renew");

    // B's writes go through, on the version A left.
    b.report("proxy", "p1", "shop", &ok()).unwrap();
    assert_eq!(b.checkpoint(true).unwrap(), 2);
    let (mut storage, _) = db.tenant(&t, second);
    assert_eq!(storage.load().unwrap().map(|c| (c.epoch, c.version)), Some((second, 2)));
}

#[test]
fn a_checkpoint_behind_the_stored_one_is_refused() {
    let db = db();
    let t = tenant("behind");
    let mut a = open(&db, &t, 0);
    let mut b = open(&db, &t, 0);
    a.register("proxy", "p1", 1).unwrap();
    assert_eq!(a.checkpoint(false).unwrap(), 1);
    // B has not folded A's registration: its state is older than the stored one.
    assert_eq!(b.checkpoint(false), Err(Error::Store(StoreError::Conflict { expected: 0, found: 1 })));
    // The refused save wrote nothing: the stored checkpoint is A's.
    let (mut storage, _) = db.tenant(&t, 0);
    let stored = storage.load().unwrap().expect("A's checkpoint");
    assert_eq!((stored.version, stored.log_seq), (1, 1));
    assert_eq!(stored.bytes, a.snapshot(false).unwrap());
    // Caught up, B may replace it: in shared mode any copy as new as the stored one will do.
    assert_eq!(b.sync().unwrap(), 1);
    assert_eq!(b.checkpoint(false).unwrap(), 2);
    assert_eq!(a.checkpoint(false).unwrap(), 3);
}

#[test]
fn the_permit_table_never_grants_one_permit_twice() {
    let db = db();
    let t = tenant("exclusive");
    {
        let mut setup = open(&db, &t, 0);
        for r in ["a", "b", "c"] {
            setup.register("proxy", r, 1).unwrap();
        }
    }
    // Who holds each permit right now, as the holders themselves see it: a
    // holder leaves before it releases, and enters after it was granted.
    let holders: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let tokens: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (db, t, holders, tokens) = (db.clone(), t.clone(), holders.clone(), tokens.clone());
            std::thread::spawn(move || {
                let mut pool = open(&db, &t, 0);
                let mut grants = 0;
                while grants < 60 {
                    let lease = match pool.acquire("shop") {
                        Ok(lease) => lease,
                        Err(Error::NoResourceAvailable { .. }) => continue,
                        Err(e) => panic!("acquire: {e}"),
                    };
                    let key = lease.resource.value().to_owned();
                    let before = holders.lock().unwrap().insert(key.clone(), lease.token);
                    assert_eq!(before, None, "{key} granted with token {} while held", lease.token);
                    tokens.lock().unwrap().entry(key.clone()).or_default().push(lease.token);
                    holders.lock().unwrap().remove(&key);
                    pool.release(lease.id, lease.token).unwrap();
                    grants += 1;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let tokens = tokens.lock().unwrap();
    let total: usize = tokens.values().map(Vec::len).sum();
    assert_eq!(total, 360);
    for (resource, issued) in tokens.iter() {
        let mut sorted = issued.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), issued.len(), "a token of {resource} was issued twice");
    }
}

#[test]
fn tokens_keep_rising_across_restarts() {
    let t = tenant("restart");
    let mut highest = 0;
    for _ in 0..3 {
        let db = db();
        let mut pool = open(&db, &t, 0);
        pool.register("proxy", "only", 1).unwrap();
        for _ in 0..3 {
            let lease = pool.acquire("shop").unwrap();
            assert!(lease.token > highest, "token {} after {highest}", lease.token);
            highest = lease.token;
            pool.release(lease.id, lease.token).unwrap();
        }
    }
    assert_eq!(highest, 9);
}

#[test]
fn every_process_folds_the_log_in_the_same_order() {
    let db = db();
    let t = tenant("fold");
    {
        let mut setup = open(&db, &t, 0);
        setup.register("proxy", "a", 1).unwrap();
        setup.register("proxy", "b", 1).unwrap();
    }
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (db, t) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                let mut pool = open(&db, &t, 0);
                for i in 0..50 {
                    let outcome = Outcome::Success { latency_ms: (w * 50 + i) as f64 };
                    pool.report("proxy", if i % 2 == 0 { "a" } else { "b" }, "shop", &outcome).unwrap();
                }
                pool
            })
        })
        .collect();
    let mut pools: Vec<Pool> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    pools.push(open(&db, &t, 0));
    let views: Vec<Vec<(u64, i32, f64)>> = pools
        .iter_mut()
        .map(|p| {
            p.sync().unwrap();
            ["a", "b"]
                .iter()
                .flat_map(|r| p.cells("proxy", r).unwrap())
                .map(|c| (c.observations, c.score, c.latency_ms))
                .collect()
        })
        .collect();
    assert_eq!(views[0].iter().filter(|v| v.0 == 100).count(), 4, "200 reports, 100 per resource: {:?}", views[0]);
    for view in &views[1..] {
        assert_eq!(view, &views[0], "every copy folded the same log in the same order");
    }
}

#[test]
fn an_owner_lease_moves_only_after_it_expires() {
    let db = db();
    let t = tenant("owner");
    let ttl = Duration::from_millis(400);
    let (mut a, mut b) = (db.owners(), db.owners());
    let first = claimed(a.claim(&t, "a", "http://a:1", ttl).unwrap());
    assert_eq!(
        b.claim(&t, "b", "http://b:1", ttl).unwrap(),
        Claim::Elsewhere { owner: "a".into(), address: "http://a:1".into() }
    );
    // Renewed in time, A keeps it past its first TTL.
    for _ in 0..3 {
        std::thread::sleep(ttl / 3);
        assert!(a.renew(&t, "a", first, ttl).unwrap().is_some());
    }
    assert!(matches!(b.claim(&t, "b", "http://b:1", ttl).unwrap(), Claim::Elsewhere { .. }));
    std::thread::sleep(ttl + Duration::from_millis(100));
    let second = claimed(b.claim(&t, "b", "http://b:1", ttl).unwrap());
    assert!(second > first);
    assert_eq!(a.renew(&t, "a", first, ttl).unwrap(), None);
    // A's resignation names its own epoch and leaves B's lease alone.
    a.resign(&t, "a", first).unwrap();
    assert!(matches!(a.claim(&t, "a", "http://a:1", ttl).unwrap(), Claim::Elsewhere { .. }));
    b.resign(&t, "b", second).unwrap();
    assert_eq!(claimed(a.claim(&t, "a", "http://a:1", ttl).unwrap()), second + 1, "a resigned tenant is free at once");
}

#[test]
fn migrations_run_once() {
    let (_first, _second) = (db(), db());
    let mut client = ::postgres::Client::connect(&url(), ::postgres::NoTls).unwrap();
    let rows = client.query("SELECT version FROM repute_migrations ORDER BY version", &[]).unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, vec![1]);
}

#[test]
fn processes_sharing_a_tenant_share_its_rate_limit() {
    let db = db();
    let t = tenant("rate");
    let policy = Policy { rate_limit: Some(RateLimit { rate: 0.5, burst: 4 }), ..Policy::default() };
    let open_limited = || {
        let providers = Providers::postgres(&db, &t, 0, Arc::new(SystemClock::new()));
        Pool::open(TenantConfig { policy: policy.clone(), durable: true, ..TenantConfig::default() }, providers)
            .unwrap()
    };
    let (mut a, mut b) = (open_limited(), open_limited());
    a.register("proxy", "p1", 8).unwrap();
    b.sync().unwrap();
    // Each pool's own bucket would admit 4; together they get the burst once.
    let mut admitted = 0;
    let mut refused = Vec::new();
    for i in 0..8 {
        let pool = if i % 2 == 0 { &mut a } else { &mut b };
        match pool.acquire("shop") {
            Ok(_) => admitted += 1,
            Err(Error::RateLimited { retry_after }) => refused.push(retry_after),
            Err(e) => panic!("acquire {i}: {e}"),
        }
    }
    assert_eq!(admitted, 4);
    assert_eq!(refused.len(), 4);
    // One token every 2 s: the next is at most 2 s away.
    assert!(refused.iter().all(|&ns| ns > 0 && ns <= 2 * SECOND), "{refused:?}");
}
