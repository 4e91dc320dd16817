"""The child processes a world starts, and the guarantee that they all end.

Every process the harness starts (tinyproxy, the target, the provider) goes
through one `Children` so that a crash, Ctrl-C or SIGTERM of the runner still
kills each of them by its own pid: a leaked tinyproxy would keep its port and
its loopback address busy for the next run.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import Sequence


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now. Another program could take it before
    we bind it; on a quiet test machine that race does not happen in practice,
    and a clash shows up as a child that fails to start."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Children:
    """The processes started for one world; `close` ends every one of them."""

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, argv: Sequence[str], cwd: str | None = None) -> int:
        """Starts `argv` with its output discarded (tinyproxy in the
        foreground logs to stderr) and returns its pid."""
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._procs[proc.pid] = proc
        return proc.pid

    def kill(self, pid: int) -> None:
        """SIGKILL, as a proxy host that dies mid-run: no goodbye to clients."""
        proc = self._procs.pop(pid, None)
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait()

    def close(self) -> None:
        """Ends every child: SIGTERM first, SIGKILL after a short grace."""
        procs = list(self._procs.values())
        self._procs.clear()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 2.0
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Waits until something accepts on host:port (a child is ready)."""
    end = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            if time.monotonic() > end:
                raise RuntimeError(f"nothing listens on {host}:{port} after {timeout}s")
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return


def install_signal_exit() -> None:
    """SIGTERM and SIGHUP raise SystemExit, so `finally` blocks (which close
    the children) run as they do for Ctrl-C."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)
