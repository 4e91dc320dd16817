//! A misbehaving component (the core built with `trap-test`) must cost the
//! caller one typed error, never the process: the shard is rebuilt from its
//! last good state and keeps serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use repute_host::{Error, ManualClock, Outcome, Pool, PoolOps, PoolSet, Providers, ShardLimits, TenantConfig, Variant};

fn providers() -> Providers {
    Providers::memory_with_clock(Arc::new(ManualClock::new(1)))
}

fn trap_pool(limits: ShardLimits) -> Pool {
    Pool::open_variant(TenantConfig::default(), providers(), limits, Variant::Testing).expect("open")
}

fn names(p: &mut impl PoolOps) -> Vec<String> {
    p.resources().unwrap().into_iter().map(|r| r.resource.to_string()).collect()
}

#[test]
fn a_trap_is_a_typed_error_and_the_pool_comes_back_from_its_last_snapshot() {
    let mut p = trap_pool(ShardLimits::default());
    p.register("proxy", "a", 1).unwrap();
    let ok = Outcome::Success { latency_ms: 12.0 };
    p.report("proxy", "a", "x.com", &ok).unwrap();
    let good = p.snapshot(true).unwrap();
    p.register("proxy", "after-snapshot", 1).unwrap();

    let err = p.register("__trap__", "x", 1).unwrap_err();
    assert!(matches!(&err, Error::Trap { message } if message.contains("unreachable")), "{err:?}");
    assert_eq!(err.code(), "trap");

    // Rebuilt from the snapshot: what came after it is gone, the rest is back.
    assert_eq!(names(&mut p), ["proxy:a"]);
    assert_eq!(p.snapshot(true).unwrap(), good);
    assert_eq!(p.cells("proxy", "a").unwrap()[1].observations, 1);
    let lease = p.acquire("x.com").unwrap();
    p.release(lease.id, lease.token).unwrap();
}

#[test]
fn a_call_that_never_returns_is_interrupted() {
    let limits = ShardLimits { call_timeout: Duration::from_millis(200), ..ShardLimits::default() };
    let mut p = trap_pool(limits);
    p.register("proxy", "a", 1).unwrap();
    p.snapshot(true).unwrap();
    let started = Instant::now();
    let err = p.register("__spin__", "x", 1).unwrap_err();
    assert!(matches!(&err, Error::Trap { message } if message.contains("interrupt")), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "interrupted near the timeout");
    assert_eq!(names(&mut p), ["proxy:a"]);
}

#[test]
fn a_call_that_hoards_memory_is_stopped_at_the_limit() {
    let limits = ShardLimits { memory_bytes: 32 << 20, ..ShardLimits::default() };
    let mut p = trap_pool(limits);
    p.register("proxy", "a", 1).unwrap();
    p.snapshot(true).unwrap();
    let err = p.register("__bloat__", "x", 1).unwrap_err();
    assert!(matches!(err, Error::Trap { .. }), "{err:?}");
    assert_eq!(names(&mut p), ["proxy:a"]);
    p.register("proxy", "b", 1).unwrap();
    assert_eq!(names(&mut p), ["proxy:a", "proxy:b"]);
}

#[test]
fn a_durable_tenant_is_rebuilt_from_storage() {
    let config = TenantConfig { durable: true, ..TenantConfig::default() };
    let mut p = Pool::open_variant(config, providers(), ShardLimits::default(), Variant::Testing).unwrap();
    p.register("proxy", "a", 1).unwrap();
    p.checkpoint(true).unwrap();
    let slow = Outcome::Success { latency_ms: 900.0 };
    p.report("proxy", "a", "x.com", &slow).unwrap();
    assert!(matches!(p.register("__trap__", "x", 1), Err(Error::Trap { .. })));
    // The checkpoint, plus the report logged after it.
    assert_eq!(names(&mut p), ["proxy:a"]);
    let cells = p.cells("proxy", "a").unwrap();
    assert_eq!((cells[1].observations, cells[1].latency_ms), (1, 900.0));
    // And the rebuilt pool still saves on top of the same checkpoint chain.
    assert_eq!(p.checkpoint(true), Ok(2));
}

