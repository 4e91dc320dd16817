"""How much of a fixed-window rate limit a learned pace uses.

    python bench/bench_pace.py [--seconds N] [--limits K/S/LATENCY,...]

One proxy (4 permits) in one context, asked for continuously on a
`ManualClock` moved 10 ms at a time, against a site that lets K requests
through per S-second slice and answers the rest 429 with a whole-second
Retry-After up to the slice's end, as sites and providers count. Each
answer is reported `LATENCY` seconds after its request was sent, by
`report_http`, so nothing is registered about the limit: the pace is
learned from the 429s alone. Printed: requests that got through per second
after the first minute, as a share of K / S, and the answers of 429. The
run is deterministic; the share says how close to the site's capacity a
paced cell runs, which a run of real traffic pays for in wall time.
"""

from __future__ import annotations

import argparse
import math

import repute

STEP = 0.01
WARM_UP = 60.0


def drive(per_slice: int, slice_s: float, latency: float, seconds: float) -> tuple[float, int]:
    clock = repute.ManualClock()
    pool = repute.Pool(clock=clock, strategy="first")
    pool.register("proxy", "p", permits=4)
    through: dict[int, int] = {}
    in_flight: list[tuple[float, repute.Lease, int, int]] = []
    passed_after_warm_up, limited = 0, 0
    for tick in range(int(seconds / STEP)):
        now = tick * STEP
        due = [f for f in in_flight if f[0] <= now]
        for f in due:
            in_flight.remove(f)
            _, done, status, wait = f
            done.report_http(status, latency, {"Retry-After": str(wait)} if status == 429 else None)
            done.release()
        while (lease := pool.try_acquire("site")) is not None:
            slice_no = math.floor(now / slice_s)
            if through.get(slice_no, 0) < per_slice:
                through[slice_no] = through.get(slice_no, 0) + 1
                passed_after_warm_up += now >= WARM_UP
                in_flight.append((now + latency, lease, 200, 0))
            else:
                limited += 1
                wait = math.ceil((slice_no + 1) * slice_s - now)
                in_flight.append((now + latency, lease, 429, wait))
        clock.advance(STEP)
    pool.close()
    return passed_after_warm_up / (seconds - WARM_UP), limited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument(
        "--limits",
        default="2/1/0.1,3/1/0.2,4/5/0.1,4/5/1.0,8/10/0.1",
        help="K/S/LATENCY: K requests per S-second slice, answers LATENCY s late",
    )
    args = parser.parse_args()
    print(f"{'limit':>12} {'latency s':>9} {'got through /s':>15} {'of the limit':>12} {'429s':>5}")
    for spec in args.limits.split(","):
        k, s, latency = spec.split("/")
        per_slice, slice_s = int(k), float(s)
        rate, limited = drive(per_slice, slice_s, float(latency), args.seconds)
        capacity = per_slice / slice_s
        print(f"{f'{per_slice} per {s} s':>12} {latency:>9} {rate:>15.3f} {rate / capacity:>11.1%} {limited:>5}")


if __name__ == "__main__":
    main()
