"""One attempt of a user request on an API key, with the real `openai` SDK.

Shared by the key contenders (LiteLLM drives the SDK itself). The SDK's own
retries are off (`max_retries=0`): the contender is what decides whether and
where to try again.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import httpx
import openai

from .base import UserRequest
from .web import Answer

PROMPT = [{"role": "user", "content": "Say ok."}]


class KeyClients:
    """One AsyncOpenAI client per key, kept for the run."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        self.told: dict[tuple[str, str], float] = {}
        """When an answer first told the contender that a key is revoked
        ("401") or out of quota ("quota"), by (secret, what)."""
        self.after_told: Counter[tuple[str, str]] = Counter()
        """Attempts on a key begun after the contender had been told, by
        (secret, what). An attempt begins as the contender chooses the key
        (nothing awaits between the choice and the call), so one already in
        flight when the first answer came does not count: no client could
        have known."""

    def _client(self, secret: str) -> openai.AsyncOpenAI:
        client = self._clients.get(secret)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=self._base_url,
                api_key=secret,
                max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
            )
            self._clients[secret] = client
        return client

    async def complete(self, secret: str, request: UserRequest, timeout: float) -> Answer:
        began = time.monotonic()
        answer = await self._complete(secret, request, timeout, began)
        told = _told(answer)
        if told is not None:
            self.told.setdefault((secret, told), time.monotonic())
        for what in ("401", "quota"):
            at = self.told.get((secret, what))
            if at is not None and began > at:
                self.after_told[(secret, what)] += 1
        return answer

    async def _complete(self, secret: str, request: UserRequest, timeout: float, began: float) -> Answer:
        try:
            raw = await self._client(secret).chat.completions.with_raw_response.create(
                model=request.context,
                messages=PROMPT,  # type: ignore[arg-type]
                timeout=max(0.05, timeout),
                extra_headers={"x-rt-request": request.id},
            )
        except openai.APIStatusError as e:
            return Answer(e.status_code, e.response.headers, e.response.text, time.monotonic() - began, None)
        except openai.APITimeoutError:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "timeout")
        except openai.APIConnectionError:
            return Answer(None, httpx.Headers(), "", time.monotonic() - began, "connection_reset")
        raw.parse()
        return Answer(raw.status_code, raw.headers, raw.text, time.monotonic() - began, None)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def _told(answer: Answer) -> str | None:
    """What an answer tells about its key for good: "401" revoked, "quota"
    out of quota, None nothing lasting."""
    if answer.status == 401:
        return "401"
    if answer.status != 429:
        return None
    try:
        error = json.loads(answer.text).get("error") or {}
    except (ValueError, AttributeError):
        return None
    return "quota" if isinstance(error, dict) and error.get("code") == "insufficient_quota" else None
