"""CPU per grant when many acquires wait for few permits.

    python bench/bench_waiters.py [--permits N] [--waiters N,N,...] [--rounds N]

Each of `waiters` asyncio tasks (then threads) acquires, holds its lease a
millisecond and releases, `rounds` times, over `permits` resources of one
permit each. A release wakes the longest-waiting acquire alone
(repute._freed for asyncio, the host's line for threads), so the CPU a
grant costs should not grow with the number waiting; the ratio to the
first row (as many waiters as permits) says how far it does.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time

import repute


async def contend(permits: int, waiters: int, rounds: int) -> float:
    pool = repute.AsyncPool(repute.Pool())
    for i in range(permits):
        await pool.register("proxy", f"p{i}")

    async def worker() -> None:
        for _ in range(rounds):
            lease = await pool.acquire("example.com", timeout=120.0)
            await asyncio.sleep(0.001)
            await lease.release()

    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(waiters)))
    cpu = time.process_time() - start
    await pool.close()
    return cpu / (waiters * rounds)


def threaded(permits: int, waiters: int, rounds: int) -> float:
    pool = repute.Pool()
    for i in range(permits):
        pool.register("proxy", f"p{i}")

    def worker() -> None:
        for _ in range(rounds):
            lease = pool.acquire("example.com", timeout=120.0)
            time.sleep(0.001)
            lease.release()

    threads = [threading.Thread(target=worker) for _ in range(waiters)]
    start = time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - start
    pool.close()
    return cpu / (waiters * rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--permits", type=int, default=4)
    parser.add_argument("--waiters", default="4,100,400")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"{'':>8} {'asyncio':>20} {'threads':>20}")
    print(f"{'waiters':>8} {'cpu/grant':>12} {'ratio':>7} {'cpu/grant':>12} {'ratio':>7}")
    bases: list[float] = []
    for waiters in (int(n) for n in args.waiters.split(",")):
        row = [asyncio.run(contend(args.permits, waiters, args.rounds)), threaded(args.permits, waiters, args.rounds)]
        bases = bases or row
        cells = " ".join(f"{per * 1e6:>9.1f} µs {per / base:>6.2f}×" for per, base in zip(row, bases))
        print(f"{waiters:>8} {cells}")


if __name__ == "__main__":
    main()
