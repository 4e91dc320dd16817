//! Acquire+release and report at 1k and 100k resources over 10 contexts.
//! The interesting number is the 100k/1k ratio: selection is indexed, so it
//! should stay near 1 (goal ≤ 2), not grow with the pool. `selectors`
//! compares filtered acquires at 100k with the unfiltered one (goal ≤ 2×).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use repute_core::{
    Context, FailureKind, LabelFilter, Labels, Outcome, Policy, Pool, Registration, ResourceId, Selector, Strategy,
};

const CONTEXTS: usize = 10;

/// Regions the labelled pool spreads its proxies over.
const REGIONS: usize = 10;
/// One resource in this many of the labelled pool is an API key.
const KEY_EVERY: usize = 1000;

fn warmed_pool(n: usize, strategy: Strategy) -> (Pool, Vec<ResourceId>, Vec<Context>) {
    warmed(n, strategy, false)
}

/// `labelled`: every resource has a region label, one in `KEY_EVERY` is an `api-key`.
fn warmed(n: usize, strategy: Strategy, labelled: bool) -> (Pool, Vec<ResourceId>, Vec<Context>) {
    let mut pool = Pool::new(Policy { strategy, ..Policy::default() }, 1).unwrap();
    let kind = |i: usize| if labelled && i % KEY_EVERY == 0 { "api-key" } else { "proxy" };
    let ids: Vec<ResourceId> =
        (0..n).map(|i| ResourceId::new(kind(i), format!("10.0.{}.{}:8080", i / 256, i % 256)).unwrap()).collect();
    let ctxs: Vec<Context> = (0..CONTEXTS).map(|i| Context::new(format!("site-{i}.example")).unwrap()).collect();
    for (i, id) in ids.iter().enumerate() {
        let labels = match labelled {
            true => Labels::new([("region".to_string(), format!("r{}", i % REGIONS))]).unwrap(),
            false => Labels::default(),
        };
        pool.register_with(id.clone(), Registration { labels, ..Registration::new(1) }, 0).unwrap();
    }
    // Three observations per resource spread over the contexts, a fifth of them failures.
    for (i, id) in ids.iter().enumerate() {
        for j in 0..3 {
            let c = &ctxs[(i * 7 + j * 3) % CONTEXTS];
            let o = if (i + j) % 5 == 0 { Outcome::failure(FailureKind::Slow, 80.0) } else { Outcome::success(40.0) };
            pool.report(id, c, o.unwrap(), 0).unwrap();
        }
    }
    pool.drain_events();
    (pool, ids, ctxs)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("core");
    for strategy in [Strategy::Classic, Strategy::Thompson] {
        for n in [1_000usize, 100_000] {
            let (mut pool, _, ctxs) = warmed_pool(n, strategy);
            let mut i = 0usize;
            group.bench_with_input(
                BenchmarkId::new(format!("acquire_release/{}", strategy.as_str()), n),
                &n,
                |b, _| {
                    b.iter(|| {
                        i += 1;
                        let l = pool.acquire(&ctxs[i % CONTEXTS], 1).unwrap();
                        pool.release(l.id, l.token, 1).unwrap();
                        if i % 1024 == 0 {
                            pool.drain_events();
                        }
                        black_box(l.token)
                    })
                },
            );
        }
    }
    for n in [1_000usize, 100_000] {
        let (mut pool, ids, ctxs) = warmed_pool(n, Strategy::Classic);
        let ok = Outcome::success(35.0).unwrap();
        let mut i = 0usize;
        group.bench_with_input(BenchmarkId::new("report", n), &n, |b, _| {
            b.iter(|| {
                i += 1;
                pool.report(&ids[(i * 7919) % ids.len()], &ctxs[i % CONTEXTS], ok, 1).unwrap();
                if i % 1024 == 0 {
                    pool.drain_events();
                }
            })
        });
    }
    group.finish();
}

fn selectors(c: &mut Criterion) {
    let mut group = c.benchmark_group("selectors");
    let n = 100_000;
    let region = |r: &str| LabelFilter { name: "region".into(), values: vec![r.into()] };
    let cases = [
        ("none", Selector::default()),
        ("where_region", Selector { labels: vec![region("r3")], ..Selector::default() }),
        ("kind_0.1pct", Selector { kind: Some("api-key".into()), ..Selector::default() }),
        (
            "exclude_3",
            Selector { exclude: (0..3).map(|i| format!("10.0.0.{i}:8080")).collect(), ..Selector::default() },
        ),
        ("affinity", Selector { affinity: Some("user-42".into()), ..Selector::default() }),
    ];
    for (name, selector) in cases {
        let (mut pool, _, ctxs) = warmed(n, Strategy::Thompson, true);
        let mut i = 0usize;
        group.bench_with_input(BenchmarkId::new(format!("acquire_release/{name}"), n), &n, |b, _| {
            b.iter(|| {
                i += 1;
                let l = pool.acquire_with(&ctxs[i % CONTEXTS], &selector, 1).unwrap();
                pool.release(l.id, l.token, 1).unwrap();
                if i % 1024 == 0 {
                    pool.drain_events();
                }
                black_box(l.token)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = bench, selectors
}
criterion_main!(benches);
