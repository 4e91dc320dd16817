"""repute: a reputation-aware resource pool with fenced leases.

The pool itself is the Rust core behind ``repute._native``; this package
re-exports it and adds the asyncio layer (:class:`AsyncPool`). Nothing here
decides who gets a resource.

Quick start::

    import repute

    pool = repute.Pool()                      # embedded, in memory
    pool.register("proxy", "10.0.0.1:8080")
    with pool.acquire("example.com", timeout=5.0) as lease:
        ...                                   # guard writes with lease.token
        lease.report_success(latency=0.120)

Times are float seconds. ``Pool(clock=repute.ManualClock())`` puts a pool on a
clock that moves only with ``clock.advance(seconds)``.

Threads: every call releases the GIL; one ``Pool`` may be shared by any
number of threads. Processes: a pool opened before ``os.fork()`` raises
:class:`PoolClosedError` (``code == "forked"``) in the child; open a new one there.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ._aio import AsyncPool
from ._aio_lease import AsyncLease
from ._native import (
    BlockedError,
    BlocklistedEvent,
    BudgetExhaustedError,
    Cell,
    CooledEvent,
    Event,
    Group,
    InternalError,
    InvalidInputError,
    InvalidSnapshotError,
    Lease,
    LeaseEvent,
    LeaseExpiredError,
    LeaseExpiredEvent,
    LeasedError,
    LeasedEvent,
    ManualClock,
    NoResourceAvailableError,
    NotOwnerError,
    Pool,
    PoolClosedError,
    ProbeTarget,
    RateLimitedError,
    RecoveredEvent,
    RegisteredEvent,
    RejectedEvent,
    ReleasedEvent,
    RenewedEvent,
    ReputeError,
    Resource,
    RetiredEvent,
    RevokedEvent,
    StaleLeaseError,
    Stats,
    StoreError,
    UnblockedEvent,
    UnknownLeaseError,
    UnknownResourceError,
    UnregisteredEvent,
    lease_partition,
    partition_of,
)
from ._types import ContextLimits, FailureKind, GroupLimits, Limits, Profile

__all__ = [
    "AsyncLease",
    "AsyncPool",
    "BlockedError",
    "BlocklistedEvent",
    "BudgetExhaustedError",
    "Cell",
    "ContextLimits",
    "CooledEvent",
    "Event",
    "FailureKind",
    "Group",
    "GroupLimits",
    "InternalError",
    "InvalidInputError",
    "InvalidSnapshotError",
    "Lease",
    "LeaseEvent",
    "LeaseExpiredError",
    "LeaseExpiredEvent",
    "LeasedError",
    "LeasedEvent",
    "Limits",
    "ManualClock",
    "NoResourceAvailableError",
    "NotOwnerError",
    "Pool",
    "PoolClosedError",
    "Profile",
    "ProbeTarget",
    "RateLimitedError",
    "RecoveredEvent",
    "RegisteredEvent",
    "RejectedEvent",
    "ReleasedEvent",
    "RenewedEvent",
    "ReputeError",
    "Resource",
    "RetiredEvent",
    "RevokedEvent",
    "StaleLeaseError",
    "Stats",
    "StoreError",
    "UnblockedEvent",
    "UnknownLeaseError",
    "UnknownResourceError",
    "UnregisteredEvent",
    "lease_partition",
    "partition_of",
]

#: The adapters, one optional extra each (``pip install "repute[httpx]"``):
#: imported on first use, so ``import repute`` needs none of their libraries
#: and ``repute.httpx.Transport`` works after it alone.
_ADAPTERS = frozenset(
    {"aiohttp", "anthropic", "crawlee", "genai", "httpx", "httpx2", "litellm", "openai", "requests", "scrapy"}
)


def __getattr__(name: str) -> ModuleType:
    if name in _ADAPTERS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
