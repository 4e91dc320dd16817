"""A fleet of real tinyproxy processes, each leaving from its own loopback address.

Each proxy listens on 127.0.0.1:PORT and opens its upstream connections from
127.0.1.K (`Bind`), so the target sees one exit address per proxy, as a site
sees one IP per proxy of a commercial pool. Linux answers on all of
127.0.0.0/8, so no interface has to be configured.

Failure is drawn from the seed: some proxies are dead from the start (a port
with no process, as a proxy list always holds a few that stopped answering)
and some die mid-run (SIGKILL, as a host that is reclaimed or crashes).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field

from .processes import Children, free_port, wait_for_port


@dataclass(frozen=True)
class Proxy:
    """One proxy as a user knows it (`address`), and its exit address, which
    only the world knows."""

    address: str
    port: int
    exit: str


@dataclass(frozen=True)
class FleetPlan:
    """Which proxies fail, drawn once per seed so every contender meets the
    same fleet."""

    size: int
    dead: frozenset[int]
    """Indexes with no process at all."""
    killed: dict[int, float] = field(default_factory=dict)
    """Index -> world second at which its process is killed."""

    @staticmethod
    def draw(seed: int, size: int) -> FleetPlan:
        rng = random.Random(f"fleet-{seed}")
        order = rng.sample(range(size), size)
        dead = frozenset(order[:1])
        killed = {order[1]: round(rng.uniform(3.0, 8.0), 2)}
        return FleetPlan(size=size, dead=dead, killed=killed)


def exit_address(index: int) -> str:
    return f"127.0.1.{index + 1}"


def _config(port: int, exit: str) -> str:
    # LogLevel Critical: tinyproxy logs each connection at Info, which costs
    # CPU we need for the traffic. Timeout bounds an idle upstream, far
    # above the slowest exit's delay. MaxClients above the contenders'
    # concurrency so the proxy never refuses for load.
    return "\n".join(
        [
            f"Port {port}",
            "Listen 127.0.0.1",
            f"Bind {exit}",
            "Timeout 15",
            "Allow 127.0.0.1",
            "DisableViaHeader Yes",
            "LogLevel Critical",
            "MaxClients 64",
            "",
        ]
    )


class Fleet:
    """The started proxies of one world. `proxies` lists all of them, dead
    ones included: a user's list does not know which are dead."""

    def __init__(self, plan: FleetPlan, children: Children) -> None:
        self.plan = plan
        self._children = children
        self._dir = tempfile.mkdtemp(prefix="realtraffic-tinyproxy-")
        self.proxies: list[Proxy] = []
        self._pids: dict[int, int] = {}

    async def start(self) -> None:
        tinyproxy = shutil.which("tinyproxy")
        if tinyproxy is None:
            raise RuntimeError("tinyproxy is not on PATH (Debian: apt-get install tinyproxy)")
        for i in range(self.plan.size):
            port = free_port()
            proxy = Proxy(address=f"127.0.0.1:{port}", port=port, exit=exit_address(i))
            self.proxies.append(proxy)
            if i in self.plan.dead:
                continue
            conf = os.path.join(self._dir, f"proxy-{i}.conf")
            with open(conf, "w") as f:
                f.write(_config(port, proxy.exit))
            self._pids[i] = self._children.start([tinyproxy, "-d", "-c", conf])
        await asyncio.gather(*(wait_for_port("127.0.0.1", self.proxies[i].port) for i in self._pids))

    async def run_schedule(self, started_at: float) -> None:
        """Kills the planned proxies at their world time (`started_at` is the
        loop time of world second 0). Cancelled when the run ends."""
        loop = asyncio.get_running_loop()
        for index, at in sorted(self.plan.killed.items(), key=lambda kv: kv[1]):
            await asyncio.sleep(max(0.0, started_at + at - loop.time()))
            pid = self._pids.pop(index, None)
            if pid is not None:
                self._children.kill(pid)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