#[test]
fn other_tenants_of_the_shard_survive_a_trap() {
    let set = PoolSet::with_variant(1, ShardLimits::default(), Variant::Testing).unwrap();
    for tenant in ["a", "b"] {
        set.open_tenant(tenant, TenantConfig::default(), providers()).unwrap();
        set.with(tenant, |p| {
            p.register("proxy", tenant, 1).unwrap();
            p.snapshot(true).unwrap();
        })
        .unwrap();
    }
    let err = set.with("a", |p| p.register("__trap__", "x", 1)).unwrap();
    assert!(matches!(err, Err(Error::Trap { .. })));
    assert_eq!(set.with("b", |p| names(p)).unwrap(), ["proxy:b"]);
    assert_eq!(set.with("a", |p| names(p)).unwrap(), ["proxy:a"]);
    set.with("b", |p| p.acquire("x.com").map(|l| l.token)).unwrap().unwrap();
}

#[test]
fn the_product_build_has_no_trap_triggers() {
    let mut p = Pool::open(TenantConfig::default(), providers()).unwrap();
    for kind in ["__trap__", "__spin__", "__bloat__"] {
        assert_eq!(p.register(kind, "x", 1), Ok(true));
    }
}

/// Storage whose log reads each take `pause`: a long log on a slow store.
struct SlowLog {
    inner: repute_host::providers::MemoryStorage,
    pause: Duration,
}

impl repute_host::providers::Storage for SlowLog {
    fn load(&mut self) -> Result<Option<repute_host::providers::Checkpoint>, repute_host::StoreError> {
        self.inner.load()
    }
    fn save(&mut self, bytes: &[u8], expected: u64, log_seq: u64) -> Result<u64, repute_host::StoreError> {
        self.inner.save(bytes, expected, log_seq)
    }
    fn append(&mut self, command: &repute_host::Command) -> Result<u64, repute_host::StoreError> {
        self.inner.append(command)
    }
    fn read_log(
        &mut self,
        after: u64,
        limit: u32,
    ) -> Result<Vec<repute_host::providers::LogEntry>, repute_host::StoreError> {
        std::thread::sleep(self.pause);
        self.inner.read_log(after, limit)
    }
}

/// A durable tenant whose log takes longer to fold than one call may run
/// (three pages of 1024 entries, each read in 150 ms, against a 100 ms call
/// timeout) still opens: opening has its own bound, since the log's length
/// is the store's, not a core bug; and that bound still interrupts it.
#[test]
fn opening_folds_a_log_longer_than_one_call_may_run_within_its_own_bound() {
    use repute_host::providers::{MemoryFencing, MemoryStorage, Storage};
    use repute_host::{Command, Context, ResourceId};
    let log = |pause| {
        let mut inner = MemoryStorage::default();
        let resource = ResourceId::new("proxy", "a").unwrap();
        let register = Command::Register {
            resource: resource.clone(),
            permits: 1,
            limits: Default::default(),
            labels: Default::default(),
            secret: None,
            groups: Vec::new(),
        };
        inner.append(&register).unwrap();
        for _ in 0..2500 {
            let context = Context::new("x.com").unwrap();
            inner
                .append(&Command::Report {
                    resource: resource.clone(),
                    context,
                    outcome: Outcome::success(5.0).unwrap(),
                })
                .unwrap();
        }
        let clock = Arc::new(ManualClock::new(1));
        Providers::new(clock, (SlowLog { inner, pause }, MemoryFencing::default()))
    };
    let config = TenantConfig { durable: true, ..TenantConfig::default() };
    let short = Duration::from_millis(100);
    let limits = ShardLimits { call_timeout: short, ..ShardLimits::default() };
    let mut p = Pool::open_variant(config.clone(), log(Duration::from_millis(150)), limits.clone(), Variant::Testing)
        .expect("the open outlasts the call timeout and still completes");
    assert_eq!(p.cells("proxy", "a").unwrap()[1].observations, 2500);

    let cut = ShardLimits { open_timeout: short, ..limits };
    let err = Pool::open_variant(config, log(Duration::from_millis(150)), cut, Variant::Testing).unwrap_err();
    assert!(matches!(&err, Error::Trap { message } if message.contains("interrupt")), "{err:?}");
}
