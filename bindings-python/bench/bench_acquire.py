"""Acquire+release pairs per second from Python, embedded memory store.

    python bench/bench_acquire.py [--resources N] [--pairs N] [--runs N]

Reports the best of several runs (the least disturbed by other load on the
machine) and the median, for the plain calls, the `with` form and the
asyncio pair (`await apool.acquire()` + `await lease.release()`, with its
ratio to the plain pair). Two
reference calls attribute the cost: `dropped_events()` crosses the binding
(argument handling, GIL release, pool lock) and makes the smallest component
call (no clock, no timers), `stats()` one that fires the timers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import repute


def plain(pool: repute.Pool, pairs: int) -> float:
    acquire = pool.acquire
    start = time.perf_counter_ns()
    for _ in range(pairs):
        acquire("example.com").release()
    return (time.perf_counter_ns() - start) / pairs


def scoped(pool: repute.Pool, pairs: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(pairs):
        with pool.acquire("example.com"):
            pass
    return (time.perf_counter_ns() - start) / pairs


def asynchronous(pool: repute.Pool, pairs: int) -> float:
    async def run() -> float:
        apool = repute.AsyncPool(pool)
        start = time.perf_counter_ns()
        for _ in range(pairs):
            lease = await apool.acquire("example.com")
            await lease.release()
        return (time.perf_counter_ns() - start) / pairs

    return asyncio.run(run())


def reference(pool: repute.Pool, pairs: int, call: str) -> float:
    fn = getattr(pool, call)
    start = time.perf_counter_ns()
    for _ in range(pairs):
        fn()
    return (time.perf_counter_ns() - start) / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    pool = repute.Pool(seed=1)
    for i in range(args.resources):
        pool.register("proxy", f"10.0.{i // 256}.{i % 256}:8080")
    for i in range(args.resources):
        pool.report_success("proxy", f"10.0.{i // 256}.{i % 256}:8080", "example.com", latency=0.05)
    plain(pool, 10_000)  # warm up caches and the allocator
    print(f"{args.resources} resources, {args.pairs} pairs per run, {args.runs} runs")
    bests = {}
    for name, bench in [("acquire().release()", plain), ("with acquire()", scoped), ("asyncio pair", asynchronous)]:
        runs = [bench(pool, args.pairs) for _ in range(args.runs)]
        best, median = min(runs), statistics.median(runs)
        bests[name] = best
        print(f"{name:22} best {best / 1e3:.2f} us/pair ({1e9 / best:,.0f} pairs/s), median {median / 1e3:.2f} us/pair")
    print(f"asyncio / sync pair:   {bests['asyncio pair'] / bests['acquire().release()']:.2f}x")
    for call in ["dropped_events", "stats"]:
        runs = [reference(pool, args.pairs, call) for _ in range(args.runs)]
        print(f"{call + '()':22} best {min(runs) / 1e3:.2f} us/call")
    pool.events()  # drop the accumulated events


if __name__ == "__main__":
    main()
