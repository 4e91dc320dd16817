"""A typed user of the package; `test_typing.py` runs mypy --strict on it.

It is also run as a plain script by that test, so the stubs and the runtime
are checked to agree on what they describe.
"""

from __future__ import annotations

import asyncio

import repute


def use_pool(pool: repute.Pool) -> list[int]:
    changed: bool = pool.register("proxy", "10.0.0.1:8080", permits=2)
    assert changed
    partition: int = repute.partition_of("example.com", 3) + repute.lease_partition(1, 3)
    assert partition >= 0
    tokens: list[int] = []
    with pool.acquire("example.com", timeout=1.0) as lease:
        tokens.append(lease.token)
        remaining: float = lease.expires_in
        assert remaining > 0 and lease.valid
        lease.renew()
        lease.report_failure(repute.FailureKind.SLOW, latency=2.5)
        lease.report_failure("timeout", latency=2.5)
    maybe: repute.Lease | None = pool.try_acquire("example.com")
    if maybe is not None:
        tokens.append(maybe.token)
        maybe.release()
    pool.report_success("proxy", "10.0.0.1:8080", "example.com", latency=0.1)
    for cell in pool.cells("proxy", "10.0.0.1:8080"):
        cause: repute.FailureKind | None = cell.cause
        context: str | None = cell.context
        del cause, context
    stats: repute.Stats = pool.stats()
    assert stats.resources == 1
    for event in pool.events():
        if isinstance(event, repute.LeaseEvent):
            tokens.append(event.token)
        elif isinstance(event, repute.CooledEvent):
            kind: repute.FailureKind = event.cause
            del kind
    data: bytes = pool.snapshot()
    pool.restore(data)
    due: list[repute.ProbeTarget] = pool.due_for_probe()
    assert due == []
    folded: int = pool.sync()
    assert folded == 0  # nothing else writes to this pool's store
    try:
        repute.Pool().acquire("anywhere", timeout=0)
    except repute.NoResourceAvailableError as e:
        hint: float | None = e.retry_after
        code: str = e.code
        limited: int = e.limited
        del hint, code, limited
    pool.register("api-key", "k1", labels={"tier": "paid"}, secret="sk-1")
    keyed = pool.acquire("gpt-4o", kind="api-key", where={"tier": ["paid", "free"]}, exclude=["k0"], affinity="u1")
    secret: str | None = keyed.secret
    assert secret == "sk-1"
    keyed.release()
    labels: dict[str, str] = next(r for r in pool.resources() if r.kind == "api-key").labels
    assert labels == {"tier": "paid"}
    pool.register("api-key", "k2", rpm=60, tpm=90_000, min_interval=0.5, max_uses=1000, max_age=3600.0)
    metered = pool.acquire("gpt-4o", kind="api-key", exclude=["k1"], cost=500)
    metered.reconcile(420)
    metered.report_http(200, latency=0.2, usage=430)
    metered.release()
    k2 = next(r for r in pool.resources() if r.value == "k2")
    limits: repute.Limits = k2.limits
    rpm: int | None = limits.get("rpm")
    assert rpm == 60
    pool.register("api-key", "k2", **limits)
    retired: str | None = k2.retired
    uses: int = k2.uses
    assert (retired, uses) == (None, 1)
    pool.register("api-key", "k3", groups=["project:acme"], rpd=1000, tpd=5_000_000)
    assert pool.set_group("project:acme", rpm=600, concurrency=4, shared_quota=True)
    group: repute.Group = pool.groups()[0]
    group_limits: repute.GroupLimits = group.limits
    pool.set_group(group.name, **group_limits)
    day: tuple[int, int] = (group.day_grants, group.day_tokens)
    until: float | None = group.limited_until_unix
    members: list[str] = next(r for r in pool.resources() if r.value == "k3").groups
    assert (members, day, until) == (["project:acme"], (0, 0), None)
    for event in pool.events():
        if isinstance(event, repute.RetiredEvent):
            reason: str = event.reason
            del reason
    return tokens


async def use_async(clock: repute.ManualClock) -> int:
    pool = await repute.AsyncPool.open(clock=clock, lease_ttl=10.0, mode="shared", owner_ttl=5.0)
    await pool.register("key", "k", labels={"tier": "paid"}, rpm=10, tpm=1000)
    folded: int = await pool.sync()
    assert folded == 0
    blocking: repute.Pool = pool.pool
    assert not blocking.closed
    async with pool.acquire("api", timeout=1.0, kind="key", where={"tier": "paid"}, prefer="k", cost=20) as lease:
        token: int = lease.token
        secret: str | None = lease.secret
        del secret
        await lease.reconcile(15)
        await lease.report_success(latency=0.01, usage=12)
    clock.advance(6.0)  # rpm 10: one grant every 6 s
    held: repute.AsyncLease = await pool.acquire("api")
    await held.release()
    await pool.close()
    return token


if __name__ == "__main__":
    clock = repute.ManualClock()
    clock.advance(1.5)
    print(use_pool(repute.Pool(clock=clock, seed=1)))
    print(asyncio.run(use_async(clock)))
