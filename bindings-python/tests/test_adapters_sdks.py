"""repute.openai, repute.anthropic and repute.genai: the real SDKs, over a
pool of keys, against a local provider that speaks their formats."""

from __future__ import annotations

import asyncio
from typing import Iterator

import anthropic
import httpx2
import openai
import pytest
from adapter_world import Provider
from google.genai import errors as genai_errors
from google.genai import types as genai_types

import repute
import repute.anthropic
import repute.genai
import repute.openai

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def provider() -> Iterator[Provider]:
    server = Provider()
    yield server
    server.close()


def keys(kind: str, *secrets: str) -> repute.Pool:
    pool = repute.Pool(strategy="first")
    for secret in secrets:
        pool.register(kind, secret.replace("sk-", "key-"), secret=secret)
    return pool


def cells(pool: repute.Pool, kind: str, value: str) -> dict[str | None, repute.Cell]:
    return {c.context: c for c in pool.cells(kind, value)}


def test_openai_moves_past_a_dead_key_a_spent_quota_and_a_rate_limit(provider: Provider) -> None:
    pool = keys("openai", "sk-dead", "sk-broke", "sk-busy", "sk-ok")
    client = repute.openai.client(pool, attempts=4, base_url=f"{provider.url}/v1", max_retries=0)
    done = client.chat.completions.create(model="gpt-x", messages=HI)  # type: ignore[arg-type]
    assert done.choices[0].message.content == "hello from sk-ok"
    assert provider.keys == ["sk-dead", "sk-broke", "sk-busy", "sk-ok"]
    again = client.chat.completions.create(model="gpt-x", messages=HI)  # type: ignore[arg-type]
    assert again.choices[0].message.content == "hello from sk-ok"
    assert provider.keys[4:] == ["sk-ok"], "the dead, spent and limited keys are not tried again"
    dead = cells(pool, "openai", "key-dead")[None]
    assert dead.blocked and dead.blocked_until is None
    busy = cells(pool, "openai", "key-busy")["gpt-x"]
    assert busy.cause == "rate_limited" and busy.cooling_until is not None
    assert 25 < busy.cooling_until - pool.now <= 30
    broke = cells(pool, "openai", "key-broke")
    assert any(c.cause == "quota_exhausted" for c in broke.values())
    assert pool.stats().live_leases == 0


def test_openai_streams_with_the_lease_held_until_the_stream_is_read(provider: Provider) -> None:
    pool = keys("openai", "sk-ok")
    client = repute.openai.client(pool, base_url=f"{provider.url}/v1", max_retries=0)
    stream = client.chat.completions.create(model="gpt-x", messages=HI, stream=True)  # type: ignore[arg-type]
    assert pool.stats().live_leases == 1
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "hello"
    assert pool.stats().live_leases == 0
    assert cells(pool, "openai", "key-ok")["gpt-x"].observations == 1


