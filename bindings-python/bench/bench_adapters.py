"""The httpx adapter's cost per request against the bare client, on the same
local server (embedded memory pool, one resource, one client, one thread).

    python bench/bench_adapters.py [--requests N]

The server runs in its own process (so it does not share this one's GIL)
and answers every GET with a fixed 200. Bare and adapted requests alternate,
so a drift of the machine touches both; each request is timed on its own.
Reports the median and p99 of each and their difference, in wall time and
in this process's CPU time (which a loaded machine disturbs less). Then the same
without the network (the transport over an `httpx.MockTransport` against
that mock alone), which the machine's load and the socket's timing disturb
less, and the protocol's calls alone: next (acquire and begin), answered,
finished, the request's start from its plan and the context default, timed as the
transport makes them between real requests and in a tight loop (the first
several times the second: the socket and the client evict the caches the
calls need).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from typing import Any, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

import repute
import repute.httpx
from repute._native import _Attempts, _context_of, _Plan


class _Fixed(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        # One write: a head and a body in two segments wait out a delayed ACK.
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(port: "multiprocessing.Queue[int]") -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    port.put(server.server_address[1])
    server.serve_forever()


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99)]


class _Timed:
    """A request's attempts with each protocol call timed into `times`."""

    def __init__(self, attempts: _Attempts, times: dict[str, list[float]]) -> None:
        self._attempts = attempts
        self._times = times

    @staticmethod
    def starting(start: Callable[[str], _Attempts], times: dict[str, list[float]]) -> Callable[[str], Any]:
        """`start` (an adapter's `Options.start`), timed as `start`."""

        def timed(context: str) -> _Timed:
            begun = time.perf_counter_ns()
            attempts = start(context)
            times.setdefault("start", []).append((time.perf_counter_ns() - begun) / 1000)
            return _Timed(attempts, times)

        return timed

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._attempts, name)

        def timed(*args: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return call(*args)
            finally:
                self._times.setdefault(name, []).append((time.perf_counter_ns() - start) / 1000)

        return timed


def _medians(times: dict[str, list[float]]) -> str:
    parts = [f"{k} {statistics.median(v):.1f}" for k, v in times.items()]
    return ", ".join(parts) + f"; in all {sum(statistics.median(v) for v in times.values()):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    queue: multiprocessing.Queue[int] = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(queue,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{queue.get()}/"
    pool = repute.Pool()
    pool.register("site", "direct")  # no secret: the request goes as it is
    bare = httpx.Client()
    adapted = httpx.Client(transport=repute.httpx.Transport(pool, kind="site"))
    times: dict[str, list[float]] = {"bare": [], "adapted": []}
    cpu: dict[str, list[float]] = {"bare": [], "adapted": []}
    for client in (bare, adapted):  # warm the connections
        for _ in range(200):
            client.get(url).read()
    for _ in range(args.requests):
        for name, client in (("bare", bare), ("adapted", adapted)):
            start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
            client.get(url).read()
            cpu[name].append((time.process_time_ns() - start_cpu) / 1000)
            times[name].append((time.perf_counter_ns() - start) / 1000)
    (bm, bp), (am, ap) = _quantiles(times["bare"]), _quantiles(times["adapted"])
    print(f"bare     median {bm:8.1f} us  p99 {bp:8.1f} us")
    print(f"adapted  median {am:8.1f} us  p99 {ap:8.1f} us")
    print(f"overhead median {am - bm:8.1f} us  p99 {ap - bp:8.1f} us")
    # CPU time of this process (the pool's threads included, the server's
    # excluded): what the adapter costs, without the scheduler's and the
    # socket's waits that a loaded machine adds to the wall times.
    (bm, bp), (am, ap) = _quantiles(cpu["bare"]), _quantiles(cpu["adapted"])
    print(f"cpu: bare median {bm:.1f} us, adapted {am:.1f} us, overhead median {am - bm:8.1f} us  p99 {ap - bp:8.1f} us")
    mocked = repute.httpx.Transport(pool, kind="site")
    mock = httpx.MockTransport(lambda request: httpx.Response(200, content=b"ok"))
    mocked._direct = mock  # type: ignore[assignment]
    local: dict[str, list[float]] = {"adapted": [], "mock": []}
    for _ in range(args.requests):
        for name, transport in (("adapted", mocked), ("mock", mock)):
            start = time.perf_counter_ns()
            response = transport.handle_request(httpx.Request("GET", url))
            response.read()
            response.close()
            local[name].append((time.perf_counter_ns() - start) / 1000)
    (lm, lp), (mm, mp) = _quantiles(local["adapted"]), _quantiles(local["mock"])
    print(f"no network: overhead median {lm - mm:8.1f} us  p99 {lp - mp:8.1f} us")
    # The same calls as the transport makes them between real requests,
    # where the socket and the client have evicted the caches they use.
    between: dict[str, list[float]] = {}
    timed = repute.httpx.Transport(pool, kind="site")
    timed._options.start = _Timed.starting(timed._options.start, between)  # type: ignore[method-assign,assignment]
    client = httpx.Client(transport=timed)
    for _ in range(200):
        client.get(url).read()
    between.clear()
    for _ in range(args.requests):
        client.get(url).read()
    print("protocol calls between real requests, median us: " + _medians(between))
    steps: dict[str, list[float]] = {k: [] for k in ("start", "context", "next", "answered", "finished")}
    plan = _Plan(pool, kind="site")
    for _ in range(args.requests):
        t0 = time.perf_counter_ns()
        attempts = plan.start("127.0.0.1")
        t1 = time.perf_counter_ns()
        _context_of(pool, "site", "127.0.0.1", "/", None)
        t2 = time.perf_counter_ns()
        attempts.next()
        t3 = time.perf_counter_ns()
        attempts.answered(200, [("content-length", "2")])
        t4 = time.perf_counter_ns()
        attempts.finished()
        t5 = time.perf_counter_ns()
        for name, a, b in zip(steps, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5)):
            steps[name].append((b - a) / 1000)
    print("protocol calls in a tight loop, median us: " + _medians(steps))
    server.terminate()


if __name__ == "__main__":
    main()
