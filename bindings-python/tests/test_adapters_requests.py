"""repute.requests: a real requests Session through real tinyproxy
processes, and with a pool of keys against a local provider."""

from __future__ import annotations

from typing import Iterator

import pytest
import requests
from adapter_world import Answer, Provider, Proxies, Target

import repute
import repute.requests

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


@pytest.fixture
def pool(proxies: Proxies) -> Iterator[repute.Pool]:
    pool = repute.Pool(strategy="first")
    for p in proxies.proxies:
        pool.register("proxy", p.url)
    yield pool
    pool.close()


def session(adapter: repute.requests.Adapter) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.mount("http://", adapter)
    return s


def context_cell(pool: repute.Pool, value: str) -> repute.Cell | None:
    return next((c for c in pool.cells("proxy", value) if c.context == SITE), None)


def test_a_ban_moves_the_request_to_another_proxy(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    a, b = proxies.proxies
    target.answers[a.exit] = Answer(403, {}, b"banned")
    with session(repute.requests.Adapter(pool, kind="proxy")) as s:
        response = s.get(f"{target.url}/page")
    assert (response.status_code, response.text) == (200, b.exit)
    assert target.hits == [("/page", a.exit), ("/page", b.exit)]
    banned, served = context_cell(pool, a.url), context_cell(pool, b.url)
    assert banned is not None and (banned.state, banned.cause) == ("cooling", "blocked")
    assert served is not None and served.observations == 1
    assert pool.stats().live_leases == 0


def test_a_streamed_body_holds_its_lease_until_it_is_read(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    with session(repute.requests.Adapter(pool, kind="proxy")) as s:
        response = s.get(f"{target.url}/stream", stream=True)
        assert pool.stats().live_leases == 1
        assert response.content == proxies.proxies[0].exit.encode()
        assert pool.stats().live_leases == 0
        with s.get(f"{target.url}/closed", stream=True):
            assert pool.stats().live_leases == 1
        assert pool.stats().live_leases == 0


def test_the_same_400_on_two_proxies_is_delivered_blaming_neither(
    pool: repute.Pool, proxies: Proxies, target: Target
) -> None:
    with session(repute.requests.Adapter(pool, kind="proxy")) as s:
        response = s.get(f"{target.url}/bad")
    assert (response.status_code, response.json()) == (400, {"error": "bad request"})
    assert [exit for _, exit in target.hits] == [p.exit for p in proxies.proxies]
    assert all(c.observations == 0 for p in proxies.proxies for c in pool.cells("proxy", p.url))


def test_a_bounded_set_of_proxy_managers(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    adapter = repute.requests.Adapter(pool, kind="proxy", max_proxies=1)
    target.answers[proxies.proxies[0].exit] = Answer(403)
    with session(adapter) as s:
        assert s.get(f"{target.url}/x").text == proxies.proxies[1].exit
    assert list(adapter.proxy_manager) == [proxies.proxies[1].url]


def test_keys_go_in_their_header(target: Target) -> None:
    provider = Provider()
    pool = repute.Pool(strategy="first")
    pool.register("openai", "key-dead", secret="sk-dead")
    pool.register("openai", "key-ok", secret="sk-ok")
    with session(repute.requests.Adapter(pool, kind="openai")) as s:
        response = s.post(f"{provider.url}/v1/chat/completions", json={"model": "gpt-x", "messages": []})
    provider.close()
    assert response.json()["choices"][0]["message"]["content"] == "hello from sk-ok"
    assert provider.keys == ["sk-dead", "sk-ok"]
    assert {c.context for c in pool.cells("openai", "key-ok")} == {None, "gpt-x"}


def test_bad_options_name_their_field(pool: repute.Pool) -> None:
    for field, options in [("attempts", {"attempts": 0}), ("max_proxies", {"max_proxies": -1})]:
        with pytest.raises(repute.InvalidInputError) as error:
            repute.requests.Adapter(pool, **options)  # type: ignore[arg-type]
        assert error.value.field == field
