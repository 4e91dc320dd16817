"""Real-traffic harness: real proxies and a real SDK on loopback, several
contenders side by side, one table of results per world.

    python run.py --seeds 1,2,3 --world all --requests 400 --json out.json

Each (world, seed, contender) gets a fresh world from the same seed (new
processes, same plan), so every contender meets the same proxies, bans,
keys and failures, and the world's own counts are that contender's ground
truth. Every process started is killed by its pid when the run ends, also
on an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from checks import violations
from contenders.base import Contender, UserRequest
from drive import Run, drive
from world.processes import Children, free_port, install_signal_exit, wait_for_port
from world.provider import MODELS, draw_keys
from world.proxies import Fleet, FleetPlan
from world.target import SITES

HERE = os.path.dirname(os.path.abspath(__file__))
"""The harness's directory: the world processes run as its modules (-m)."""

CONTENDERS = ("repute", "careful-rr", "round-robin", "crawlee", "litellm", "repute-adapter")
"""All contenders; crawlee runs in the proxies world only, litellm in the keys worlds only."""
DEFAULT_CONTENDERS = CONTENDERS
"""What a run races unless told: every contender, repute both by the
harness's own loop (`repute`) and through its adapters (`repute-adapter`,
the same pool driven by `repute.httpx` and the SDK helpers)."""
WORLDS = ("proxies", "keys", "anthropic")
"""The proxies world, and the keys world in each provider format."""
FORMATS = {"keys": "openai", "anthropic": "anthropic"}
"""The provider format of each keys world."""
PROXY_CONTENDERS = ("repute", "careful-rr", "round-robin", "crawlee", "repute-adapter")
KEY_CONTENDERS = ("repute", "careful-rr", "round-robin", "litellm", "repute-adapter")


@dataclass
class Row:
    world: str
    contender: str
    seed: int
    requests: int
    served: float = 0.0
    r429: int = 0
    r403: int = 0
    wall: float = 0.0
    median_attempts: float = 0.0
    after_401: int | None = None
    """Attempts on the revoked key begun after the contender was told (see
    KeyClients.after_told); LiteLLM's as the provider saw them."""
    after_quota: int | None = None
    """The same for the out-of-quota key."""
    cut: int = 0
    skipped: str | None = None
    errors: list[str] = field(default_factory=list)
    truth: dict[str, Any] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)
    """Every request taken, as `drive.Run.trace` records it."""


def user_requests(world: str, seed: int, count: int) -> list[UserRequest]:
    """The same list for every contender of a seed: which site or model each
    request is for, drawn by the shares of traffic."""
    rng = random.Random(f"requests-{world}-{seed}")
    if world == "proxies":
        names, weights = [s.name for s in SITES], [s.weight for s in SITES]
    else:
        models = MODELS[FORMATS[world]]
        names, weights = [m for m, _ in models], [w for _, w in models]
    return [
        UserRequest(id=f"{seed}-{i}", context=rng.choices(names, weights)[0], path=f"/item/{rng.randint(1, 99999)}")
        for i in range(count)
    ]


async def _control(port: int, path: str, post: bool = False) -> Any:
    """A call to a world process's control endpoint, straight, no proxy."""
    async with httpx.AsyncClient(trust_env=False) as client:
        url = f"http://127.0.0.1:{port}{path}"
        response = await (client.post(url) if post else client.get(url))
        response.raise_for_status()
        return response.json()


def _proxy_contender(
    name: str, proxies: list[str], seed: int, web: Any, sites: dict[str, str], deadline: float
) -> Contender:
    if name == "repute-adapter":
        from contenders.proxy_adapter import ProxyAdapter

        return ProxyAdapter(proxies, sites, seed, deadline)
    if name == "repute":
        from contenders.proxy_repute import ProxyRepute

        return ProxyRepute(proxies, web, seed)
    if name == "careful-rr":
        from contenders.proxy_careful import ProxyCareful

        return ProxyCareful(proxies, web)
    if name == "round-robin":
        from contenders.proxy_roundrobin import ProxyRoundRobin

        return ProxyRoundRobin(proxies, web)
    from contenders.proxy_crawlee import ProxyCrawlee

    return ProxyCrawlee(proxies, web)


