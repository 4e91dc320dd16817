"""repute through its SDK adapters, as a user adopts them in one line:
`repute.openai.async_client(pool, ...)` (or `repute.anthropic`'s) over the
keys, registered as the README's API-key tour does (kind "openai" or
"anthropic", the secret, the documented rpm per model). The adapter leases
a key per attempt, sets its credential and moves the request on as the
answer says; the SDK's own retries are off, as for every contender; its `deadline` is
the harness's per-request budget.
Attempts, and attempts on a key after it was known revoked or out of
quota, are counted where they arrive, at the provider."""

from __future__ import annotations

import asyncio
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

    async def start(self) -> None:
        for name, secret, rpm in self._keys:
            self._pool.register(self._format, name, permits=16, secret=secret, per_context={"rpm": rpm})

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
        await self._client.close()
        self._pool.close()
