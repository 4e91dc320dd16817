# The types of repute.httpx2: repute.httpx's transports on httpx2 (see httpx2.py).
from typing import Any, Callable, Mapping, Sequence

import httpx2

from ._aio import AsyncPool
from ._native import Pool

__all__ = ["AsyncTransport", "Transport"]

_Context = str | Callable[[httpx2.Request], str] | None

class Transport(httpx2.BaseTransport):
    def __init__(
        self,
        pool: Pool,
        *,
        kind: str | None = None,
        where: Mapping[str, str | Sequence[str]] | None = None,
        context: _Context = None,
        attempts: int = 3,
        timeout: float | None = None,
        max_proxies: int = 64,
        **options: Any,
    ) -> None: ...
    def handle_request(self, request: httpx2.Request) -> httpx2.Response: ...
    def close(self) -> None: ...

class AsyncTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str | None = None,
        where: Mapping[str, str | Sequence[str]] | None = None,
        context: _Context = None,
        attempts: int = 3,
        timeout: float | None = None,
        max_proxies: int = 64,
        **options: Any,
    ) -> None: ...
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response: ...
    async def aclose(self) -> None: ...
