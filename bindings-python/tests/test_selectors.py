"""Choosing among resources: labels and `where`, `kind`, `exclude`, `prefer`
and `affinity`, in the blocking and the asyncio API alike. The pools select
with the `first` strategy, so the resource an acquire gets is exact."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

import repute


def register_keys(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", labels={"region": "eu", "tier": "free"})
    pool.register("api-key", "k2", labels={"tier": "paid", "region": "us"})
    pool.register("api-key", "k3", labels={"region": "eu", "tier": "paid"})
    pool.register("proxy", "p1", labels={"region": "eu"})


def value(lease: repute.Lease | None) -> str | None:
    """The lease's value, and the lease released."""
    if lease is None:
        return None
    lease.release()
    return lease.value


def test_labels_are_part_of_the_resource_view(pool: repute.Pool) -> None:
    register_keys(pool)
    pool.register("api-key", "k4")
    labels = {r.value: r.labels for r in pool.resources()}
    assert labels == {
        "k1": {"region": "eu", "tier": "free"},
        "k2": {"region": "us", "tier": "paid"},
        "k3": {"region": "eu", "tier": "paid"},
        "k4": {},
        "p1": {"region": "eu"},
    }
    k2 = next(r for r in pool.resources() if r.value == "k2")
    assert list(k2.labels) == ["region", "tier"]
    assert repr(k2) == "Resource(kind='api-key', value='k2', permits=1, leased=0, score=0, labels={'region': 'us', 'tier': 'paid'})"
    k2.labels["region"] = "changed"
    assert k2.labels == {"region": "us", "tier": "paid"}, "each read is a new dict"
    # Registering again replaces the labels.
    assert pool.register("api-key", "k2", labels={"tier": "free"})
    assert not pool.register("api-key", "k2", labels={"tier": "free"})
    assert next(r for r in pool.resources() if r.value == "k2").labels == {"tier": "free"}


def test_where_admits_resources_whose_labels_match_every_filter(pool: repute.Pool) -> None:
    register_keys(pool)
    assert value(pool.try_acquire("c", where={"tier": "paid"})) == "k2"
    assert value(pool.try_acquire("c", where={"tier": "paid", "region": "eu"})) == "k3"
    assert value(pool.try_acquire("c", where={"region": ["us", "asia"]})) == "k2"
    assert value(pool.try_acquire("c", where={"region": ("asia", "eu"), "tier": ["free", "paid"]})) == "k1"
    assert pool.try_acquire("c", where={"region": "asia"}) is None
    assert pool.try_acquire("c", where={"zone": "a"}) is None, "a resource without the label never matches"
    held = pool.acquire("c", where={"tier": "paid", "region": "eu"})
    assert held.value == "k3"
    with pytest.raises(repute.NoResourceAvailableError) as refused:
        pool.acquire("c", timeout=0.0, where={"tier": "paid", "region": "eu"})
    assert refused.value.code == "no_resource_available"
    held.release()


def test_kind_admits_resources_of_that_kind_only(pool: repute.Pool) -> None:
    register_keys(pool)
    assert value(pool.try_acquire("c", kind="proxy")) == "p1"
    assert value(pool.try_acquire("c", kind="api-key", where={"region": "eu"})) == "k1"
    assert value(pool.try_acquire("c", kind="proxy", where={"tier": "paid"})) is None
    assert value(pool.try_acquire("c", kind="account")) is None
    with pool.acquire("c", kind="proxy") as lease:
        assert lease.value == "p1"
        assert pool.try_acquire("c", kind="proxy") is None


def test_exclude_leaves_values_out_of_any_kind(pool: repute.Pool) -> None:
    register_keys(pool)
    assert value(pool.try_acquire("c", exclude=["k1"])) == "k2"
    assert value(pool.try_acquire("c", exclude=("k1", "k2", "k3"))) == "p1"
    assert value(pool.try_acquire("c", exclude={"k1", "k2", "k3", "p1"})) is None
    assert value(pool.try_acquire("c", exclude=["k2"], where={"tier": "paid"})) == "k3"


