"""Plain-Python types shared by the native module and the package."""

from __future__ import annotations

import enum


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
