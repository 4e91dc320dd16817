"""Plain round-robin over the proxy list: the next proxy for every attempt,
whatever the last answer was. The floor every pool should beat."""

from __future__ import annotations

import itertools

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .web import ProxyWeb


class ProxyRoundRobin:
    name = "round-robin"

    def __init__(self, proxies: list[str], web: ProxyWeb) -> None:
        self._next = itertools.cycle(proxies)
        self._web = web

    async def start(self) -> None:
        pass

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            attempts += 1
            answer = await self._web.get(next(self._next), request, deadline - now())
            if answer.status == 200:
                return Outcome(True, attempts)
        return Outcome(False, attempts)

    async def close(self) -> None:
        pass
