"""Acquires of one pool asleep on an event loop, woken when a permit is
freed: the asyncio form of the blocking acquire's line.

Without it a waiter slept out its whole backoff (up to 50 ms) beside a
permit released a moment after it lay down, and a pool whose permits are
the limit served at well under half its rate. A release frees one permit,
so it wakes one sleeper; one that cannot use it hands the wake on. The
native pool counts releases wherever they are made (an asyncio form, an
adapter's request, a blocking ``Lease.release()`` on another thread) and,
after each call that saw some, tells :meth:`Freed.released` how many. Who
is woken is the host's line (``_Line``: the first in line, then the next
that wishes for something else and has not tried since the release); this
module keeps the futures, keyed by place. Waking every sleeper cost each an
attempt per release (at 400 acquires over 4 permits, 21 times the CPU of a
grant nobody waits for; 2.4 times in line). A permit no call releases (a
lease left to expire) wakes no one: the backoff bounds that wait.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from ._native import Pool, _Line


class Freed:
    """The sleepers of one pool, in line."""

    def __init__(self) -> None:
        self._line = _Line()
        # Loops of several threads may share one pool.
        self._lock = threading.Lock()
        self._sleeping: dict[int, asyncio.Future[bool]] = {}

    def place(self) -> Place:
        """A place in line for one acquire, behind every one before it."""
        return Place(self, self._line.place())

    def released(self, permits: int) -> None:
        """``permits`` were freed (the native pool tells, after a call that
        saw them released): as many first in line try for them."""
        if not self._sleeping:
            return
        with self._lock:
            for _ in range(permits):
                self._ring(self._line.wake_one())

    def _ring(self, place: int | None) -> None:
        """Ends the sleep of ``place``, just woken (under ``_lock``)."""
        woken = None if place is None else self._sleeping.pop(place, None)
        if woken is None:
            return
        loop = woken.get_loop()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running:
            _set(woken, True)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(_set, woken, True)

    def _hand(self, place: int, tried: bool) -> None:
        """Hands on the wake ``place`` holds, if any."""
        with self._lock:
            self._ring(self._line.refused(place) if tried else self._line.left(place))

    async def _sleep(self, place: int, seconds: float, wish: int) -> None:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[bool] = loop.create_future()
        timer = self._timer(loop, seconds, place, woken)
        with self._lock:
            self._sleeping[place] = woken
            self._line.lie_down(place, wish)
        try:
            await woken
        finally:
            if timer is not None:
                timer.cancel()
            self._leave(place)

    def _leave(self, place: int) -> None:
        """Out of line without a wake (time up, cancelled)."""
        with self._lock:
            self._sleeping.pop(place, None)
            self._line.leave(place)

    def _timer(
        self, loop: asyncio.AbstractEventLoop, seconds: float, place: int, woken: asyncio.Future[bool]
    ) -> asyncio.TimerHandle | None:
        """Ends the sleep after ``seconds``, out of line at once: a wake
        must not go to a sleeper already on its way to try."""
        return loop.call_later(seconds, self._time_up, place, woken)

    def _time_up(self, place: int, woken: asyncio.Future[bool]) -> None:
        self._leave(place)
        _set(woken, False)


class Place:
    """One acquire's place in its pool's line: a wake it could not use is
    handed on, whether the acquire tries again, gives up or is cancelled
    (``refused`` after each refused try, ``left`` when it ends)."""

    def __init__(self, freed: Freed, place: int) -> None:
        self._freed = freed
        self._place = place

    async def sleep(self, seconds: float, wish: int) -> None:
        """Sleeps ``seconds``, or until a release wakes it; ``wish`` is what
        its next try asks for, as the host hashes it (``Pool._wish``,
        ``_Attempts.wish``): tries that ask alike are answered alike."""
        await self._freed._sleep(self._place, seconds, wish)

    def granted(self) -> None:
        """The try after the sleep got its permit: the wake is used."""
        self._freed._line.granted(self._place)

    def refused(self) -> None:
        """The try after the sleep got nothing: a wake it holds goes to the
        next in line that wishes otherwise."""
        self._freed._hand(self._place, tried=True)

    def left(self) -> None:
        """The acquire ends (cancelled, given up): a wake it holds and did
        not try goes to the next in line."""
        self._freed._hand(self._place, tried=False)


def _set(woken: asyncio.Future[bool], rung: bool) -> None:
    if not woken.done():
        woken.set_result(rung)


_BY_POOL: weakref.WeakKeyDictionary[Pool, Freed] = weakref.WeakKeyDictionary()


def freed(pool: Pool) -> Freed:
    """The sleepers of ``pool``: one line for every asyncio form over it."""
    sleepers = _BY_POOL.get(pool)
    if sleepers is None:
        sleepers = _BY_POOL[pool] = Freed()
        pool._on_released(sleepers.released)
    return sleepers
