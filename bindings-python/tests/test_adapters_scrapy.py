"""repute.scrapy: a real Scrapy crawl, in its own process (Scrapy's reactor
is process-wide), through real tinyproxy processes to a local site that
answers by the proxy a request came through."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest
from adapter_world import Answer, Proxies, Target, free_port, wait_for_port

CRAWL = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import Crawler, CrawlerProcess
    from scrapy.utils.reactor import install_reactor
    import repute, repute.scrapy

    config = json.loads(sys.argv[1])

    class Captcha:
        def response_is_ban(self, request, response):
            return b"captcha" in response.body

        def exception_is_ban(self, request, exception):
            return True

    class Pages(scrapy.Spider):
        name = "pages"
        items = []

        async def start(self):
            for i in range(config["pages"]):
                yield scrapy.Request(f"{config['target']}/page/{i}")

        def parse(self, response):
            Pages.items.append({"url": response.url, "exit": response.text,
                                "proxy": response.meta["proxy"], "slot": response.meta["download_slot"]})

    pool = repute.Pool(strategy="first")
    settings = {
        "REPUTE_POOL": "__main__.pool",
        "ROTATING_PROXY_LIST": config["proxies"],
        "ROTATING_PROXY_BAN_POLICY": Captcha,
        "DOWNLOADER_MIDDLEWARES": {"repute.scrapy.ProxyMiddleware": 610},
        "CONCURRENT_REQUESTS": 4,
        "DOWNLOAD_TIMEOUT": 10,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        **config["settings"],
    }
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    process = CrawlerProcess(settings)
    bad = {}
    for name, value in config["bad"].items():
        try:
            repute.scrapy.ProxyMiddleware.from_crawler(Crawler(Pages, {**settings, name: value}))
        except repute.InvalidInputError as e:
            bad[name] = e.field
    process.crawl(Pages)
    process.start()
    cells = {r.value: {c.context: [c.cause, c.blocked, c.cooling_until and c.cooling_until - pool.now, c.observations,
                                  c.consecutive_failures]
                 for c in pool.cells("proxy", r.value)} for r in pool.resources()}
    values = [r.value for r in pool.resources()]
    print(json.dumps({"items": Pages.items, "cells": cells, "live": pool.stats().live_leases, "bad": bad,
                      "values": values}))
    """
)


@pytest.fixture
def world() -> Iterator[tuple[Proxies, Target]]:
    proxies, target = Proxies(4), Target()
    yield proxies, target
    target.close()
    proxies.close()


def crawl(
    target: Target, proxies: list[str], pages: int, bad: dict[str, Any], tmp: Path, **settings: Any
) -> dict[str, Any]:
    script = tmp / "crawl.py"
    script.write_text(CRAWL)
    config = json.dumps({"target": target.url, "proxies": proxies, "pages": pages, "bad": bad, "settings": settings})
    done = subprocess.run([sys.executable, str(script), config], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_crawl_moves_past_a_dead_a_banned_a_limited_and_a_captcha_proxy(
    world: tuple[Proxies, Target], tmp_path: Path
) -> None:
    proxies, target = world
    banned, limited, captcha, good = proxies.proxies
    target.answers[banned.exit] = Answer(403, {}, b"forbidden")
    target.answers[limited.exit] = Answer(429, {"retry-after": "30"}, b"slow down")
    target.answers[captcha.exit] = Answer(200, {}, b"solve this captcha")
    dead = f"127.0.0.1:{free_port()}"
    listed = [dead] + [p.url.removeprefix("http://") for p in proxies.proxies]
    done = crawl(target, listed, 6, {}, tmp_path)

    good_value = good.url.removeprefix("http://")
    assert sorted(i["url"] for i in done["items"]) == sorted(f"{target.url}/page/{i}" for i in range(6))
    for item in done["items"]:
        assert item == {**item, "exit": good.exit, "proxy": good.url, "slot": good_value}
    hits = [exit for _, exit in target.hits]
    assert hits.count(banned.exit) == 1 and hits.count(limited.exit) == 1 and hits.count(captcha.exit) == 1
    assert hits.count(good.exit) == 6
    cells = done["cells"]
    failures, seen = cells[dead]["127.0.0.1"][4], cells[dead]["127.0.0.1"][3]
    assert failures >= 1 and failures == seen, "the refused connections reported on the dead proxy"
    for proxy in (banned, captcha):  # a ban (the policy's verdict for the CAPTCHA page) cools it for long
        cause, _, cooling, *_ = cells[proxy.url.removeprefix("http://")]["127.0.0.1"]
        assert cause == "blocked" and cooling > 60
    cause, _, cooling, *_ = cells[limited.url.removeprefix("http://")]["127.0.0.1"]
    assert cause == "rate_limited" and 25 < cooling <= 30
    assert cells[good_value]["127.0.0.1"][3] == 6
    assert done["live"] == 0


def test_a_request_every_proxy_refuses_gets_the_last_answer_when_its_time_is_up(
    world: tuple[Proxies, Target], tmp_path: Path
) -> None:
    proxies, target = world
    first, second = proxies.proxies[:2]
    for proxy in (first, second):
        target.answers[proxy.exit] = Answer(403, {}, b"forbidden")
    listed = [p.url.removeprefix("http://") for p in (first, second)]
    done = crawl(target, listed, 1, {}, tmp_path, REPUTE_TIMEOUT=1, HTTPERROR_ALLOWED_CODES=[403])
    assert [(i["exit"], i["proxy"]) for i in done["items"]] == [("forbidden", second.url)]
    assert [exit for _, exit in target.hits] == [first.exit, second.exit]
    for value in listed:
        assert done["cells"][value]["127.0.0.1"][0] == "blocked"
    assert done["live"] == 0


def test_a_proxy_with_a_password_keeps_it_as_its_secret(tmp_path: Path, world: tuple[Proxies, Target]) -> None:
    _, target = world
    tinyproxy, port = shutil.which("tinyproxy"), free_port()
    assert tinyproxy is not None
    conf = tmp_path / "auth.conf"
    conf.write_text(
        f"Port {port}\nListen 127.0.0.1\nBind 127.0.3.1\nAllow 127.0.0.1\nBasicAuth scraper s3cret\nLogLevel Critical\n"
    )
    proxy = subprocess.Popen([tinyproxy, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        done = crawl(target, [f"http://scraper:s3cret@127.0.0.1:{port}"], 2, {}, tmp_path)
    finally:
        proxy.kill()
        proxy.wait()
    assert [i["exit"] for i in done["items"]] == ["127.0.3.1"] * 2, "the proxy let the requests through"
    assert done["values"] == [f"http://127.0.0.1:{port}"]
    assert "s3cret" not in json.dumps(done["cells"]) and done["live"] == 0


def test_bad_settings_name_their_setting(world: tuple[Proxies, Target], tmp_path: Path) -> None:
    proxies, target = world
    bad = {
        "ROTATING_PROXY_LIST": ["http://"],
        "ROTATING_PROXY_LIST_PATH": str(tmp_path / "missing.txt"),
        "ROTATING_PROXY_BAN_POLICY": "no.such.Policy",
        "ROTATING_PROXY_PAGE_RETRY_TIMES": 40,
        "REPUTE_KIND": "",
        "REPUTE_TIMEOUT": -1,
        "REPUTE_WHERE": "not a dict",
        "REPUTE_POOL": "__main__.Pages",
    }
    done = crawl(target, [proxies.proxies[0].url], 1, bad, tmp_path)
    assert done["bad"] == {name: name for name in bad}
    assert len(done["items"]) == 1 and done["live"] == 0
