"""What the SDK helpers (:mod:`repute.openai`, :mod:`repute.anthropic`)
share: the httpx clients they give the SDK, over the pool's keys."""

from __future__ import annotations

from typing import Any, Callable

import httpx2

from ._adapt import Where, invalid
from ._aio import AsyncPool
from ._native import Pool
from .httpx2 import AsyncTransport, Transport

#: The API key the SDK is made with: every request's credential header is
#: replaced by the leased key's, so this one is never sent.
PLACEHOLDER = "repute-leased-key"


def _options(kwargs: dict[str, Any], deadline: float | None) -> float | None:
    if "http_client" in kwargs:
        rule = "is made by repute over the pool; give the SDK an httpx2 client over repute.httpx2.Transport instead"
        raise invalid("http_client", rule)
    if deadline is not None and not deadline > 0:
        raise invalid("deadline", "must be > 0")
    kwargs.setdefault("api_key", PLACEHOLDER)
    return deadline


def http_client(
    pool: Pool,
    kwargs: dict[str, Any],
    *,
    kind: str,
    where: Where | None,
    context: str | Callable[[httpx2.Request], str] | None,
    attempts: int,
    deadline: float | None,
) -> httpx2.Client:
    timeout = _options(kwargs, deadline)
    return httpx2.Client(
        transport=Transport(pool, kind=kind, where=where, context=context, attempts=attempts, timeout=timeout)
    )


def async_http_client(
    pool: Pool | AsyncPool,
    kwargs: dict[str, Any],
    *,
    kind: str,
    where: Where | None,
    context: str | Callable[[httpx2.Request], str] | None,
    attempts: int,
    deadline: float | None,
) -> httpx2.AsyncClient:
    timeout = _options(kwargs, deadline)
    return httpx2.AsyncClient(
        transport=AsyncTransport(pool, kind=kind, where=where, context=context, attempts=attempts, timeout=timeout)
    )
