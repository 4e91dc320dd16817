"""Plain round-robin over the keys: the next key for every attempt,
whatever the last answer was."""

from __future__ import annotations

import itertools

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .llm import KeyClients


class KeyRoundRobin:
    name = "round-robin"

    def __init__(self, secrets: list[str], clients: KeyClients) -> None:
        self._next = itertools.cycle(secrets)
        self._clients = clients

    async def start(self) -> None:
        pass

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            attempts += 1
            answer = await self._clients.complete(next(self._next), request, deadline - now())
            if answer.status == 200:
                return Outcome(True, attempts)
        return Outcome(False, attempts)

    async def close(self) -> None:
        pass
