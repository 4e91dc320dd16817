"""repute with its defaults for API keys: each key registered with kind
"openai" (the pool's api-key profile with its OpenAI preset), its secret,
and the documented rpm per model as `per_context` (the model is the
context), as repute's README tells users. Each answer is reported with its
status, headers and error body; a retry excludes keys already tried."""

from __future__ import annotations

import repute

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .llm import KeyClients


class KeyRepute:
    name = "repute"

    def __init__(self, keys: list[tuple[str, str, int]], clients: KeyClients, seed: int) -> None:
        """`keys`: (name, secret, rpm) of each key."""
        self._keys = keys
        self._clients = clients
        self._pool = repute.AsyncPool(repute.Pool(seed=seed))

    async def start(self) -> None:
        for name, secret, rpm in self._keys:
            # As the README's API-key tour: a key takes requests at once
            # (permits), its documented rpm per model paces them.
            await self._pool.register("openai", name, permits=16, secret=secret, per_context={"rpm": rpm})

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        tried: list[str] = []
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            exclude = tried if len(tried) < len(self._keys) else []
            try:
                lease = (
                    await self._pool.acquire(request.context, timeout=deadline - now(), kind="openai", exclude=exclude)
                ).lease
            except repute.ReputeError:
                break
            attempts += 1
            assert lease.secret is not None, "every key is registered with its secret"
            answer = await self._clients.complete(lease.secret, request, deadline - now())
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
