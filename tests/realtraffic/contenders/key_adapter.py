"""repute through its SDK adapters, as a user adopts them in one line:
`repute.openai.async_client(pool, ...)` (or `repute.anthropic`'s) over the
keys, registered as the README's API-key tour does (kind "openai" or
"anthropic", the secret, the documented rpm per model). The adapter leases
a key per attempt, sets its credential and moves the request on as the
answer says; the SDK's own retries are off, as for every contender; its `deadline` is
the harness's per-request budget.
Attempts, and attempts on the out-of-quota key after its quota error, are
counted where they arrive, at the provider. Attempts on a key after the
pool knew it revoked are counted in the pool's own events: a key granted
after its resource-wide block (the 401's report). The provider cannot tell
one the adapter chose after that from one it sent before the 401 came back,
on another model of the same key."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import anthropic
import openai

import repute
import repute.anthropic
import repute.openai

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .llm import PROMPT


class KeyAdapter:
    name = "repute-adapter"

    def __init__(self, keys: list[tuple[str, str, int]], base_url: str, format: str, seed: int, deadline: float) -> None:
        """`keys`: (name, secret, rpm) of each key."""
        self._keys = keys
        self._format = format
        self._pool = repute.Pool(seed=seed)
        client: Any
        if format == "anthropic":
            client = repute.anthropic.async_client(
                self._pool, "anthropic", attempts=MAX_ATTEMPTS, deadline=deadline, base_url=base_url, max_retries=0
            )
        else:
            client = repute.openai.async_client(
                self._pool, "openai", attempts=MAX_ATTEMPTS, deadline=deadline, base_url=f"{base_url}/v1", max_retries=0
            )
        self._client = client
        self._blocked: set[str] = set()
        self.after_blocked: Counter[str] = Counter()
        """Grants of a key after its resource-wide block, by key name."""
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for name, secret, rpm in self._keys:
            self._pool.register(self._format, name, permits=16, secret=secret, per_context={"rpm": rpm})
        self._reader = asyncio.create_task(self._read_events())

    async def _read_events(self) -> None:
        while True:
            self._seen()
            await asyncio.sleep(0.05)

    def blocked(self, name: str) -> bool:
        """Whether the pool blocked key `name` everywhere."""
        return name in self._blocked

    def _seen(self) -> None:
        """Folds the pool's events since the last call, oldest first."""
        for event in self._pool.events():
            if isinstance(event, repute.BlocklistedEvent) and event.context is None:
                self._blocked.add(event.value)
            elif isinstance(event, repute.LeasedEvent) and event.value in self._blocked:
                self.after_blocked[event.value] += 1

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        remaining = deadline - now()
        headers = {"x-rt-request": request.id}
        if self._format == "anthropic":
            call = self._client.messages.create(
                model=request.context, max_tokens=16, messages=PROMPT, timeout=max(0.05, remaining), extra_headers=headers
            )
        else:
            call = self._client.chat.completions.create(
                model=request.context, messages=PROMPT, timeout=max(0.05, remaining), extra_headers=headers
            )
        errors = (openai.OpenAIError, anthropic.AnthropicError, repute.ReputeError, asyncio.TimeoutError)
        try:
            await asyncio.wait_for(call, remaining)
        except errors:
            return Outcome(False, 0)
        return Outcome(True, 0)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        self._seen()
        assert self._pool.dropped_events() == 0, "every grant was seen"
        await self._client.close()
        self._pool.close()
