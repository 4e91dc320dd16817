//! Redis as the shared store, against a real server: the scripts never let
//! two pools hold one permit, tokens rise across restarts and across a
//! server that lost its data, every process folds the log in the same order,
//! the acquire rate limit is shared, and a checkpoint behind the stored one
//! is refused.
//!
//! Needs `REPUTE_TEST_REDIS_URL` (see `scripts/services.sh`).

mod shared_store;

use std::sync::Arc;

use repute_host::providers::{Redis, Storage};
use repute_host::{Policy, Pool, PoolOps, Providers, StoreError, SystemClock, TenantConfig};
use shared_store::{tenant, Opener};

fn url() -> String {
    std::env::var("REPUTE_TEST_REDIS_URL").expect(
        "REPUTE_TEST_REDIS_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`",
    )
}

fn db() -> Redis {
    Redis::connect(&url()).expect("Redis at REPUTE_TEST_REDIS_URL is reachable (`scripts/services.sh start`)")
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

fn opener() -> Opener {
    let db = db();
    Arc::new(move |tenant, policy| open_with(&db, tenant, policy))
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

shared_store::shared_store_tests!(opener: opener, db: db, grants: 100);

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
