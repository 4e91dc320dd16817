"""A resource's secret: registered with it, handed to the holders of its
leases (`lease.secret`), and shown nowhere else: no event, view, repr, log
line, error or JSON snapshot carries it."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

import repute

SECRET = "sk-live-7f3a9c1e5b"


def test_a_lease_hands_out_its_resources_secret(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", secret=SECRET, labels={"tier": "paid"})
    pool.register("api-key", "k2")
    with pool.acquire("c") as lease:
        assert (lease.value, lease.secret) == ("k1", SECRET)
        assert lease.secret == SECRET
    with pool.acquire("c", exclude=["k1"]) as other:
        assert (other.value, other.secret) == ("k2", None)
    assert pool.register("api-key", "k1", secret="sk-rotated", labels={"tier": "paid"})
    with pool.acquire("c") as rotated:
        assert rotated.secret == "sk-rotated"
    assert pool.register("api-key", "k1")
    with pool.acquire("c") as cleared:
        assert cleared.secret is None, "registering again without one removes it"


def test_a_lease_keeps_the_secret_it_was_granted_with(pool: repute.Pool) -> None:
    pool.register("api-key", "k1", secret=SECRET)
    lease = pool.acquire("c")
    assert pool.register("api-key", "k1", secret="sk-rotated")
    assert lease.secret == SECRET, "the grant brought it: a rotation is for the next lease"
    pool.unregister("api-key", "k1", force=True)
    assert lease.secret == SECRET, "its resource gone, the lease still holds it"


def test_snapshots_keep_the_secret_in_binary_and_leave_it_out_of_json(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first")
    pool.register("api-key", "k1", secret=SECRET, labels={"tier": "paid"})
    text = pool.snapshot_json()
    assert SECRET not in text
    resources = json.loads(text)
    assert SECRET not in json.dumps(resources)
    binary = pool.snapshot()

    from_binary = repute.Pool(clock=clock, strategy="first")
    from_binary.restore(binary)
    with from_binary.acquire("c") as lease:
        assert lease.secret == SECRET
    assert [r.labels for r in from_binary.resources()] == [{"tier": "paid"}]

    from_json = repute.Pool(clock=clock, strategy="first")
    from_json.restore_json(text)
    with from_json.acquire("c") as lease:
        assert lease.secret is None, "a JSON snapshot carries no secret"
    assert [r.labels for r in from_json.resources()] == [{"tier": "paid"}]


def shown(obj: object) -> list[str]:
    """What Python shows of an object: its repr, its str, and the repr of
    every public attribute but a lease's `secret`, which is the one way to it."""
    out = [repr(obj), str(obj)]
    for name in dir(obj):
        if not name.startswith("_") and name != "secret":
            attribute = getattr(obj, name)
            if not callable(attribute):
                out.append(repr(attribute))
    return out


def test_the_secret_is_in_no_event_view_repr_error_or_log(
    pool: repute.Pool, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    pool.register("api-key", "k1", secret=SECRET, labels={"tier": "paid"})
    lease = pool.acquire("c", affinity="user-1", auto_renew=True)
    assert lease.secret == SECRET
    seen += shown(lease)
    assert repr(lease) == (
        f"Lease(id={lease.id}, kind='api-key', value='k1', context='c', permit=0, token={lease.token}, valid=True)"
    )
    lease.renew()
    for e in (
        pytest.raises(repute.LeasedError, pool.unregister, "api-key", "k1"),
        pytest.raises(repute.InvalidInputError, pool.register, "api-key", "k1", 0, secret=SECRET),
        pytest.raises(repute.InvalidInputError, pool.register, "api-key", "k1", labels={"tier": SECRET + "\n"}),
        pytest.raises(repute.InvalidInputError, pool.register, "api-key", "k1", secret=SECRET * 300),
        pytest.raises(repute.NoResourceAvailableError, pool.acquire, "c", 0.0),
        pytest.raises(repute.InvalidInputError, pool.acquire, "c", where={"tier": [SECRET + "\n"]}),
    ):
        seen += [str(e.value), repr(e.value), *shown(e.value)]
    lease.report_http(429, headers={"Retry-After": "30"})
    pool.block("api-key", "k1", seconds=60.0, reason="rotated")
    with pytest.raises(repute.BlockedError) as blocked:
        lease.renew()
    seen += [str(blocked.value), *shown(blocked.value)]
    lease.release()
    pool.unblock("api-key", "k1")
    for view in [*pool.resources(), *pool.cells("api-key", "k1"), pool.stats(), *pool.events()]:
        seen += shown(view)
    seen += [pool.snapshot_json(), pool.snapshot_json(with_leases=False), repr(pool)]
    captured = capfd.readouterr()
    seen += [caplog.text, captured.out, captured.err]
    assert any("api-key" in s for s in seen) and any("paid" in s for s in seen)
    for text in seen:
        assert SECRET not in text


def test_the_asyncio_lease_hands_out_the_secret_and_shows_it_nowhere(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        assert await pool.register("api-key", "k1", secret=SECRET)
        async with pool.acquire("c", kind="api-key") as lease:
            assert lease.secret == SECRET
            assert SECRET not in repr(lease)
            assert repr(lease) == f"Async{lease.lease!r}"
            await lease.report_http(429, headers={"Retry-After": "30"})
        texts = [repr(e) for e in await pool.events()] + [repr(r) for r in await pool.resources()]
        texts.append(await pool.snapshot_json())
        assert all(SECRET not in t for t in texts)
        await pool.close()

    asyncio.run(main())
