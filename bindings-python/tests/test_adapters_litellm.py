"""repute.litellm: the real LiteLLM Router choosing its deployments by
repute, against a local provider in the OpenAI format that answers by the
key a request carries, with OpenAI's documented error bodies."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price map
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import litellm  # noqa: E402
from litellm.exceptions import BadRequestError, InternalServerError  # noqa: E402
from litellm.router import Router  # noqa: E402

import repute  # noqa: E402
import repute.litellm  # noqa: E402

HI: list[Any] = [{"role": "user", "content": "hi"}]


class Provider:
    """OpenAI's Chat Completions on 127.0.0.1: `sk-dead` is refused (401
    `invalid_api_key`), `sk-broke` is out of quota (429
    `insufficient_quota`, no retry-after), `sk-busy` is rate limited (429
    `rate_limit_exceeded`, retry-after 30 s), the model `bad` is refused
    whatever the key (400), the model `broken` fails whatever the key (500);
    any other key answers, as server-sent events when asked to stream. `keys` lists the key of
    every request in arrival order."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(_Handler):
            provider = owner

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(status: int, message: str, type_: str, code: str | None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    provider: Provider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        key = self.headers.get("authorization", "")[len("Bearer ") :]
        with self.provider.lock:
            self.provider.keys.append(key)
        headers = {}
        if key == "sk-dead":
            status, body = _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        elif key == "sk-broke":
            status, body = _error(429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
        elif key == "sk-busy":
            status, body = _error(429, "Rate limit reached for requests.", "requests", "rate_limit_exceeded")
            headers = {"retry-after": "30"}
        elif payload.get("model") == "bad":
            status, body = _error(400, "The model `bad` does not exist.", "invalid_request_error", None)
        elif payload.get("model") == "broken":
            status, body = _error(500, "The server had an error while processing your request.", "server_error", None)
        elif payload.get("stream"):
            return self._stream(payload.get("model"), key)
        else:
            status, body = 200, {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": payload.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"hello from {key}"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }  # fmt: skip
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, model: str, key: str) -> None:
        chunks = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                  for delta, finish in (({"content": "hello from "}, None), ({"content": key}, None),
                                        ({}, "stop"))]  # fmt: skip
        data = "".join([f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def provider() -> Iterator[Provider]:
    server = Provider()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def callbacks() -> Iterator[None]:
    """Each test's logger off every list LiteLLM copied it to, so the next test's pool has the only one."""
    yield
    manager = litellm.logging_callback_manager
    lists = ("callbacks", "input_callback", "success_callback", "failure_callback")
    for name in (*lists, "_async_success_callback", "_async_failure_callback"):
        manager.remove_callbacks_by_type(getattr(litellm, name), repute.litellm.Logger)  # type: ignore[no-untyped-call]


def router(provider: Provider, *secrets: str, model: str = "gpt-x", retries: int = 4) -> Router:
    made: Router = Router(
        model_list=[
            {
                "model_name": model,
                "litellm_params": {"model": f"openai/{model}", "api_key": s, "api_base": provider.url},
                "model_info": {"id": s.replace("sk-", "key-")},
            }
            for s in secrets
        ],
        num_retries=retries,
        retry_after=0,
        disable_cooldowns=True,
    )
    return made


def adopt(pool: repute.Pool, r: Router, **options: Any) -> repute.litellm.Logger:
    repute.litellm.register(pool, r, kind="openai")
    logger = repute.litellm.Logger(pool, kind="openai", **options)
    litellm.callbacks = [logger]
    return logger


def cells(pool: repute.Pool, value: str) -> dict[str | None, repute.Cell]:
    return {c.context: c for c in pool.cells("openai", value)}


async def settled(pool: repute.Pool) -> None:
    """LiteLLM runs its success and failure callbacks as tasks after the call returns."""
    for _ in range(200):
        if pool.stats().live_leases == 0:
            return
        await asyncio.sleep(0.01)


def test_a_dead_key_a_spent_quota_and_a_rate_limit_are_each_tried_once_and_never_again(provider: Provider) -> None:
    pool = repute.Pool(strategy="first")
    r = router(provider, "sk-dead", "sk-broke", "sk-busy", "sk-ok")
    logger = adopt(pool, r)

    async def run() -> list[str | None]:
        answers = []
        for _ in range(3):
            done = await r.acompletion(model="gpt-x", messages=HI)
            answers.append(done.choices[0].message.content)
            await settled(pool)
        return answers

    assert asyncio.run(run()) == ["hello from sk-ok"] * 3
    assert provider.keys == ["sk-dead", "sk-broke", "sk-busy", "sk-ok", "sk-ok", "sk-ok"]
    dead = cells(pool, "key-dead")[None]
    assert dead.blocked and dead.blocked_until is None
    assert any(c.cause == "quota_exhausted" for c in cells(pool, "key-broke").values())
    busy = cells(pool, "key-busy")["gpt-x"]
    assert busy.cause == "rate_limited" and busy.cooling_until is not None
    assert 25 < busy.cooling_until - pool.now <= 30
    assert cells(pool, "key-ok")["gpt-x"].observations == 3
    assert pool.stats().live_leases == 0
    assert not logger._calls, "every call's attempts ended"


def test_a_streamed_answer_holds_its_lease_until_the_stream_is_read(provider: Provider) -> None:
    pool = repute.Pool()
    r = router(provider, "sk-a")
    adopt(pool, r)

    async def run() -> tuple[int, str]:
        stream = await r.acompletion(model="gpt-x", messages=HI, stream=True)
        held = pool.stats().live_leases
        text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
        await settled(pool)
        return held, text

    assert asyncio.run(run()) == (1, "hello from sk-a")
    assert pool.stats().live_leases == 0
    assert cells(pool, "key-a")["gpt-x"].observations == 1


def test_concurrent_calls_spread_over_the_keys_and_each_reports_its_own(provider: Provider) -> None:
    pool = repute.Pool()
    secrets = ("sk-a", "sk-b", "sk-c")
    r = router(provider, *secrets)
    adopt(pool, r)

    async def run() -> list[str | None]:
        calls = [r.acompletion(model="gpt-x", messages=HI) for _ in range(12)]
        answers = [done.choices[0].message.content for done in await asyncio.gather(*calls)]
        await settled(pool)
        return answers

    answers = asyncio.run(run())
    # One permit per key: at most three calls in flight, each on the key repute leased it.
    assert sorted(provider.keys) == sorted(str(a).removeprefix("hello from ") for a in answers)
    assert set(provider.keys) == set(secrets)
    seen = {s: provider.keys.count(s) for s in secrets}
    for s in secrets:
        assert cells(pool, s.replace("sk-", "key-"))["gpt-x"].observations == seen[s]
    assert pool.stats().live_leases == 0


def test_a_500_on_every_key_is_the_providers_and_blames_none(provider: Provider) -> None:
    pool = repute.Pool(strategy="first")
    r = router(provider, "sk-a", "sk-b", "sk-c", model="broken", retries=1)
    logger = adopt(pool, r)

    async def run() -> None:
        with pytest.raises(InternalServerError):
            await r.acompletion(model="broken", messages=HI)
        await settled(pool)

    asyncio.run(run())
    assert provider.keys == ["sk-a", "sk-b"]
    for value in ("key-a", "key-b", "key-c"):
        assert all(c.observations == 0 for c in pool.cells("openai", value))
    assert pool.stats().live_leases == 0
    assert not logger._calls, "LiteLLM's last retry ends the call"


def test_a_400_litellm_does_not_retry_is_delivered_with_its_lease_released(provider: Provider) -> None:
    pool = repute.Pool(strategy="first")
    r = router(provider, "sk-a", "sk-b", model="bad")
    adopt(pool, r)

    async def run() -> None:
        with pytest.raises(BadRequestError) as refused:
            await r.acompletion(model="bad", messages=HI)
        assert "does not exist" in str(refused.value)
        await settled(pool)

    asyncio.run(run())
    assert provider.keys == ["sk-a"]
    assert pool.stats().live_leases == 0
    assert all(c.observations == 0 for c in pool.cells("openai", "key-a")), "held back for a second opinion"


def test_bad_options_name_their_field(provider: Provider) -> None:
    pool = repute.Pool()
    for options, field in (
        ({"max_calls": 0}, "max_calls"),
        ({"label": ""}, "label"),
        ({"where": {"model_group": "x"}}, "where"),
        ({"attempts": 0}, "attempts"),
        ({"kind": 3}, "kind"),
    ):
        with pytest.raises(repute.InvalidInputError) as bad:
            repute.litellm.Logger(pool, **options)
        assert bad.value.field == field
    with pytest.raises(repute.InvalidInputError) as bad:
        repute.litellm.register(pool, [{"litellm_params": {"model": "openai/x"}, "model_info": {"id": "d1"}}], kind="k")
    assert bad.value.field == "model_name"
    with pytest.raises(repute.InvalidInputError) as bad:
        repute.litellm.Logger("not a pool")  # type: ignore[arg-type]
    assert bad.value.field == "pool"
