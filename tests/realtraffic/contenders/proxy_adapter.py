"""repute through its httpx adapter, as a user adopts it in one line: an
`httpx.AsyncClient` whose transport is `repute.httpx.AsyncTransport` over
the proxies (kind "proxy", as the README's tour registers them), the site
as the context. The adapter makes the attempts itself, up to the same
budget as every contender; the harness only bounds the request by its
deadline, which the transport is also told, as a user states a request's
budget once (its `timeout`). Attempts are counted where they arrive, at
the target."""

from __future__ import annotations

import asyncio

import httpx

import repute
import repute.httpx

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now


class ProxyAdapter:
    name = "repute-adapter"

    def __init__(self, proxies: list[str], sites: dict[str, str], seed: int, deadline: float) -> None:
        self._proxies = proxies
        self._sites = sites
        self._pool = repute.Pool(seed=seed)
        transport = repute.httpx.AsyncTransport(self._pool, kind="proxy", attempts=MAX_ATTEMPTS, timeout=deadline)
        self._client = httpx.AsyncClient(transport=transport, trust_env=False)

    async def start(self) -> None:
        for proxy in self._proxies:
            self._pool.register("proxy", f"http://{proxy}", permits=4)

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        url = self._sites[request.context] + request.path
        remaining = deadline - now()
        get = self._client.get(
            url,
            headers={"x-rt-request": request.id},
            timeout=max(0.05, remaining),
            extensions={"repute.context": request.context},
        )
        try:
            response = await asyncio.wait_for(get, remaining)
        except (httpx.TransportError, repute.ReputeError, asyncio.TimeoutError):
            return Outcome(False, 0)
        return Outcome(response.status_code == 200, 0)

    async def close(self) -> None:
        await self._client.aclose()
        self._pool.close()