def _key_contender(name: str, seed: int, base_url: str, clients: Any, deadline: float) -> Contender:
    keys = [(k.name, k.secret, k.rpm) for k in draw_keys(seed, format=clients.format)]
    if name == "repute-adapter":
        from contenders.key_adapter import KeyAdapter

        return KeyAdapter(keys, base_url, clients.format, seed, deadline)
    if name == "repute":
        from contenders.key_repute import KeyRepute

        return KeyRepute(keys, clients, seed)
    if name == "careful-rr":
        from contenders.key_careful import KeyCareful

        return KeyCareful([s for _, s, _ in keys], clients)
    if name == "round-robin":
        from contenders.key_roundrobin import KeyRoundRobin

        return KeyRoundRobin([s for _, s, _ in keys], clients)
    from contenders.key_litellm import KeyLiteLLM

    return KeyLiteLLM(keys, [m for m, _ in MODELS[clients.format]], base_url, clients.format)


async def _race(
    contender: Contender, requests: list[UserRequest], args: argparse.Namespace, port: int
) -> tuple[Run, Any]:
    """Starts world second 0 and drives the contender through the requests."""
    await contender.start()
    try:
        await _control(port, "/__start", post=True)
        run = await drive(contender, requests, args.workers, args.deadline, args.run_limit)
        truth = await _control(port, "/__truth")
    finally:
        await contender.close()
    return run, truth


async def proxies_row(name: str, seed: int, args: argparse.Namespace, children: Children) -> Row:
    from contenders.web import ProxyWeb

    requests = user_requests("proxies", seed, args.requests)
    row = Row("proxies", name, seed, len(requests))
    fleet = Fleet(FleetPlan.draw(seed, args.proxies), children)
    port = free_port()
    sites = {s.name: f"http://{s.address}:{port}" for s in SITES}
    web = ProxyWeb(sites)
    schedule: asyncio.Task[None] | None = None
    try:
        await fleet.start()
        children.start(
            [
                sys.executable,
                "-m",
                "world.target",
                "--seed",
                str(seed),
                "--port",
                str(port),
                "--exits",
                str(args.proxies),
            ],
            cwd=HERE,
        )
        await wait_for_port("127.0.0.1", port)
        contender = _proxy_contender(name, [p.address for p in fleet.proxies], seed, web, sites, args.deadline)
        schedule = asyncio.create_task(fleet.run_schedule(asyncio.get_running_loop().time()))
        run, truth = await _race(contender, requests, args, port)
    finally:
        if schedule is not None:
            schedule.cancel()
        await web.close()
        children.close()
        fleet.close()
    totals = truth["totals"]
    row.served = sum(o.served for o in run.outcomes.values()) / len(requests)
    row.r429, row.r403 = totals.get("429", 0), totals.get("403", 0)
    row.wall, row.cut, row.errors, row.truth, row.trace = run.wall, run.cut, run.errors, truth, run.trace
    if name == "repute-adapter":
        # The adapter makes its attempts unseen: counted where they arrive.
        seen = truth["attempts"] + [0] * max(0, len(requests) - len(truth["attempts"]))
        row.median_attempts = statistics.median(seen)
    else:
        row.median_attempts = statistics.median(o.attempts for o in run.outcomes.values())
    return row


async def keys_row(world: str, name: str, seed: int, args: argparse.Namespace, children: Children) -> Row:
    from contenders.llm import clients_for

    format = FORMATS[world]
    requests = user_requests(world, seed, args.requests)
    row = Row(world, name, seed, len(requests))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    clients = clients_for(format, base_url)
    try:
        command = [sys.executable, "-m", "world.provider", "--seed", str(seed), "--port", str(port)]
        children.start([*command, "--format", format, "--slice", str(args.slice)], cwd=HERE)
        await wait_for_port("127.0.0.1", port)
        contender = _key_contender(name, seed, base_url, clients, args.deadline)
        run, truth = await _race(contender, requests, args, port)
    finally:
        await clients.close()
        children.close()
    keys = draw_keys(seed, format=format)
    revoked = next(k for k in keys if k.revoked_at is not None)
    no_quota = next(k for k in keys if k.quota is not None)
    totals, per_key = truth["totals"], truth["per_key"]
    row.served = sum(o.served for o in run.outcomes.values()) / len(requests)
    row.r429 = totals.get("rate_limit_exceeded", 0) + totals.get("insufficient_quota", 0)
    if name in ("litellm", "repute-adapter"):
        # LiteLLM's router and repute's adapters call the provider
        # themselves: every answer after the first, in flight or not, is
        # all the provider can tell. repute's own events tell which grants
        # came after it knew the key revoked.
        row.after_401 = per_key.get(revoked.name, {}).get("after_first_401", 0)
        if name == "repute-adapter":
            row.after_401 = _after_blocked(contender, revoked.name, per_key)
        row.after_quota = max(0, per_key.get(no_quota.name, {}).get("insufficient_quota", 0) - 1)
    else:
        row.after_401 = clients.after_told[(revoked.secret, "401")]
        row.after_quota = clients.after_told[(no_quota.secret, "quota")]
    row.wall, row.cut, row.errors, row.truth, row.trace = run.wall, run.cut, run.errors, truth, run.trace
    # Attempts as the provider saw them (LiteLLM retries inside the router);
    # a request that never reached the provider made none.
    attempts = truth["attempts"] + [0] * max(0, len(requests) - len(truth["attempts"]))
    row.median_attempts = statistics.median(attempts)
    return row


