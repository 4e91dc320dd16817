"""One pool shared by many threads: never two holders of one permit."""

from __future__ import annotations

import threading
from collections import defaultdict

import repute

THREADS = 8
ROUNDS = 400


def test_threads_hammering_one_pool_never_double_grant() -> None:
    pool = repute.Pool(seed=3)  # the system clock: real contention, real waits
    pool.register("proxy", "a", permits=2)
    pool.register("proxy", "b")
    pool.register("proxy", "c", permits=3)
    guard = threading.Lock()
    held: set[tuple[str, str, int]] = set()
    tokens: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    failures: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work() -> None:
        try:
            start.wait()
            for _ in range(ROUNDS):
                with pool.acquire("example.com", timeout=10.0) as lease:
                    permit = (lease.kind, lease.value, lease.permit)
                    with guard:
                        assert permit not in held, f"{permit} granted twice"
                        held.add(permit)
                        tokens[permit].append(lease.token)
                    lease.report_success(latency=0.001)
                    with guard:
                        held.remove(permit)
        except BaseException as e:  # surfaced below, with the thread's traceback
            failures.append(e)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert failures == []
    assert sum(len(seq) for seq in tokens.values()) == THREADS * ROUNDS
    for permit, seq in tokens.items():
        # Grants of one permit are serial, so tokens arrive in order, each
        # strictly above the last (a fence never repeats).
        assert seq == sorted(set(seq)), permit
        assert seq[-1] == len(seq), permit
    stats = pool.stats()
    assert stats.live_leases == 0
    assert sum(c.observations for r in ("a", "b", "c") for c in pool.cells("proxy", r)[1:]) == THREADS * ROUNDS
