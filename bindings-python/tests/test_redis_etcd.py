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
