//! `Pool::footprint` against a counting allocator: on pools built to be
//! large in each way a tenant can grow one (long names, many permits held,
//! many contexts, dense per-context indexes grown afterwards, retired fence
//! sets, long block reasons), the estimate is never below the heap bytes
//! the pool really holds, and not far above them.
//!
//! Only the measuring thread's allocations count, and the cases run one
//! after another in one test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

use repute_core::{Context, FailureKind, Outcome, Policy, Pool, ResourceId};

struct Counting;

/// Bytes allocated and not yet freed by the measuring thread while it
/// measures: the test harness's own threads allocate too, and must not count.
static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

fn count(bytes: usize, sign: isize) {
    if MEASURING.with(Cell::get) {
        LIVE.fetch_add(sign * bytes as isize, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size, 1);
        count(layout.size(), -1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes held by the pool `build` returns (everything else it made is
/// dropped by then), boxed so the pool's own struct counts too.
fn measured(build: impl FnOnce() -> Pool) -> (u64, u64) {
    let before = LIVE.load(Ordering::SeqCst);
    MEASURING.with(|m| m.set(true));
    let mut pool = Box::new(build());
    pool.drain_events();
    MEASURING.with(|m| m.set(false));
    let held = (LIVE.load(Ordering::SeqCst) - before) as u64;
    let estimate = pool.stats().footprint;
    assert_eq!(estimate, pool.footprint());
    drop(pool);
    (estimate, held)
}

fn name(prefix: &str, i: usize) -> String {
    // The longest name the pool takes (256 bytes), unique per `i`.
    let tag = format!("{prefix}-{i}-");
    format!("{tag}{}", "x".repeat(256 - tag.len()))
}

fn id(i: usize) -> ResourceId {
    ResourceId::new(name("kind", i), name("value", i)).unwrap()
}

fn ctx(i: usize) -> Context {
    Context::new(name("context", i)).unwrap()
}

fn check(what: &str, build: impl FnOnce() -> Pool) -> (u64, u64) {
    let (estimate, held) = measured(build);
    println!("{what}: estimate {estimate} bytes, held {held} bytes ({:.2}×)", estimate as f64 / held as f64);
    assert!(estimate >= held, "{what}: estimate {estimate} < held {held}");
    assert!(estimate <= 2 * held + 4096, "{what}: estimate {estimate} far above held {held}");
    (estimate, held)
}

fn an_empty_pool() {
    check("empty", || Pool::new(Policy::default(), 1).unwrap());
}

fn resources_with_the_longest_names() {
    check("2000 resources", || {
        let mut p = Pool::new(Policy::default(), 1).unwrap();
        for i in 0..2000 {
            p.register(id(i), 1, 0).unwrap();
        }
        p
    });
}

fn many_permits_held_in_long_contexts() {
    check("50 × 1024 permits, half leased", || {
        let mut p = Pool::new(Policy::default(), 1).unwrap();
        for i in 0..50 {
            p.register(id(i), 1024, 0).unwrap();
        }
        for i in 0..50 * 512 {
            p.acquire(&ctx(i % 7), 0).unwrap();
        }
        p
    });
}

fn cells_in_many_contexts_with_failures_and_blocks() {
    check("100 resources × 300 contexts", || {
        let mut p = Pool::new(Policy::default(), 1).unwrap();
        for i in 0..100 {
            p.register(id(i), 1, 0).unwrap();
        }
        let slow = Outcome::failure(FailureKind::Timeout, 900.0).unwrap();
        for c in 0..300 {
            for r in (c % 5..100).step_by(5) {
                p.report(&id(r), &ctx(c), slow, 0).unwrap();
            }
            p.block(&id(c % 100), Some(&ctx(c)), Some(1_000_000_000_000), Some("r".repeat(1024)), 0).unwrap();
        }
        p
    });
}

fn dense_context_indexes_grown_by_later_registrations() {
    // With few resources one cell makes a context's index dense; registering
    // many resources afterwards grows every such index.
    check("500 dense contexts, then 3000 resources", || {
        let mut p = Pool::new(Policy::default(), 1).unwrap();
        for i in 0..8 {
            p.register(id(i), 1, 0).unwrap();
        }
        let ok = Outcome::success(10.0).unwrap();
        for c in 0..500 {
            p.report(&id(c % 8), &ctx(c), ok, 0).unwrap();
        }
        for i in 8..3000 {
            p.register(id(i), 1, 0).unwrap();
        }
        p
    });
}

fn retired_fence_sets() {
    check("3000 registered and removed", || {
        let mut p = Pool::new(Policy::default(), 1).unwrap();
        for i in 0..3000 {
            p.register(id(i), 8, 0).unwrap();
            p.unregister(&id(i), false, 0).unwrap();
        }
        p
    });
}

#[test]
fn the_estimate_bounds_what_each_pool_holds() {
    an_empty_pool();
    resources_with_the_longest_names();
    many_permits_held_in_long_contexts();
    cells_in_many_contexts_with_failures_and_blocks();
    dense_context_indexes_grown_by_later_registrations();
    retired_fence_sets();
}
