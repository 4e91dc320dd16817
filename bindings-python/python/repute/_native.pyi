# Hand-kept type stubs for the native module (bindings-python/src). Keep each
# signature in step with its `#[pyo3(signature = ...)]`; tests/typed_example.py
# is checked against these by mypy in the test suite.

from types import TracebackType
from typing import Awaitable, Callable, Iterable, Iterator, Literal, Mapping, Sequence, final

from ._types import ContextLimits, FailureKind, Limits, Profile

_CellState = Literal["healthy", "cooling", "recovering", "blocklisted"]
_LeaseKind = Literal["client", "trial", "probe", "fail_open"]
_Recovery = Literal["traffic", "probe", "classic"]
# A probe: (kind, value, context) -> True/None healthy, False failed, or an HTTP status.
_ProbeAnswer = bool | int | None
_Probe = Callable[[str, str, str], _ProbeAnswer] | Callable[[str, str, str], Awaitable[_ProbeAnswer]]
_Headers = Mapping[str, str] | Iterable[tuple[str, str]]
# `acquire(where=...)`: label name -> the value, or the values, it must have.
_Where = Mapping[str, str | Sequence[str]]

class ReputeError(Exception):
    """Base class of every error repute raises."""

    code: str

def _error_table() -> tuple[list[tuple[str, int, str, list[str]]], list[ReputeError]]: ...

class InvalidInputError(ReputeError):
    field: str
    rule: str

class UnknownResourceError(ReputeError): ...
class UnknownLeaseError(ReputeError): ...

class StaleLeaseError(ReputeError):
    """The token is not the lease's current one; which token is, is not told."""

class LeaseExpiredError(ReputeError): ...
class BlockedError(ReputeError): ...

class NoResourceAvailableError(ReputeError):
    """Nothing selectable: each registered resource counted under the first
    reason that holds it back, and when the first may free up."""

    retry_after: float | None
    none_registered: bool
    blocked: int
    rate_limited: int
    cooling: int
    leased: int
    limited: int
    """Over a usage limit until its window frees up, or retired by its limits."""

class LeasedError(ReputeError):
    live: int

class BudgetExhaustedError(ReputeError):
    budget: str
    limit: int

class RateLimitedError(ReputeError):
    retry_after: float

class InvalidSnapshotError(ReputeError):
    reason: Literal["truncated", "foreign", "unsupported_version", "checksum", "malformed", "invalid"]
    field: str | None
    rule: str | None

class StoreError(ReputeError):
    """`code` "storage_conflict" sets `expected`/`found` (checkpoint versions),
    "stale_epoch" `mine`/`stored` (owner epochs); "storage_unavailable" none."""

    expected: int | None
    found: int | None
    mine: int | None
    stored: int | None

class NotOwnerError(ReputeError):
    owner: str

class PoolClosedError(ReputeError): ...
class InternalError(ReputeError): ...

@final
class ManualClock:
    """A clock that moves only with `advance`; pass it as `Pool(clock=...)`."""

    def __init__(self, start: float = 0.0) -> None: ...
    def advance(self, seconds: float) -> None: ...
    @property
    def now(self) -> float: ...

@final
class Cell:
    @property
    def context(self) -> str | None: ...
    @property
    def state(self) -> _CellState: ...
    @property
    def score(self) -> int: ...
    @property
    def effective_score(self) -> float: ...
    @property
    def consecutive_failures(self) -> int: ...
    @property
    def consecutive_successes(self) -> int: ...
    @property
    def cooling_until(self) -> float | None: ...
    @property
    def cooling_until_unix(self) -> float | None: ...
    @property
    def cause(self) -> FailureKind | None: ...
    @property
    def half_open(self) -> bool: ...
    @property
    def due_for_probe(self) -> bool: ...
    @property
    def success_rate(self) -> float | None: ...
    @property
    def latency(self) -> float: ...
    @property
    def observations(self) -> int: ...
    @property
    def blocked(self) -> bool: ...
    @property
    def blocked_until(self) -> float | None: ...
    @property
    def blocked_until_unix(self) -> float | None: ...
    @property
    def block_reason(self) -> str | None: ...

@final
class Resource:
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def permits(self) -> int: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def uses(self) -> int:
        """Grants since it was registered, as its limits count them (`rpm`,
        `tpm`, `min_interval` and `max_uses` do; without them 0)."""
    @property
    def retired(self) -> Literal["max_uses", "max_age"] | None: ...
    @property
    def leased(self) -> int: ...
    @property
    def score(self) -> int: ...
    @property
    def contexts(self) -> int: ...
    @property
    def blocked(self) -> bool: ...
    @property
    def blocked_until(self) -> float | None: ...
    @property
    def blocked_until_unix(self) -> float | None: ...
    @property
    def block_reason(self) -> str | None: ...

