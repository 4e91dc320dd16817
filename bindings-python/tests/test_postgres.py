"""PostgreSQL: sharded mode (one owner per tenant) and shared mode (every
pool serves the tenant, the database grants the leases).

Needs a server at REPUTE_TEST_PG_URL (`scripts/services.sh start`, then
`export $(scripts/services.sh env)`); without it these tests fail, never skip.
The database outlives test runs, so every test uses a tenant of its own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid

import pytest

import repute


@pytest.fixture
def url() -> str:
    url = os.environ.get("REPUTE_TEST_PG_URL")
    if not url:
        pytest.fail(
            "REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and "
            "`export $(scripts/services.sh env)` from the repository root"
        )
    return url


@pytest.fixture
def tenant() -> str:
    return f"py-{uuid.uuid4().hex}"


def test_sharded_a_second_pool_is_refused_until_the_first_resigns(url: str, tenant: str) -> None:
    first = repute.Pool(store=url, tenant=tenant, strategy="first")
    first.register("proxy", "a")
    lease = first.acquire("shop", timeout=0)
    with pytest.raises(repute.NotOwnerError) as caught:
        repute.Pool(store=url, tenant=tenant)
    assert caught.value.code == "not_owner"
    assert caught.value.owner == f"embedded pid {os.getpid()}"
    first.close()  # a checkpoint, then the owner lease is given up at once
    with repute.Pool(store=url, tenant=tenant, mode="sharded", owner_ttl=5.0) as second:
        assert [r.value for r in second.resources()] == ["a"]
        # The checkpoint kept the lease, so its permit is still taken; its
        # holder can hand it back, and the next token is above its token.
        assert second.try_acquire("shop") is None
        second.resume(lease.id, lease.token).release()
        assert second.acquire("shop", timeout=0).token > lease.token


def test_sharded_a_pool_whose_owner_lease_lapsed_stops_serving(url: str, tenant: str) -> None:
    pool = repute.Pool(store=url, tenant=tenant, owner_ttl=1.0)
    pool.register("proxy", "a")
    # The database ends the owner lease, as it does for an owner that could
    # not renew in time (paused, cut off): renewal now fails, and the pool
    # refuses every call from then on instead of serving what it lost.
    expire = f"UPDATE repute_tenant SET expires_at = '-infinity' WHERE tenant = '{tenant}'"
    done = subprocess.run(
        ["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", expire],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    successor = repute.Pool(store=url, tenant=tenant)
    deadline = time.monotonic() + 5.0
    with pytest.raises(repute.NotOwnerError) as caught:
        while time.monotonic() < deadline:
            pool.stats()
            time.sleep(0.05)
    assert caught.value.code == "not_owner"
    assert [r.value for r in successor.resources()] == ["a"]
    successor.close()
    pool.close(checkpoint=False)


def test_shared_pools_see_each_others_changes_and_never_share_a_permit(url: str, tenant: str) -> None:
    a = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    b = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    try:
        assert a.register("proxy", "x", permits=1)
        assert b.sync() >= 1
        assert [r.value for r in b.resources()] == ["x"]

        held = a.acquire("shop", timeout=0)
        # B's core finds x free, but the database still holds A's lease.
        assert b.try_acquire("shop") is None
        with pytest.raises(repute.NoResourceAvailableError):
            b.acquire("shop", timeout=0.2)
        held.release()
        taken = b.acquire("shop", timeout=5.0)
        assert taken.token > held.token

        before = a.cells("proxy", "x")
        taken.report_failure("timeout", latency=1.5)
        taken.release()
        assert a.sync() >= 1
        after = {c.context: c.observations for c in a.cells("proxy", "x")}
        assert after["shop"] >= 1
        assert after["shop"] > {c.context: c.observations for c in before}.get("shop", 0)
    finally:
        a.close()
        b.close()


def test_shared_pools_count_a_keys_limits_at_the_database(url: str, tenant: str) -> None:
    a = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    b = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    try:
        assert a.register("api-key", "k1", tpm=100)
        assert b.sync() >= 1
        with b.acquire("gpt-4o", timeout=0, cost=60) as lease:
            lease.reconcile(30)
        # 30 + 70 tokens: the database counts what B's grant used, not its cost.
        a.acquire("gpt-4o", timeout=0, cost=70).release()
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            b.acquire("gpt-4o", timeout=0)
        assert refused.value.limited == 1, "100 tokens a minute, of both pools"
        assert refused.value.retry_after is not None and 50.0 < refused.value.retry_after <= 60.0
    finally:
        a.close()
        b.close()


def test_shared_pools_count_a_models_limits_at_the_database(url: str, tenant: str) -> None:
    a = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    b = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    try:
        assert a.register("api-key", "k1", per_context={"rpm": 1})
        assert b.sync() >= 1
        a.acquire("gpt-4o", timeout=0).release()
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            b.acquire("gpt-4o", timeout=0)
        assert refused.value.retry_after is not None and 50.0 < refused.value.retry_after <= 60.0
        b.acquire("o1", timeout=0).release()
    finally:
        a.close()
        b.close()


def test_shared_sync_from_asyncio(url: str, tenant: str) -> None:
    async def main() -> None:
        a = await repute.AsyncPool.open(store=url, tenant=tenant, mode="shared")
        b = await repute.AsyncPool.open(store=url, tenant=tenant, mode="shared")
        await a.register("proxy", "x")
        await a.report_success("proxy", "x", "shop", latency=0.1)
        assert await b.sync() >= 2
        assert [c.observations for c in await b.cells("proxy", "x") if c.context == "shop"] == [1]
        await a.close()
        await b.close()

    asyncio.run(main())


def test_owner_loss_loses_an_auto_renewed_lease_once(url: str, tenant: str) -> None:
    pool = repute.Pool(store=url, tenant=tenant, owner_ttl=1.0, lease_ttl=0.6)
    pool.register("proxy", "a")
    lease = pool.acquire("c", auto_renew=True)
    lost: list[str] = []
    lease.on_lost(lost.append)
    # The database ends the owner lease, as for an owner cut off too long.
    expire = f"UPDATE repute_tenant SET expires_at = '-infinity' WHERE tenant = '{tenant}'"
    done = subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", expire], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    successor = repute.Pool(store=url, tenant=tenant)
    until = time.monotonic() + 10.0
    while not lost and time.monotonic() < until:
        time.sleep(0.02)
    time.sleep(0.5)
    assert lost == ["owner_lost"]
    assert not lease.valid
    successor.close()
    pool.close(checkpoint=False)


def test_releasing_a_lost_lease_still_frees_the_permit_at_the_database(url: str, tenant: str) -> None:
    clock = repute.ManualClock()
    a = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first", clock=clock, lease_ttl=20.0)
    b = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
    try:
        a.register("proxy", "x")
        b.sync()
        lease = a.acquire("shop", timeout=0)
        # A's clock jumps past the TTL (a process paused past its lease):
        # A's pool ends the lease, but the database's grant runs 20 s more.
        clock.advance(21.0)
        assert not lease.valid
        assert b.try_acquire("shop") is None
        # The release is conditional on A's token at the database: the
        # permit frees now instead of when the database's grant runs out.
        assert lease.release() is False
        taken = b.acquire("shop", timeout=5.0)
        assert taken.token > lease.token
        taken.release()
    finally:
        a.close()
        b.close()
