"""asyncio forms of the pool API.

Calls on a pool whose store is in the process or a local file (memory,
SQLite) take microseconds and run inline on the event loop: an executor hop
would cost a hundred times the call. Calls that wait for a network store
(PostgreSQL, Redis; ``Pool.waits_on_network``) run on the loop's default
executor; the native call releases the GIL, so the loop keeps running
meanwhile. Waiting for a free permit is a loop of single attempts separated
by ``asyncio.sleep``, so it never holds an executor thread while it waits and
a cancelled waiter stops at once.

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
import math
from types import TracebackType
from typing import Any, Callable, Generator, Iterable, Iterator, Literal, Mapping, TypeVar

from ._native import (
    Cell,
    Event,
    Lease,
    ManualClock,
    NoResourceAvailableError,
    Pool,
    ProbeTarget,
    RateLimitedError,
    ReputeError,
    Resource,
    Stats,
)
from ._types import FailureKind

_T = TypeVar("_T")

# Same bounds as the blocking `Pool.acquire`: retry soon after a refusal, back
# off to at most 50 ms, never later than the pool's own `retry_after` hint.
_MIN_BACKOFF = 0.001
_MAX_BACKOFF = 0.05


async def _run(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


async def _call(inline: bool, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` inline when it cannot wait on a network, else on the executor."""
    if inline:
        return fn(*args, **kwargs)
    return await _run(fn, *args, **kwargs)


def _quiet_release(lease: Lease) -> None:
    try:
        lease.release()
    except ReputeError:
        pass  # it was never handed to anyone; its TTL ends it anyway


def _release_orphan(future: asyncio.Future[Lease]) -> None:
    """Releases a lease granted after its waiter was cancelled."""
    if future.cancelled() or future.exception() is not None:
        return
    asyncio.get_running_loop().run_in_executor(None, _quiet_release, future.result())


class AsyncLease:
    """The asyncio handle of a :class:`Lease`; ``async with`` releases it."""

    def __init__(self, lease: Lease, inline: bool = False) -> None:
        self._lease = lease
        self._inline = inline

    @property
    def lease(self) -> Lease:
        """The underlying blocking handle."""
        return self._lease

    @property
    def id(self) -> int:
        return self._lease.id

    @property
    def kind(self) -> str:
        return self._lease.kind

    @property
    def value(self) -> str:
        return self._lease.value

    @property
    def context(self) -> str:
        return self._lease.context

    @property
    def permit(self) -> int:
        return self._lease.permit

    @property
    def token(self) -> int:
        return self._lease.token

    @property
    def lease_kind(self) -> str:
        return self._lease.lease_kind

    @property
    def expires_at(self) -> float:
        return self._lease.expires_at

    @property
    def deadline(self) -> float:
        return self._lease.deadline

    @property
    def expires_in(self) -> float:
        return self._lease.expires_in

    @property
    def valid(self) -> bool:
        return self._lease.valid

    @property
    def released(self) -> bool:
        return self._lease.released

    async def renew(self) -> None:
        await _call(self._inline, self._lease.renew)

    async def release(self) -> None:
        await _call(self._inline, self._lease.release)

    async def report_success(self, latency: float) -> None:
        await _call(self._inline, self._lease.report_success, latency)

    async def report_failure(
        self, kind: FailureKind | str, latency: float, *, retry_after: float | None = None
    ) -> None:
        await _call(self._inline, self._lease.report_failure, kind, latency, retry_after=retry_after)

    async def report_http(
        self, status: int, latency: float = 0.0, headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None
    ) -> None:
        await _call(self._inline, self._lease.report_http, status, latency, headers)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # As the blocking form: a release error surfaces only when the block
        # itself succeeded.
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except ReputeError:
            pass

    def __repr__(self) -> str:
        return f"Async{self._lease!r}"


class _Acquire:
    """``await pool.acquire(...)`` gives the lease; ``async with`` also releases it."""

    def __init__(self, pool: AsyncPool, context: str, timeout: float | None) -> None:
        self._pool = pool
        self._context = context
        self._timeout = timeout
        self._lease: AsyncLease | None = None

    def __await__(self) -> Generator[Any, None, AsyncLease]:
        return self._pool._acquire(self._context, self._timeout).__await__()

    async def __aenter__(self) -> AsyncLease:
        self._lease = await self._pool._acquire(self._context, self._timeout)
        return self._lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._lease is not None, "__aexit__ without __aenter__"
        await self._lease.__aexit__(exc_type, exc, tb)


