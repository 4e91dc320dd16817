//! PostgreSQL as the shared store, against a real server: the database, not
//! the client, refuses stale owners and second writers; the permit table
//! never lets two pools hold one permit, and a lease it saw released does
//! not come back from an older checkpoint; tokens rise across restarts; every
//! process folds the log in the same order; owner leases move only after
//! they expire, with a higher epoch.
//!
//! Needs `REPUTE_TEST_PG_URL` (see `scripts/services.sh`).

use std::sync::Arc;
use std::time::Duration;

use repute_host::providers::{Claim, Fencing, OwnerStore, Postgres, Storage};
use repute_host::{
    partition_of, Backend, Command, Context, Error, Outcome, Partition, Policy, Pool, PoolOps, Providers, ResourceId,
    StoreError, SystemClock, TenantConfig, SECOND,
};

use crate::shared_store::{shared_store_tests, tenant, Opener};
use crate::usage_limits::{usage_limit_tests, Store};

fn url() -> String {
    std::env::var("REPUTE_TEST_PG_URL")
        .expect("REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
}

fn db() -> Postgres {
    Postgres::connect(&url()).expect("PostgreSQL at REPUTE_TEST_PG_URL is reachable (`scripts/services.sh start`)")
}

fn open(db: &Postgres, tenant: &str, epoch: u64) -> Pool {
    open_with(db, tenant, epoch, Policy::default())
}

fn open_with(db: &Postgres, tenant: &str, epoch: u64, policy: Policy) -> Pool {
    let providers = Providers::postgres(db, tenant, epoch, Arc::new(SystemClock::new()));
    Pool::open(TenantConfig { policy, durable: true, ..TenantConfig::default() }, providers).unwrap()
}

fn opener() -> Opener {
    let db = db();
    Arc::new(move |tenant, policy| open_with(&db, tenant, 0, policy))
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

/// A partition's storage appends to its tenant's one log under the
/// partition's own owner epoch, which the database checks (a deposed
/// owner of one partition is refused while another partition's owner goes
/// on), and reads back only the entries of its own contexts and those
/// every partition folds.
#[test]
fn a_partition_writes_under_its_own_epoch_and_reads_its_own_part_of_the_log() {
    let db = db();
    let t = tenant("partition");
    let ttl = Duration::from_millis(300);
    let mut owners = db.owners();
    let part = |index| Partition::new(&t, index, 2).unwrap();
    let site = |index| (0..).map(|i| format!("site-{i}")).find(|c| partition_of(c, 2) == index).unwrap();
    let first = claimed(owners.claim(&part(0).name(), "a", "http://a", ttl).unwrap());
    let other = claimed(owners.claim(&part(1).name(), "b", "http://b", ttl).unwrap());
    let (mut zero, _) = db.partition(part(0), first);
    let (mut one, _) = db.partition(part(1), other);
    let resource = ResourceId::new("proxy", "p1").unwrap();
    let report = |index| Command::Report {
        resource: resource.clone(),
        context: Context::new(site(index)).unwrap(),
        outcome: Outcome::Success { latency_ms: 1.0 },
    };
    let everywhere = Command::Block { resource: resource.clone(), context: None, duration: None, reason: None };
    let a = zero.append(&report(0)).unwrap();
    let b = one.append(&report(1)).unwrap();
    let c = zero.append(&everywhere).unwrap();
    assert!(a < b && b < c, "one order for the tenant's log");
    let seqs = |s: &mut dyn Storage| s.read_log(0, 100).unwrap().into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&mut zero), vec![a, c]);
    assert_eq!(seqs(&mut one), vec![b, c]);

    std::thread::sleep(ttl + Duration::from_millis(100));
    let second = claimed(db.owners().claim(&part(0).name(), "c", "http://c", ttl).unwrap());
    assert!(
        matches!(zero.append(&report(0)), Err(StoreError::StaleEpoch { mine, stored }) if mine == first && stored == second)
    );
    assert!(matches!(zero.save(b"x", 0, c), Err(StoreError::StaleEpoch { .. })));
    let (mut taken, _) = db.partition(part(0), second);
    assert!(taken.append(&report(0)).unwrap() > c);
    assert!(taken.lease_id_floor() > zero.lease_id_floor(), "the new owner's lease ids are above the old one's");
    assert!(one.append(&report(1)).is_ok(), "the other partition's owner is not deposed");
}

#[test]
fn migrations_run_once() {
    let (_first, _second) = (db(), db());
    let mut client = ::postgres::Client::connect(&url(), ::postgres::NoTls).unwrap();
    let rows = client.query("SELECT version FROM repute_migrations ORDER BY version", &[]).unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6, 7]);
}

