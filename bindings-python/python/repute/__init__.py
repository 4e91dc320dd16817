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
:class:`PoolClosed` (``code == "forked"``) in the child; open a new one there.
"""

from __future__ import annotations

from ._aio import AsyncLease, AsyncPool
from ._native import (
    Blocked,
    BlocklistedEvent,
    BudgetExhausted,
    Cell,
    CooledEvent,
    Event,
    InternalError,
    InvalidInput,
    InvalidSnapshot,
    Lease,
    LeaseEvent,
    LeaseExpired,
    LeaseExpiredEvent,
    LeasedEvent,
    ManualClock,
    NoResourceAvailable,
    NotOwner,
    Pool,
    PoolClosed,
    RateLimited,
    RecoveredEvent,
    RegisteredEvent,
    RejectedEvent,
    ReleasedEvent,
    RenewedEvent,
    ReputeError,
    Resource,
    ResourceLeased,
    RevokedEvent,
    StaleLease,
    Stats,
    StoreError,
    UnblockedEvent,
    UnknownLease,
    UnknownResource,
    UnregisteredEvent,
)
from ._types import FailureKind

__all__ = [
    "AsyncLease",
    "AsyncPool",
    "Blocked",
    "BlocklistedEvent",
    "BudgetExhausted",
    "Cell",
    "CooledEvent",
    "Event",
    "FailureKind",
    "InternalError",
    "InvalidInput",
    "InvalidSnapshot",
    "Lease",
    "LeaseEvent",
    "LeaseExpired",
    "LeaseExpiredEvent",
    "LeasedEvent",
    "ManualClock",
    "NoResourceAvailable",
    "NotOwner",
    "Pool",
    "PoolClosed",
    "RateLimited",
    "RecoveredEvent",
    "RegisteredEvent",
    "RejectedEvent",
    "ReleasedEvent",
    "RenewedEvent",
    "ReputeError",
    "Resource",
    "ResourceLeased",
    "RevokedEvent",
    "StaleLease",
    "Stats",
    "StoreError",
    "UnblockedEvent",
    "UnknownLease",
    "UnknownResource",
    "UnregisteredEvent",
]
