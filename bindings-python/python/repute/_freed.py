"""Acquires of one pool asleep on an event loop, woken when an asyncio call
of this process may have freed a permit: the asyncio form of the blocking
acquire's condition variable.

Without it a waiter slept out its whole backoff (up to 50 ms) beside a
permit released a moment after it lay down, and a pool whose permits are
the limit served at well under half its rate. A lease released by the
asyncio forms (``AsyncLease.release``, ``async with``) or by an adapter's
request wakes every sleeper of its pool; each tries once and those that
find nothing sleep again. A release the event loop does not see (a blocking
``Lease.release()``, an expiry) wakes no one: the backoff bounds that wait.
"""

from __future__ import annotations

import asyncio
import weakref

from ._native import Pool


class Freed:
    """The sleepers of one pool."""

    def __init__(self) -> None:
        self._sleepers: set[asyncio.Future[None]] = set()

    async def sleep(self, seconds: float) -> None:
        """Sleeps ``seconds``, or until :meth:`wake`."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _set, woken)
        self._sleepers.add(woken)
        try:
            await woken
        finally:
            timer.cancel()
            self._sleepers.discard(woken)

    def wake(self) -> None:
        """Wakes every sleeper: a permit may be free."""
        if not self._sleepers:
            return
        sleepers, self._sleepers = self._sleepers, set()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for woken in sleepers:
            loop = woken.get_loop()
            if loop is running:
                _set(woken)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_set, woken)


def _set(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


_BY_POOL: weakref.WeakKeyDictionary[Pool, Freed] = weakref.WeakKeyDictionary()


def freed(pool: Pool) -> Freed:
    """The sleepers of ``pool``: one set for every asyncio form over it."""
    sleepers = _BY_POOL.get(pool)
    if sleepers is None:
        sleepers = _BY_POOL[pool] = Freed()
    return sleepers
