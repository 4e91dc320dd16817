"""repute.httpx: real httpx clients through real tinyproxy processes to a
local site that answers by the proxy a request came through."""

from __future__ import annotations

import asyncio
from typing import Iterator

import httpx
import pytest
from adapter_world import Answer, Proxies, Target, free_port

import repute
import repute._freed
import repute.httpx

SITE = "127.0.0.1"


@pytest.fixture(scope="module")
def proxies() -> Iterator[Proxies]:
    fleet = Proxies(3)
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


def cell(pool: repute.Pool, value: str, context: str | None) -> repute.Cell | None:
    return next((c for c in pool.cells("proxy", value) if c.context == context), None)


def test_a_request_goes_through_a_leased_proxy(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    first = proxies.proxies[0]
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        response = client.get(f"{target.url}/hello")
    assert (response.status_code, response.text) == (200, first.exit)
    assert target.hits == [("/hello", first.exit)]
    assert pool.stats().live_leases == 0
    reported = cell(pool, first.url, SITE)
    assert reported is not None and reported.observations == 1


def test_a_ban_moves_the_request_to_another_proxy_and_cools_only_that_site(
    pool: repute.Pool, proxies: Proxies, target: Target
) -> None:
    a, b = proxies.proxies[0], proxies.proxies[1]
    target.answers[a.exit] = Answer(403, {}, b"banned")
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        response = client.get(f"{target.url}/page")
    assert (response.status_code, response.text) == (200, b.exit)
    assert target.hits == [("/page", a.exit), ("/page", b.exit)]
    banned = cell(pool, a.url, SITE)
    assert banned is not None and banned.state == "cooling" and banned.cause == "blocked"
    overall = cell(pool, a.url, None)
    assert overall is not None and overall.state == "healthy", "the proxy still serves other sites"
    assert pool.stats().live_leases == 0


def test_a_429_pauses_the_proxy_for_its_retry_after(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    a, b = proxies.proxies[0], proxies.proxies[1]
    target.answers[a.exit] = Answer(429, {"Retry-After": "120"}, b"slow down")
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        assert client.get(f"{target.url}/x").text == b.exit
        assert client.get(f"{target.url}/y").text == b.exit, "the paused proxy is not chosen again"
    assert target.hits == [("/x", a.exit), ("/x", b.exit), ("/y", b.exit)]
    with pytest.raises(repute.NoResourceAvailableError) as refused:
        pool.acquire(SITE, 0.0, kind="proxy", exclude=[b.url, proxies.proxies[2].url])
    assert refused.value.retry_after is not None and 100 < refused.value.retry_after <= 120


def test_the_same_400_on_two_proxies_is_the_requests_own(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    a, b = proxies.proxies[0], proxies.proxies[1]
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        response = client.get(f"{target.url}/bad")
    assert (response.status_code, response.json()) == (400, {"error": "bad request"})
    assert target.hits == [("/bad", a.exit), ("/bad", b.exit)], "one more proxy tells whose fault it is"
    for p in (a, b):
        assert all(c.observations == 0 for c in pool.cells("proxy", p.url)), "neither proxy is blamed"
    assert pool.stats().live_leases == 0


def test_a_dead_proxy_is_reported_and_the_request_moves_on(target: Target, proxies: Proxies) -> None:
    pool = repute.Pool(strategy="first")
    dead = f"http://127.0.0.1:{free_port()}"
    pool.register("proxy", dead)
    pool.register("proxy", proxies.proxies[0].url)
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        assert client.get(f"{target.url}/z").text == proxies.proxies[0].exit
    failed = cell(pool, dead, SITE)
    assert failed is not None and (failed.observations, failed.consecutive_failures) == (1, 1)


def test_a_streamed_body_holds_its_lease_until_it_is_read(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        with client.stream("GET", f"{target.url}/stream") as response:
            assert pool.stats().live_leases == 1
            assert cell(pool, proxies.proxies[0].url, SITE) is None, "reported once the body ends"
            assert response.read() == proxies.proxies[0].exit.encode()
            assert pool.stats().live_leases == 0
        with client.stream("GET", f"{target.url}/closed"):
            assert pool.stats().live_leases == 1
    assert pool.stats().live_leases == 0
    reported = cell(pool, proxies.proxies[0].url, SITE)
    assert reported is not None and reported.observations == 2


def test_the_context_comes_from_the_request_or_the_option(pool: repute.Pool, target: Target, proxies: Proxies) -> None:
    url = proxies.proxies[0].url
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy", context="shop")) as client:
        client.get(f"{target.url}/a")
        client.get(f"{target.url}/b", extensions={"repute.context": "checkout"})
    by_path = repute.httpx.Transport(pool, kind="proxy", context=lambda r: r.url.path.strip("/"))
    with httpx.Client(transport=by_path) as client:
        client.get(f"{target.url}/c")
    assert [c.context for c in pool.cells("proxy", url)] == [None, "c", "checkout", "shop"]


def test_a_bounded_cache_of_proxy_transports(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    transport = repute.httpx.Transport(pool, kind="proxy", max_proxies=1)
    exits = []
    with httpx.Client(transport=transport) as client:
        for i in range(3):
            for p in proxies.proxies[:i]:
                pool.block("proxy", p.url, context=str(i))
            exits.append(client.get(f"{target.url}/{i}", extensions={"repute.context": str(i)}).text)
        assert len(transport._proxied._clients) == 1, "one inner transport kept, the others closed"
    assert exits == [p.exit for p in proxies.proxies]


def test_bad_options_name_their_field(pool: repute.Pool) -> None:
    bad: list[tuple[str, dict[str, object]]] = [
        ("attempts", {"attempts": 0}),
        ("attempts", {"attempts": 17}),
        ("timeout", {"timeout": 0.0}),
        ("max_proxies", {"max_proxies": 0}),
        ("context", {"context": 5}),
        ("kind", {"kind": 5}),
        ("where", {"where": "region"}),
    ]
    for field, options in bad:
        with pytest.raises(repute.InvalidInputError) as error:
            repute.httpx.Transport(pool, **options)  # type: ignore[arg-type]
        assert error.value.field == field, options
    with pytest.raises(repute.InvalidInputError) as error:
        repute.httpx.Transport("memory")  # type: ignore[arg-type]
    assert error.value.field == "pool"


def test_nothing_to_lease_raises_the_refusal(target: Target) -> None:
    pool = repute.Pool()
    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy", timeout=0.05)) as client:
        with pytest.raises(repute.NoResourceAvailableError):
            client.get(f"{target.url}/none")
    assert target.hits == []


def test_the_asyncio_transport(proxies: Proxies, target: Target) -> None:
    a, b = proxies.proxies[0], proxies.proxies[1]
    target.answers[a.exit] = Answer(403)

    async def run() -> None:
        pool = await repute.AsyncPool.open(strategy="first")
        for p in proxies.proxies:
            await pool.register("proxy", p.url)
        async with httpx.AsyncClient(transport=repute.httpx.AsyncTransport(pool, kind="proxy")) as client:
            response = await client.get(f"{target.url}/async")
            assert (response.status_code, response.text) == (200, b.exit)
            async with client.stream("GET", f"{target.url}/stream") as streamed:
                assert (await pool.stats()).live_leases == 1
                assert await streamed.aread() == b.exit.encode()
            bad = await client.get(f"{target.url}/bad")
            assert bad.status_code == 400
        assert (await pool.stats()).live_leases == 0
        await pool.close()

    asyncio.run(run())
    assert target.hits == [
        ("/async", a.exit),
        ("/async", b.exit),
        ("/stream", b.exit),
        ("/bad", b.exit),
        ("/bad", proxies.proxies[2].exit),
    ]


def test_httpx2_gets_the_same_transports(pool: repute.Pool, proxies: Proxies, target: Target) -> None:
    import httpx2

    import repute.httpx2

    a, b = proxies.proxies[0], proxies.proxies[1]
    target.answers[a.exit] = Answer(403)
    with httpx2.Client(transport=repute.httpx2.Transport(pool, kind="proxy")) as client:
        response = client.get(f"{target.url}/two")
    assert (response.status_code, response.text) == (200, b.exit)
    assert target.hits == [("/two", a.exit), ("/two", b.exit)]
    assert pool.stats().live_leases == 0


def test_an_inner_answer_already_read_is_finished_at_once() -> None:
    pool = repute.Pool()
    pool.register("site", "direct")
    transport = repute.httpx.Transport(pool, kind="site")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"ok")

    transport._direct = httpx.MockTransport(answer)  # type: ignore[assignment]
    with httpx.Client(transport=transport) as client:
        assert [client.get("http://127.0.0.1/").text for _ in range(2)] == ["ok", "ok"]
    assert pool.stats().live_leases == 0
    assert next(c for c in pool.cells("site", "direct") if c.context == SITE).observations == 2


@pytest.mark.usefixtures("sleeps_until_woken")
def test_the_asyncio_transport_wakes_the_request_waiting_for_the_permit_it_frees() -> None:
    pool = repute.Pool()
    pool.register("site", "direct")
    transport = repute.httpx.AsyncTransport(pool, kind="site")
    answered = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/first":
            await answered.wait()
        return httpx.Response(200, content=b"ok")

    transport._direct = httpx.MockTransport(answer)  # type: ignore[assignment]

    async def main() -> list[str]:
        async with httpx.AsyncClient(transport=transport) as client:
            first = asyncio.create_task(client.get("http://127.0.0.1/first"))
            while pool.stats().live_leases == 0:
                await asyncio.sleep(0)
            second = asyncio.create_task(client.get("http://127.0.0.1/second"))
            while not repute._freed.freed(pool)._line:
                await asyncio.sleep(0)
            answered.set()
            return [r.text for r in await asyncio.wait_for(asyncio.gather(first, second), 5.0)]

    assert asyncio.run(main()) == ["ok", "ok"]
    assert pool.stats().live_leases == 0


def test_a_streamed_response_let_go_of_unread_gives_its_lease_back(
    pool: repute.Pool, proxies: Proxies, target: Target
) -> None:
    import gc

    with httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy")) as client:
        response = client.send(client.build_request("GET", f"{target.url}/stream"), stream=True)
        assert pool.stats().live_leases == 1
        del response
        gc.collect()
        assert pool.stats().live_leases == 0
    assert cell(pool, proxies.proxies[0].url, SITE) is None, "a body nobody read is not reported"


def test_a_request_the_pool_knows_cannot_be_served_in_time_fails_at_once(proxies: Proxies, target: Target) -> None:
    # The pool clock never moves: a transport that waited for a grant the
    # pool knows is further away than the request's timeout would hang.
    pool = repute.Pool(strategy="first", clock=repute.ManualClock())
    for p in proxies.proxies:
        pool.register("proxy", p.url)
    for p in proxies.proxies:
        target.answers[p.exit] = Answer(403, {}, b"banned")
    transport = repute.httpx.Transport(pool, kind="proxy", attempts=len(proxies.proxies), timeout=5.0)
    with httpx.Client(transport=transport) as client:
        assert client.get(f"{target.url}/a").status_code == 403
        banned = [cell(pool, p.url, SITE) for p in proxies.proxies]
        assert [c.cause if c else None for c in banned] == ["blocked"] * len(proxies.proxies)
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            client.get(f"{target.url}/b")
    # Every site ban's first early trial is 10 s away, past the 5 s timeout.
    assert (refused.value.cooling, refused.value.retry_after, refused.value.settled) == (3, 10.0, True)
    assert refused.value.expected_after == 300.0, "a ban is expected to hold to its end"
    # A timeout the early trials come within, but not the bans' end: a trial
    # mostly finds the ban still on, so the request fails at once too.
    longer = repute.httpx.Transport(pool, kind="proxy", attempts=len(proxies.proxies), timeout=60.0)
    with httpx.Client(transport=longer) as client, pytest.raises(repute.NoResourceAvailableError):
        client.get(f"{target.url}/c")
    assert [path for path, _ in target.hits] == ["/a"] * len(proxies.proxies)
    pool.close()