def test_the_same_400_on_two_keys_is_the_requests_and_blames_neither(provider: Provider) -> None:
    pool = keys("openai", "sk-a", "sk-b", "sk-c")
    client = repute.openai.client(pool, base_url=f"{provider.url}/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="bad", messages=HI)  # type: ignore[arg-type]
    assert refused.value.status_code == 400 and "does not exist" in refused.value.message
    assert provider.keys == ["sk-a", "sk-b"]
    for value in ("key-a", "key-b"):
        assert all(c.observations == 0 for c in pool.cells("openai", value))


def test_a_400_is_delivered_at_once_when_the_other_keys_are_paused(provider: Provider) -> None:
    """No deadline, the one other key paused an hour for its quota: the
    400 is not held for a second opinion that cannot come sooner."""

    async def run() -> None:
        pool = keys("openai", "sk-broke", "sk-ok")
        client = repute.openai.async_client(pool, base_url=f"{provider.url}/v1", max_retries=0)
        done = await client.chat.completions.create(model="gpt-x", messages=HI)  # type: ignore[arg-type]
        assert done.choices[0].message.content == "hello from sk-ok"
        with pytest.raises(openai.BadRequestError):
            bad = client.chat.completions.create(model="bad", messages=HI)  # type: ignore[arg-type]
            await asyncio.wait_for(bad, 10.0)
        ok = cells(pool, "openai", "key-ok")["bad"]
        assert (ok.cooling_until, ok.blocked, ok.consecutive_failures) == (None, False, 0), "read as the key working"
        await client.close()

    asyncio.run(run())
    assert provider.keys == ["sk-broke", "sk-ok", "sk-ok"]


def test_anthropic_moves_past_a_dead_key_and_a_spent_balance(provider: Provider) -> None:
    pool = keys("anthropic", "sk-dead", "sk-broke", "sk-ok")
    client = repute.anthropic.client(pool, base_url=provider.url, max_retries=0)
    message = client.messages.create(model="claude-x", max_tokens=16, messages=HI)  # type: ignore[arg-type]
    assert message.content[0].type == "text" and message.content[0].text == "hello from sk-ok"
    assert provider.keys == ["sk-dead", "sk-broke", "sk-ok"]
    assert cells(pool, "anthropic", "key-dead")[None].blocked
    assert any(c.cause == "quota_exhausted" for c in cells(pool, "anthropic", "key-broke").values())
    with client.messages.stream(model="claude-x", max_tokens=16, messages=HI) as stream:  # type: ignore[arg-type]
        assert pool.stats().live_leases == 1
        assert "".join(stream.text_stream) == "hello"
    assert pool.stats().live_leases == 0
    assert provider.keys[3:] == ["sk-ok"]


def test_gemini_moves_past_an_invalid_key_a_spent_day_and_a_rate_limit(provider: Provider) -> None:
    pool = keys("gemini", "sk-dead", "sk-broke", "sk-busy", "sk-ok")
    client = repute.genai.client(pool, attempts=4, http_options={"base_url": provider.url})
    done = client.models.generate_content(model="gemini-x", contents="hi")
    assert done.text == "hello from sk-ok"
    assert provider.keys == ["sk-dead", "sk-broke", "sk-busy", "sk-ok"]
    assert client.models.generate_content(model="gemini-x", contents="hi").text == "hello from sk-ok"
    assert provider.keys[4:] == ["sk-ok"], "the invalid, spent and limited keys are not tried again"
    dead = cells(pool, "gemini", "key-dead")[None]
    assert dead.blocked and dead.blocked_until is None, "Google's 400 API_KEY_INVALID: the key is dead"
    busy = cells(pool, "gemini", "key-busy")["gemini-x"]
    assert busy.cause == "rate_limited" and busy.cooling_until is not None
    assert 25 < busy.cooling_until - pool.now <= 30, "paused for the body's RetryInfo delay"
    broke = cells(pool, "gemini", "key-broke")[None]
    assert broke.cause == "quota_exhausted" and broke.cooling_until is not None
    assert broke.cooling_until - pool.now > 60, "a spent day pauses the key everywhere until the quota resets"
    text = "".join(c.text or "" for c in client.models.generate_content_stream(model="gemini-x", contents="hi"))
    assert text == "hello"
    assert pool.stats().live_leases == 0


def test_gemini_a_404_on_two_keys_is_the_requests(provider: Provider) -> None:
    pool = keys("gemini", "sk-a", "sk-b", "sk-c")
    client = repute.genai.client(pool, http_options={"base_url": provider.url})
    with pytest.raises(genai_errors.ClientError) as refused:
        client.models.generate_content(model="bad", contents="hi")
    assert refused.value.code == 404 and refused.value.status == "NOT_FOUND"
    assert provider.keys == ["sk-a", "sk-b"]
    for value in ("key-a", "key-b"):
        assert all(c.observations == 0 for c in pool.cells("gemini", value))


def test_gemini_over_an_asyncio_pool(provider: Provider) -> None:
    async def run() -> None:
        pool = await repute.AsyncPool.open(strategy="first")
        await pool.register("gemini", "key-dead", secret="sk-dead")
        await pool.register("gemini", "key-ok", secret="sk-ok")
        client = repute.genai.client(pool, http_options=genai_types.HttpOptions(base_url=provider.url))
        done = await client.aio.models.generate_content(model="gemini-x", contents="hi")
        assert done.text == "hello from sk-ok"
        assert (await pool.stats()).live_leases == 0
        await pool.close()

    asyncio.run(run())
    assert provider.keys == ["sk-dead", "sk-ok"]


def test_the_asyncio_clients(provider: Provider) -> None:
    async def run() -> None:
        pool = await repute.AsyncPool.open(strategy="first")
        await pool.register("openai", "key-busy", secret="sk-busy")
        await pool.register("openai", "key-ok", secret="sk-ok")
        await pool.register("anthropic", "key-dead", secret="sk-dead")
        await pool.register("anthropic", "key-ok", secret="sk-ok")
        gpt = repute.openai.async_client(pool, base_url=f"{provider.url}/v1", max_retries=0)
        done = await gpt.chat.completions.create(model="gpt-x", messages=HI)  # type: ignore[arg-type]
        assert done.choices[0].message.content == "hello from sk-ok"
        claude = repute.anthropic.async_client(pool, base_url=provider.url, max_retries=0)
        message = await claude.messages.create(model="claude-x", max_tokens=16, messages=HI)  # type: ignore[arg-type]
        assert message.content[0].type == "text" and message.content[0].text == "hello from sk-ok"
        assert (await pool.stats()).live_leases == 0
        await gpt.close()
        await claude.close()
        await pool.close()

    asyncio.run(run())
    assert provider.keys == ["sk-busy", "sk-ok", "sk-dead", "sk-ok"]


def test_the_helpers_check_their_options() -> None:
    pool = repute.Pool()
    for field, make in [
        ("deadline", lambda: repute.openai.client(pool, deadline=0)),
        ("attempts", lambda: repute.anthropic.client(pool, attempts=0)),
        ("http_client", lambda: repute.openai.client(pool, http_client=None)),
        ("pool", lambda: repute.anthropic.async_client(None)),  # type: ignore[arg-type]
        ("http_options.httpx_client", lambda: repute.genai.client(pool, http_options={"httpx_client": httpx2.Client()})),
        ("http_options", lambda: repute.genai.client(pool, http_options=3)),
        ("deadline", lambda: repute.genai.client(pool, deadline=-1)),
    ]:
        with pytest.raises(repute.InvalidInputError) as error:
            make()
        assert error.value.field == field
    assert isinstance(repute.anthropic.client(pool), anthropic.Anthropic)
