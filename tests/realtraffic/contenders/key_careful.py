"""A careful hand-written round-robin over API keys: it waits out
retry-after per (key, model), drops a key that answers 401, pauses a key
whose quota ran out for an hour (only billing brings it back; it knows each
provider's quota error), and takes a 5xx as the provider's fault, not the
key's."""

from __future__ import annotations

import asyncio

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .llm import KeyClients

QUOTA_PAUSE = 3600.0


class KeyCareful:
    name = "careful-rr"

    def __init__(self, secrets: list[str], clients: KeyClients) -> None:
        self._keys = secrets
        self._clients = clients
        self._turn = 0
        self._until: dict[tuple[str, str], float] = {}
        self._paused: dict[str, float] = {}
        self._dropped: set[str] = set()

    async def start(self) -> None:
        pass

    def _free_at(self, key: str, model: str) -> float:
        return max(self._until.get((key, model), 0.0), self._paused.get(key, 0.0))

    def _pick(self, model: str) -> str | float:
        """The next usable key for `model`, or the loop time when one frees up."""
        for _ in range(len(self._keys)):
            key = self._keys[self._turn % len(self._keys)]
            self._turn += 1
            if key not in self._dropped and self._free_at(key, model) <= now():
                return key
        return min((self._free_at(k, model) for k in self._keys if k not in self._dropped), default=float("inf"))

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            key = self._pick(request.context)
            if isinstance(key, float):
                if key >= deadline:
                    break
                await asyncio.sleep(key - now())
                continue
            attempts += 1
            answer = await self._clients.complete(key, request, deadline - now())
            if answer.status == 200:
                return Outcome(True, attempts)
            told = self._clients.told_by(answer)
            if told == "401":
                self._dropped.add(key)
            elif told == "quota":
                self._paused[key] = now() + QUOTA_PAUSE
            elif answer.status == 429:
                ms = answer.headers.get("retry-after-ms")
                wait = float(ms) / 1000 if ms else float(answer.headers.get("retry-after", "1"))
                self._until[(key, request.context)] = now() + wait
        return Outcome(False, attempts)

    async def close(self) -> None:
        pass
