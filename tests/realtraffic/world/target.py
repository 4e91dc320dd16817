"""The sites the proxies are used against: one aiohttp process, several sites.

Run as ``python -m world.target --seed S --port P --exits N``. Each site has
its own loopback address (127.0.2.K:P): tinyproxy rewrites the Host header
from the request URL, so a name that only the target knows could not pass
through it; the site is told by the Host header the target receives. The
exit is the peer address of the connection (the proxy's `Bind` address).

What a site does to an exit, per (exit, site), drawn from the seed:

- a standing ban (403) for some exits, lasting tens of seconds to minutes,
  after which the site lets the exit back in;
- a rate limit counted in fixed slices (k requests per slice), answered with
  429 and a whole-second `Retry-After` up to the end of the slice;
- an escalation ban: an exit that keeps hitting the rate limit (10 answers
  of 429 within 10 s) is banned for a while, as rate-limiting rules of
  anti-bot services block a client that goes on over the limit;
- a ban wave on one site at one moment, banning most exits it sees;
- some exits are slow (a delay added to every answer through them).

Ground truth (requests, answers by status, per exit) is served on
127.0.0.1:P/__truth; POST /__start sets world second 0.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from aiohttp import web

from .proxies import exit_address


@dataclass(frozen=True)
class Site:
    name: str
    address: str
    slice: float
    """Seconds of one rate-limit slice."""
    per_slice: int
    """Requests one exit may make in one slice."""
    ban_share: float
    """Share of exits this site bans from the start."""
    weight: float
    """Share of the user's requests that go to this site."""


# A shop and a news site with per-second limits, a search engine that is
# strict (few requests, many banned exits) and a social site with a 10 s
# window: the kinds of limits scrapers meet, in small numbers so that a run
# stays short.
SITES: tuple[Site, ...] = (
    Site("shop", "127.0.2.1", slice=1.0, per_slice=2, ban_share=0.15, weight=0.35),
    Site("news", "127.0.2.2", slice=1.0, per_slice=3, ban_share=0.05, weight=0.30),
    Site("search", "127.0.2.3", slice=5.0, per_slice=4, ban_share=0.30, weight=0.15),
    Site("social", "127.0.2.4", slice=10.0, per_slice=8, ban_share=0.20, weight=0.20),
)

ESCALATE_AFTER = 10
"""Answers of 429 to one exit within ESCALATE_WINDOW that turn into a ban."""
ESCALATE_WINDOW = 10.0
WAVE_SHARE = 0.6
"""Share of the exits the ban wave bans."""


@dataclass(frozen=True)
class Plan:
    """Everything about a world of sites that is drawn from the seed."""

    bans: dict[tuple[str, str], float]
    """(exit, site) -> world second at which a standing ban ends."""
    slow: dict[str, float]
    """exit -> seconds added to every answer through it."""
    wave_site: str
    wave_at: float
    wave: dict[str, float]
    """exit -> how long the ban wave bans it (exits it spares are absent);
    drawn here, so that every contender of a seed meets the same wave."""

    @staticmethod
    def draw(seed: int, exits: list[str]) -> Plan:
        rng = random.Random(f"target-{seed}")
        bans = {}
        for site in SITES:
            for exit in exits:
                if rng.random() < site.ban_share:
                    bans[(exit, site.name)] = rng.uniform(10.0, 150.0)
        slow = {exit: rng.uniform(1.0, 2.5) for exit in rng.sample(exits, 2)}
        wave_site = rng.choice([s.name for s in SITES])
        wave_at = rng.uniform(4.0, 8.0)
        wave = {exit: ban_duration(rng) for exit in exits if rng.random() < WAVE_SHARE}
        return Plan(bans=bans, slow=slow, wave_site=wave_site, wave_at=wave_at, wave=wave)


def ban_duration(rng: random.Random) -> float:
    """A ban a site hands out during the run: tens of seconds to minutes."""
    return rng.uniform(20.0, 120.0)