def _after_blocked(contender: Contender, revoked: str, per_key: dict[str, Any]) -> int:
    """Grants of the revoked key after the adapter's pool blocked it."""
    from contenders.key_adapter import KeyAdapter

    assert isinstance(contender, KeyAdapter)
    if per_key.get(revoked, {}).get("401", 0) > 0:
        assert contender.blocked(revoked), "a 401 answered and the key never blocked"
    return contender.after_blocked[revoked]


def _p95_served(row: Row) -> str:
    """How long the slowest twentieth of the served requests took, at
    least: the tail a user waits in, which the wall time averages away."""
    took = [t["took"] for t in row.trace if t["served"]]
    return f"{statistics.quantiles(took, n=20)[-1]:.1f}" if len(took) >= 2 else "-"


def print_table(world: str, rows: list[Row]) -> None:
    keys = world in FORMATS
    head = ["contender", "seed", "served", "429s", "403s" if not keys else "of them quota", "wall s", "p95 s", "med att"]
    if keys:
        head += ["after 401", "after quota"]
    head += ["cut", "notes"]
    lines = [head]
    for r in rows:
        if r.skipped:
            lines.append([r.contender, str(r.seed)] + ["-"] * (len(head) - 3) + [r.skipped])
            continue
        third = str(r.truth["totals"].get("insufficient_quota", 0)) if keys else str(r.r403)
        line = [
            r.contender,
            str(r.seed),
            f"{r.served:.1%}",
            str(r.r429),
            third,
            f"{r.wall:.1f}",
            _p95_served(r),
            f"{r.median_attempts:g}",
        ]
        if keys:
            line += [str(r.after_401), str(r.after_quota)]
        line += [str(r.cut), f"{len(r.errors)} contender errors" if r.errors else ""]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    print(f"\n== world: {world} ==")
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


async def main_async(args: argparse.Namespace) -> list[Row]:
    worlds = list(WORLDS) if args.world == "all" else [args.world]
    rows: list[Row] = []
    for world in worlds:
        names = [c for c in args.contenders if c in (PROXY_CONTENDERS if world == "proxies" else KEY_CONTENDERS)]
        world_rows = []
        for seed in args.seeds:
            for name in names:
                children = Children()
                try:
                    if world == "proxies":
                        row = await proxies_row(name, seed, args, children)
                    else:
                        row = await keys_row(world, name, seed, args, children)
                except ImportError as e:
                    row = Row(world, name, seed, args.requests, skipped=f"not installed: {e}")
                finally:
                    children.close()
                world_rows.append(row)
                print(f"  {world} seed {seed} {name}: done", file=sys.stderr, flush=True)
        print_table(world, world_rows)
        rows += world_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--world", choices=(*WORLDS, "all"), default="all")
    parser.add_argument("--requests", type=int, default=300, help="user requests per run")
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS), type=lambda s: s.split(","))
    parser.add_argument("--json", help="write every row, with the world's ground truth, to this file")
    parser.add_argument("--workers", type=int, default=16, help="concurrent user requests")
    parser.add_argument("--deadline", type=float, default=10.0, help="seconds each user request may take")
    parser.add_argument("--run-limit", type=float, default=30.0, help="seconds after which a run takes no new request")
    parser.add_argument("--proxies", type=int, default=10)
    parser.add_argument(
        "--slice", type=float, default=1.0, help="seconds the keys world's provider counts a slice of rpm/60 in (60: whole minutes)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 unless repute meets the checks of checks.py (needs every contender)"
    )
    args = parser.parse_args()
    unknown = set(args.contenders) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    # Every address used is on loopback; proxy settings in the environment
    # must not send anything elsewhere.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(var, None)
    install_signal_exit()
    began = time.monotonic()
    rows = asyncio.run(main_async(args))
    print(f"\ntotal {time.monotonic() - began:.0f} s", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([row.__dict__ for row in rows], f, indent=1)
    if args.check:
        checked, failed = violations(rows)
        for what in failed:
            print(f"check failed: {what}", file=sys.stderr)
        print(f"realtraffic: {checked - len(failed)} passed, {len(failed)} failed")
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
