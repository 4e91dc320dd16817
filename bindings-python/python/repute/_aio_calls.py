"""How the asyncio layer runs native calls, and the arguments an acquire
carries from the pool to its lease (see :mod:`repute._aio`)."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from typing import Any, Callable, Iterable, Mapping, Sequence, TypedDict, TypeVar

from ._native import Lease, ReputeError

_T = TypeVar("_T")


async def _run(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


async def _call(io: Executor | None, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` inline when it cannot wait on a network (``io`` None), else on
    the pool's IO thread."""
    if io is None:
        return fn(*args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(io, functools.partial(fn, *args, **kwargs))


def _quiet_release(lease: Lease) -> None:
    try:
        lease.release()
    except ReputeError:
        pass  # it was never handed to anyone; its TTL ends it anyway


def _release_orphan(io: Executor | None, future: asyncio.Future[Lease]) -> None:
    """Releases a lease granted after its waiter was cancelled."""
    if future.cancelled() or future.exception() is not None:
        return
    asyncio.get_running_loop().run_in_executor(io, _quiet_release, future.result())



def _ignore_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _Selector(TypedDict):
    """``acquire``'s arguments that choose among the resources, and the
    tokens the grant reserves, as given."""

    kind: str | None
    where: Mapping[str, str | Sequence[str]] | None
    exclude: Iterable[str] | None
    prefer: str | None
    affinity: str | None
    cost: int | None


class _Hold:
    """How a lease is held once granted: auto-renewed (up to ``max_hold``
    seconds), and whether its loss cancels the task that acquired it."""

    def __init__(self, auto_renew: bool, max_hold: float | None, cancel_on_loss: bool) -> None:
        self.auto_renew = auto_renew
        self.max_hold = max_hold
        self.cancel_on_loss = cancel_on_loss


