//! One error type for every operation, so the host, the bindings and the HTTP
//! layer each map it once instead of parsing messages.

use core::fmt;

use crate::refusal::Refusal;

/// Why an operation was refused. Every refusal leaves the pool unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// An argument broke a validation rule; `field` names it, `rule` says which rule.
    InvalidInput { field: &'static str, rule: &'static str },
    /// The resource is not registered.
    UnknownResource,
    /// No lease with that id is live (released, expired, revoked or never granted).
    UnknownLease,
    /// The lease exists but the token presented is not its current fencing
    /// token. The current one is not told: a holder fenced out must not
    /// learn the token that fences it out.
    StaleLease,
    /// The lease ran out before the call; its permit has been freed.
    LeaseExpired,
    /// The resource (or the resource in this context) is on the blocklist.
    Blocked,
    /// Nothing selectable right now: why, resource by resource, and when
    /// the first of them may free up.
    NoResourceAvailable(Refusal),
    /// Unregister without `force` while leases are live.
    Leased { live: u32 },
    /// A configured budget would be exceeded.
    BudgetExhausted { budget: &'static str, limit: u64 },
    /// The acquire rate limit has no token; one is minted after `retry_after` nanoseconds.
    RateLimited { retry_after: u64 },
    /// A snapshot could not be decoded; the pool is left as it was.
    Snapshot(SnapshotError),
}

impl Error {
    pub(crate) const fn invalid(field: &'static str, rule: &'static str) -> Self {
        Error::InvalidInput { field, rule }
    }

    /// A stable machine-readable code, shared by every front end.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidInput { .. } => "invalid_input",
            Error::UnknownResource => "unknown_resource",
            Error::UnknownLease => "unknown_lease",
            Error::StaleLease => "stale_lease",
            Error::LeaseExpired => "lease_expired",
            Error::Blocked => "blocked",
            Error::NoResourceAvailable { .. } => "no_resource_available",
            Error::Leased { .. } => "leased",
            Error::BudgetExhausted { .. } => "budget_exhausted",
            Error::RateLimited { .. } => "rate_limited",
            Error::Snapshot(_) => "invalid_snapshot",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidInput { field, rule } => write!(f, "invalid {field}: {rule}"),
            Error::UnknownResource => f.write_str("resource is not registered"),
            Error::UnknownLease => f.write_str("no live lease with that id"),
            Error::StaleLease => f.write_str("stale fencing token"),
            Error::LeaseExpired => f.write_str("lease expired"),
            Error::Blocked => f.write_str("resource is blocklisted"),
            Error::NoResourceAvailable(refusal) => write!(f, "no resource available ({refusal})"),
            Error::Leased { live } => write!(f, "resource has {live} live lease(s)"),
            Error::BudgetExhausted { budget, limit } => {
                write!(f, "budget {budget} exhausted (limit {limit})")
            }
            Error::RateLimited { retry_after } => {
                write!(f, "rate limited (retry after {} ms)", retry_after.div_ceil(1_000_000))
            }
            Error::Snapshot(e) => write!(f, "snapshot refused: {e}"),
        }
    }
}

impl core::error::Error for Error {}

/// Why a snapshot was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// Shorter than its header or its declared body.
    Truncated,
    /// Not a repute snapshot (wrong magic).
    Foreign,
    /// Written by a newer (or unknown) format version.
    UnsupportedVersion { found: u16, supported: u16 },
    /// The body does not match its checksum.
    Checksum,
    /// The body or JSON does not decode.
    Malformed,
    /// Decoded, but a value breaks a rule of the pool.
    Invalid { field: &'static str, rule: &'static str },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Truncated => f.write_str("truncated"),
            SnapshotError::Foreign => f.write_str("not a repute snapshot"),
            SnapshotError::UnsupportedVersion { found, supported } => {
                write!(f, "format version {found} is not supported (this build reads format {supported})")
            }
            SnapshotError::Checksum => f.write_str("checksum mismatch"),
            SnapshotError::Malformed => f.write_str("body does not decode"),
            SnapshotError::Invalid { field, rule } => write!(f, "invalid {field}: {rule}"),
        }
    }
}

impl From<SnapshotError> for Error {
    fn from(e: SnapshotError) -> Self {
        Error::Snapshot(e)
    }
}

pub type Result<T, E = Error> = core::result::Result<T, E>;
