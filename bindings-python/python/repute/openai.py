"""The OpenAI SDK over the pool's keys (``pip install repute[openai]``)::

    client = repute.openai.client(pool)       # the keys registered as kind "openai"
    client.chat.completions.create(model="gpt-4o-mini", messages=[...])

The SDK is given an ``httpx`` client whose transport is
:class:`repute.httpx.Transport`: each request leases a key (in the context
of the model it asks for), carries it as ``Authorization: Bearer``, and is
moved to another key when the answer blames this one (a 401, a quota
error, a 429, whose ``retry-after`` pauses the key). The SDK's own
``max_retries`` stays as the caller sets it: each of its retries is one
more request through the transport. ``deadline`` bounds one request's
attempts, waits for a key included (seconds); every other keyword goes to
``openai.OpenAI`` / ``openai.AsyncOpenAI``.
"""

from __future__ import annotations

from typing import Any, Callable

import httpx2
import openai

from ._adapt import Where
from ._aio import AsyncPool
from ._native import Pool
from ._sdk import async_http_client, http_client

__all__ = ["async_client", "client"]


def client(
    pool: Pool,
    kind: str = "openai",
    *,
    where: Where | None = None,
    context: str | Callable[[httpx2.Request], str] | None = None,
    attempts: int = 3,
    deadline: float | None = None,
    **kwargs: Any,
) -> openai.OpenAI:
    """An ``openai.OpenAI`` whose requests carry the pool's keys of ``kind``."""
    made = http_client(pool, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline)
    return openai.OpenAI(http_client=made, **kwargs)


def async_client(
    pool: Pool | AsyncPool,
    kind: str = "openai",
    *,
    where: Where | None = None,
    context: str | Callable[[httpx2.Request], str] | None = None,
    attempts: int = 3,
    deadline: float | None = None,
    **kwargs: Any,
) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` whose requests carry the pool's keys of ``kind``."""
    made = async_http_client(
        pool, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline
    )
    return openai.AsyncOpenAI(http_client=made, **kwargs)