@final
class Stats:
    @property
    def resources(self) -> int: ...
    @property
    def cells(self) -> int: ...
    @property
    def contexts(self) -> int: ...
    @property
    def live_leases(self) -> int: ...
    @property
    def available(self) -> int: ...
    @property
    def due_for_probe(self) -> int: ...
    @property
    def now(self) -> float: ...

@final
class ProbeTarget:
    """A cell waiting for a probe."""

    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str: ...

class Event:
    @property
    def at(self) -> float: ...
    @property
    def at_unix(self) -> float: ...
    @property
    def type(self) -> str: ...

@final
class RegisteredEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def permits(self) -> int: ...

@final
class UnregisteredEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...

@final
class CooledEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str | None: ...
    @property
    def until(self) -> float: ...
    @property
    def until_unix(self) -> float: ...
    @property
    def cause(self) -> FailureKind: ...

@final
class RecoveredEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str: ...

@final
class BlocklistedEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str | None: ...
    @property
    def until(self) -> float | None: ...
    @property
    def until_unix(self) -> float | None: ...
    @property
    def reason(self) -> str | None: ...

@final
class UnblockedEvent(Event):
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str | None: ...

@final
class RejectedEvent(Event):
    @property
    def context(self) -> str: ...
    @property
    def reason(self) -> Literal["no_candidates", "rate_limited"]: ...

@final
class RetiredEvent(Event):
    """Its usage limits retired a resource; it is not selected again."""

    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def reason(self) -> Literal["max_uses", "max_age"]: ...

class LeaseEvent(Event):
    @property
    def lease_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str: ...
    @property
    def permit(self) -> int: ...
    @property
    def token(self) -> int: ...
    @property
    def lease_kind(self) -> _LeaseKind: ...
    @property
    def granted_at(self) -> float: ...
    @property
    def granted_at_unix(self) -> float: ...
    @property
    def expires_at(self) -> float: ...
    @property
    def expires_at_unix(self) -> float: ...

@final
class LeasedEvent(LeaseEvent): ...

@final
class RenewedEvent(LeaseEvent): ...

@final
class ReleasedEvent(LeaseEvent): ...

@final
class LeaseExpiredEvent(LeaseEvent): ...

@final
class RevokedEvent(LeaseEvent): ...

_Loss = Literal["expired", "renewal_refused", "blocked", "owner_lost", "max_hold", "closed"]

@final
class RedisLink:
    """A pool's grants and revokes on Redis as bytes (used by the asyncio layer)."""

    @property
    def address(self) -> tuple[str, int]: ...
    def acquire(
        self,
        context: str,
        auto_renew: bool = False,
        max_hold: float | None = None,
        *,
        kind: str | None = None,
        where: _Where | None = None,
        exclude: Iterable[str] | None = None,
        prefer: str | None = None,
        affinity: str | None = None,
        cost: int | None = None,
    ) -> int: ...
    def release(self, lease: Lease) -> tuple[str, int | None]: ...
    def output(self) -> bytes: ...
    def feed(self, data: bytes) -> list[tuple[int, Lease | None | ReputeError]]: ...
    def unavailable(self, why: str) -> ReputeError: ...
    def reset(self, why: str) -> list[tuple[int, Lease | None | ReputeError]]: ...

@final
class Waiting:
    """An acquire's waiting plan (used by the asyncio layer)."""

    def next(self, retry_after: float | None) -> float | None: ...

