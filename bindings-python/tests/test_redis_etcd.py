"""Redis shared mode and etcd owner leases from Python: the same `store`,
`mode` and `owners` options the server takes.

Needs the servers of `scripts/services.sh start` (REPUTE_TEST_REDIS_URL,
REPUTE_TEST_ETCD_URL, REPUTE_TEST_PG_URL); without them these tests fail,
never skip. Every test uses a tenant of its own.
"""

from __future__ import annotations

import os
import uuid

import pytest

import repute


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: run `scripts/services.sh start` and "
            "`export $(scripts/services.sh env)` from the repository root"
        )
    return value


@pytest.fixture
def tenant() -> str:
    return f"py-{uuid.uuid4().hex}"


def test_redis_shared_pools_never_hold_one_permit_together(tenant: str) -> None:
    url = env("REPUTE_TEST_REDIS_URL")
    with repute.Pool(store=url, tenant=tenant, mode="shared") as a, repute.Pool(
        store=url, tenant=tenant, mode="shared"
    ) as b:
        a.register("proxy", "only")
        assert b.sync() == 1
        lease = a.acquire("shop", timeout=0)
        assert b.try_acquire("shop") is None
        lease.release()
        assert b.acquire("shop", timeout=0).token == lease.token + 1


def test_etcd_owners_refuse_a_second_pool_naming_the_first(tenant: str) -> None:
    store, etcd = env("REPUTE_TEST_PG_URL"), env("REPUTE_TEST_ETCD_URL")
    owners = "etcd://" + etcd.removeprefix("http://")
    with repute.Pool(store=store, tenant=tenant, owners=owners, owner_ttl=2.0) as first:
        first.register("proxy", "a")
        with pytest.raises(repute.NotOwnerError) as caught:
            repute.Pool(store=store, tenant=tenant, owners=owners, owner_ttl=2.0)
        assert caught.value.owner == f"embedded pid {os.getpid()}"
    with repute.Pool(store=store, tenant=tenant, owners=owners, owner_ttl=2.0) as second:
        assert [r.value for r in second.resources()] == ["a"]


def test_bad_owners_names_the_field() -> None:
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(store="memory", owners="zookeeper://x:1")
    assert caught.value.field == "owners"


