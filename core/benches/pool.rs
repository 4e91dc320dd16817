//! Acquire+release and report at 1k and 100k resources over 10 contexts.
//! The interesting number is the 100k/1k ratio: selection is indexed, so it
//! should stay near 1 (goal ≤ 2), not grow with the pool. `selectors`
//! compares filtered acquires at 100k with the unfiltered one (goal ≤ 2×).
//! `quota` compares an acquire+release on keys that each belong to a quota
//! group with an rpm, a tpm and a concurrency (ten groups of 100 keys) with
//! the same keys in no group (goal ≤ 1.15×; `Workload::quota`, which
//! `scripts/guest-loop-counts.sh --quota` counts in instructions).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use repute_core::workload::{warmed, Workload, CONTEXTS, DRAIN_EVERY};
use repute_core::{LabelFilter, Outcome, Selector, Strategy};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("core");
    for strategy in [Strategy::Classic, Strategy::Thompson] {
        for n in [1_000usize, 100_000] {
            let mut workload = Workload::new(n, strategy);
            group.bench_with_input(
                BenchmarkId::new(format!("acquire_release/{}", strategy.as_str()), n),
                &n,
                |b, _| b.iter(|| black_box(workload.pairs(1))),
            );
        }
    }
    for n in [1_000usize, 100_000] {
        let (mut pool, ids, ctxs) = warmed(n, Strategy::Classic, false);
        let ok = Outcome::success(35.0).unwrap();
        let mut i = 0usize;
        group.bench_with_input(BenchmarkId::new("report", n), &n, |b, _| {
            b.iter(|| {
                i += 1;
                pool.report(&ids[(i * 7919) % ids.len()], &ctxs[i % CONTEXTS], ok, 1).unwrap();
                if i as u64 % DRAIN_EVERY == 0 {
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
                if i as u64 % DRAIN_EVERY == 0 {
                    pool.drain_events();
                }
                black_box(l.token)
            })
        });
    }
    group.finish();
}

fn quota(c: &mut Criterion) {
    let mut group = c.benchmark_group("quota");
    let n = 1_000;
    for grouped in [false, true] {
        let mut workload = Workload::quota(n, Strategy::Thompson, grouped);
        let name = if grouped { "acquire_release/one_group" } else { "acquire_release/no_group" };
        group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| b.iter(|| black_box(workload.pairs(1))));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = bench, selectors, quota
}
criterion_main!(benches);