/// Another server now answers for the data (the generation row names
/// another postmaster): a promoted standby or a restart, either of which
/// may have lost the last commits.
#[test]
fn a_new_server_waits_out_the_old_leases_and_lifts_the_token_floor() {
    crate::shared_store::a_new_history_waits_out_its_leases_and_lifts_the_token_floor(&opener(), &|t| {
        let mut admin = ::postgres::Client::connect(&url(), ::postgres::NoTls).unwrap();
        let changed = admin
            .execute("UPDATE repute_generation SET server = 'an earlier server' WHERE tenant = $1", &[&t])
            .unwrap();
        assert_eq!(changed, 1, "the tenant's first grant started its generation");
    });
}

/// The test server commits synchronously and has no standby: nothing it
/// acknowledged can be lost, and startup has nothing to warn of.
#[test]
fn a_server_that_loses_nothing_says_nothing() {
    assert_eq!(db().durability(), None);
}

/// A restored lease granted before the generation's floor is one the
/// server may have forgotten: it is not brought back.
#[test]
fn a_lease_from_before_the_floor_has_ended() {
    let db = db();
    let t = tenant("floor");
    let (_, mut fencing) = db.tenant(&t, 0);
    let permit = repute_host::providers::Permit { kind: "proxy", value: "p", index: 0 };
    let mut admin = ::postgres::Client::connect(&url(), ::postgres::NoTls).unwrap();
    admin
        .execute(
            "INSERT INTO repute_generation (tenant, server, floor, resume, ttl) VALUES ($1, repute_server(), 100, 0, 0)",
            &[&t],
        )
        .unwrap();
    assert!(fencing.ended(permit, 100).unwrap());
    assert!(!fencing.ended(permit, 101).unwrap());
    assert!(!fencing.extend(permit, 100, SECOND, 0).unwrap(), "a token at the floor never extends");
    assert!(fencing.extend(permit, 101, SECOND, 0).unwrap(), "one above it is adopted");
}

shared_store_tests!(opener: opener, db: db, grants: 60);

#[test]
fn a_capped_group_is_shared_fairly_between_processes() {
    let shares = crate::shared_store::a_capped_group_is_shared_fairly_between_processes(&url());
    println!("grants per process under concurrency 2: {shares:?}");
}

/// Each connection a process of its own; the grants' times are the
/// database's, so aging rewrites them.
struct Pg {
    db: Postgres,
    admin: std::sync::Mutex<::postgres::Client>,
}

fn pg() -> Pg {
    Pg { db: db(), admin: std::sync::Mutex::new(::postgres::Client::connect(&url(), ::postgres::NoTls).unwrap()) }
}

impl Store for Pg {
    fn connect(&self, tenant: &str) -> Box<dyn repute_host::providers::Fencing> {
        Box::new(self.db.tenant(tenant, 0).1)
    }

    fn now(&self) -> u64 {
        0
    }

    fn age(&self, tenant: &str, ns: u64) {
        let us = (ns / 1_000) as i64;
        let mut admin = self.admin.lock().unwrap();
        for sql in [
            "UPDATE repute_grant SET at = at - $2::bigint * interval '1 microsecond' WHERE tenant = $1",
            "UPDATE repute_usage SET last_at = last_at - $2::bigint * interval '1 microsecond' WHERE tenant = $1",
            "UPDATE repute_bucket SET first = first - $2::bigint * interval '1 microsecond',
                                      at = at - $2::bigint * interval '1 microsecond' WHERE tenant = $1",
            "UPDATE repute_claimed SET at = at - $2::bigint * interval '1 microsecond' WHERE tenant = $1",
        ] {
            admin.execute(sql, &[&tenant, &us]).unwrap();
        }
    }

    fn kept(&self, tenant: &str) -> Option<usize> {
        let mut admin = self.admin.lock().unwrap();
        let n: i64 = admin.query_one("SELECT count(*) FROM repute_grant WHERE tenant = $1", &[&tenant]).unwrap().get(0);
        Some(n as usize)
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

usage_limit_tests!(store: pg());

#[test]
fn a_lease_released_after_the_checkpoint_does_not_come_back() {
    let db = db();
    let t = tenant("released");
    let mut first = open(&db, &t, 0);
    first.register("proxy", "p1", 1).unwrap();
    let lease = first.acquire("x.com").unwrap();
    assert_eq!(first.checkpoint(true), Ok(1));
    first.release(lease.id, lease.token).unwrap();
    drop(first); // no checkpoint after the release

    let mut next = open(&db, &t, 0);
    let live: Vec<u64> = next.leases().unwrap().iter().map(|l| l.id).collect();
    assert!(live.is_empty(), "the released lease {} came back: {live:?}", lease.id);
    assert_eq!(next.acquire("x.com").unwrap().token, lease.token + 1);
}