def test_asyncio_on_redis_runs_on_the_pools_own_connection(tenant: str) -> None:
    import asyncio
    import concurrent.futures

    url = env("REPUTE_TEST_REDIS_URL")
    submitted: list[object] = []

    class Counting(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    async def main() -> tuple[list[int], int, int]:
        other = repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first")
        other.register("proxy", "a", permits=2)
        pool = repute.AsyncPool(repute.Pool(store=url, tenant=tenant, mode="shared", strategy="first"))
        await pool.sync()
        asyncio.get_running_loop().set_default_executor(Counting(max_workers=1))
        # Acquires in flight together are never proposed one permit.
        first, second = await asyncio.gather(pool.acquire("shop", timeout=0), pool.acquire("shop", timeout=0))
        permits = sorted([first.permit, second.permit])
        assert other.try_acquire("shop") is None  # Redis holds both
        assert await first.release() is True
        # The revoke ran on the server once the release returned.
        taken = other.acquire("shop", timeout=0)
        assert taken.token == first.token + 1
        taken.release()
        async with pool.acquire("shop", timeout=1.0) as lease:
            assert lease.valid
        await second.release()
        live = (await pool.stats()).live_leases
        await pool.close()
        other.close()
        return permits, live, len(submitted)

    permits, live, hops = asyncio.run(main())
    assert permits == [0, 1]
    assert live == 0
    # Acquires and releases waited on the loop; the rest ran on the pool's
    # own IO thread: nothing went to the loop's default executor.
    assert hops == 0


def test_asyncio_on_redis_fails_in_flight_calls_when_the_server_is_gone(tenant: str) -> None:
    import asyncio

    async def main() -> str:
        pool = repute.AsyncPool(repute.Pool(store=env("REPUTE_TEST_REDIS_URL"), tenant=tenant, mode="shared"))
        await pool.register("proxy", "a")
        lease = await pool.acquire("shop", timeout=0)
        assert pool._link is not None
        transport = pool._link._transport  # connected by the acquire
        assert transport is not None
        transport.abort()  # as if the server went away
        await asyncio.sleep(0)
        # The next call connects anew.
        assert await lease.release() is True
        again = await pool.acquire("shop", timeout=0)
        code = str(again.token > lease.token)
        await again.release()
        await pool.close()
        return code

    assert asyncio.run(main()) == "True"


def test_asyncio_on_redis_chooses_by_selector_and_hands_out_a_secret_registered_elsewhere(tenant: str) -> None:
    import asyncio

    url = env("REPUTE_TEST_REDIS_URL")

    async def main() -> None:
        other = repute.Pool(store=url, tenant=tenant, mode="shared")
        other.register("api-key", "k1", labels={"tier": "free"}, secret="sk-1")
        other.register("api-key", "k2", labels={"tier": "paid"}, secret="sk-2")
        other.register("proxy", "p1", labels={"tier": "paid"})
        pool = repute.AsyncPool(repute.Pool(store=url, tenant=tenant, mode="shared"))
        assert [(r.value, r.labels) for r in await pool.resources()] == [
            ("k1", {"tier": "free"}),
            ("k2", {"tier": "paid"}),
            ("p1", {"tier": "paid"}),
        ], "opened from the log"
        assert pool._link is not None, "acquires run on the pool's own connection"
        lease = await pool.acquire("c", timeout=0, kind="api-key", where={"tier": "paid"}, affinity="user-1")
        assert (lease.value, lease.secret) == ("k2", "sk-2")
        assert other.try_acquire("c", kind="api-key", where={"tier": "paid"}) is None, "Redis holds it"
        await lease.release()
        again = await pool.acquire("c", timeout=0, affinity="user-1")
        assert again.value == "k2"
        await again.release()
        with pytest.raises(repute.InvalidInputError) as bad:
            await pool.acquire("c", timeout=0, where={"tier": []})
        assert (bad.value.field, bad.value.rule) == ("where", "each filter must list 1..=16 values")
        await pool.close()
        other.close()

    asyncio.run(main())


def test_asyncio_on_redis_counts_a_keys_limits_across_pools(tenant: str) -> None:
    import asyncio

    url = env("REPUTE_TEST_REDIS_URL")

    async def main() -> None:
        other = repute.Pool(store=url, tenant=tenant, mode="shared")
        other.register("api-key", "k1", tpm=100)
        pool = repute.AsyncPool(repute.Pool(store=url, tenant=tenant, mode="shared"))
        assert pool._link is not None, "acquires run on the pool's own connection"
        assert [r.limits for r in await pool.resources()] == [{"tpm": 100}], "opened from the log"
        with pytest.raises(repute.NoResourceAvailableError) as over:
            await pool.acquire("gpt-4o", timeout=0, cost=101)
        assert over.value.none_registered, "the cost went with the acquire: above the key's tpm"
        async with pool.acquire("gpt-4o", timeout=0, cost=60) as lease:
            await lease.report_success(latency=0.1, usage=30)
        # 30 + 70 tokens: Redis counts what the first grant used, not its cost.
        other.acquire("gpt-4o", timeout=0, cost=70).release()
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            await pool.acquire("gpt-4o", timeout=0)
        assert refused.value.limited == 1, "100 tokens a minute, of both pools"
        assert refused.value.retry_after is not None and 50.0 < refused.value.retry_after <= 60.0
        await pool.close()
        other.close()

    asyncio.run(main())


def test_the_asyncio_adapters_on_redis_report_and_release_off_the_loop(tenant: str) -> None:
    import asyncio

    import httpx
    from adapter_world import Answer, Target

    import repute.httpx

    target = Target()
    target.answers["127.0.0.1"] = Answer(200, {}, b"ok")

    async def main() -> tuple[int, int, int]:
        pool = repute.Pool(store=env("REPUTE_TEST_REDIS_URL"), tenant=tenant, mode="shared")
        pool.register("site", "direct")
        transport = repute.httpx.AsyncTransport(pool, kind="site")
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("GET", f"{target.url}/stream") as streamed:
                held = pool.stats().live_leases
                await streamed.aread()
            answer = await client.get(f"{target.url}/page")
        await asyncio.sleep(0.2)  # a release started by a close runs on the pool's IO thread
        cells = {c.context: c for c in pool.cells("site", "direct")}
        live = pool.stats().live_leases
        pool.close()
        return held, live, cells["127.0.0.1"].observations if answer.status_code == 200 else -1

    try:
        assert asyncio.run(main()) == (1, 0, 2)
    finally:
        target.close()


@pytest.mark.parametrize("store_env", ["REPUTE_TEST_PG_URL", "REPUTE_TEST_REDIS_URL"])
def test_a_regroup_applies_in_every_shared_pool_or_in_none(tenant: str, store_env: str) -> None:
    """One log, one state: a regroup of a key another pool holds is refused
    (the store counts that pool's lease) and applied by no pool; once the
    lease is released it is accepted, and every pool folds it the same."""
    url = env(store_env)
    with repute.Pool(store=url, tenant=tenant, mode="shared") as a, repute.Pool(
        store=url, tenant=tenant, mode="shared"
    ) as b:
        a.register("api-key", "k1", groups=["g1"])
        assert b.sync() == 1
        lease = a.acquire("chat", timeout=0)
        with pytest.raises(repute.LeasedError) as at_other:
            b.register("api-key", "k1", groups=["g2"])
        assert at_other.value.live == 1
        with pytest.raises(repute.LeasedError):
            b.unregister("api-key", "k1")
        with pytest.raises(repute.LeasedError):
            a.register("api-key", "k1", groups=["g2"])
        assert b.sync() == 0 and a.sync() == 0, "a refused change is logged nowhere"
        lease.release()
        assert b.register("api-key", "k1", groups=["g2"])
        assert a.sync() == 1
        assert [r.groups for r in a.resources()] == [r.groups for r in b.resources()] == [["g2"]]
        assert a.stats().refused_entries == b.stats().refused_entries == 0