class AsyncPool:
    """The asyncio form of :class:`Pool`: the same operations, awaited.

    Open one with ``await AsyncPool.open(...)`` (same arguments as ``Pool``),
    or wrap an existing pool with ``AsyncPool(pool)``; both forms can be used
    on the same pool at once.
    """

    def __init__(self, pool: Pool) -> None:
        self._inline = not pool.waits_on_network
        self._pool = pool

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
        )
        return cls(pool)

    @property
    def pool(self) -> Pool:
        """The underlying blocking pool."""
        return self._pool

    @property
    def now(self) -> float:
        return self._pool.now

    async def register(self, kind: str, value: str, permits: int = 1) -> bool:
        return await _call(self._inline, self._pool.register, kind, value, permits)

    async def unregister(self, kind: str, value: str, force: bool = False) -> None:
        await _call(self._inline, self._pool.unregister, kind, value, force)

    async def try_acquire(self, context: str) -> AsyncLease | None:
        lease = await _call(self._inline, self._pool.try_acquire, context)
        return None if lease is None else AsyncLease(lease, self._inline)

    def acquire(self, context: str, timeout: float | None = None) -> _Acquire:
        """The best lease for ``context``, waiting up to ``timeout`` seconds
        (None: without limit); raises ``NoResourceAvailableError`` or
        ``RateLimitedError`` when the time is up."""
        return _Acquire(self, context, timeout)

    async def _acquire(self, context: str, timeout: float | None) -> AsyncLease:
        if timeout is not None and not (0.0 <= timeout < math.inf):
            # The blocking form checks its argument before touching the pool,
            # so this raises the same InvalidInputError without blocking.
            self._pool.acquire(context, timeout)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        backoff = _MIN_BACKOFF
        while True:
            try:
                return AsyncLease(await self._attempt(context), self._inline)
            except (NoResourceAvailableError, RateLimitedError) as refusal:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise
                hint: float | None = refusal.retry_after
                wait = backoff if hint is None else min(backoff, hint)
                if remaining is not None:
                    wait = min(wait, remaining)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                await asyncio.sleep(wait)

    async def _attempt(self, context: str) -> Lease:
        if self._inline:
            return self._pool.acquire(context, 0.0)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self._pool.acquire, context, 0.0)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(_release_orphan)
            raise

    async def acquire_for_probe(self, kind: str, value: str, context: str) -> AsyncLease:
        return AsyncLease(await _call(self._inline, self._pool.acquire_for_probe, kind, value, context), self._inline)

    async def resume(self, lease_id: int, token: int) -> AsyncLease:
        return AsyncLease(await _call(self._inline, self._pool.resume, lease_id, token), self._inline)

    async def report_success(self, kind: str, value: str, context: str, latency: float) -> None:
        await _call(self._inline, self._pool.report_success, kind, value, context, latency)

    async def report_failure(
        self,
        kind: str,
        value: str,
        context: str,
        failure: FailureKind | str,
        latency: float,
        *,
        retry_after: float | None = None,
    ) -> None:
        await _call(self._inline, self._pool.report_failure, kind, value, context, failure, latency, retry_after=retry_after)

    async def report_http(
        self,
        kind: str,
        value: str,
        context: str,
        status: int,
        latency: float = 0.0,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        await _call(self._inline, self._pool.report_http, kind, value, context, status, latency, headers)

    async def block(
        self,
        kind: str,
        value: str,
        seconds: float | None = None,
        context: str | None = None,
        reason: str | None = None,
    ) -> None:
        await _call(self._inline, self._pool.block, kind, value, seconds, context, reason)

    async def unblock(self, kind: str, value: str, context: str | None = None) -> bool:
        return await _call(self._inline, self._pool.unblock, kind, value, context)

    async def due_for_probe(self) -> list[ProbeTarget]:
        return await _call(self._inline, self._pool.due_for_probe)

    async def cells(self, kind: str, value: str) -> list[Cell]:
        return await _call(self._inline, self._pool.cells, kind, value)

    async def resources(self) -> list[Resource]:
        return await _call(self._inline, self._pool.resources)

    async def stats(self) -> Stats:
        return await _call(self._inline, self._pool.stats)

    async def snapshot(self, with_leases: bool = True) -> bytes:
        return await _call(self._inline, self._pool.snapshot, with_leases)

    async def snapshot_json(self, with_leases: bool = True) -> str:
        return await _call(self._inline, self._pool.snapshot_json, with_leases)

    async def restore(self, data: bytes) -> None:
        await _call(self._inline, self._pool.restore, data)

    async def restore_json(self, data: str) -> None:
        await _call(self._inline, self._pool.restore_json, data)

    async def checkpoint(self, with_leases: bool = True) -> int:
        return await _call(self._inline, self._pool.checkpoint, with_leases)

    async def sync(self) -> int:
        return await _call(self._inline, self._pool.sync)

    async def events(self) -> Iterator[Event]:
        return await _call(self._inline, self._pool.events)

    async def close(self, checkpoint: bool = True) -> None:
        await _call(self._inline, self._pool.close, checkpoint)

    async def __aenter__(self) -> AsyncPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
