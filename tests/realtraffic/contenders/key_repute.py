"""repute with its defaults for API keys: each key registered with kind
"openai" or "anthropic" (the pool's api-key profile with that provider's
preset), its secret,
and the documented rpm per model as `per_context` (the model is the
context), as repute's README tells users. Each answer is reported with its
status, headers and error body; a retry excludes keys already tried."""

from __future__ import annotations

import repute

from .base import Outcome, UserRequest
from .llm import KeyClients
from .loops import through_pool


class KeyRepute:
    name = "repute"

    def __init__(self, keys: list[tuple[str, str, int]], clients: KeyClients, seed: int) -> None:
        """`keys`: (name, secret, rpm) of each key."""
        self._keys = keys
        self._clients = clients
        self._kind = clients.format
        self._pool = repute.AsyncPool(repute.Pool(seed=seed))

    async def start(self) -> None:
        for name, secret, rpm in self._keys:
            # As the README's API-key tour: a key takes requests at once
            # (permits), its documented rpm per model paces them.
            await self._pool.register(self._kind, name, permits=16, secret=secret, per_context={"rpm": rpm})

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        return await through_pool(self._pool, self._kind, _secret, self._clients.complete, request, deadline)

    async def close(self) -> None:
        self._pool.pool.close()


def _secret(lease: repute.Lease) -> str:
    assert lease.secret is not None, "every key is registered with its secret"
    return lease.secret
