"""Quota groups and day windows: `register(..., groups=[...])`, `rpd` and
`tpd` beside the per-minute limits, `set_group` and the `groups()` views,
in the blocking and the asyncio API alike. The pools are on a manual clock
and select with the `first` strategy, so every grant and refusal is exact."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import repute


def test_members_share_their_groups_limits(pool: repute.Pool, clock: repute.ManualClock) -> None:
    for key in ("k1", "k2"):
        assert pool.register("api-key", key, groups=["project:acme"])
    assert [r.groups for r in pool.resources()] == [["project:acme"], ["project:acme"]]
    (group,) = pool.groups()
    assert (group.name, group.members, group.leased, group.limits) == ("project:acme", 2, 0, {})
    assert pool.set_group("project:acme", rpd=2, concurrency=1)
    assert not pool.set_group("project:acme", rpd=2, concurrency=1), "the same limits: nothing changed"
    lease = pool.acquire("gpt-4o", 0.0)
    with pytest.raises(repute.NoResourceAvailableError) as refused:
        pool.acquire("gpt-4o", 0.0)
    assert refused.value.limited == 2, "the group's one lease is out: both members wait"
    (group,) = pool.groups()
    assert (group.leased, group.day_grants) == (1, 1)
    assert group.limited_until is not None and group.limited_until > clock.now
    assert group.limited_until_unix is not None
    lease.release()
    clock.advance(1.0)
    pool.acquire("gpt-4o", 0.0).release()
    clock.advance(1.0)
    with pytest.raises(repute.NoResourceAvailableError):
        pool.acquire("gpt-4o", 0.0)
    clock.advance(86_400.0)
    pool.acquire("gpt-4o", 0.0).release()
    assert pool.set_group("project:acme"), "no limits: removed"
    assert pool.groups()[0].limits == {}


def test_day_limits_of_a_resource_show_in_its_view(pool: repute.Pool, clock: repute.ManualClock) -> None:
    given: dict[str, Any] = {"rpm": 60, "rpd": 2, "tpd": 1_000}
    pool.register("api-key", "k1", **given)
    (view,) = pool.resources()
    assert view.limits == given
    assert not pool.register("api-key", "k1", **view.limits), "the view's limits register them again"
    for _ in range(2):
        pool.acquire("gpt-4o", 0.0).release()
        clock.advance(1.0)
    with pytest.raises(repute.NoResourceAvailableError) as refused:
        pool.acquire("gpt-4o", 0.0)
    assert refused.value.limited == 1


def test_the_group_view_sets_its_limits_again(pool: repute.Pool) -> None:
    given: dict[str, Any] = {"rpm": 600, "tpm": 90_000, "rpd": 10_000, "tpd": 5_000_000, "concurrency": 8}
    assert pool.set_group("account:x", **given, shared_quota=True)
    (group,) = pool.groups()
    assert (group.members, group.grants, group.tokens) == (0, 0, 0)
    assert group.limits == {**given, "shared_quota": True}
    assert not pool.set_group(group.name, **group.limits)
    assert repr(group).startswith("Group(name='account:x', members=0, leased=0, limits=")


BAD_GROUP_LIMITS: list[tuple[dict[str, Any], str, str]] = [
    ({"rpm": 0}, "group.rpm", "must be in 1..=100000"),
    ({"tpm": 0}, "group.tpm", "must be > 0"),
    ({"rpd": 100_000_001}, "group.rpd", "must be in 1..=100000000"),
    ({"tpd": 0}, "group.tpd", "must be > 0"),
    ({"concurrency": 0}, "group.concurrency", "must be in 1..=1000000"),
    ({"concurrency": -1}, "group.concurrency", "must be an integer in 0..2^32"),
    ({"tpd": "many"}, "group.tpd", "must be an integer in 0..2^64"),
]


def test_bad_groups_and_limits_name_their_field(pool: repute.Pool) -> None:
    for kwargs, field, rule in BAD_GROUP_LIMITS:
        with pytest.raises(repute.InvalidInputError) as e:
            pool.set_group("g", **kwargs)
        assert (e.value.field, e.value.rule) == (field, rule), kwargs
    with pytest.raises(repute.InvalidInputError) as e:
        pool.set_group("", rpm=1)
    assert (e.value.field, e.value.rule) == ("group", "must not be empty")
    assert pool.groups() == [], "nothing was set"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"groups": [""]}, "groups"),
        ({"groups": "g"}, "groups"),
        ({"groups": ["a", "a"]}, "groups"),
        ({"groups": [f"g{i}" for i in range(9)]}, "groups"),
        ({"rpd": 0}, "limits.rpd"),
        ({"tpd": 0}, "limits.tpd"),
    ]
    for kwargs, field in bad:
        with pytest.raises(repute.InvalidInputError) as e:
            pool.register("api-key", "k1", **kwargs)
        assert e.value.field == field, kwargs
    assert pool.resources() == [], "nothing was registered"


def test_the_asyncio_pool_has_groups_too(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        assert await pool.register("api-key", "k1", groups=["project:acme"], rpd=10)
        assert await pool.set_group("project:acme", concurrency=1)
        (group,) = await pool.groups()
        assert (group.name, group.members, group.limits) == ("project:acme", 1, {"concurrency": 1})
        await pool.close()

    asyncio.run(main())
