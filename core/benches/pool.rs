//! Acquire+release and report at 1k and 100k resources over 10 contexts.
//! The interesting number is the 100k/1k ratio: selection is indexed, so it
//! should stay near 1 (goal ≤ 2), not grow with the pool.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use repute_core::{Context, FailureKind, Outcome, Policy, Pool, ResourceId, Strategy};

const CONTEXTS: usize = 10;

fn warmed_pool(n: usize, strategy: Strategy) -> (Pool, Vec<ResourceId>, Vec<Context>) {
    let mut pool = Pool::new(Policy { strategy, ..Policy::default() }, 1).unwrap();
    let ids: Vec<ResourceId> =
        (0..n).map(|i| ResourceId::new("proxy", format!("10.0.{}.{}:8080", i / 256, i % 256)).unwrap()).collect();
    let ctxs: Vec<Context> = (0..CONTEXTS).map(|i| Context::new(format!("site-{i}.example")).unwrap()).collect();
    for id in &ids {
        pool.register(id.clone(), 1, 0).unwrap();
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

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
