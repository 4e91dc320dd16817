"""Plain-Python types shared by the native module and the package."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Literal, TypedDict

Profile = Literal["generic", "proxy", "api-key", "openai", "anthropic", "gemini"]
"""How the answers of a kind's resources are read (``Pool(profiles={kind: profile})``):
a proxy's 403 cools that proxy for that site only, an API key's 401 blocks the
key everywhere, a quota error in the body pauses the key until its quota can
have reset. A kind not declared has the profile its name names, else ``generic``."""


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


class ContextLimits(TypedDict, total=False):
    """``register``'s ``per_context``: limits each context of a resource has
    on its own, beside the resource's (a provider's quota per model)."""

    rpm: int
    """At most this many grants for one context in any 60 s."""
    tpm: int
    """At most this many tokens for one context in any 60 s."""
    min_interval: float
    """At least this many seconds between two grants for one context."""


class Limits(TypedDict, total=False):
    """A resource's usage limits, as ``Resource.limits`` shows them: only the
    limits it has, by ``register``'s keyword names, so
    ``pool.register(kind, value, **resource.limits)`` registers them again."""

    rpm: int
    """At most this many grants in any 60 s."""
    tpm: int
    """At most this many tokens (each lease's cost, reconciled to its use) in any 60 s."""
    rpd: int
    """At most this many grants in any rolling day."""
    tpd: int
    """At most this many tokens in any rolling day."""
    min_interval: float
    """At least this many seconds between two grants."""
    max_uses: int
    """At most this many grants ever; then the resource is retired."""
    max_age: float
    """Retired this many seconds after it was registered."""
    per_context: ContextLimits
    """What each context of the resource may use on its own."""


class GroupLimits(TypedDict, total=False):
    """A quota group's limits, as ``Group.limits`` shows them: only the
    limits it has, by ``set_group``'s keyword names, so
    ``pool.set_group(name, **group.limits)`` sets them again."""

    rpm: int
    """At most this many grants of its members in any 60 s."""
    tpm: int
    """At most this many tokens of its members in any 60 s."""
    rpd: int
    """At most this many grants of its members in any rolling day."""
    tpd: int
    """At most this many tokens of its members in any rolling day."""
    concurrency: int
    """At most this many live leases across its members."""
    shared_quota: bool
    """A ``quota_exhausted`` outcome on one member pauses every member."""


# The names the native module's signatures give their narrower types (its
# Rust source names these aliases; `stubgen.py` imports them into the stubs).
_CellState = Literal["healthy", "cooling", "recovering", "blocklisted"]
_LeaseKind = Literal["client", "trial", "probe", "fail_open"]
_Loss = Literal["expired", "renewal_refused", "blocked", "owner_lost", "max_hold", "closed"]
_Retirement = Literal["max_uses", "max_age"]
_Rejection = Literal["no_candidates", "rate_limited"]
_Release = Literal["held", "lost", "lost_unseen"]
_Strategy = Literal["classic", "thompson", "first"]
_Mode = Literal["sharded", "shared"]
_Recovery = Literal["traffic", "probe", "classic"]
# A probe: (kind, value, context) -> True/None healthy, False failed, or an HTTP status.
_ProbeAnswer = bool | int | None
_Probe = Callable[[str, str, str], _ProbeAnswer] | Callable[[str, str, str], Awaitable[_ProbeAnswer]]
_Headers = Mapping[str, str] | Iterable[tuple[str, str]]
# `acquire(where=...)`: label name -> the value, or the values, it must have.
_Where = Mapping[str, str | Sequence[str]]
# The attempt protocol's answers, for the adapters (`repute._native._Attempts`).
_Step = Literal["stream", "deliver", "retry"]
_Refused = tuple[Literal["wait", "again", "give_up"], float | None]
_Route = tuple[Literal["proxy", "header", "as_is"], str, str]
