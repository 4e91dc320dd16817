"""Per-resource usage limits: `rpm`, `tpm` with each lease's `cost` and its
reconciled use, `min_interval`, `max_uses` and `max_age`, in the blocking and
the asyncio API alike. The pools are on a manual clock and select with the
`first` strategy, so every grant, refusal and wait is exact."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

import repute


def refusal(attempt: Callable[[], object]) -> repute.NoResourceAvailableError:
    with pytest.raises(repute.NoResourceAvailableError) as refused:
        attempt()
    return refused.value


def test_rpm_grants_a_key_rpm_times_a_minute(pool: repute.Pool, clock: repute.ManualClock) -> None:
    assert pool.register("api-key", "k1", rpm=3)
    pool.acquire("gpt-4o", 0.0).release()
    clock.advance(1.0)
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0))
    assert e.retry_after == 19.0, "three a minute are spread over it: one every 20 s"
    for _ in range(2):
        clock.advance(19.0)
        pool.acquire("gpt-4o", 0.0).release()
        clock.advance(1.0)
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0))
    assert (e.code, e.limited, e.leased, e.cooling, e.blocked, e.none_registered) == (
        "no_resource_available",
        1,
        0,
        0,
        0,
        False,
    )
    assert e.retry_after == 19.0, "the first grant leaves the window 60 s after it"
    assert pool.try_acquire("gpt-4o") is None
    assert pool.stats().available == 0, "a key over its limit is out of selection"
    clock.advance(18.999)
    assert pool.try_acquire("gpt-4o") is None
    clock.advance(0.001)
    with pool.acquire("gpt-4o", 0.0) as lease:
        assert lease.value == "k1"
    (view,) = pool.resources()
    assert (view.limits, view.uses, view.retired) == ({"rpm": 3}, 4, None)


def test_another_key_takes_the_traffic_while_one_is_over_its_rpm(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", rpm=1)
    pool.register("api-key", "k2")
    held = [pool.acquire("gpt-4o", 0.0) for _ in range(2)]
    assert [lease.value for lease in held] == ["k1", "k2"]
    held[0].release()
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0))
    assert (e.limited, e.leased) == (1, 1), "k1 is over its rpm, k2 is leased"
    held[1].release()
    assert pool.acquire("gpt-4o", 0.0).value == "k2"


def test_tpm_reserves_the_cost_and_counts_the_reconciled_use(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("api-key", "k1", permits=4, tpm=100)
    pool.acquire("gpt-4o", 0.0, cost=60).release()
    clock.advance(1.0)
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0, cost=60))
    assert (e.limited, e.retry_after) == (1, 59.0)
    with pool.acquire("gpt-4o", 0.0, cost=30) as lease:
        lease.report_http(200, latency=0.2, usage=5)  # 60 + 5 counted, not 60 + 30
    with pool.acquire("gpt-4o", 0.0, cost=35) as lease:
        lease.reconcile(10)  # 60 + 5 + 10
    assert pool.try_acquire("gpt-4o", cost=26) is None
    last = pool.try_acquire("gpt-4o", cost=25)
    assert last is not None
    last.report_success(0.1, usage=26)  # one token over: 101
    last.release()
    with pytest.raises(repute.UnknownLeaseError):
        last.reconcile(1)
    assert pool.try_acquire("gpt-4o") is None
    clock.advance(59.0)
    freed = pool.try_acquire("gpt-4o", cost=59)
    assert freed is not None, "the first grant left the window: 5 + 10 + 26 + 59 tokens"
    freed.release()
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0, cost=101))
    assert (e.none_registered, e.limited) == (True, 0), "a cost above a key's tpm is never served by it"
    assert pool.resources()[0].limits == {"tpm": 100}


def test_reconciling_a_lease_lets_its_window_serve_more(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", permits=3, tpm=100)
    first = pool.acquire("gpt-4o", 0.0, cost=50)
    second = pool.acquire("gpt-4o", 0.0, cost=50)
    assert pool.try_acquire("gpt-4o") is None
    first.report_failure("timeout", 1.0, usage=0)
    third = pool.try_acquire("gpt-4o", cost=50)
    assert third is not None and third.permit == 2
    for lease in (first, second, third):
        lease.release()


def test_min_interval_spaces_grants(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("api-key", "k1", min_interval=2.0)
    pool.acquire("c", 0.0).release()
    clock.advance(0.5)
    e = refusal(lambda: pool.acquire("c", 0.0))
    assert (e.limited, e.retry_after) == (1, 1.5)
    clock.advance(1.5)
    pool.acquire("c", 0.0).release()
    assert pool.resources()[0].limits == {"min_interval": 2.0}


def test_max_uses_retires_a_key_with_an_event(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("api-key", "k1", max_uses=2)
    pool.register("api-key", "k2")
    list(pool.events())
    clock.advance(1.0)
    for _ in range(2):
        pool.acquire("c", 0.0).release()
    events = list(pool.events())
    assert [e.type for e in events] == ["leased", "released", "leased", "retired", "released"]
    retired = events[3]
    assert isinstance(retired, repute.RetiredEvent)
    assert (retired.kind, retired.value, retired.reason, retired.at) == ("api-key", "k1", "max_uses", 1.0)
    assert repr(retired) == "RetiredEvent(type='retired', at=1.0)"
    held = pool.acquire("c", 0.0)
    assert held.value == "k2", "k1 is retired"
    e = refusal(lambda: pool.acquire("c", 0.0))
    assert (e.limited, e.leased) == (1, 1)
    views = {r.value: r for r in pool.resources()}
    assert (views["k1"].retired, views["k1"].uses, views["k1"].limits) == ("max_uses", 2, {"max_uses": 2})
    assert (views["k2"].retired, views["k2"].limits) == (None, {})
    held.release()
    assert pool.register("api-key", "k1", max_uses=3), "new limits judge it afresh"
    assert pool.acquire("c", 0.0).value == "k1"


def test_max_age_retires_a_key_when_it_is_due(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("api-key", "k1", max_age=30.0)
    list(pool.events())
    clock.advance(29.0)
    pool.acquire("c", 0.0).release()
    clock.advance(1.0)
    pool.stats()
    retired = [(e.value, e.reason, e.at) for e in pool.events() if isinstance(e, repute.RetiredEvent)]
    assert retired == [("k1", "max_age", 30.0)]
    e = refusal(lambda: pool.acquire("c", 0.0))
    assert (e.limited, e.retry_after) == (1, None), "retired for good"
    (view,) = pool.resources()
    assert (view.retired, view.limits) == ("max_age", {"max_age": 30.0})


def test_the_limits_view_registers_them_again(pool: repute.Pool) -> None:
    given: dict[str, Any] = {"rpm": 60, "tpm": 90_000, "min_interval": 0.25, "max_uses": 10_000, "max_age": 86_400.0}
    pool.register("api-key", "k1", **given)
    limits = pool.resources()[0].limits
    assert limits == given
    assert not pool.register("api-key", "k1", **limits), "the same limits: nothing changed"
    assert pool.register("api-key", "k1"), "registering without them removes them"
    assert pool.resources()[0].limits == {}


BAD_LIMITS: list[tuple[dict[str, Any], str, str]] = [
    ({"rpm": 0}, "limits.rpm", "must be in 1..=100000"),
    ({"rpm": 100_001}, "limits.rpm", "must be in 1..=100000"),
    ({"rpm": -1}, "limits.rpm", "must be an integer in 0..2^32"),
    ({"rpm": 1.5}, "limits.rpm", "must be an integer in 0..2^32"),
    ({"tpm": 0}, "limits.tpm", "must be > 0"),
    ({"tpm": 2**64}, "limits.tpm", "must be an integer in 0..2^64"),
    ({"min_interval": 0.0}, "limits.min_interval", "must be > 0"),
    ({"min_interval": -1.0}, "limits.min_interval", "must be a finite number of seconds >= 0"),
    ({"max_uses": 0}, "limits.max_uses", "must be > 0"),
    ({"max_uses": "3"}, "limits.max_uses", "must be an integer in 0..2^64"),
    ({"max_age": 0.0}, "limits.max_age", "must be > 0"),
    ({"max_age": float("inf")}, "limits.max_age", "must be a finite number of seconds >= 0"),
]


def test_bad_limits_name_their_field(pool: repute.Pool) -> None:
    for kwargs, field, rule in BAD_LIMITS:
        with pytest.raises(repute.InvalidInputError) as e:
            pool.register("api-key", "k1", **kwargs)
        assert (e.value.code, e.value.field, e.value.rule) == ("invalid_input", field, rule), kwargs
        assert str(e.value) == f"invalid {field}: {rule}"
    assert pool.resources() == [], "nothing was registered"


def test_bad_costs_and_uses_name_their_field(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", tpm=100)
    text: Any = "10"
    fraction: Any = 1.5
    attempts: list[tuple[Callable[[], object], str, str]] = [
        (lambda: pool.acquire("c", 0.0, cost=0), "cost", "must be > 0"),
        (lambda: pool.try_acquire("c", cost=0), "cost", "must be > 0"),
        (lambda: pool.acquire("c", 0.0, cost=-1), "cost", "must be an integer in 0..2^64"),
        (lambda: pool.try_acquire("c", cost=text), "cost", "must be an integer in 0..2^64"),
    ]
    with pool.acquire("c", 0.0, cost=10) as lease:
        attempts += [
            (lambda: lease.reconcile(-1), "used", "must be an integer in 0..2^64"),
            (lambda: lease.reconcile(2**64), "used", "must be an integer in 0..2^64"),
            (lambda: lease.report_success(0.1, usage=-1), "usage", "must be an integer in 0..2^64"),
            (lambda: lease.report_http(200, usage=fraction), "usage", "must be an integer in 0..2^64"),
        ]
        for attempt, field, rule in attempts:
            with pytest.raises(repute.InvalidInputError) as e:
                attempt()
            assert (e.value.field, e.value.rule) == (field, rule)
    assert pool.resources()[0].uses == 1


def test_the_asyncio_pool_counts_alike(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        assert await pool.register("api-key", "k1", rpm=2, tpm=100)
        async with pool.acquire("gpt-4o", cost=40) as lease:
            await lease.reconcile(10)
        assert await pool.try_acquire("gpt-4o") is None, "two grants a minute, 30 s apart"
        clock.advance(30.0)
        async with pool.acquire("gpt-4o", timeout=1.0, cost=50) as lease:
            await lease.report_http(200, latency=0.3, usage=20)
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            await pool.acquire("gpt-4o", timeout=0.0)
        assert (refused.value.limited, refused.value.retry_after) == (1, 30.0)

        async def wait() -> repute.AsyncLease:
            return await pool.acquire("gpt-4o", cost=70)

        waiter = asyncio.create_task(wait())
        await asyncio.sleep(0.05)
        assert not waiter.done(), "the window is full"
        clock.advance(30.0)
        lease = await asyncio.wait_for(waiter, timeout=5.0)
        assert lease.value == "k1"
        await lease.report_success(latency=0.1, usage=100)
        await lease.release()
        (view,) = await pool.resources()
        assert (view.limits, view.uses) == ({"rpm": 2, "tpm": 100}, 3)
        with pytest.raises(repute.InvalidInputError) as bad:
            await pool.try_acquire("gpt-4o", cost=0)
        assert bad.value.field == "cost"
        with pytest.raises(repute.InvalidInputError) as bad:
            await pool.register("api-key", "k2", rpm=0)
        assert bad.value.field == "limits.rpm"
        await pool.close()

    asyncio.run(main())


def test_the_asyncio_pool_retires_alike(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        await pool.register("api-key", "k1", max_uses=1)
        await pool.register("api-key", "k2", max_age=10.0)
        await pool.events()
        async with pool.acquire("c", timeout=0.0) as lease:
            assert lease.value == "k1"
        clock.advance(10.0)
        await pool.stats()
        retired = [e for e in await pool.events() if isinstance(e, repute.RetiredEvent)]
        assert [(e.value, e.reason, e.at) for e in retired] == [("k1", "max_uses", 0.0), ("k2", "max_age", 10.0)]
        assert [r.retired for r in await pool.resources()] == ["max_uses", "max_age"]
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            await pool.acquire("c", timeout=0.0)
        assert (refused.value.limited, refused.value.retry_after) == (2, None)
        await pool.close()

    asyncio.run(main())


def test_per_context_limits_count_each_model_of_a_key_apart(pool: repute.Pool, clock: repute.ManualClock) -> None:
    assert pool.register("api-key", "k1", per_context={"rpm": 2, "tpm": 10})
    pool.acquire("gpt-4o", 0.0, cost=4).release()
    clock.advance(30.0)
    pool.acquire("gpt-4o", 0.0, cost=4).release()
    e = refusal(lambda: pool.acquire("gpt-4o", 0.0))
    assert (e.limited, e.retry_after) == (1, 30.0), "gpt-4o's two grants a minute are spent"
    with pool.acquire("o1", 0.0, cost=10) as lease:
        assert lease.value == "k1", "another model of the same key has its own window"
    assert refusal(lambda: pool.acquire("o3", 0.0, cost=11)).none_registered, "a cost above a model's tpm never fits"
    (view,) = pool.resources()
    assert view.limits == {"per_context": {"rpm": 2, "tpm": 10}}
    assert pool.register("api-key", "k1", **view.limits) is False, "a view's limits register them again"
    clock.advance(30.0)
    pool.acquire("gpt-4o", 0.0).release()
    with pytest.raises(repute.InvalidInputError) as bad:
        pool.register("api-key", "k2", per_context={"rpm": 0})
    assert bad.value.field == "limits.per_context.rpm"
    with pytest.raises(repute.InvalidInputError) as bad:
        pool.register("api-key", "k2", per_context={"max_uses": 1})
    assert bad.value.field == "limits.per_context"
    assert [r.value for r in pool.resources()] == ["k1"], "nothing half-applied"
