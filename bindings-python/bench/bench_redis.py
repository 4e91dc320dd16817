"""repute on Redis against the locks a Python user would otherwise pick, on
the same server in one run: acquire + release of a repute lease (shared
mode: one grant script, one revoke script) vs lock + unlock of a
python-redis-lock `Lock` (blocking), and the asyncio pair against
redis-py's `redis.asyncio` `Lock` (one task after another, and `--tasks`
tasks at once, each pair its own lock name).

    pip install python-redis-lock redis
    python bench/bench_redis.py [--url redis://127.0.0.1:56379] [--pairs N] [--runs N] [--tasks N]

repute also picks the resource (100 registered, reputation-weighted) and
mints a fencing token; the locks only exclude. Reports the best of several
runs and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import redis
import redis.asyncio
import redis_lock

import repute


def repute_pairs(url: str, pairs: int) -> float:
    with repute.Pool(store=url, tenant=f"bench-{uuid.uuid4().hex}", mode="shared") as pool:
        for i in range(100):
            pool.register("proxy", f"10.0.0.{i}:8080")
        start = time.perf_counter_ns()
        for _ in range(pairs):
            pool.acquire("example.com", timeout=0).release()
        return (time.perf_counter_ns() - start) / pairs


def lock_pairs(url: str, pairs: int) -> float:
    conn = redis.Redis.from_url(url)
    names = [f"bench-{uuid.uuid4().hex}-{i}" for i in range(100)]
    start = time.perf_counter_ns()
    for i in range(pairs):
        lock = redis_lock.Lock(conn, names[i % 100], expire=30)
        lock.acquire(blocking=False)
        lock.release()
    return (time.perf_counter_ns() - start) / pairs


async def async_repute_pairs(url: str, pairs: int, tasks: int) -> float:
    pool = repute.AsyncPool(repute.Pool(store=url, tenant=f"bench-{uuid.uuid4().hex}", mode="shared"))
    for i in range(100):
        await pool.register("proxy", f"10.0.0.{i}:8080")

    async def worker(n: int) -> None:
        for _ in range(n):
            lease = await pool.acquire("example.com", timeout=5.0)
            await lease.release()

    start = time.perf_counter_ns()
    await asyncio.gather(*(worker(pairs // tasks) for _ in range(tasks)))
    elapsed = time.perf_counter_ns() - start
    await pool.close()
    return elapsed / (pairs // tasks * tasks)


async def async_lock_pairs(url: str, pairs: int, tasks: int) -> float:
    conn = redis.asyncio.Redis.from_url(url, max_connections=max(tasks, 1) * 2)
    prefix = f"bench-{uuid.uuid4().hex}"

    async def worker(w: int, n: int) -> None:
        for i in range(n):
            lock = conn.lock(f"{prefix}-{w}-{i % 100}", timeout=30)
            await lock.acquire(blocking=False)
            await lock.release()

    start = time.perf_counter_ns()
    await asyncio.gather(*(worker(w, pairs // tasks) for w in range(tasks)))
    elapsed = time.perf_counter_ns() - start
    await conn.aclose()
    return elapsed / (pairs // tasks * tasks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=os.environ.get("REPUTE_TEST_REDIS_URL", "redis://127.0.0.1:56379"))
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=16)
    args = parser.parse_args()
    ours = min(repute_pairs(args.url, args.pairs) for _ in range(args.runs))
    theirs = min(lock_pairs(args.url, args.pairs) for _ in range(args.runs))
    print(f"repute acquire+release (Redis, shared): {ours / 1000:.1f} µs/pair = {1e9 / ours:.0f} pairs/s")
    print(f"python-redis-lock lock+unlock:          {theirs / 1000:.1f} µs/pair = {1e9 / theirs:.0f} pairs/s")
    print(f"repute / python-redis-lock throughput: {theirs / ours:.2f}x")
    for tasks in (1, args.tasks):
        ours = min(asyncio.run(async_repute_pairs(args.url, args.pairs, tasks)) for _ in range(args.runs))
        theirs = min(asyncio.run(async_lock_pairs(args.url, args.pairs, tasks)) for _ in range(args.runs))
        print(f"asyncio, {tasks} task(s): repute {ours / 1000:.1f} µs/pair, redis.asyncio Lock {theirs / 1000:.1f} µs/pair")
        print(f"  repute / redis.asyncio Lock throughput: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
