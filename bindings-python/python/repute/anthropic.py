"""The Anthropic SDK over the pool's keys (``pip install repute[anthropic]``)::

    client = repute.anthropic.client(pool)    # the keys registered as kind "anthropic"
    client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=[...])

The SDK is given an ``httpx`` client whose transport is
:class:`repute.httpx.Transport`: each request leases a key (in the context
of the model it asks for), carries it as ``x-api-key``, and is
moved to another key when the answer blames this one (a 401, a quota
error, a 429, whose ``retry-after`` pauses the key). The SDK's own
``max_retries`` stays as the caller sets it: each of its retries is one
more request through the transport. ``deadline`` bounds one request's
attempts, waits for a key included (seconds); every other keyword goes to
``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic``.
"""

from __future__ import annotations

from typing import Any, Callable

import httpx2
import anthropic

from ._adapt import Where
from ._aio import AsyncPool
from ._native import Pool
from ._sdk import async_http_client, http_client

__all__ = ["async_client", "client"]


def client(
    pool: Pool,
    kind: str = "anthropic",
    *,
    where: Where | None = None,
    context: str | Callable[[httpx2.Request], str] | None = None,
    attempts: int = 3,
    deadline: float | None = None,
    **kwargs: Any,
) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` whose requests carry the pool's keys of ``kind``."""
    made = http_client(pool, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline)
    return anthropic.Anthropic(http_client=made, **kwargs)


def async_client(
    pool: Pool | AsyncPool,
    kind: str = "anthropic",
    *,
    where: Where | None = None,
    context: str | Callable[[httpx2.Request], str] | None = None,
    attempts: int = 3,
    deadline: float | None = None,
    **kwargs: Any,
) -> anthropic.AsyncAnthropic:
    """An ``anthropic.AsyncAnthropic`` whose requests carry the pool's keys of ``kind``."""
    made = async_http_client(
        pool, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline
    )
    return anthropic.AsyncAnthropic(http_client=made, **kwargs)
