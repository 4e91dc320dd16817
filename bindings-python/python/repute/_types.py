"""Plain-Python types shared by the native module and the package."""

from __future__ import annotations

import enum
from typing import TypedDict


class FailureKind(str, enum.Enum):
    """Why a use of a resource failed.

    A ``str`` enum: every API that takes a failure kind accepts a member or
    its name (``"timeout"``), and members compare equal to their names.
    """

    CONNECTION_RESET = "connection_reset"
    TLS_HANDSHAKE = "tls_handshake"
    TIMEOUT = "timeout"
    BLOCKED = "blocked"
    SLOW = "slow"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    AUTH_FAILED = "auth_failed"

    def __str__(self) -> str:
        return self.value


class Limits(TypedDict, total=False):
    """A resource's usage limits, as ``Resource.limits`` shows them: only the
    limits it has, by ``register``'s keyword names, so
    ``pool.register(kind, value, **resource.limits)`` registers them again."""

    rpm: int
    """At most this many grants in any 60 s."""
    tpm: int
    """At most this many tokens (each lease's cost, reconciled to its use) in any 60 s."""
    min_interval: float
    """At least this many seconds between two grants."""
    max_uses: int
    """At most this many grants ever; then the resource is retired."""
    max_age: float
    """Retired this many seconds after it was registered."""
