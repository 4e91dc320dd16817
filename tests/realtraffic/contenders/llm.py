"""One attempt of a user request on an API key, with the provider's real
SDK: `openai` for the OpenAI format, `anthropic` for Anthropic's.

Shared by the key contenders (LiteLLM drives the SDKs itself). The SDKs' own
retries are off (`max_retries=0`): the contender is what decides whether and
where to try again.
"""

from __future__ import annotations

import inspect
import json
import time
from collections import Counter
from typing import Any

import anthropic
import httpx
import openai

from .base import UserRequest
from .web import Answer

PROMPT = [{"role": "user", "content": "Say ok."}]


class KeyClients:
    """One SDK client per key, kept for the run, and what each key's answers
    have told the contender for good."""

    format = "openai"

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._clients: dict[str, Any] = {}
        self.told: dict[tuple[str, str], float] = {}
        """When an answer first told the contender that a key is revoked
        ("401") or out of quota ("quota"), by (secret, what)."""
        self.after_told: Counter[tuple[str, str]] = Counter()
        """Attempts on a key begun after the contender had been told, by
        (secret, what). An attempt begins as the contender chooses the key
        (nothing awaits between the choice and the call), so one already in
        flight when the first answer came does not count: no client could
        have known."""

    def _new_client(self, secret: str) -> Any:
        return openai.AsyncOpenAI(
            base_url=f"{self._base_url}/v1",
            api_key=secret,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
        )

    def _client(self, secret: str) -> Any:
        client = self._clients.get(secret)
        if client is None:
            client = self._clients[secret] = self._new_client(secret)
        return client

    async def _call(self, secret: str, request: UserRequest, timeout: float) -> Any:
        return await self._client(secret).chat.completions.with_raw_response.create(
            model=request.context,
            messages=PROMPT,  # type: ignore[arg-type]
            timeout=max(0.05, timeout),
            extra_headers={"x-rt-request": request.id},
        )

    def quota_spent(self, status: int, error: dict[str, Any]) -> bool:
        """OpenAI: 429 with code `insufficient_quota`."""
        return status == 429 and error.get("code") == "insufficient_quota"

    def told_by(self, answer: Answer) -> str | None:
        """What an answer tells about its key for good: "401" revoked,
        "quota" out of quota, None nothing lasting."""
        if answer.status == 401:
            return "401"
        if answer.status is None:
            return None
        try:
            error = json.loads(answer.text).get("error") or {}
        except (ValueError, AttributeError):
            return None
        return "quota" if isinstance(error, dict) and self.quota_spent(answer.status, error) else None

    async def complete(self, secret: str, request: UserRequest, timeout: float) -> Answer:
        began = time.monotonic()
        answer = await self._complete(secret, request, timeout, began)
        told = self.told_by(answer)
        if told is not None:
            self.told.setdefault((secret, told), time.monotonic())
        for what in ("401", "quota"):
            at = self.told.get((secret, what))
            if at is not None and began > at:
                self.after_told[(secret, what)] += 1
        return answer

    async def _complete(self, secret: str, request: UserRequest, timeout: float, began: float) -> Answer:
        errors = anthropic if self.format == "anthropic" else openai
        try:
            raw = await self._call(secret, request, timeout)
        except errors.APIStatusError as e:
            return Answer(e.status_code, e.response.headers, e.response.text, time.monotonic() - began, None)
        except errors.APITimeoutError:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "timeout")
        except errors.APIConnectionError:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "connection_reset")
        # The body must parse as the SDK's model: the openai SDK's raw
        # response parses at once, the anthropic SDK's is awaited.
        parsed = raw.parse()
        if inspect.isawaitable(parsed):
            await parsed
        response: httpx.Response = raw.http_response
        return Answer(response.status_code, response.headers, response.text, time.monotonic() - began, None)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


class AnthropicClients(KeyClients):
    """The same with the `anthropic` SDK against Anthropic's Messages format."""

    format = "anthropic"

    def _new_client(self, secret: str) -> Any:
        return anthropic.AsyncAnthropic(
            base_url=self._base_url,
            api_key=secret,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(trust_env=False),
        )

    async def _call(self, secret: str, request: UserRequest, timeout: float) -> Any:
        return await self._client(secret).messages.with_raw_response.create(
            model=request.context,
            max_tokens=16,
            messages=PROMPT,  # type: ignore[arg-type]
            timeout=max(0.05, timeout),
            extra_headers={"x-rt-request": request.id},
        )

    def quota_spent(self, status: int, error: dict[str, Any]) -> bool:
        """Anthropic: 400 whose message says the credit balance is too low,
        or 402 `billing_error`."""
        message = str(error.get("message", "")).lower()
        return (status == 400 and "credit balance" in message) or error.get("type") == "billing_error"


def clients_for(format: str, base_url: str) -> KeyClients:
    return AnthropicClients(base_url) if format == "anthropic" else KeyClients(base_url)
