"""Acquires of one pool asleep on an event loop, woken when an asyncio call
of this process may have freed a permit: the asyncio form of the blocking
acquire's condition variable.

Without it a waiter slept out its whole backoff (up to 50 ms) beside a
permit released a moment after it lay down, and a pool whose permits are
the limit served at well under half its rate. A lease released by the
asyncio forms (``AsyncLease.release``, ``async with``) or by an adapter's
request frees one permit, so it wakes one sleeper: the one longest in line
(a :class:`Place` is taken at an acquire's first refusal and kept until it
ends). A sleeper that cannot use what was freed (another acquire took it
first, or it is not what this one's context and selector admit) hands the
wake on to the next in line that wishes for something else and has not
tried since that release: the permit reaches whoever can take it, and
sleepers that wish alike (the same context and selector, answered alike)
cost one attempt a release between them, where waking them all cost each
an attempt. A release the event loop does not see (a blocking
``Lease.release()``, an expiry) wakes no one: the backoff bounds that
wait.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import threading
import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field

from ._native import Pool


@dataclass
class _Wake:
    """A release's wake, handed down the line."""

    release: int
    #: What the sleepers it woke wished for and were refused.
    refused: set[Hashable] = field(default_factory=set)


@dataclass
class _Sleeper:
    woken: asyncio.Future[_Wake | None]
    #: The last release this sleeper tried after: one it need not be woken for.
    seen: int
    wish: Hashable


class Freed:
    """The sleepers of one pool, in line."""

    def __init__(self) -> None:
        # Loops of several threads may share one pool.
        self._lock = threading.Lock()
        self._places = itertools.count()
        self._sleeping: dict[int, _Sleeper] = {}
        #: The places of the sleepers, in order.
        self._line: list[int] = []
        #: Releases seen, counted.
        self._releases = 0

    def place(self) -> Place:
        """A place in line for one acquire, behind every one before it."""
        with self._lock:
            return Place(self, next(self._places))

    def wake(self) -> None:
        """A permit was freed: the first in line tries for it."""
        if not self._line:
            return
        with self._lock:
            self._releases += 1
            wake = _Wake(self._releases)
        self._hand(wake, -1)

    def _hand(self, wake: _Wake, after: int) -> None:
        """Wakes the first sleeper behind place ``after`` that may use what
        ``wake`` freed; none: every one has tried since, or wishes for what
        was refused."""
        with self._lock:
            woken = self._next(wake, after)
        if woken is not None:
            _deliver(woken, wake)

    def _next(self, wake: _Wake, after: int) -> asyncio.Future[_Wake | None] | None:
        """Takes out of line the first sleeper behind ``after`` to wake:
        one its timer has not woken already, that has not tried since the
        release and does not wish for what was refused."""
        start = bisect.bisect_right(self._line, after)
        for place in self._line[start:]:
            sleeper = self._sleeping[place]
            if sleeper.seen < wake.release and sleeper.wish not in wake.refused and not sleeper.woken.done():
                self._leave(place)
                return sleeper.woken
        return None

    def _leave(self, place: int) -> None:
        del self._sleeping[place]
        del self._line[bisect.bisect_left(self._line, place)]

    async def _sleep(self, place: int, seconds: float, wish: Hashable) -> _Wake | None:
        """Sleeps ``seconds``: the wake that ended it, or None."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[_Wake | None] = loop.create_future()
        timer = self._timer(loop, seconds, woken)
        with self._lock:
            self._sleeping[place] = _Sleeper(woken, self._releases, wish)
            bisect.insort(self._line, place)
        try:
            return await woken
        except asyncio.CancelledError:
            # Cancelled after a release woke it, before it could try.
            if woken.done() and not woken.cancelled() and (wake := woken.result()) is not None:
                self._hand(wake, place)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                if place in self._sleeping:
                    self._leave(place)

    def _timer(
        self, loop: asyncio.AbstractEventLoop, seconds: float, woken: asyncio.Future[_Wake | None]
    ) -> asyncio.TimerHandle | None:
        """Ends the sleep after ``seconds``."""
        return loop.call_later(seconds, _set, woken, None)


class Place:
    """One acquire's place in its pool's line, and the wake it holds: a
    wake it could not use is handed on, whether the acquire tries again,
    gives up or is cancelled."""

    def __init__(self, freed: Freed, place: int) -> None:
        self._freed = freed
        self._place = place
        self._woken: _Wake | None = None
        self._wish: Hashable = None

    async def sleep(self, seconds: float, wish: Hashable) -> None:
        """Sleeps ``seconds``, or until a release wakes it; ``wish`` is what
        its next try asks for (tries that ask alike are answered alike)."""
        self._wish = wish
        self._woken = await self._freed._sleep(self._place, seconds, wish)

    def granted(self) -> None:
        """The attempt after the sleep got its permit: the wake is used."""
        self._woken = None

    def refused(self) -> None:
        """The attempt after the sleep got nothing, or the acquire ends
        without one: the wake goes to the next in line."""
        if self._woken is not None:
            wake, self._woken = self._woken, None
            wake.refused.add(self._wish)
            self._freed._hand(wake, self._place)


def _deliver(woken: asyncio.Future[_Wake | None], wake: _Wake) -> None:
    loop = woken.get_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is running:
        _set(woken, wake)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(_set, woken, wake)


def _set(woken: asyncio.Future[_Wake | None], wake: _Wake | None) -> None:
    if not woken.done():
        woken.set_result(wake)


_BY_POOL: weakref.WeakKeyDictionary[Pool, Freed] = weakref.WeakKeyDictionary()


def freed(pool: Pool) -> Freed:
    """The sleepers of ``pool``: one line for every asyncio form over it."""
    sleepers = _BY_POOL.get(pool)
    if sleepers is None:
        sleepers = _BY_POOL[pool] = Freed()
    return sleepers
