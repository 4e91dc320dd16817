//! The host's one error type. It mirrors `repute_core::Error` case for case
//! (owned strings instead of `&'static str`, because values cross the wasm
//! boundary) and adds what only a host can run into: storage refusals,
//! ownership, and a trapped component. The CLI, the Python and the Node
//! bindings each map this enum once.

use std::fmt;

use repute_core::Refusal;

/// Why a host operation was refused. A refusal leaves the pool unchanged.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke a validation rule; `field` names it, `rule` says which rule.
    InvalidInput { field: String, rule: String },
    /// The resource is not registered.
    UnknownResource,
    /// No lease with that id is live.
    UnknownLease,
    /// The lease exists but the token presented is not its current fencing token.
    StaleLease,
    /// The lease ran out (or its authority no longer recognises it); its permit is free.
    LeaseExpired,
    /// The resource, or the resource in this context, is blocklisted.
    Blocked,
    /// Nothing selectable now: why, resource by resource, and when the first may free up.
    NoResourceAvailable(Refusal),
    /// Unregister without `force` while leases are live.
    Leased { live: u32 },
    /// A configured budget would be exceeded.
    BudgetExhausted { budget: String, limit: u64 },
    /// The acquire rate limit has no token; one is minted after `retry_after` ns.
    RateLimited { retry_after: u64 },
    /// A snapshot was refused; the pool is left as it was.
    Snapshot(SnapshotError),
    /// A storage or fencing provider refused or failed.
    Store(StoreError),
    /// Another process (or another pool in this one) owns the tenant.
    NotOwner { owner: String },
    /// The component trapped (a core bug, or a call over its time or memory
    /// limit). The shard has been rebuilt from its last good state.
    Trap { message: String },
    /// The wasm runtime could not load or instantiate the component.
    Runtime { message: String },
    /// The pool was closed; an embedded pool answers every later call so.
    Closed,
}

/// Why a snapshot was refused; mirrors `repute_core::SnapshotError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    Truncated,
    Foreign,
    UnsupportedVersion { found: u16, supported: u16 },
    Checksum,
    Malformed,
    Invalid { field: String, rule: String },
}

/// Why storage refused or failed. Refusals wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// Another writer saved a checkpoint since this pool loaded or saved one.
    Conflict { expected: u64, found: u64 },
    /// Ownership of the tenant moved to a writer with a higher epoch.
    StaleEpoch { mine: u64, stored: u64 },
    /// The backend failed (IO, corruption, connection).
    Unavailable(String),
}

/// Shorthand used across the host.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A stable machine-readable code, shared by every front end. The core's
    /// cases keep the core's codes.
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
            Error::Store(StoreError::Conflict { .. }) => "storage_conflict",
            Error::Store(StoreError::StaleEpoch { .. }) => "stale_epoch",
            Error::Store(StoreError::Unavailable(_)) => "storage_unavailable",
            Error::NotOwner { .. } => "not_owner",
            Error::Trap { .. } => "trap",
            Error::Runtime { .. } => "runtime",
            Error::Closed => "closed",
        }
    }

    pub(crate) fn invalid(field: &str, rule: &str) -> Self {
        Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() }
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
            Error::Store(e) => write!(f, "storage: {e}"),
            Error::NotOwner { owner } => write!(f, "not owner: {owner}"),
            Error::Trap { message } => write!(f, "component trapped (shard rebuilt): {message}"),
            Error::Runtime { message } => write!(f, "wasm runtime: {message}"),
            Error::Closed => f.write_str("pool is closed"),
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Truncated => f.write_str("truncated"),
            SnapshotError::Foreign => f.write_str("not a repute snapshot"),
            SnapshotError::UnsupportedVersion { found, supported } => {
                write!(f, "format version {found} is not supported (this build reads up to {supported})")
            }
            SnapshotError::Checksum => f.write_str("checksum mismatch"),
            SnapshotError::Malformed => f.write_str("body does not decode"),
            SnapshotError::Invalid { field, rule } => write!(f, "invalid {field}: {rule}"),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict { expected, found } => {
                write!(f, "checkpoint version conflict (expected {expected}, found {found}): another writer saved")
            }
            StoreError::StaleEpoch { mine, stored } => {
                write!(f, "owner epoch {mine} is stale (store has {stored})")
            }
            StoreError::Unavailable(message) => write!(f, "unavailable: {message}"),
        }
    }
}

impl std::error::Error for Error {}
impl std::error::Error for SnapshotError {}
impl std::error::Error for StoreError {}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

impl From<repute_core::SnapshotError> for SnapshotError {
    fn from(e: repute_core::SnapshotError) -> Self {
        use repute_core::SnapshotError as S;
        match e {
            S::Truncated => SnapshotError::Truncated,
            S::Foreign => SnapshotError::Foreign,
            S::UnsupportedVersion { found, supported } => SnapshotError::UnsupportedVersion { found, supported },
            S::Checksum => SnapshotError::Checksum,
            S::Malformed => SnapshotError::Malformed,
            S::Invalid { field, rule } => SnapshotError::Invalid { field: field.to_owned(), rule: rule.to_owned() },
        }
    }
}

/// The native path (differential test, benchmarks) maps core errors the same
/// way the component path maps the WIT variants.
impl From<repute_core::Error> for Error {
    fn from(e: repute_core::Error) -> Self {
        use repute_core::Error as E;
        match e {
            E::InvalidInput { field, rule } => Error::invalid(field, rule),
            E::UnknownResource => Error::UnknownResource,
            E::UnknownLease => Error::UnknownLease,
            E::StaleLease => Error::StaleLease,
            E::LeaseExpired => Error::LeaseExpired,
            E::Blocked => Error::Blocked,
            E::NoResourceAvailable(refusal) => Error::NoResourceAvailable(refusal),
            E::Leased { live } => Error::Leased { live },
            E::BudgetExhausted { budget, limit } => Error::BudgetExhausted { budget: budget.to_owned(), limit },
            E::RateLimited { retry_after } => Error::RateLimited { retry_after },
            E::Snapshot(s) => Error::Snapshot(s.into()),
        }
    }
}