class Target:
    def __init__(self, seed: int, exits: list[str]) -> None:
        self.plan = Plan.draw(seed, exits)
        self.exits = exits
        self.bans = dict(self.plan.bans)
        # Separate streams, so that how many answers a contender drew does
        # not change the length of an escalation ban.
        self.delays = random.Random(f"target-delays-{seed}")
        self.escalations = random.Random(f"target-escalations-{seed}")
        self.started = time.monotonic()
        self.wave_done = False
        self.slices: dict[tuple[str, str, int], int] = defaultdict(int)
        self.recent_429: dict[tuple[str, str], deque[float]] = defaultdict(deque)
        self.by_site = {s.address: s for s in SITES}
        self.truth: dict[str, int] = defaultdict(int)
        self.per_exit: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.attempts: dict[str, int] = defaultdict(int)
        """Requests that reached the site, by user request (`x-rt-request`)."""

    def now(self) -> float:
        return time.monotonic() - self.started

    def _wave(self, now: float) -> None:
        """The ban wave happens at the first request after its moment."""
        if self.wave_done or now < self.plan.wave_at:
            return
        self.wave_done = True
        for exit, duration in self.plan.wave.items():
            key = (exit, self.plan.wave_site)
            if self.bans.get(key, 0.0) <= now:
                self.bans[key] = now + duration

    def _escalate(self, key: tuple[str, str], now: float) -> None:
        recent = self.recent_429[key]
        recent.append(now)
        while recent and recent[0] < now - ESCALATE_WINDOW:
            recent.popleft()
        if len(recent) >= ESCALATE_AFTER:
            recent.clear()
            self.bans[key] = now + ban_duration(self.escalations)
            self.truth["escalation_bans"] += 1

    async def handle(self, request: web.Request) -> web.Response:
        host = (request.host or "").rsplit(":", 1)[0]
        site = self.by_site.get(host)
        if site is None:
            return web.Response(status=404, text="unknown site\n")
        exit = request.remote or ""
        now = self.now()
        self._wave(now)
        key = (exit, site.name)
        self.truth["requests"] += 1
        self.per_exit[exit]["requests"] += 1
        self.attempts[request.headers.get("x-rt-request", "")] += 1
        delay = self.plan.slow.get(exit, 0.0)

        if self.bans.get(key, 0.0) > now:
            status, body, headers = 403, _BLOCK_PAGE, {"Content-Type": "text/html"}
        else:
            n = int(now // site.slice)
            self.slices[(exit, site.name, n)] += 1
            if self.slices[(exit, site.name, n)] > site.per_slice:
                retry = max(1, math.ceil((n + 1) * site.slice - now))
                status, body = 429, "Too Many Requests\n"
                headers = {"Retry-After": str(retry), "Content-Type": "text/plain"}
                self._escalate(key, now)
            else:
                status, headers = 200, {"Content-Type": "text/html"}
                body = f"<html><body>{site.name} {request.path}</body></html>\n"
                delay += self.delays.uniform(0.02, 0.12)
        self.truth[str(status)] += 1
        self.per_exit[exit][str(status)] += 1
        if delay:
            await asyncio.sleep(delay)
        return web.Response(status=status, text=body, headers=headers)

    async def start(self, _request: web.Request) -> web.Response:
        self.started = time.monotonic()
        return web.json_response({"ok": True})

    async def report(self, _request: web.Request) -> web.Response:
        attempts = sorted(v for k, v in self.attempts.items() if k)
        return web.json_response({"totals": dict(self.truth), "per_exit": self.per_exit, "attempts": attempts})


_BLOCK_PAGE = (
    "<!DOCTYPE html><html><head><title>Access denied</title></head>"
    "<body><h1>Access denied</h1><p>You do not have access to this site. "
    "The site owner may have set restrictions that prevent you from accessing it.</p></body></html>\n"
)


async def serve(seed: int, port: int, exits: list[str]) -> None:
    target = Target(seed, exits)
    app = web.Application()
    app.router.add_post("/__start", target.start)
    app.router.add_get("/__truth", target.report)
    app.router.add_route("*", "/{tail:.*}", target.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for host in ["127.0.0.1", *(s.address for s in SITES)]:
        await web.TCPSite(runner, host, port).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--exits", type=int, required=True)
    args = parser.parse_args()
    exits = [exit_address(i) for i in range(args.exits)]
    asyncio.run(serve(args.seed, args.port, exits))


if __name__ == "__main__":
    main()