@final
class Lease:
    """A granted lease; `with lease:` releases it on exit.

    `valid` is False once released or lost. A lease is lost for good when a
    renewal is refused, its resource is blocked, the tenant's ownership is
    lost, the local deadline (send time + TTL - margin) passes, `max_hold`
    ends an auto-renewed lease, or the pool closes; `loss` says which, and
    `on_lost` callbacks run once.
    """

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def context(self) -> str: ...
    @property
    def permit(self) -> int: ...
    @property
    def token(self) -> int: ...
    @property
    def lease_kind(self) -> _LeaseKind: ...
    @property
    def secret(self) -> str | None: ...
    @property
    def ttl(self) -> float: ...
    @property
    def granted_at(self) -> float: ...
    @property
    def granted_at_unix(self) -> float: ...
    @property
    def expires_at(self) -> float: ...
    @property
    def expires_at_unix(self) -> float: ...
    @property
    def deadline(self) -> float: ...
    @property
    def expires_in(self) -> float: ...
    @property
    def valid(self) -> bool: ...
    @property
    def released(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    @property
    def loss(self) -> _Loss | None: ...
    def on_lost(self, callback: Callable[[_Loss], object]) -> None: ...
    def renew(self) -> None: ...
    def release(self) -> bool: ...
    def _release_as(self) -> Literal["held", "lost", "lost_unseen"]: ...
    def reconcile(self, used: int) -> None:
        """The lease used `used` tokens of its resource's `tpm` instead of its `cost`."""
    def report_success(self, latency: float, *, usage: int | None = None) -> None: ...
    def report_failure(
        self,
        kind: FailureKind | str,
        latency: float,
        *,
        retry_after: float | None = None,
        usage: int | None = None,
    ) -> None: ...
    def report_http(
        self,
        status: int,
        latency: float = 0.0,
        headers: _Headers | None = None,
        *,
        body: str | bytes | None = None,
        usage: int | None = None,
    ) -> None: ...
    def __enter__(self) -> Lease: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

@final
class Pool:
    """One tenant's pool. `store` is "memory", "sqlite:PATH", a "postgres://" or a
    "redis://" URL; `mode`, `owner_ttl` and `owners` ("store" or "etcd://HOST:PORT")
    matter only for the shared stores."""

    def __init__(
        self,
        store: str = "memory",
        tenant: str = "default",
        lease_ttl: float = 30.0,
        strategy: Literal["classic", "thompson", "first"] | None = None,
        seed: int | None = None,
        clock: ManualClock | None = None,
        *,
        probe_ttl: float = 15.0,
        renew_margin: float | None = None,
        max_resources: int | None = None,
        max_cells: int | None = None,
        rate: float | None = None,
        burst: int = 1,
        mode: Literal["sharded", "shared"] = "sharded",
        owner_ttl: float = 10.0,
        owners: str = "store",
        recovery: _Recovery = "traffic",
        fail_open: bool = False,
        cooldowns: dict[str, dict[str, float]] | None = None,
        probe: _Probe | None = None,
        probe_concurrency: int = 4,
        probe_every: float = 1.0,
        profiles: dict[str, Profile] | None = None,
    ) -> None: ...
    @property
    def now(self) -> float: ...
    @property
    def waits_on_network(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def register(
        self,
        kind: str,
        value: str,
        permits: int = 1,
        *,
        labels: Mapping[str, str] | None = None,
        secret: str | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        min_interval: float | None = None,
        max_uses: int | None = None,
        max_age: float | None = None,
        per_context: ContextLimits | None = None,
    ) -> bool: ...
    def unregister(self, kind: str, value: str, force: bool = False) -> None: ...
    def try_acquire(
        self,
        context: str,
        *,
        kind: str | None = None,
        where: _Where | None = None,
        exclude: Iterable[str] | None = None,
        prefer: str | None = None,
        affinity: str | None = None,
        cost: int | None = None,
        auto_renew: bool = False,
        max_hold: float | None = None,
    ) -> Lease | None: ...
    def acquire(
        self,
        context: str,
        timeout: float | None = None,
        *,
        kind: str | None = None,
        where: _Where | None = None,
        exclude: Iterable[str] | None = None,
        prefer: str | None = None,
        affinity: str | None = None,
        cost: int | None = None,
        auto_renew: bool = False,
        max_hold: float | None = None,
    ) -> Lease: ...
    def _waiting(self, timeout: float | None = None) -> Waiting: ...
    def _link(self) -> RedisLink | None: ...
    def acquire_for_probe(self, kind: str, value: str, context: str) -> Lease: ...
    def resume(self, lease_id: int, token: int) -> Lease: ...
    def report_success(self, kind: str, value: str, context: str, latency: float) -> None: ...
    def report_failure(
        self,
        kind: str,
        value: str,
        context: str,
        failure: FailureKind | str,
        latency: float,
        *,
        retry_after: float | None = None,
    ) -> None: ...
    def report_http(
        self,
        kind: str,
        value: str,
        context: str,
        status: int,
        latency: float = 0.0,
        headers: _Headers | None = None,
        *,
        body: str | bytes | None = None,
    ) -> None: ...
    def block(
        self,
        kind: str,
        value: str,
        seconds: float | None = None,
        context: str | None = None,
        reason: str | None = None,
    ) -> None: ...
    def unblock(self, kind: str, value: str, context: str | None = None) -> bool: ...
    def due_for_probe(self) -> list[ProbeTarget]: ...
    def cells(self, kind: str, value: str) -> list[Cell]: ...
    def resources(self) -> list[Resource]: ...
    def stats(self) -> Stats: ...
    def snapshot(self, with_leases: bool = True) -> bytes: ...
    def snapshot_json(self, with_leases: bool = True) -> str: ...
    def restore(self, data: bytes) -> None: ...
    def restore_json(self, data: str) -> None: ...
    def checkpoint(self, with_leases: bool = True) -> int: ...
    def sync(self) -> int: ...
    def events(self) -> Iterator[Event]: ...
    def dropped_events(self) -> int: ...
    def close(self, checkpoint: bool = True) -> None: ...
    def __enter__(self) -> Pool: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...
