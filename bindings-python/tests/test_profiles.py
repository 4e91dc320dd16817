"""What an answer means depends on what the resource is: a proxy's 403 is
one site refusing one exit for a while, an API key's quota error pauses the
key until its quota can have reset, a provider's overload is no key's fault.
The tables are the host's; these tests check that Python reaches them."""

from __future__ import annotations

import asyncio
import json

import pytest

import repute

QUOTA = json.dumps(
    {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
)
RATE = json.dumps(
    {
        "error": {
            "message": "Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, "
            "Requested 1. Please try again in 20s.",
            "type": "requests",
            "param": None,
            "code": "rate_limited_exceeded",
        }
    }
)


def test_a_site_refusing_a_proxy_cools_that_proxy_for_that_site_only(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", seed=7)
    pool.register("proxy", "p1")
    with pool.acquire("shop.example") as lease:
        lease.report_http(403, latency=0.1)
    shop = pool.cells("proxy", "p1")[1]
    assert (shop.context, shop.state, shop.cause, shop.cooling_until) == (
        "shop.example",
        "cooling",
        repute.FailureKind.BLOCKED,
        300.0,
    )
    elsewhere = pool.try_acquire("news.example")
    assert elsewhere is not None, "another site still gets the proxy"
    elsewhere.release()
    assert pool.try_acquire("shop.example") is None
    clock.advance(300.0)
    trial = pool.acquire("shop.example")
    assert trial.lease_kind == "trial"
    trial.report_http(403, latency=0.1)
    trial.release()
    assert pool.cells("proxy", "p1")[1].cooling_until == 300.0 + 600.0, "a refusal in a row doubles the ban"
    clock.advance(600.0)
    with pool.acquire("shop.example") as lease:
        lease.report_http(200, latency=0.1)
    assert pool.cells("proxy", "p1")[1].state == "recovering", "a success ends the ban"


def test_a_kind_takes_the_profile_declared_for_it(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", seed=7, profiles={"residential": "proxy"})
    pool.register("residential", "r1")
    pool.register("account", "a1")
    pool.report_http("residential", "r1", "shop.example", 403)
    pool.report_http("account", "a1", "shop.example", 403)
    assert pool.cells("residential", "r1")[1].cause == repute.FailureKind.BLOCKED
    assert [r.value for r in pool.resources() if r.blocked] == ["a1"], "generic: a 403 blocks everywhere"
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(profiles={"residential": "socks"})  # type: ignore[dict-item]
    assert (caught.value.field, caught.value.rule) == (
        "profiles",
        "must be one of generic, proxy, api-key, openai, anthropic, gemini",
    )


def test_an_out_of_quota_key_pauses_until_its_quota_can_have_reset(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", seed=7)
    pool.register("openai", "k1")
    with pool.acquire("gpt-4o") as lease:
        lease.report_http(429, latency=0.05, body=QUOTA)
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("gpt-4o-mini", timeout=0)
    assert (caught.value.rate_limited, caught.value.retry_after) == (1, 3600.0)
    clock.advance(3600.0)
    assert pool.try_acquire("gpt-4o") is not None


def test_a_rate_limit_waits_as_long_as_the_body_or_headers_say(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", seed=7)
    pool.register("openai", "k1")
    pool.report_http("openai", "k1", "gpt-4o", 429, body=RATE.encode())
    assert pool.cells("openai", "k1")[1].cooling_until == 20.0
    pool.report_http("openai", "k1", "o3", 429, headers={"retry-after-ms": "1500"}, body=RATE)
    assert pool.cells("openai", "k1")[2].cooling_until == 1.5


def test_a_provider_overload_is_no_key_s_fault(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, strategy="first", seed=7)
    pool.register("anthropic", "k1")
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    for _ in range(5):
        with pool.acquire("claude") as lease:
            lease.report_http(529, latency=0.2, body=overloaded)
    cells = pool.cells("anthropic", "k1")
    assert [(c.context, c.observations, c.score) for c in cells] == [(None, 0, 0)], "nothing was reported"


def test_a_bad_body_is_named(pool: repute.Pool) -> None:
    pool.register("openai", "k1")
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.report_http("openai", "k1", "gpt", 429, body=42)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.rule) == ("body", "must be str or bytes")


def test_the_asyncio_layer_passes_the_body(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first", seed=7, profiles={"llm": "openai"})
        await pool.register("llm", "k1")
        lease = await pool.acquire("gpt-4o")
        await lease.report_http(429, body=QUOTA)
        await lease.release()
        await pool.report_http("llm", "k1", "o3", 401, body="{}")
        assert await pool.try_acquire("gpt-4o") is None
        assert pool.pool.resources()[0].blocked

    asyncio.run(main())
