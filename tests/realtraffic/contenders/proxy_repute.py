"""repute with its defaults: every proxy registered with kind "proxy" (so
the pool uses its proxy profile), the site as the context, each answer
reported as it came (status, headers, body, latency), a transport error as
a failure. A retry excludes the proxies this request already tried."""

from __future__ import annotations

import repute

from .base import Outcome, UserRequest
from .loops import through_pool
from .web import ProxyWeb


class ProxyRepute:
    name = "repute"

    def __init__(self, proxies: list[str], web: ProxyWeb, seed: int) -> None:
        self._proxies = proxies
        self._web = web
        # The pool is in memory: its calls take microseconds and run inline
        # on the loop; AsyncPool is used for its waiting acquire.
        self._pool = repute.AsyncPool(repute.Pool(seed=seed))

    async def start(self) -> None:
        # A proxy carries a few connections at once, as the README's proxy
        # tour registers it; what a site takes per exit is the pool's to learn.
        for proxy in self._proxies:
            await self._pool.register("proxy", proxy, permits=4)

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        return await through_pool(self._pool, "proxy", lambda lease: lease.value, self._web.get, request, deadline)

    async def close(self) -> None:
        self._pool.pool.close()
