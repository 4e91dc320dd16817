"""What every contender shares: the user's request, the outcome, the rules.

The harness hands a contender one user request at a time with a deadline;
within it the contender may make up to MAX_ATTEMPTS attempts, on whatever
proxy or key it chooses, and waits as it sees fit. The same rule holds for
every contender, so a difference in the table is a difference in choosing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

MAX_ATTEMPTS = 10
"""Attempts one user request may take, as a client's retry budget would."""


@dataclass(frozen=True)
class UserRequest:
    id: str
    context: str
    """The site (proxies world) or the model (keys world)."""
    path: str


@dataclass(frozen=True)
class Outcome:
    served: bool
    attempts: int


class Contender(Protocol):
    name: str

    async def start(self) -> None: ...

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        """Serves `request` by loop time `deadline` if it can."""
        ...

    async def close(self) -> None: ...


def now() -> float:
    return asyncio.get_running_loop().time()