def test_prefer_is_tried_first_when_it_is_selectable_and_admitted(pool: repute.Pool) -> None:
    register_keys(pool)
    assert value(pool.try_acquire("c", prefer="k3")) == "k3"
    assert value(pool.try_acquire("c", prefer="p1", kind="api-key")) == "k1", "a preferred value of another kind"
    assert value(pool.try_acquire("c", prefer="k3", where={"region": "us"})) == "k2", "a preferred value not admitted"
    assert value(pool.try_acquire("c", prefer="nowhere")) == "k1"
    with pool.acquire("c", prefer="k3") as held:
        assert held.value == "k3"
        assert value(pool.try_acquire("c", prefer="k3")) == "k1", "a preferred value leased"
    pool.block("api-key", "k3", context="c")
    assert value(pool.try_acquire("c", prefer="k3")) == "k1", "a preferred value blocked"


def test_affinity_gets_the_same_resource_again_until_it_is_blocked(pool: repute.Pool) -> None:
    register_keys(pool)
    assert value(pool.acquire("c", affinity="user-7", prefer="k3")) == "k3"
    assert value(pool.acquire("c", affinity="user-7")) == "k3"
    assert value(pool.acquire("c")) == "k1", "without the key, selection as usual"
    assert value(pool.acquire("c", affinity="user-8")) == "k1", "another key is bound by its own grants"
    pool.block("api-key", "k3")
    assert value(pool.acquire("c", affinity="user-7", exclude=["k1"])) == "k2", "picked anew"
    pool.unblock("api-key", "k3")
    assert value(pool.acquire("c", affinity="user-7")) == "k2", "and bound to the new pick"
    assert value(pool.acquire("c", affinity="user-7", kind="proxy")) == "p1", "a bound resource not admitted"
    assert value(pool.acquire("c", affinity="user-7")) == "p1"


