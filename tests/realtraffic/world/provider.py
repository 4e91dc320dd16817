"""A local LLM provider speaking OpenAI's Chat Completions format or
Anthropic's Messages format.

Run as ``python -m world.provider --seed S --port P [--format anthropic]``;
it serves ``POST /v1/chat/completions`` (openai) or ``POST /v1/messages``
(anthropic) on 127.0.0.1:P with the error bodies, status codes and headers
that provider documents, so its real SDK (and LiteLLM on top of it) parses
every answer as it would parse the provider's. The keys and what happens to
them are the same in both formats:

- each key has a requests-per-minute limit per model, enforced quantized, as
  OpenAI's rate-limit guide says limits may be (60,000 rpm enforced as 1,000
  per second): ceil(rpm/60) requests per 1 s slice, and rpm per 60 s;
  over it: 429 ``rate_limit_exceeded`` with ``retry-after`` (whole seconds),
  ``retry-after-ms`` and the ``x-ratelimit-*-requests`` headers;
- one key runs out of quota after a few requests: 429 ``insufficient_quota``
  with no retry-after (waiting does not help; billing does);
- one key is revoked a few seconds in: 401 ``invalid_api_key``;
- a few requests fail provider-wide (500 / 503 ``server_error``), more during
  a short overload, which is no key's fault.

In Anthropic's format: requests per minute are a token bucket per key and
model that refills continuously at rpm/60 a second and holds ceil(rpm/60)
(Anthropic documents a continuously replenished bucket, and that a per-minute
limit may be enforced over shorter intervals); over it, 429
``rate_limit_error`` with ``retry-after`` and the
``anthropic-ratelimit-requests-*`` headers (reset in RFC 3339); the
out-of-quota key answers 400 ``invalid_request_error`` "Your credit balance
is too low to access the Anthropic API..."; the revoked key 401
``authentication_error``; provider-wide failures are 500 ``api_error`` and,
during the overload, 529 ``overloaded_error``. Every error body is
``{"type": "error", "error": {"type", "message"}, "request_id"}``.

Ground truth is served on GET /__truth; POST /__start sets world second 0.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import secrets
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from aiohttp import web

MODELS: dict[str, tuple[tuple[str, float], ...]] = {
    "openai": (("gpt-4o-mini", 0.7), ("gpt-4o", 0.3)),
    "anthropic": (("claude-haiku-4-5", 0.7), ("claude-sonnet-4-5", 0.3)),
}
"""Models asked for per format, with their share of the requests."""

SLICE = 1.0
"""Seconds of one enforcement slice by default: rpm R allows ceil(R/60) per
slice. ``--slice 60`` is a provider that counts whole minutes only."""


@dataclass(frozen=True)
class Key:
    name: str
    secret: str
    rpm: int
    """The documented requests per minute, the same for each model (as
    OpenAI's usage tiers give gpt-4o and gpt-4o-mini the same rpm)."""
    revoked_at: float | None = None
    quota: int | None = None
    """Requests answered before the key's credit runs out."""


def draw_keys(seed: int, count: int = 6, format: str = "openai") -> list[Key]:
    """The keys of one world. Their rpm are project-level limits of a few
    hundred per minute (an organisation owner sets lower limits per project),
    so that a short run meets them."""
    rng = random.Random(f"keys-{seed}")
    names = [f"key-{i + 1}" for i in range(count)]
    revoked, no_quota = rng.sample(range(count), 2)
    keys = []
    for i, name in enumerate(names):
        keys.append(
            Key(
                name=name,
                secret=("sk-ant-api03-" if format == "anthropic" else "sk-proj-")
                + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(40)),
                rpm=rng.choice((60, 120, 180, 300, 600)),
                revoked_at=round(rng.uniform(1.0, 4.0), 2) if i == revoked else None,
                quota=rng.randint(20, 60) if i == no_quota else None,
            )
        )
    return keys


def duration(seconds: float) -> str:
    """A reset time in the form of OpenAI's ``x-ratelimit-reset-*`` headers
    ("20ms", "1.5s", "6m0s")."""
    if seconds < 1.0:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60.0:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s"


def _error(status: int, message: str, type_: str, code: str | None, headers: dict[str, str]) -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def _anthropic_error(status: int, type_: str, message: str, headers: dict[str, str]) -> web.Response:
    request_id = "req_" + secrets.token_hex(12)
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": request_id}
    return web.json_response(body, status=status, headers={**headers, "request-id": request_id})


@dataclass(frozen=True)
class Verdict:
    kind: str
    """revoked, quota, limited, overloaded, error or ok."""
    wait: float = 0.0
    """Seconds until the limit admits the next request (limited)."""


