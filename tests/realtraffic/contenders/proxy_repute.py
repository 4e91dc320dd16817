"""repute with its defaults: every proxy registered with kind "proxy" (so
the pool uses its proxy profile), the site as the context, each answer
reported as it came (status, headers, body, latency), a transport error as
a failure. A retry excludes the proxies this request already tried."""

from __future__ import annotations

import repute

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
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
        attempts = 0
        tried: list[str] = []
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            exclude = tried if len(tried) < len(self._proxies) else []
            try:
                lease = (
                    await self._pool.acquire(request.context, timeout=deadline - now(), kind="proxy", exclude=exclude)
                ).lease
            except repute.ReputeError:
                break  # nothing became available before the deadline
            attempts += 1
            answer = await self._web.get(lease.value, request, deadline - now())
            if answer.status is None:
                lease.report_failure(answer.failure or "connection_reset", latency=answer.latency)
            else:
                lease.report_http(answer.status, latency=answer.latency, headers=answer.headers, body=answer.text)
            lease.release()
            if answer.status == 200:
                return Outcome(True, attempts)
            tried.append(lease.value)
        return Outcome(False, attempts)

    async def close(self) -> None:
        self._pool.pool.close()
