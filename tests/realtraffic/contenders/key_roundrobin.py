"""Plain round-robin over the keys: the next key for every attempt,
whatever the last answer was."""

from __future__ import annotations

import itertools

from .base import Outcome, UserRequest
from .llm import KeyClients
from .loops import round_robin


class KeyRoundRobin:
    name = "round-robin"

    def __init__(self, secrets: list[str], clients: KeyClients) -> None:
        self._next = itertools.cycle(secrets)
        self._clients = clients

    async def start(self) -> None:
        pass

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        return await round_robin(self._next, self._clients.complete, request, deadline)

    async def close(self) -> None:
        pass
