"""Google's Gen AI SDK over the pool's Gemini API keys (``pip install repute[genai]``)::

    client = repute.genai.client(pool)        # the keys registered as kind "gemini"
    client.models.generate_content(model="gemini-2.5-flash", contents="...")
    await client.aio.models.generate_content(model="gemini-2.5-flash", contents="...")

The SDK is given ``httpx`` clients (its sync one and the one behind
``client.aio``) whose transports are :class:`repute.httpx2.Transport` and
``AsyncTransport``: each request leases a key (in the context of the model
its path names), carries it as ``x-goog-api-key``, and is moved to another
key when the answer blames this one (a 400 ``API_KEY_INVALID``, a 401 or
403, a spent per-day quota, a 429 whose ``RetryInfo`` delay pauses the key).
The SDK does not retry unless ``http_options.retry_options`` asks it to;
each of its retries is one more request through the transport.
``deadline`` bounds one request's attempts, waits for a key included
(seconds); every other keyword goes to ``google.genai.Client``, and
``http_options`` (``base_url``, ``api_version``, ``headers``, ...) keeps
all but the clients, which repute makes.
"""

from __future__ import annotations

from typing import Any, Callable

import httpx2
from google import genai
from google.genai import types

from ._adapt import Where, invalid
from ._aio import AsyncPool
from ._native import Pool
from ._sdk import async_http_client, http_client

__all__ = ["client"]

#: The clients repute makes; ``http_options`` may not bring its own.
_CLIENTS = ("httpx_client", "httpx_async_client", "aiohttp_client")


def client(
    pool: Pool | AsyncPool,
    kind: str = "gemini",
    *,
    where: Where | None = None,
    context: str | Callable[[httpx2.Request], str] | None = None,
    attempts: int = 3,
    deadline: float | None = None,
    **kwargs: Any,
) -> genai.Client:
    """A ``google.genai.Client`` whose requests, sync and ``aio`` alike,
    carry the pool's keys of ``kind``."""
    given = kwargs.pop("http_options", None)
    if isinstance(given, dict):
        given = types.HttpOptions.model_validate(given)
    if given is not None and not isinstance(given, types.HttpOptions):
        raise invalid("http_options", "must be a google.genai.types.HttpOptions or a dict")
    options = given or types.HttpOptions()
    for name in _CLIENTS:
        if getattr(options, name) is not None:
            raise invalid(f"http_options.{name}", "is made by repute over the pool")
    # The blocking client leases through the pool's blocking API, the same
    # pool an AsyncPool serves its event loop from.
    native = pool.pool if isinstance(pool, AsyncPool) else pool
    sync = http_client(native, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline)
    aio = async_http_client(pool, kwargs, kind=kind, where=where, context=context, attempts=attempts, deadline=deadline)
    made = options.model_copy(update={"httpx_client": sync, "httpx_async_client": aio})
    return genai.Client(http_options=made, **kwargs)
