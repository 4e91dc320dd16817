"""asyncio forms of the pool API.

Calls on a pool whose store is in the process or a local file (memory,
SQLite) take microseconds and run inline on the event loop: an executor hop
would cost a hundred times the call. On Redis, acquires and releases run on
the pool's own connection on the event loop (:class:`_Link`). Other calls
that wait for a network store (PostgreSQL, Redis; ``Pool.waits_on_network``)
run on one IO thread of the pool's own, never on the loop's default
executor; the native call releases the GIL, so the loop keeps running
meanwhile. Waiting for a free permit is a loop of single attempts separated
by sleeps on the loop for as long as the pool's waiting plan says (the same
plan as the blocking ``Pool.acquire``, on the pool's clock), cut short when
a release in this process frees a permit (:mod:`repute._freed`),
so it never holds an executor thread while it waits and a cancelled waiter
stops at once.

Usage::

    pool = await repute.AsyncPool.open(store="sqlite:repute.db")
    async with pool.acquire("example.com", timeout=5.0) as lease:
        ...
        await lease.report_success(latency=0.120)
    lease = await pool.acquire("example.com")     # or hold it yourself
    await lease.release()
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Callable, Generator, Iterable, Literal, Mapping, Sequence

from ._aio_calls import _call, _Hold, _release_orphan, _run, _Selector
from ._aio_forwards import _PoolCalls
from ._aio_lease import AsyncLease
from ._aio_link import _Link
from ._freed import freed
from ._native import Lease, ManualClock, NoResourceAvailableError, Pool, RateLimitedError
from ._types import Profile


class _Acquire:
    """``await pool.acquire(...)`` gives the lease; ``async with`` also releases it."""

    def __init__(
        self, pool: AsyncPool, context: str, timeout: float | None, selector: _Selector, hold: _Hold
    ) -> None:
        self._pool = pool
        self._context = context
        self._timeout = timeout
        self._selector = selector
        self._hold = hold
        self._lease: AsyncLease | None = None

    def __await__(self) -> Generator[Any, None, AsyncLease]:
        return self._pool._acquire(self._context, self._timeout, self._selector, self._hold).__await__()

    async def __aenter__(self) -> AsyncLease:
        self._lease = await self._pool._acquire(self._context, self._timeout, self._selector, self._hold)
        return self._lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._lease is not None, "__aexit__ without __aenter__"
        await self._lease.__aexit__(exc_type, exc, tb)


class AsyncPool(_PoolCalls):
    """The asyncio form of :class:`Pool`: the same operations, awaited.

    Open one with ``await AsyncPool.open(...)`` (same arguments as ``Pool``),
    or wrap an existing pool with ``AsyncPool(pool)``; both forms can be used
    on the same pool at once.
    """

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        # Calls that wait on a network store run on one thread of the
        # pool's own (the pool serves one call at a time anyway), never on
        # the loop's default executor; the rest run inline.
        self._io: Executor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="repute-io") if pool.waits_on_network else None
        )
        native = pool._link()
        self._link = None if native is None else _Link(native)
        self._freed = freed(pool)

    @classmethod
    async def open(
        cls,
        store: str = "memory",
        tenant: str = "default",
        lease_ttl: float = 30.0,
        strategy: Literal["classic", "thompson", "first"] | None = None,
        seed: int | None = None,
        clock: ManualClock | None = None,
        *,
        probe_ttl: float = 15.0,
        renew_margin: float | None = None,
        max_resources: int | None = None,
        max_cells: int | None = None,
        rate: float | None = None,
        burst: int = 1,
        mode: Literal["sharded", "shared"] = "sharded",
        owner_ttl: float = 10.0,
        owners: str = "store",
        recovery: Literal["traffic", "probe", "classic"] = "traffic",
        fail_open: bool = False,
        cooldowns: Mapping[str, Mapping[str, float]] | None = None,
        probe: Callable[[str, str, str], Any] | None = None,
        probe_concurrency: int = 4,
        probe_every: float = 1.0,
        profiles: Mapping[str, Profile] | None = None,
    ) -> AsyncPool:
        pool = await _run(
            Pool,
            store,
            tenant,
            lease_ttl,
            strategy,
            seed,
            clock,
            probe_ttl=probe_ttl,
            renew_margin=renew_margin,
            max_resources=max_resources,
            max_cells=max_cells,
            rate=rate,
            burst=burst,
            mode=mode,
            owner_ttl=owner_ttl,
            owners=owners,
            recovery=recovery,
            fail_open=fail_open,
            cooldowns=None if cooldowns is None else {k: dict(v) for k, v in cooldowns.items()},
            probe=probe,
            probe_concurrency=probe_concurrency,
            probe_every=probe_every,
            profiles=None if profiles is None else dict(profiles),
        )
        return cls(pool)

    @property
    def pool(self) -> Pool:
        """The underlying blocking pool."""
        return self._pool

    @property
    def now(self) -> float:
        return self._pool.now

    async def try_acquire(
        self,
        context: str,
        *,
        kind: str | None = None,
        where: Mapping[str, str | Sequence[str]] | None = None,
        exclude: Iterable[str] | None = None,
        prefer: str | None = None,
        affinity: str | None = None,
        cost: int | None = None,
        auto_renew: bool = False,
        max_hold: float | None = None,
    ) -> AsyncLease | None:
        selector = _Selector(kind=kind, where=where, exclude=exclude, prefer=prefer, affinity=affinity, cost=cost)
        lease = await _call(
            self._io, self._pool.try_acquire, context, **selector, auto_renew=auto_renew, max_hold=max_hold
        )
        return None if lease is None else AsyncLease(lease, self._io, self._link)

    def acquire(
        self,
        context: str,
        timeout: float | None = None,
        *,
        kind: str | None = None,
        where: Mapping[str, str | Sequence[str]] | None = None,
        exclude: Iterable[str] | None = None,
        prefer: str | None = None,
        affinity: str | None = None,
        cost: int | None = None,
        auto_renew: bool = False,
        max_hold: float | None = None,
        cancel_on_loss: bool = False,
    ) -> _Acquire:
        """The best lease for ``context``, waiting up to ``timeout`` seconds
        (None: without limit); raises ``NoResourceAvailableError`` or
        ``RateLimitedError`` when the time is up. ``kind``, ``where``,
        ``exclude``, ``prefer`` and ``affinity`` choose among the resources
        and ``cost`` reserves tokens as for :meth:`Pool.acquire`. With
        ``auto_renew`` the pool's thread renews the lease until it is
        released, lost or held for ``max_hold`` seconds; with
        ``cancel_on_loss`` a lost lease cancels the task that acquired it (so
        ``async with`` leaves its block)."""
        selector = _Selector(kind=kind, where=where, exclude=exclude, prefer=prefer, affinity=affinity, cost=cost)
        return _Acquire(self, context, timeout, selector, _Hold(auto_renew, max_hold, cancel_on_loss))

    async def _acquire(self, context: str, timeout: float | None, selector: _Selector, hold: _Hold) -> AsyncLease:
        # The plan starts the timeout now, and checks it (InvalidInputError)
        # before the pool is touched; without one it is made at the first
        # refusal, so a grant at once costs nothing more.
        waiting = None if timeout is None else self._pool._waiting(timeout)
        place = None
        try:
            while True:
                try:
                    lease = AsyncLease(await self._attempt(context, selector, hold), self._io, self._link)
                    break
                except (NoResourceAvailableError, RateLimitedError) as refusal:
                    if place is not None:
                        place.refused()
                    if waiting is None:
                        waiting = self._pool._waiting(None)
                    wait = waiting.next(refusal.retry_after, refusal.settled, getattr(refusal, "expected_after", None))
                    if wait is None:
                        raise
                    if place is None:
                        place, wish = self._freed.place(), self._pool._wish(context, **selector)
                    await place.sleep(wait, wish)
            if place is not None:
                place.granted()
        finally:
            if place is not None:
                place.left()
        if hold.cancel_on_loss:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
            assert task is not None, "acquire runs in a task"
            lease.on_lost(lambda _loss: loop.call_soon_threadsafe(task.cancel))
        return lease

    async def _attempt(self, context: str, selector: _Selector, hold: _Hold) -> Lease:
        if self._link is not None:
            return await self._link.acquire(context, selector, hold)
        if self._io is None:
            return self._pool.acquire(context, 0.0, **selector, auto_renew=hold.auto_renew, max_hold=hold.max_hold)
        attempt = functools.partial(
            self._pool.acquire, context, 0.0, **selector, auto_renew=hold.auto_renew, max_hold=hold.max_hold
        )
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._io, attempt)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(functools.partial(_release_orphan, self._io))
            raise

    async def acquire_for_probe(self, kind: str, value: str, context: str) -> AsyncLease:
        lease = await _call(self._io, self._pool.acquire_for_probe, kind, value, context)
        return AsyncLease(lease, self._io, self._link)

    async def resume(self, lease_id: int, token: int) -> AsyncLease:
        lease = await _call(self._io, self._pool.resume, lease_id, token)
        return AsyncLease(lease, self._io, self._link)

    async def close(self, checkpoint: bool = True) -> None:
        if self._link is not None:
            self._link.close()
        await _call(self._io, self._pool.close, checkpoint)
        if self._io is not None:
            self._io.shutdown(wait=False)

    async def __aenter__(self) -> AsyncPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
