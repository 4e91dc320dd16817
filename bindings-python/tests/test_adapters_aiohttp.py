"""repute.aiohttp: a real aiohttp ClientSession with the middleware,
through real tinyproxy processes, and with keys against a local provider."""

from __future__ import annotations

import asyncio
from typing import Iterator

import aiohttp
import pytest
from adapter_world import Answer, Provider, Proxies, Target

import repute
import repute.aiohttp

SITE = "127.0.0.1"


@pytest.fixture(scope="module")
def proxies() -> Iterator[Proxies]:
    fleet = Proxies(2)
    yield fleet
    fleet.close()


@pytest.fixture
def target() -> Iterator[Target]:
    site = Target()
    yield site
    site.close()


async def proxy_pool(proxies: Proxies) -> repute.AsyncPool:
    pool = await repute.AsyncPool.open(strategy="first")
    for p in proxies.proxies:
        await pool.register("proxy", p.url)
    return pool


def test_a_ban_moves_the_request_and_a_body_holds_its_lease_until_read(proxies: Proxies, target: Target) -> None:
    a, b = proxies.proxies
    target.answers[a.exit] = Answer(403, {}, b"banned")

    async def run() -> None:
        pool = await proxy_pool(proxies)
        async with aiohttp.ClientSession(middlewares=[repute.aiohttp.middleware(pool, kind="proxy")]) as session:
            async with session.get(f"{target.url}/page") as response:
                assert (await pool.stats()).live_leases == 1
                assert (response.status, await response.text()) == (200, b.exit)
                assert (await pool.stats()).live_leases == 0
            async with session.get(f"{target.url}/unread") as response:
                assert (await pool.stats()).live_leases == 1
            assert (await pool.stats()).live_leases == 0
        banned = {c.context: c for c in await pool.cells("proxy", a.url)}[SITE]
        assert (banned.state, banned.cause) == ("cooling", "blocked")
        served = {c.context: c for c in await pool.cells("proxy", b.url)}[SITE]
        assert served.observations == 2
        await pool.close()

    asyncio.run(run())
    assert target.hits == [("/page", a.exit), ("/page", b.exit), ("/unread", b.exit)]


def test_the_same_400_on_two_proxies_is_delivered_blaming_neither(proxies: Proxies, target: Target) -> None:
    async def run() -> None:
        pool = await proxy_pool(proxies)
        async with aiohttp.ClientSession(middlewares=[repute.aiohttp.middleware(pool, kind="proxy")]) as session:
            async with session.get(f"{target.url}/bad") as response:
                assert (response.status, await response.json()) == (400, {"error": "bad request"})
        for p in proxies.proxies:
            assert all(c.observations == 0 for c in await pool.cells("proxy", p.url))
        assert (await pool.stats()).live_leases == 0
        await pool.close()

    asyncio.run(run())
    assert [exit for _, exit in target.hits] == [p.exit for p in proxies.proxies]


def test_keys_go_in_their_header_and_the_context_is_the_model() -> None:
    provider = Provider()

    async def run() -> None:
        pool = repute.Pool(strategy="first")
        pool.register("openai", "key-busy", secret="sk-busy")
        pool.register("openai", "key-ok", secret="sk-ok")
        async with aiohttp.ClientSession(middlewares=[repute.aiohttp.middleware(pool, kind="openai")]) as session:
            url = f"{provider.url}/v1/chat/completions"
            async with session.post(url, json={"model": "gpt-x", "messages": []}) as response:
                answer = await response.json()
        assert answer["choices"][0]["message"]["content"] == "hello from sk-ok"
        busy = {c.context: c for c in pool.cells("openai", "key-busy")}["gpt-x"]
        assert busy.cause == "rate_limited"

    asyncio.run(run())
    provider.close()
    assert provider.keys == ["sk-busy", "sk-ok"]


def test_bad_options_name_their_field() -> None:
    with pytest.raises(repute.InvalidInputError) as error:
        repute.aiohttp.middleware(repute.Pool(), timeout=-1.0)
    assert error.value.field == "timeout"
