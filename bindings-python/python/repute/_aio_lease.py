"""The asyncio handle of a lease (see :mod:`repute._aio`)."""

from __future__ import annotations

from concurrent.futures import Executor
from types import TracebackType
from typing import Callable, Iterable, Mapping

from ._aio_calls import _call
from ._aio_link import _Link
from ._native import Lease, ReputeError
from ._types import FailureKind


class AsyncLease:
    """The asyncio handle of a :class:`Lease`; ``async with`` releases it."""

    def __init__(self, lease: Lease, io: Executor | None = None, link: _Link | None = None) -> None:
        self._lease = lease
        self._io = io
        self._link = link

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
    def secret(self) -> str | None:
        """The resource's secret, or None (read from the pool's memory once)."""
        return self._lease.secret

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

    @property
    def lost(self) -> bool:
        return self._lease.lost

    @property
    def loss(self) -> str | None:
        return self._lease.loss

    def on_lost(self, callback: Callable[[str], object]) -> None:
        """``callback(loss)`` once when the lease is lost; it runs on the
        thread that noticed, so use ``loop.call_soon_threadsafe`` to reach
        the event loop."""
        self._lease.on_lost(callback)

    async def renew(self) -> None:
        await _call(self._io, self._lease.renew)

    async def release(self) -> bool:
        """True if the lease was held up to now; False if it had been lost
        (its grant is still revoked at the authority)."""
        if self._link is None and self._io is None:
            return self._lease.release()
        return await self._release_as() == "held"

    async def _release_as(self) -> str:
        if self._link is not None:
            return await self._link.release(self._lease)
        return await _call(self._io, self._lease._release_as)

    async def reconcile(self, used: int) -> None:
        """The lease used ``used`` tokens instead of the ``cost`` it reserved."""
        await _call(self._io, self._lease.reconcile, used)

    async def report_success(self, latency: float, *, usage: int | None = None) -> None:
        await _call(self._io, self._lease.report_success, latency, usage=usage)

    async def report_failure(
        self, kind: FailureKind | str, latency: float, *, retry_after: float | None = None, usage: int | None = None
    ) -> None:
        await _call(self._io, self._lease.report_failure, kind, latency, retry_after=retry_after, usage=usage)

    async def report_http(
        self,
        status: int,
        latency: float = 0.0,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        *,
        body: str | bytes | None = None,
        usage: int | None = None,
    ) -> None:
        await _call(self._io, self._lease.report_http, status, latency, headers, body=body, usage=usage)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # As the blocking form: a release error, or a lease lost while the
        # block ran, surfaces only when the block itself succeeded.
        if exc_type is None:
            if await self._release_as() == "lost_unseen":
                # Released already: the blocking exit does no IO now, and
                # raises the native LeaseExpiredError (with its code).
                self._lease.__exit__(None, None, None)
            return
        try:
            await self.release()
        except ReputeError:
            pass

    def __repr__(self) -> str:
        return f"Async{self._lease!r}"


