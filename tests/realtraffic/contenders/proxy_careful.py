"""A careful hand-written round-robin, as a competent engineer writes it in
an afternoon: it honours Retry-After per (proxy, site), takes a 403 as a ban
of that proxy on that site for a while, and drops a proxy after three
connection errors in a row."""

from __future__ import annotations

import asyncio

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .web import ProxyWeb

BAN_PAUSE = 120.0
"""Seconds a proxy is left alone on a site that answered 403."""
DROP_AFTER = 3


class ProxyCareful:
    name = "careful-rr"

    def __init__(self, proxies: list[str], web: ProxyWeb) -> None:
        self._proxies = proxies
        self._web = web
        self._turn = 0
        self._until: dict[tuple[str, str], float] = {}
        self._errors: dict[str, int] = {p: 0 for p in proxies}

    async def start(self) -> None:
        pass

    def _pick(self, site: str) -> str | float:
        """The next usable proxy for `site`, or the loop time when one frees up."""
        alive = [p for p in self._proxies if self._errors[p] < DROP_AFTER]
        for _ in range(len(self._proxies)):
            proxy = self._proxies[self._turn % len(self._proxies)]
            self._turn += 1
            if proxy in alive and self._until.get((proxy, site), 0.0) <= now():
                return proxy
        return min((self._until.get((p, site), 0.0) for p in alive), default=float("inf"))

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            proxy = self._pick(request.context)
            if isinstance(proxy, float):
                if proxy >= deadline:
                    break
                await asyncio.sleep(proxy - now())
                continue
            attempts += 1
            answer = await self._web.get(proxy, request, deadline - now())
            if answer.status is None:
                self._errors[proxy] += 1
                continue
            self._errors[proxy] = 0
            if answer.status == 200:
                return Outcome(True, attempts)
            if answer.status == 429:
                retry = float(answer.headers.get("Retry-After", "1"))
                self._until[(proxy, request.context)] = now() + retry
            elif answer.status == 403:
                self._until[(proxy, request.context)] = now() + BAN_PAUSE
        return Outcome(False, attempts)

    async def close(self) -> None:
        pass