def test_the_asyncio_pool_chooses_alike(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        register_keys(pool.pool)
        assert await pool.register("api-key", "k5", 2, labels={"region": "asia"})
        assert {r.value: r.labels for r in await pool.resources()}["k5"] == {"region": "asia"}

        async def got(lease: repute.AsyncLease | None) -> str | None:
            if lease is None:
                return None
            await lease.release()
            return lease.value

        assert await got(await pool.try_acquire("c", where={"tier": "paid"})) == "k2"
        assert await got(await pool.try_acquire("c", kind="proxy")) == "p1"
        assert await got(await pool.try_acquire("c", exclude=["k1", "k2"])) == "k3"
        assert await got(await pool.try_acquire("c", where={"region": "mars"})) is None
        async with pool.acquire("c", timeout=1.0, where={"region": ["asia"]}) as lease:
            assert (lease.value, lease.permit) == ("k5", 0)
        assert await got(await pool.acquire("c", prefer="k3")) == "k3"
        assert await got(await pool.acquire("c", affinity="user-1", prefer="k2")) == "k2"
        assert await got(await pool.acquire("c", affinity="user-1")) == "k2"
        await pool.block("api-key", "k2")
        assert await got(await pool.acquire("c", affinity="user-1", exclude=["k1"])) == "k3"
        await pool.unblock("api-key", "k2")
        assert await got(await pool.acquire("c", affinity="user-1")) == "k3"
        held = await pool.acquire("c", kind="proxy")
        with pytest.raises(repute.NoResourceAvailableError):
            await pool.acquire("c", timeout=0.0, kind="proxy")
        await held.release()
        await pool.close()

    asyncio.run(main())


def test_the_asyncio_wait_keeps_its_selector(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        register_keys(pool.pool)
        held = await pool.acquire("c", kind="proxy")

        async def wait() -> repute.AsyncLease:
            return await pool.acquire("c", kind="proxy")

        waiter = asyncio.create_task(wait())
        await asyncio.sleep(0.01)
        assert not waiter.done(), "the api keys are free, but not of the kind asked for"
        await held.release()
        lease = await asyncio.wait_for(waiter, timeout=5.0)
        assert lease.value == "p1"
        await lease.release()
        await pool.close()

    asyncio.run(main())


BAD_CHOICES: list[tuple[dict[str, Any], str, str]] = [
    ({"where": {"region": []}}, "where", "each filter must list 1..=16 values"),
    ({"where": {"bad name": "eu"}}, "where", "names may hold only ASCII letters, digits, '_', '-' and '.'"),
    ({"where": {"region": "x\n"}}, "where", "must not contain control characters"),
    ({"where": {"region": 5}}, "where", "must be a mapping of label name to str or list of str"),
    ({"where": "region"}, "where", "must be a mapping of label name to str or list of str"),
    ({"where": {f"l{i}": "v" for i in range(9)}}, "where", "must be at most 8 filters"),
    ({"exclude": "k1"}, "exclude", "must be a list of str"),
    ({"exclude": [1]}, "exclude", "must be a list of str"),
    ({"exclude": [""]}, "exclude", "must not be empty"),
    ({"exclude": [f"v{i}" for i in range(65)]}, "exclude", "must be at most 64 values"),
    ({"kind": ""}, "kind", "must not be empty"),
    ({"prefer": "x" * 257}, "prefer", "must be at most 256 bytes"),
    ({"affinity": "a\tb"}, "affinity", "must not contain control characters"),
]


def test_bad_choices_name_their_field(pool: repute.Pool) -> None:
    register_keys(pool)
    for kwargs, field, rule in BAD_CHOICES:
        attempts: list[Callable[[], object]] = [
            lambda: pool.try_acquire("c", **kwargs),
            lambda: pool.acquire("c", 1.0, **kwargs),
        ]
        for attempt in attempts:
            with pytest.raises(repute.InvalidInputError) as e:
                attempt()
            assert (e.value.code, e.value.field, e.value.rule) == ("invalid_input", field, rule), kwargs
            assert str(e.value) == f"invalid {field}: {rule}"
    assert pool.stats().live_leases == 0


def test_bad_registrations_name_their_field(pool: repute.Pool) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"labels": {"bad name": "x"}}, "labels", "names may hold only ASCII letters, digits, '_', '-' and '.'"),
        ({"labels": {"a": ""}}, "labels", "must not be empty"),
        ({"labels": {"a": 1}}, "labels", "must be a mapping of str to str"),
        ({"labels": ["a"]}, "labels", "must be a mapping of str to str"),
        ({"labels": {f"l{i:02}": "v" for i in range(17)}}, "labels", "must be at most 16"),
        ({"secret": ""}, "secret", "must not be empty"),
        ({"secret": "x" * 4097}, "secret", "must be at most 4096 bytes"),
    ]
    for kwargs, field, rule in cases:
        with pytest.raises(repute.InvalidInputError) as e:
            pool.register("api-key", "k1", **kwargs)
        assert (e.value.field, e.value.rule) == (field, rule), kwargs
    assert pool.resources() == [], "nothing was registered"


def test_the_asyncio_pool_names_the_same_fields(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        register_keys(pool.pool)
        for kwargs, field, rule in BAD_CHOICES:
            with pytest.raises(repute.InvalidInputError) as e:
                await pool.acquire("c", 1.0, **kwargs)
            assert (e.value.field, e.value.rule) == (field, rule), kwargs
            with pytest.raises(repute.InvalidInputError) as e:
                await pool.try_acquire("c", **kwargs)
            assert (e.value.field, e.value.rule) == (field, rule), kwargs
        with pytest.raises(repute.InvalidInputError) as e:
            await pool.register("api-key", "k9", labels={"a b": "x"})
        assert e.value.field == "labels"
        with pytest.raises(repute.InvalidInputError) as e:
            await pool.register("api-key", "k9", secret="")
        assert e.value.field == "secret"
        await pool.close()

    asyncio.run(main())
