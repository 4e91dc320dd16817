"""Views are typed objects whose reprs show Python values, and every instant
a person reads has its Unix time beside it."""

from __future__ import annotations

import time

import repute


def test_reprs_show_python_values(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("example.com")
    assert repr(lease) == (
        f"Lease(id={lease.id}, kind='proxy', value='a', context='example.com', permit=0, token={lease.token}, valid=True)"
    )
    lease.release()
    assert repr(lease).endswith("valid=False)")
    pool.report_failure("proxy", "a", "example.com", "timeout", latency=1.0)
    global_cell, context_cell = pool.cells("proxy", "a")
    assert repr(global_cell).startswith("Cell(context=None, state='healthy', score=")
    assert repr(context_cell).startswith("Cell(context='example.com', state=")
    assert repr(pool.resources()[0]).startswith("Resource(kind='proxy', value='a', permits=1, leased=0, score=")
    assert repr(pool.stats()) == (
        "Stats(resources=1, cells=1, contexts=1, live_leases=0, available=1, due_for_probe=0, now=0.0, refused_entries=0)"
    )
    registered = next(iter(pool.events()))
    assert repr(registered) == f"RegisteredEvent(type='registered', at={registered.at!r})"
    assert repr(pool) == "Pool(closed=False)"
    pool.close()
    assert repr(pool) == "Pool(closed=True)"


def test_instants_have_their_unix_time_beside_them(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", lease_ttl=30.0)
    pool.register("proxy", "a")
    pool.register("proxy", "b")
    clock.advance(5.0)
    lease = pool.acquire("shop")
    pool.block("proxy", "b", seconds=60.0)
    for _ in range(3):
        pool.report_failure("proxy", "a", "shop", "timeout", latency=1.0)

    def near(unix: float | None, at: float | None) -> bool:
        """`unix` is the Unix time of pool-clock instant `at`, read now."""
        assert unix is not None and at is not None
        return abs(unix - (time.time() + at - pool.now)) < 0.5

    assert near(lease.granted_at_unix, lease.granted_at)
    assert near(lease.expires_at_unix, lease.expires_at)
    assert abs(lease.expires_at_unix - lease.granted_at_unix - 30.0) < 1e-3
    cell = pool.cells("proxy", "a")[1]
    assert cell.state == "cooling"
    assert near(cell.cooling_until_unix, cell.cooling_until)
    blocked = next(r for r in pool.resources() if r.value == "b")
    assert near(blocked.blocked_until_unix, blocked.blocked_until)
    assert blocked.blocked_until_unix is not None and blocked.blocked_until_unix > time.time() + 59
    events = list(pool.events())
    for event in events:
        assert near(event.at_unix, event.at)
    leased = next(e for e in events if isinstance(e, repute.LeasedEvent))
    assert near(leased.expires_at_unix, leased.expires_at) and near(leased.granted_at_unix, leased.granted_at)
    cooled = next(e for e in events if isinstance(e, repute.CooledEvent))
    assert near(cooled.until_unix, cooled.until)
    block = next(e for e in events if isinstance(e, repute.BlocklistedEvent))
    assert near(block.until_unix, block.until)
    assert cell.cooling_until_unix is not None and cell.cooling_until_unix > time.time()
