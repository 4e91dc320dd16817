"""repute.crawlee: a real Crawlee HttpCrawler through real tinyproxy
processes to a local site that answers by the proxy a request came through."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest
from adapter_world import Answer, Proxies, Target, free_port
from crawlee.crawlers import HttpCrawler, HttpCrawlingContext
from crawlee.storage_clients import MemoryStorageClient

import repute
import repute.crawlee


@pytest.fixture
def world() -> Iterator[tuple[Proxies, Target]]:
    proxies, target = Proxies(3), Target()
    yield proxies, target
    target.close()
    proxies.close()


def crawl(proxies: repute.crawlee.Proxies, urls: list[str]) -> list[dict[str, Any]]:
    """The pages the crawler handled: url, body (the exit address) and proxy."""
    crawler = HttpCrawler(
        proxy_configuration=proxies.configuration(),
        storage_client=MemoryStorageClient(),
        max_request_retries=3,
        max_session_rotations=5,
        configure_logging=False,
    )
    proxies.attach(crawler)
    pages: list[dict[str, Any]] = []

    @crawler.router.default_handler
    async def handle(context: HttpCrawlingContext) -> None:
        body = (await context.http_response.read()).decode()
        pages.append({"url": context.request.url, "exit": body, "proxy": context.proxy_info and context.proxy_info.url})

    asyncio.run(crawler.run(urls))
    return pages


def cell(pool: repute.Pool, value: str) -> repute.Cell:
    return {c.context: c for c in pool.cells("proxy", value)}["127.0.0.1"]


def test_a_crawl_moves_past_a_dead_a_banned_and_a_limited_proxy(world: tuple[Proxies, Target]) -> None:
    proxies, target = world
    banned, limited, good = proxies.proxies
    target.answers[banned.exit] = Answer(403, {}, b"forbidden")
    target.answers[limited.exit] = Answer(429, {"retry-after": "30"}, b"slow down")
    dead = f"http://127.0.0.1:{free_port()}"
    pool = repute.Pool(strategy="first")
    for url in (dead, banned.url, limited.url, good.url):
        pool.register("proxy", url)
    leased = repute.crawlee.Proxies(pool, attempts=6)
    urls = [f"{target.url}/page/{i}" for i in range(5)]

    pages = crawl(leased, urls)

    assert sorted(p["url"] for p in pages) == urls
    assert all(p["exit"] == good.exit and p["proxy"] == good.url for p in pages)
    hits = [exit for _, exit in target.hits]
    assert hits.count(banned.exit) == 1 and hits.count(limited.exit) == 1 and hits.count(good.exit) == 5
    assert cell(pool, dead).consecutive_failures >= 1
    assert cell(pool, dead).consecutive_failures == cell(pool, dead).observations
    assert cell(pool, banned.url).cause == "blocked"
    limited_cell = cell(pool, limited.url)
    assert limited_cell.cause == "rate_limited" and limited_cell.cooling_until is not None
    assert 25 < limited_cell.cooling_until - pool.now <= 30
    assert cell(pool, good.url).observations == 5
    assert pool.stats().live_leases == 0
    assert not leased._requests, "every request's attempts ended"


def test_bad_options_name_their_field(world: tuple[Proxies, Target]) -> None:
    pool = repute.Pool()
    for options, field in (({"kind": ""}, "kind"), ({"attempts": 0}, "attempts"), ({"timeout": 0}, "timeout")):
        with pytest.raises(repute.InvalidInputError) as bad:
            repute.crawlee.Proxies(pool, **options)
        assert bad.value.field == field
    crawler = HttpCrawler(storage_client=MemoryStorageClient(), configure_logging=False)

    @crawler.error_handler
    async def own(context: Any, error: Exception) -> None:
        pass

    with pytest.raises(repute.InvalidInputError) as bad:
        repute.crawlee.Proxies(pool).attach(crawler)
    assert bad.value.field == "crawler" and "Proxies.errored" in str(bad.value)
