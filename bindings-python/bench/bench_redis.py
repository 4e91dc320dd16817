"""repute on Redis against the lock a Python user would otherwise pick, on
the same server in one run: acquire + release of a repute lease (shared
mode: one grant script, one revoke script) vs lock + unlock of a
python-redis-lock `Lock`, single client, round trip bound.

    pip install python-redis-lock
    python bench/bench_redis.py [--url redis://127.0.0.1:56379] [--pairs N] [--runs N]

repute also picks the resource (100 registered, reputation-weighted) and
mints a fencing token; the lock only excludes. Reports the best of several
runs and the ratio.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import redis
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=os.environ.get("REPUTE_TEST_REDIS_URL", "redis://127.0.0.1:56379"))
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ours = min(repute_pairs(args.url, args.pairs) for _ in range(args.runs))
    theirs = min(lock_pairs(args.url, args.pairs) for _ in range(args.runs))
    print(f"repute acquire+release (Redis, shared): {ours / 1000:.1f} µs/pair = {1e9 / ours:.0f} pairs/s")
    print(f"python-redis-lock lock+unlock:          {theirs / 1000:.1f} µs/pair = {1e9 / theirs:.0f} pairs/s")
    print(f"repute / python-redis-lock throughput: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