class Slices:
    """OpenAI's requests per minute, enforced quantized: ceil(rpm/60 × slice)
    per slice (1 s unless told), and rpm per 60 s."""

    def __init__(self, slice: float = SLICE) -> None:
        self.slice = slice
        self.slices: dict[tuple[str, str, int], int] = defaultdict(int)
        self.minute: dict[tuple[str, str], deque[float]] = defaultdict(deque)

    def _window(self, key: Key, model: str, now: float) -> deque[float]:
        window = self.minute[(key.name, model)]
        while window and window[0] <= now - 60.0:
            window.popleft()
        return window

    def take(self, key: Key, model: str, now: float) -> float | None:
        """Counts a request; the wait until one fits when it does not."""
        window = self._window(key, model, now)
        n = int(now // self.slice)
        if self.slices[(key.name, model, n)] >= math.ceil(key.rpm / 60 * self.slice) or len(window) >= key.rpm:
            return (n + 1) * self.slice - now if len(window) < key.rpm else window[0] + 60.0 - now
        self.slices[(key.name, model, n)] += 1
        window.append(now)
        return None

    def used(self, key: Key, model: str, now: float) -> int:
        return len(self._window(key, model, now))


class Bucket:
    """Anthropic's requests per minute: a bucket per key and model holding
    ceil(rpm/60), refilled continuously at rpm/60 a second."""

    def __init__(self) -> None:
        self.level: dict[tuple[str, str], tuple[float, float]] = {}

    def _level(self, key: Key, model: str, now: float) -> float:
        size = math.ceil(key.rpm / 60)
        level, at = self.level.get((key.name, model), (float(size), now))
        return min(float(size), level + (now - at) * key.rpm / 60)

    def take(self, key: Key, model: str, now: float) -> float | None:
        level = self._level(key, model, now)
        if level < 1.0:
            self.level[(key.name, model)] = (level, now)
            return (1.0 - level) * 60 / key.rpm
        self.level[(key.name, model)] = (level - 1.0, now)
        return None

    def headers(self, key: Key, model: str, now: float) -> dict[str, str]:
        size = math.ceil(key.rpm / 60)
        level = self._level(key, model, now)
        full = datetime.now(timezone.utc) + timedelta(seconds=(size - level) * 60 / key.rpm)
        return {
            "anthropic-ratelimit-requests-limit": str(key.rpm),
            "anthropic-ratelimit-requests-remaining": str(int(level)),
            "anthropic-ratelimit-requests-reset": full.isoformat(timespec="seconds").replace("+00:00", "Z"),
        }


class Provider:
    def __init__(self, seed: int, format: str, slice: float = SLICE) -> None:
        self.keys = {k.secret: k for k in draw_keys(seed, format=format)}
        self.meter: Slices | Bucket = Bucket() if format == "anthropic" else Slices(slice)
        rng = random.Random(f"provider-{seed}")
        self.overload_at = rng.uniform(3.0, 9.0)
        self.rng = random.Random(f"provider-run-{seed}")
        self.started = time.monotonic()
        self.answered: dict[str, int] = defaultdict(int)
        self.truth: dict[str, int] = defaultdict(int)
        self.per_key: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.attempts: dict[str, int] = defaultdict(int)
        self.first_401: set[str] = set()

    def now(self) -> float:
        return time.monotonic() - self.started

    def _count(self, key: Key | None, what: str) -> None:
        self.truth[what] += 1
        if key is not None:
            self.per_key[key.name][what] += 1

    def _limit_headers(self, key: Key, used: int, reset: float) -> dict[str, str]:
        return {
            "x-ratelimit-limit-requests": str(key.rpm),
            "x-ratelimit-remaining-requests": str(max(0, key.rpm - used)),
            "x-ratelimit-reset-requests": duration(reset),
        }

    def _verdict(self, key: Key | None, model: str, now: float) -> Verdict:
        """What the provider does with one request, counted in the truth."""
        self._count(key, "requests")
        if key is None or (key.revoked_at is not None and now >= key.revoked_at):
            if key is not None:
                if key.name in self.first_401:
                    self._count(key, "after_first_401")
                self.first_401.add(key.name)
            self._count(key, "401")
            return Verdict("revoked")
        if key.quota is not None and self.answered[key.name] >= key.quota:
            self._count(key, "insufficient_quota")
            return Verdict("quota")
        wait = self.meter.take(key, model, now)
        if wait is not None:
            self._count(key, "rate_limit_exceeded")
            return Verdict("limited", wait=wait)
        overloaded = self.overload_at <= now < self.overload_at + 1.5
        if self.rng.random() < (0.3 if overloaded else 0.02):
            self._count(None, "server_error")
            return Verdict("overloaded" if overloaded else "error")
        return Verdict("ok")

    async def _answered(self, key: Key) -> None:
        await asyncio.sleep(self.rng.uniform(0.1, 0.3))
        self.answered[key.name] += 1
        self._count(key, "200")

    async def completions(self, request: web.Request) -> web.Response:
        """OpenAI's Chat Completions."""
        now = self.now()
        payload = await request.json()
        model = str(payload.get("model", ""))
        self.attempts[request.headers.get("x-rt-request", "")] += 1
        secret = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        key = self.keys.get(secret)
        verdict = self._verdict(key, model, now)
        meter = self.meter
        assert isinstance(meter, Slices)
        if verdict.kind == "revoked":
            shown = f"{secret[:3]}...{secret[-4:]}" if len(secret) > 8 else "***"
            return _error(
                401,
                f"Incorrect API key provided: {shown}. You can find your API key on your account's API keys page.",
                "invalid_request_error",
                "invalid_api_key",
                {},
            )
        assert key is not None
        if verdict.kind == "quota":
            return _error(
                429,
                "You exceeded your current quota, please check your plan and billing details. For more "
                "information on this error, read the docs on error codes.",
                "insufficient_quota",
                "insufficient_quota",
                {},
            )
        used = meter.used(key, model, now)
        if verdict.kind == "limited":
            wait = verdict.wait
            headers = self._limit_headers(key, used, wait)
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            headers["retry-after-ms"] = str(max(1, round(wait * 1000)))
            return _error(
                429,
                f"Rate limit reached for {model} in organization org-realtraffic on requests per min (RPM): "
                f"Limit {key.rpm}, Used {used}, Requested 1. Please try again in {duration(wait)}. "
                "Visit your account's rate limits page to learn more.",
                "requests",
                "rate_limit_exceeded",
                headers,
            )
        if verdict.kind == "overloaded":
            return _error(503, "The engine is currently overloaded, please try again later.", "server_error", None, {})
        if verdict.kind == "error":
            return _error(
                500,
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
                {},
            )
        headers = self._limit_headers(key, used, used * 60.0 / key.rpm)
        await self._answered(key)
        body = {
            "id": "chatcmpl-" + secrets.token_hex(12),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok", "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
        }
        headers["x-request-id"] = "req_" + secrets.token_hex(16)
        return web.json_response(body, headers=headers)

    async def messages(self, request: web.Request) -> web.Response:
        """Anthropic's Messages."""
        now = self.now()
        payload = await request.json()
        model = str(payload.get("model", ""))
        self.attempts[request.headers.get("x-rt-request", "")] += 1
        # The API takes the key as `x-api-key` or, as the current SDK sends
        # it, as a bearer token.
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        key = self.keys.get(request.headers.get("x-api-key", bearer).strip())
        verdict = self._verdict(key, model, now)
        meter = self.meter
        assert isinstance(meter, Bucket)
        if verdict.kind == "revoked":
            return _anthropic_error(401, "authentication_error", "invalid x-api-key", {})
        assert key is not None
        if verdict.kind == "quota":
            return _anthropic_error(
                400,
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. "
                "Please go to Plans & Billing to upgrade or purchase credits.",
                {},
            )
        headers = meter.headers(key, model, now)
        if verdict.kind == "limited":
            headers["retry-after"] = str(max(1, math.ceil(verdict.wait)))
            return _anthropic_error(
                429,
                "rate_limit_error",
                f"This request would exceed your organization's rate limit of {key.rpm} requests per minute "
                f"(org: realtraffic, model: {model}). For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits.",
                headers,
            )
        if verdict.kind == "overloaded":
            return _anthropic_error(529, "overloaded_error", "Overloaded", {})
        if verdict.kind == "error":
            return _anthropic_error(500, "api_error", "Internal server error", {})
        await self._answered(key)
        body = {
            "id": "msg_" + secrets.token_hex(12),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        }
        headers["request-id"] = "req_" + secrets.token_hex(12)
        return web.json_response(body, headers=headers)

    async def start(self, _request: web.Request) -> web.Response:
        self.started = time.monotonic()
        return web.json_response({"ok": True})

    async def report(self, _request: web.Request) -> web.Response:
        attempts = sorted(v for k, v in self.attempts.items() if k)
        return web.json_response({"totals": dict(self.truth), "per_key": self.per_key, "attempts": attempts})


async def serve(seed: int, port: int, format: str, slice: float) -> None:
    provider = Provider(seed, format, slice)
    app = web.Application()
    app.router.add_post("/__start", provider.start)
    app.router.add_get("/__truth", provider.report)
    app.router.add_post("/v1/chat/completions", provider.completions)
    app.router.add_post("/v1/messages", provider.messages)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--format", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--slice", type=float, default=SLICE, help="seconds of an enforcement slice (openai format)")
    args = parser.parse_args()
    asyncio.run(serve(args.seed, args.port, args.format, args.slice))


if __name__ == "__main__":
    main()
