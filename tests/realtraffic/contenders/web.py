"""One attempt of a user request through a proxy, with httpx.

Shared by the proxy contenders so that they differ only in which proxy they
choose and when: the same client settings, the same error mapping.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from .base import UserRequest


@dataclass(frozen=True)
class Answer:
    status: int | None
    """None when no HTTP answer came (connection refused or dropped, timeout)."""
    headers: Mapping[str, str]
    """Case-insensitive (httpx's Headers)."""
    text: str
    latency: float
    failure: str | None
    """"connection_reset" or "timeout" when `status` is None (repute's names)."""


class ProxyWeb:
    """One httpx client per proxy, kept for the whole run (a client per
    attempt would pay a new connection pool each time)."""

    def __init__(self, sites: dict[str, str]) -> None:
        self._sites = sites
        self._clients: dict[str, httpx.AsyncClient] = {}

    def _client(self, proxy: str) -> httpx.AsyncClient:
        client = self._clients.get(proxy)
        if client is None:
            # trust_env=False: no proxy or certificate settings from the
            # environment; every address here is on loopback.
            client = httpx.AsyncClient(proxy=f"http://{proxy}", trust_env=False)
            self._clients[proxy] = client
        return client

    async def get(self, proxy: str, request: UserRequest, timeout: float) -> Answer:
        url = self._sites[request.context] + request.path
        began = time.monotonic()
        try:
            response = await self._client(proxy).get(
                url, headers={"x-rt-request": request.id}, timeout=max(0.05, timeout)
            )
        except httpx.TimeoutException:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "timeout")
        except httpx.TransportError:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "connection_reset")
        return Answer(response.status_code, response.headers, response.text, time.monotonic() - began, None)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
