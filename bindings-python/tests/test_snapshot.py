"""Snapshot and restore round trips, binary and JSON."""

from __future__ import annotations

import json

import repute


def _populate(pool: repute.Pool) -> repute.Lease:
    pool.register("proxy", "a", permits=2)
    pool.register("proxy", "b")
    pool.report_success("proxy", "a", "shop", latency=0.1)
    pool.report_failure("proxy", "b", "shop", repute.FailureKind.SLOW, latency=2.0)
    pool.block("proxy", "b", seconds=60.0, context="news", reason="banned")
    return pool.acquire("shop")


def _state(pool: repute.Pool) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for r in pool.resources():
        rows.append((r.kind, r.value, r.permits, r.leased, r.score, r.blocked))
        for c in pool.cells(r.kind, r.value):
            rows.append((c.context, c.state, c.score, c.observations, c.blocked, c.blocked_until, c.block_reason))
    return rows


def test_binary_round_trip(clock: repute.ManualClock) -> None:
    source = repute.Pool(clock=clock, strategy="first", seed=1)
    lease = _populate(source)
    data = source.snapshot()
    assert isinstance(data, bytes) and data.startswith(b"RPUTSNAP")

    target = repute.Pool(clock=clock, strategy="first", seed=99)
    target.restore(data)
    assert _state(target) == _state(source)
    assert target.stats().live_leases == 1
    # The lease lives on in the restored pool: its permit stays taken, with a
    # full TTL from the restore instant.
    other = target.acquire("shop")
    assert (other.value, other.permit) == (lease.value, 1 - lease.permit)
    assert target.try_acquire("shop") is not None  # "b", the last free permit
    assert target.try_acquire("shop") is None
    clock.advance(30)
    assert target.stats().live_leases == 0  # any call fires the timers due by now
    expired = [e for e in target.events() if isinstance(e, repute.LeaseExpiredEvent)]
    assert lease.id in [e.lease_id for e in expired]


def test_snapshot_without_leases(clock: repute.ManualClock) -> None:
    source = repute.Pool(clock=clock)
    _populate(source)
    target = repute.Pool(clock=clock)
    target.restore(source.snapshot(with_leases=False))
    assert target.stats().live_leases == 0
    assert len(target.resources()) == 2


def test_json_round_trip(clock: repute.ManualClock) -> None:
    source = repute.Pool(clock=clock, seed=5)
    _populate(source)
    text = source.snapshot_json()
    assert isinstance(json.loads(text), dict)
    target = repute.Pool(clock=clock)
    target.restore_json(text)
    assert _state(target) == _state(source)
    assert target.snapshot_json() == text  # same state, same instant: same bytes


def test_restored_fences_never_go_back(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock)
    pool.register("proxy", "a")
    old = pool.snapshot()
    for _ in range(3):
        pool.acquire("c").release()
    pool.restore(old)  # an older state, but the fence counter keeps its high mark
    assert pool.acquire("c").token == 4
