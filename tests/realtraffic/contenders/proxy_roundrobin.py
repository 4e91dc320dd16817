"""Plain round-robin over the proxy list: the next proxy for every attempt,
whatever the last answer was. The floor every pool should beat."""

from __future__ import annotations

import itertools

from .base import Outcome, UserRequest
from .loops import round_robin
from .web import ProxyWeb


class ProxyRoundRobin:
    name = "round-robin"

    def __init__(self, proxies: list[str], web: ProxyWeb) -> None:
        self._next = itertools.cycle(proxies)
        self._web = web

    async def start(self) -> None:
        pass

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        return await round_robin(self._next, self._web.get, request, deadline)

    async def close(self) -> None:
        pass
