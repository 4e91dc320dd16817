"""What the adapters on an event loop (:mod:`repute.httpx`'s
``AsyncTransport``, :mod:`repute.aiohttp`, :mod:`repute.litellm`,
:mod:`repute.scrapy`, :mod:`repute.crawlee`) share: a request's lease
acquired without blocking the loop, waiting between tries by the pool's own
waiting plan, as ``AsyncPool.acquire`` does; and a proxy's credentials kept
as its secret, out of its value, which events and errors show."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ._aio import AsyncPool
from ._aio_calls import _call, _ignore_result, _run
from ._freed import freed
from ._native import Lease, NoResourceAvailableError, Pool, RateLimitedError, _Attempts
from ._types import _Route

_T = TypeVar("_T")


class Acquirer:
    """Single tries of a request's :class:`_Attempts`, and its other calls
    (a report, a release), on the pool's IO thread when the pool waits on a
    network (a shared store), inline else: never blocking the loop."""

    def __init__(self, pool: Pool | AsyncPool, native: Pool) -> None:
        self._pool = native
        self._io = pool._io if isinstance(pool, AsyncPool) else None
        self._offload = self._io is None and native.waits_on_network
        self._freed = freed(native)

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)``, one of the attempts' calls, which may wait on the
        store: on the IO thread when it may, inline else. A release it makes
        wakes the pool's first sleeper in line (the native pool tells
        :mod:`repute._freed`)."""
        if self._offload:
            return await _run(fn, *args)
        return await _call(self._io, fn, *args)

    def soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """``call`` from code that cannot wait (a library's synchronous
        close): inline, or started on the IO thread and not waited for."""
        if not (self._offload or self._io is not None):
            fn(*args)
            return
        done = asyncio.get_running_loop().run_in_executor(self._io, functools.partial(fn, *args))
        done.add_done_callback(_ignore_result)

    async def acquire(self, attempts: _Attempts) -> Lease:
        """The next attempt's lease; raises the refusal when the protocol gives up."""
        return await self._first(attempts.try_acquire, attempts)

    async def next(self, attempts: _Attempts) -> _Route:
        """The next attempt acquired and begun (``_Attempts.try_next``):
        its route; raises the refusal when the protocol gives up."""
        return await self._first(attempts.try_next, attempts)

    async def _first(self, one_try: Callable[[], _T], attempts: _Attempts) -> _T:
        """``one_try()`` until it is granted, waiting between refusals as
        ``attempts.refused()`` says."""
        waiting = None
        place = None
        try:
            while True:
                try:
                    granted = await self.call(one_try)
                    if place is not None:
                        place.granted()
                    return granted
                except (NoResourceAvailableError, RateLimitedError):
                    if place is not None:
                        place.refused()
                    what, hint = attempts.refused()
                    if what == "again":
                        continue
                    if what == "give_up":
                        raise
                    if waiting is None:
                        waiting = self._pool._waiting(attempts.remaining)
                    wait = waiting.next(hint)
                    if wait is None:
                        raise
                    if place is None:
                        place = self._freed.place()
                    await place.sleep(wait, attempts.wish)
        finally:
            if place is not None:
                place.left()


def split_credentials(proxy: str) -> tuple[str, str | None]:
    """A listed proxy as the resource's value (its URL without ``user:password@``)
    and its secret (that ``user:password``, or None)."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.username is None and parts.password is None:
        return proxy, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    userinfo = parts.netloc.rsplit("@", 1)[0]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), userinfo


def with_credentials(url: str, secret: str | None) -> str:
    """A leased proxy's URL with its secret put back, for the library that connects."""
    if not secret:
        return url
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"{secret}@{parts.netloc}", parts.path, parts.query, parts.fragment))
