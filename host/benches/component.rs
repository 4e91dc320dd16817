//! The cost of the component boundary: the same operations through the
//! component and through the natively linked core, at 1k and 100k resources
//! with 10 contexts, the fixed price of one call, a cold start (engine →
//! first acquire), what a usage limit adds to an acquire, and the core's own
//! acquire+release loop run inside the guest against the same loop natively
//! (`guest-loop`: no boundary crossed per pair, so the ratio is the price of
//! the compiled code alone).
//!
//! Run: `cargo bench -p repute-host --features testing --bench component`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use repute_core::workload::Workload;
use repute_host::linked::LinkedPool;
use repute_host::{
    measure_cold_start, FailureKind, GuestWorkload, Limits, ManualClock, Outcome, Policy, Pool, PoolOps, Providers,
    Registration, ShardLimits, Strategy, SystemClock, TenantConfig, MAX_RPM,
};

const CONTEXTS: [&str; 10] = ["ctx-0", "ctx-1", "ctx-2", "ctx-3", "ctx-4", "ctx-5", "ctx-6", "ctx-7", "ctx-8", "ctx-9"];
/// Events are drained this often, as a host serving them would.
const DRAIN_EVERY: u64 = 1024;

fn providers() -> Providers {
    Providers::memory_with_clock(Arc::new(SystemClock::new()))
}

/// `n` resources, and some history in every context so that context cells exist.
fn fill(p: &mut dyn PoolOps, n: usize) {
    let values: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    for v in &values {
        p.register("proxy", v, 1).unwrap();
    }
    for (i, v) in values.iter().enumerate().take(2000) {
        let outcome = Outcome::Success { latency_ms: 20.0 + i as f64 % 50.0 };
        p.report("proxy", v, CONTEXTS[i % CONTEXTS.len()], &outcome).unwrap();
    }
    p.drain_events().unwrap();
}

/// Each side with events recorded (drained every `DRAIN_EVERY` operations)
/// and with events off (`-quiet`), as a host that hands them to nobody runs.
fn pools(n: usize, strategy: Strategy) -> Vec<(&'static str, Box<dyn PoolOps>)> {
    let config = TenantConfig { policy: Policy { strategy, ..Policy::default() }, ..TenantConfig::default() };
    let quiet = ShardLimits { max_pending_events: 0, ..ShardLimits::default() };
    let mut native_quiet = LinkedPool::open(config.clone(), providers()).unwrap();
    native_quiet.set_event_limit(0);
    let mut pools: Vec<(&'static str, Box<dyn PoolOps>)> = vec![
        ("component", Box::new(Pool::open(config.clone(), providers()).unwrap())),
        ("native", Box::new(LinkedPool::open(config.clone(), providers()).unwrap())),
        ("component-quiet", Box::new(Pool::open_with(config, providers(), quiet).unwrap())),
        ("native-quiet", Box::new(native_quiet)),
    ];
    for (_, pool) in &mut pools {
        fill(pool.as_mut(), n);
    }
    pools
}

fn operations(c: &mut Criterion) {
    // Thompson (the default) spends most of an acquire drawing from Beta
    // posteriors; classic selection is cheap, so it shows the boundary's share.
    for (n, strategy) in [(1_000usize, Strategy::Thompson), (100_000, Strategy::Thompson), (100_000, Strategy::Classic)]
    {
        let label = format!("{}k-{}", n / 1000, strategy.as_str());
        let values: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
        for (name, mut pool) in pools(n, strategy) {
            let mut group = c.benchmark_group(format!("acquire+release/{name}"));
            let mut i = 0u64;
            group.bench_function(BenchmarkId::from_parameter(&label), |b| {
                b.iter(|| {
                    i += 1;
                    let lease = pool.acquire(CONTEXTS[(i % 10) as usize]).unwrap();
                    pool.release(lease.id, lease.token).unwrap();
                    if i.is_multiple_of(DRAIN_EVERY) {
                        black_box(pool.drain_events().unwrap());
                    }
                })
            });
            group.finish();

            let mut group = c.benchmark_group(format!("report/{name}"));
            let mut i = 0u64;
            group.bench_function(BenchmarkId::from_parameter(&label), |b| {
                b.iter(|| {
                    i += 1;
                    let outcome = if i.is_multiple_of(7) {
                        Outcome::Failure { kind: FailureKind::Slow, latency_ms: 900.0, retry_after: None }
                    } else {
                        Outcome::Success { latency_ms: 30.0 }
                    };
                    let value = &values[(i.wrapping_mul(2_654_435_761) % n as u64) as usize];
                    pool.report("proxy", value, CONTEXTS[(i % 10) as usize], &outcome).unwrap();
                    if i.is_multiple_of(DRAIN_EVERY) {
                        black_box(pool.drain_events().unwrap());
                    }
                })
            });
            group.finish();
        }
    }
}

