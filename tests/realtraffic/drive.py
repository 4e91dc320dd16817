"""Runs one contender over the user's requests with a fixed concurrency.

Closed loop: `workers` tasks take the next request as soon as they are free,
so a contender that wastes time on bad proxies finishes later (wall time)
and one that waits well serves more within each request's deadline. The
deadline starts when a worker takes the request. A run that passes
`run_limit` stops taking requests; those left are counted as cut (not
served), so that every run ends by itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from contenders.base import Contender, Outcome, UserRequest


@dataclass
class Run:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    cut: int = 0
    errors: list[str] = field(default_factory=list)
    """Exceptions a contender raised (its request counted as not served)."""
    wall: float = 0.0
    trace: list[dict[str, object]] = field(default_factory=list)
    """One record per request taken: its id and context, when it was taken
    and how long it took (seconds from the run's start), whether it was
    served and in how many attempts; for finding where a run's time went."""


async def drive(
    contender: Contender, requests: list[UserRequest], workers: int, deadline: float, run_limit: float
) -> Run:
    loop = asyncio.get_running_loop()
    run = Run()
    queue = list(reversed(requests))
    began = time.monotonic()
    started = loop.time()
    stop_at = started + run_limit

    async def serve_one(request: UserRequest) -> Outcome:
        taken = loop.time()
        outcome = await attempt_one(request, taken + deadline)
        run.trace.append(
            {
                "id": request.id,
                "context": request.context,
                "taken": round(taken - started, 3),
                "took": round(loop.time() - taken, 3),
                "served": outcome.served,
                "attempts": outcome.attempts,
            }
        )
        return outcome

    async def attempt_one(request: UserRequest, due: float) -> Outcome:
        try:
            # A second of grace past the deadline for a contender's own
            # bookkeeping; what ends later is not served.
            outcome = await asyncio.wait_for(contender.serve(request, due), deadline + 1.0)
        except TimeoutError:
            return Outcome(False, 0)
        except Exception as e:  # a contender's bug must not stop the run
            run.errors.append(f"{type(e).__name__}: {e}")
            return Outcome(False, 0)
        return Outcome(outcome.served and loop.time() <= due + 0.05, outcome.attempts)

    async def worker() -> None:
        while queue:
            request = queue.pop()
            if loop.time() >= stop_at:
                run.cut += 1
                run.outcomes[request.id] = Outcome(False, 0)
                continue
            run.outcomes[request.id] = await serve_one(request)

    await asyncio.gather(*(worker() for _ in range(workers)))
    run.wall = time.monotonic() - began
    return run
