"""A pool's own Redis connection on the event loop (see :mod:`repute._aio`)."""

from __future__ import annotations

import asyncio
from typing import Any

from ._aio_calls import _Hold, _ignore_result, _Selector
from ._native import Lease, RedisLink, ReputeError


class _Link(asyncio.Protocol):
    """A pool's own Redis connection on the event loop. The native
    :class:`RedisLink` turns acquires and releases into the pool's grant and
    revoke scripts as bytes and settles them from the replies; this writes
    the bytes and reads the replies as the loop delivers them, so an
    acquire or release waits on the loop with no thread and no executor hop.
    A lost connection fails what was in flight; the next call connects anew.
    """

    def __init__(self, native: RedisLink) -> None:
        self._native = native
        self._transport: asyncio.Transport | None = None
        self._connecting: asyncio.Future[Any] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}

    async def _ready(self) -> None:
        while self._transport is None or self._transport.is_closing():
            if self._connecting is None:
                host, port = self._native.address
                loop = asyncio.get_running_loop()
                self._connecting = loop.create_task(loop.create_connection(lambda: self, host, port))
            connecting = self._connecting
            try:
                await asyncio.shield(connecting)
            except OSError as e:
                raise self._native.unavailable(str(e)) from e
            finally:
                if self._connecting is connecting and connecting.done():
                    self._connecting = None

    def _flush(self) -> None:
        data = self._native.output()
        if data and self._transport is not None:
            self._transport.write(data)

    async def _await(self, op: int) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._waiting[op] = future
        self._flush()
        return await future

    async def acquire(self, context: str, selector: _Selector, hold: _Hold) -> Lease:
        await self._ready()
        op = self._native.acquire(context, hold.auto_renew, hold.max_hold, **selector)
        lease: Lease = await self._await(op)
        return lease

    async def release(self, lease: Lease) -> str:
        """How the release found the lease: "held", "lost" or "lost_unseen"."""
        await self._ready()
        how, op = self._native.release(lease)
        if op is not None:
            await self._await(op)
        return how

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._flush()  # the handshake, if the server wants one

    def data_received(self, data: bytes) -> None:
        try:
            settled = self._native.feed(data)
        except ReputeError:
            # An unreadable reply: the connection is unusable.
            if self._transport is not None:
                self._transport.abort()
            return
        for op, value in settled:
            self._settle(op, value)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for op, value in self._native.reset(str(exc or "connection closed")):
            self._settle(op, value)

    def _settle(self, op: int, value: Any) -> None:
        future = self._waiting.pop(op, None)
        if future is None or future.done():
            # Its waiter was cancelled: a lease nobody holds goes back.
            if isinstance(value, Lease):
                asyncio.ensure_future(self.release(value)).add_done_callback(_ignore_result)
            return
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)