/// The fixed price of one component call: `lease` of an id that was never
/// granted (one call in, one `clock.now` out, nothing found), against the
/// same call on the native core. Every operation pays at least this.
fn call_floor(c: &mut Criterion) {
    for (name, mut pool) in pools(1_000, Strategy::Classic) {
        let mut group = c.benchmark_group(format!("call/{name}"));
        group.bench_function("lease-of-unknown-id", |b| b.iter(|| black_box(pool.lease(u64::MAX).unwrap())));
        group.finish();
    }
}

/// What an `rpm` limit adds to an acquire + release through the component:
/// one key with the highest `rpm` accepted against the same key without a
/// limit, on the memory store, where the pool is its own authority inside
/// the guest. The clock moves 60 ms a pair, so a full window holds 1000
/// grants, each counted on its own (under the window's merge threshold,
/// 1024 entries), and the key is never refused: the price measured is
/// judging and counting each grant in the window, not waiting.
fn usage_limits(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire+release/component-one-key");
    let rpm = Limits { rpm: Some(MAX_RPM), ..Limits::default() };
    for (name, limits) in [("no-limit", Limits::default()), ("rpm", rpm)] {
        let clock = ManualClock::new(0);
        let mut pool =
            Pool::open(TenantConfig::default(), Providers::memory_with_clock(Arc::new(clock.clone()))).unwrap();
        pool.register_with("api", "key", &Registration { limits, ..Registration::new(1) }).unwrap();
        let mut i = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                clock.advance(Duration::from_millis(60).as_nanos() as u64);
                let lease = pool.acquire(CONTEXTS[0]).unwrap();
                pool.release(lease.id, lease.token).unwrap();
                if i.is_multiple_of(DRAIN_EVERY) {
                    black_box(pool.drain_events().unwrap());
                }
            })
        });
    }
    group.finish();
}

fn cold_start(c: &mut Criterion) {
    let mut group = c.benchmark_group("cold-start");
    group.sample_size(20).measurement_time(Duration::from_secs(10));
    group.bench_function("engine+deserialize+instantiate+first-acquire", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let (elapsed, precompiled) = measure_cold_start().unwrap();
                    assert!(precompiled, "the build-time precompiled component must be used");
                    elapsed
                })
                .sum()
        })
    });
    group.finish();
}

fn guest_loop(c: &mut Criterion) {
    for (n, strategy) in [
        (1_000u32, Strategy::Thompson),
        (100_000, Strategy::Thompson),
        (1_000, Strategy::Classic),
        (100_000, Strategy::Classic),
    ] {
        let label = format!("{}k-{}", n / 1000, strategy.as_str());
        let mut guest = GuestWorkload::new(n, strategy).unwrap();
        let mut native = Workload::new(n as usize, strategy);
        let mut group = c.benchmark_group("guest-loop");
        group.bench_function(BenchmarkId::new("component", &label), |b| {
            b.iter_custom(|pairs| {
                let started = Instant::now();
                black_box(guest.pairs(pairs).unwrap());
                started.elapsed()
            })
        });
        group.bench_function(BenchmarkId::new("native", &label), |b| {
            b.iter_custom(|pairs| {
                let started = Instant::now();
                black_box(native.pairs(pairs));
                started.elapsed()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, operations, call_floor, usage_limits, cold_start, guest_loop);
criterion_main!(benches);
