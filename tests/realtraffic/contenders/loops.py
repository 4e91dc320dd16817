"""The attempt loops contenders of both worlds share, so that a proxies
contender and its keys twin differ only in what one attempt is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import repute

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .web import Answer

Attempt = Callable[[str, UserRequest, float], Awaitable[Answer]]
"""One attempt on a proxy address or a key's secret, within a timeout."""


async def round_robin(choices: Iterator[str], attempt: Attempt, request: UserRequest, deadline: float) -> Outcome:
    """The next choice for every attempt, whatever the last answer was."""
    attempts = 0
    while attempts < MAX_ATTEMPTS and deadline - now() > 0:
        attempts += 1
        answer = await attempt(next(choices), request, deadline - now())
        if answer.status == 200:
            return Outcome(True, attempts)
    return Outcome(False, attempts)


async def through_pool(
    pool: repute.AsyncPool,
    kind: str,
    target: Callable[[repute.Lease], str],
    attempt: Attempt,
    request: UserRequest,
    deadline: float,
) -> Outcome:
    """repute's loop: a lease for the request's context (waiting until the
    deadline), one attempt on `target(lease)`, every answer reported as it
    came (status, headers, body, latency; a transport error as a failure),
    and a retry on what this request has not tried yet when one of those
    is free now, else on the first of them all to come free (one it tried
    may be back before the others are)."""
    attempts = 0
    tried: list[str] = []
    while attempts < MAX_ATTEMPTS and deadline - now() > 0:
        try:
            held = await pool.try_acquire(request.context, kind=kind, exclude=tried) if tried else None
            held = held or await pool.acquire(request.context, timeout=deadline - now(), kind=kind)
        except repute.ReputeError:
            break  # nothing became available before the deadline
        lease = held.lease
        attempts += 1
        answer = await attempt(target(lease), request, deadline - now())
        if answer.status is None:
            lease.report_failure(answer.failure or "connection_reset", latency=answer.latency)
        else:
            lease.report_http(answer.status, latency=answer.latency, headers=answer.headers, body=answer.text)
        lease.release()
        if answer.status == 200:
            return Outcome(True, attempts)
        tried.append(lease.value)
    return Outcome(False, attempts)
