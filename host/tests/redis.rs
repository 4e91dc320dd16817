//! Redis as the shared store, against a real server: the scripts never let
//! two pools hold one permit, tokens rise across restarts and across a
//! server that lost its data, every process folds the log in the same order,
//! the acquire rate limit is shared, and a checkpoint behind the stored one
//! is refused.
//!
//! Needs `REPUTE_TEST_REDIS_URL` (see `scripts/services.sh`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use repute_host::providers::{Redis, Storage};
use repute_host::{
    Error, Outcome, Policy, Pool, PoolOps, Providers, RateLimit, StoreError, SystemClock, TenantConfig, SECOND,
};

fn url() -> String {
    std::env::var("REPUTE_TEST_REDIS_URL").expect(
        "REPUTE_TEST_REDIS_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`",
    )
}

fn db() -> Redis {
    Redis::connect(&url()).expect("Redis at REPUTE_TEST_REDIS_URL is reachable (`scripts/services.sh start`)")
}

/// A tenant name no earlier run used: the server outlives test runs.
fn tenant(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{name}-{}-{nanos:x}", std::process::id())
}

fn open_with(db: &Redis, tenant: &str, policy: Policy) -> Pool {
    let (storage, fencing) = db.tenant(tenant, 0);
    let providers =
        Providers { clock: Arc::new(SystemClock::new()), fencing: Box::new(fencing), storage: Box::new(storage) };
    Pool::open(TenantConfig { policy, durable: true, ..TenantConfig::default() }, providers).unwrap()
}

fn open(db: &Redis, tenant: &str) -> Pool {
    open_with(db, tenant, Policy::default())
}

#[test]
fn the_scripts_never_grant_one_permit_twice() {
    let db = db();
    let t = tenant("exclusive");
    {
        let mut setup = open(&db, &t);
        for r in ["a", "b", "c"] {
            setup.register("proxy", r, 1).unwrap();
        }
    }
    // A holder leaves the map before it releases and enters after it was granted.
    let holders: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let tokens: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (db, t, holders, tokens) = (db.clone(), t.clone(), holders.clone(), tokens.clone());
            std::thread::spawn(move || {
                let mut pool = open(&db, &t);
                let mut grants = 0;
                while grants < 100 {
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
    assert_eq!(tokens.values().map(Vec::len).sum::<usize>(), 600);
    for (resource, issued) in tokens.iter() {
        let mut sorted = issued.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), issued.len(), "a token of {resource} was issued twice");
        assert_eq!(sorted.last(), Some(&(issued.len() as u64)), "{resource}: tokens 1..=n, none skipped");
    }
}

#[test]
fn tokens_never_go_back_even_when_redis_loses_its_data() {
    let db = db();
    let t = tenant("loss");
    let mut pool = open(&db, &t);
    pool.register("proxy", "only", 1).unwrap();
    let mut highest = 0;
    for _ in 0..5 {
        let lease = pool.acquire("shop").unwrap();
        highest = lease.token;
        pool.release(lease.id, lease.token).unwrap();
    }
    assert_eq!(pool.checkpoint(false).unwrap(), 1);
    // The tenant's keys are gone, as after a restart that lost the last writes.
    let mut conn = redis::Client::open(url()).unwrap().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("repute:{{{t}}}:*")).query(&mut conn).unwrap();
    let _: () = redis::cmd("DEL").arg(&keys).query(&mut conn).unwrap();
    // The pool still knows the highest token it saw: the counter is reseeded above it.
    let lease = pool.acquire("shop").unwrap();
    assert_eq!(lease.token, highest + 1);
    pool.release(lease.id, lease.token).unwrap();
    // And from the reseeded counter on.
    let lease = pool.acquire("shop").unwrap();
    assert_eq!(lease.token, highest + 2);
}

#[test]
fn every_process_folds_the_log_in_the_same_order() {
    let db = db();
    let t = tenant("fold");
    {
        let mut setup = open(&db, &t);
        setup.register("proxy", "a", 1).unwrap();
        setup.register("proxy", "b", 1).unwrap();
    }
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (db, t) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                let mut pool = open(&db, &t);
                for i in 0..50 {
                    let outcome = Outcome::Success { latency_ms: (w * 50 + i) as f64 };
                    pool.report("proxy", if i % 2 == 0 { "a" } else { "b" }, "shop", &outcome).unwrap();
                }
                pool
            })
        })
        .collect();
    let mut pools: Vec<Pool> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    pools.push(open(&db, &t));
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
fn processes_sharing_a_tenant_share_its_rate_limit() {
    let db = db();
    let t = tenant("rate");
    let policy = Policy { rate_limit: Some(RateLimit { rate: 0.5, burst: 4 }), ..Policy::default() };
    let (mut a, mut b) = (open_with(&db, &t, policy.clone()), open_with(&db, &t, policy));
    a.register("proxy", "p1", 8).unwrap();
    b.sync().unwrap();
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
    assert_eq!(admitted, 4, "each pool's own bucket would admit 4; together they get the burst once");
    assert_eq!(refused.len(), 4);
    assert!(refused.iter().all(|&ns| ns > 0 && ns <= 2 * SECOND), "{refused:?}");
}

#[test]
fn a_checkpoint_behind_the_stored_one_is_refused() {
    let db = db();
    let t = tenant("behind");
    let mut a = open(&db, &t);
    let mut b = open(&db, &t);
    a.register("proxy", "p1", 1).unwrap();
    assert_eq!(a.checkpoint(false).unwrap(), 1);
    assert_eq!(b.checkpoint(false), Err(Error::Store(StoreError::Conflict { expected: 0, found: 1 })));
    let (mut storage, _) = db.tenant(&t, 0);
    let stored = storage.load().unwrap().expect("A's checkpoint");
    assert_eq!((stored.version, stored.log_seq), (1, 1));
    assert_eq!(stored.bytes, a.snapshot(false).unwrap());
    assert_eq!(b.sync().unwrap(), 1);
    assert_eq!(b.checkpoint(false).unwrap(), 2);
}

#[test]
fn a_stale_epoch_is_refused_by_the_scripts() {
    let db = db();
    let t = tenant("epoch");
    db.raise_epoch(&t, 3).unwrap();
    let (mut old, _) = db.tenant(&t, 2);
    let register =
        repute_host::Command::Register { resource: repute_host::ResourceId::new("proxy", "p").unwrap(), permits: 1 };
    assert_eq!(old.append(&register), Err(StoreError::StaleEpoch { mine: 2, stored: 3 }));
    assert_eq!(old.save(b"bytes", 0, 0), Err(StoreError::StaleEpoch { mine: 2, stored: 3 }));
    let (mut current, _) = db.tenant(&t, 3);
    assert_eq!(current.append(&register), Ok(1));
    db.raise_epoch(&t, 1).unwrap();
    assert_eq!(current.append(&register), Ok(2), "raising never lowers the epoch");
}
