//! The host's one error type, and the table of its codes ([`codes`]).
//!
//! The core's cases come back from the component as WIT variants with owned
//! strings, where `repute_core::Error` has `&'static str` fields (the core
//! allocates nothing for an error), so the host cannot hand out the core's
//! type itself: [`Error`] carries the core's cases with owned strings, and
//! adds what only a host can run into (storage refusals, ownership, a trapped
//! component, a closed pool). What every front end needs beyond the case
//! itself — code, HTTP status, class name, fields, a message in the front
//! end's unit — comes from here and [`codes::CODES`], so no front end keeps
//! its own copy.

use std::fmt;

use repute_core::Refusal;

pub mod codes;

use codes::Code;

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
    /// The store's history changed (a failover, a restart that may have
    /// lost writes): no permit is granted until every lease the earlier
    /// history may have granted has expired, `retry_after` ns from now.
    Recovering { retry_after: u64 },
}

/// Shorthand used across the host.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// This case's row of the code table.
    pub fn info(&self) -> &'static Code {
        match self {
            Error::InvalidInput { .. } => &codes::INVALID_INPUT,
            Error::UnknownResource => &codes::UNKNOWN_RESOURCE,
            Error::UnknownLease => &codes::UNKNOWN_LEASE,
            Error::StaleLease => &codes::STALE_LEASE,
            Error::LeaseExpired => &codes::LEASE_EXPIRED,
            Error::Blocked => &codes::BLOCKED,
            Error::NoResourceAvailable(_) => &codes::NO_RESOURCE_AVAILABLE,
            Error::Leased { .. } => &codes::LEASED,
            Error::BudgetExhausted { .. } => &codes::BUDGET_EXHAUSTED,
            Error::RateLimited { .. } => &codes::RATE_LIMITED,
            Error::Snapshot(_) => &codes::INVALID_SNAPSHOT,
            Error::Store(StoreError::Conflict { .. }) => &codes::STORAGE_CONFLICT,
            Error::Store(StoreError::StaleEpoch { .. }) => &codes::STALE_EPOCH,
            Error::Store(StoreError::Unavailable(_)) => &codes::STORAGE_UNAVAILABLE,
            Error::Store(StoreError::Recovering { .. }) => &codes::STORE_RECOVERING,
            Error::NotOwner { .. } => &codes::NOT_OWNER,
            Error::Trap { .. } => &codes::TRAP,
            Error::Runtime { .. } => &codes::RUNTIME,
            Error::Closed => &codes::CLOSED,
        }
    }

    /// A stable machine-readable code, shared by every front end. The core's
    /// cases keep the core's codes.
    pub fn code(&self) -> &'static str {
        self.info().code
    }

    /// Whether the pool no longer has the lease a call named (it expired,
    /// was ended, or a newer token holds its permit): the answer of every
    /// call that ends a lease the pool already ended.
    pub fn is_lease_gone(&self) -> bool {
        matches!(self, Error::LeaseExpired | Error::UnknownLease | Error::StaleLease)
    }

    /// For a refused acquire, whether nothing the pool knows of can end
    /// its wait sooner than `retry_after`: always for the acquire rate
    /// limit (its tokens come back with time only), for a refusal as the
    /// pool found it. `None` for any other error.
    pub fn settled(&self) -> Option<bool> {
        match self {
            Error::NoResourceAvailable(r) => Some(r.settled),
            Error::RateLimited { .. } | Error::Store(StoreError::Recovering { .. }) => Some(true),
            _ => None,
        }
    }

    /// The fields of this error's class ([`Code::fields`]), named and in
    /// that order, with their values.
    pub fn fields(&self) -> Vec<(&'static str, Field<'_>)> {
        use Field::{Absent, Count, Duration, Flag, Text};
        let store = |expected, found, mine, stored| {
            vec![
                ("expected", expected),
                ("found", found),
                ("mine", mine),
                ("stored", stored),
                ("retry_after", Duration(None)),
            ]
        };
        match self {
            Error::InvalidInput { field, rule } => vec![("field", Text(field)), ("rule", Text(rule))],
            Error::NoResourceAvailable(r) => vec![
                ("retry_after", Duration(r.retry_after)),
                ("expected_after", Duration(r.expected_after)),
                ("none_registered", Flag(r.registered == 0)),
                ("blocked", Count(r.blocked.into())),
                ("rate_limited", Count(r.rate_limited.into())),
                ("cooling", Count(r.cooling.into())),
                ("leased", Count(r.leased.into())),
                ("limited", Count(r.limited.into())),
                ("settled", Flag(self.settled() == Some(true))),
            ],
            Error::Leased { live } => vec![("live", Count((*live).into()))],
            Error::BudgetExhausted { budget, limit } => vec![("budget", Text(budget)), ("limit", Count(*limit))],
            Error::RateLimited { retry_after } => {
                vec![("retry_after", Duration(Some(*retry_after))), ("settled", Flag(self.settled() == Some(true)))]
            }
            Error::Snapshot(s) => {
                let (field, rule) = match s {
                    SnapshotError::Invalid { field, rule } => (Text(field), Text(rule)),
                    _ => (Absent, Absent),
                };
                vec![("reason", Text(s.reason())), ("field", field), ("rule", rule)]
            }
            Error::Store(StoreError::Conflict { expected, found }) => {
                store(Count(*expected), Count(*found), Absent, Absent)
            }
            Error::Store(StoreError::StaleEpoch { mine, stored }) => {
                store(Absent, Absent, Count(*mine), Count(*stored))
            }
            Error::Store(StoreError::Unavailable(_)) => store(Absent, Absent, Absent, Absent),
            Error::Store(StoreError::Recovering { retry_after }) => {
                let mut fields = store(Absent, Absent, Absent, Absent);
                fields[4].1 = Duration(Some(*retry_after));
                fields
            }
            Error::NotOwner { owner } => vec![("owner", Text(owner))],
            Error::UnknownResource
            | Error::UnknownLease
            | Error::StaleLease
            | Error::LeaseExpired
            | Error::Blocked
            | Error::Trap { .. }
            | Error::Runtime { .. }
            | Error::Closed => Vec::new(),
        }
    }

    /// The message, with durations in `unit`: each front end asks for its
    /// own, so a message says what the error's fields say. `Display` is the
    /// message in milliseconds.
    pub fn message(&self, unit: Unit) -> String {
        match self {
            Error::InvalidInput { field, rule } => format!("invalid {field}: {rule}"),
            Error::UnknownResource => "resource is not registered".into(),
            Error::UnknownLease => "no live lease with that id".into(),
            Error::StaleLease => "stale fencing token".into(),
            Error::LeaseExpired => "lease expired".into(),
            Error::Blocked => "resource is blocklisted".into(),
            Error::NoResourceAvailable(r) => {
                let counts = Refusal { retry_after: None, expected_after: None, ..*r };
                let expected = match r.expected_later() {
                    Some(ns) => format!(", expected after {}", unit.show(ns)),
                    None => String::new(),
                };
                match r.retry_after {
                    Some(ns) => format!("no resource available ({counts}; retry after {}{expected})", unit.show(ns)),
                    None => format!("no resource available ({counts})"),
                }
            }
            Error::Leased { live } => format!("resource has {live} live lease(s)"),
            Error::BudgetExhausted { budget, limit } => format!("budget {budget} exhausted (limit {limit})"),
            Error::RateLimited { retry_after } => format!("rate limited (retry after {})", unit.show(*retry_after)),
            Error::Snapshot(e) => format!("snapshot refused: {e}"),
            Error::Store(StoreError::Recovering { retry_after }) => format!(
                "storage: the store changed its history (a failover or a lossy restart); \
                 leases it may have forgotten expire first (retry after {})",
                unit.show(*retry_after)
            ),
            Error::Store(e) => format!("storage: {e}"),
            Error::NotOwner { owner } => format!("not owner: {owner}"),
            Error::Trap { message } => format!("component trapped (shard rebuilt): {message}"),
            Error::Runtime { message } => format!("wasm runtime: {message}"),
            Error::Closed => "pool is closed".into(),
        }
    }

    /// One error of every row of the code table, in table order: the front
    /// ends' tests map each to its class and fields (the host's tests check
    /// that the list and the table agree).
    #[doc(hidden)]
    pub fn examples() -> Vec<Error> {
        let refusal = Refusal {
            registered: 3,
            blocked: 1,
            rate_limited: 1,
            cooling: 1,
            leased: 0,
            limited: 0,
            retry_after: Some(1_500_000_000),
            expected_after: Some(290_000_000_000),
            settled: true,
        };
        vec![
            Error::invalid("ttl", "must be > 0"),
            Error::UnknownResource,
            Error::UnknownLease,
            Error::StaleLease,
            Error::LeaseExpired,
            Error::Blocked,
            Error::NoResourceAvailable(refusal),
            Error::Leased { live: 2 },
            Error::BudgetExhausted { budget: "max_resources".into(), limit: 10 },
            Error::RateLimited { retry_after: 250_000_000 },
            Error::Snapshot(SnapshotError::Invalid { field: "policy".into(), rule: "bad".into() }),
            Error::Store(StoreError::Conflict { expected: 1, found: 2 }),
            Error::Store(StoreError::StaleEpoch { mine: 3, stored: 4 }),
            Error::Store(StoreError::Unavailable("down".into())),
            Error::Store(StoreError::Recovering { retry_after: 1_200_000_000 }),
            Error::NotOwner { owner: "pid 7".into() },
            Error::Trap { message: "boom".into() },
            Error::Runtime { message: "no engine".into() },
            Error::Closed,
        ]
    }

    pub(crate) fn invalid(field: &str, rule: &str) -> Self {
        Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() }
    }
}

/// The name every front end gives a selector's label filters.
const WHERE: &str = "where";

/// An acquire's error as the front ends name its fields. The core calls a
/// selector's label filters `labels`, as it calls a registration's labels;
/// HTTP, Python and JavaScript take the filters as `where` (`labels` is the
/// registration's there), so a refusal names what the caller wrote. Every
/// other error passes unchanged.
pub fn selector_error(e: Error) -> Error {
    match e {
        Error::InvalidInput { field, rule } => {
            let field = match field.strip_prefix("labels") {
                Some(rest) if rest.is_empty() || rest.starts_with('.') => format!("{WHERE}{rest}"),
                _ => field,
            };
            Error::InvalidInput { field, rule }
        }
        e => e,
    }
}

/// One field value of an error, for a front end to show in its own types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    Text(&'a str),
    Count(u64),
    Flag(bool),
    /// Nanoseconds, shown in the front end's unit; `None` when the wait is
    /// not known (the field is there all the same, named in that unit).
    Duration(Option<u64>),
    /// The class has the field, this error has no value for it.
    Absent,
}

/// The unit a front end shows durations in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Python: seconds, as the error's `retry_after`, to whole milliseconds
    /// rounded up (a message of a nanosecond wait reads `0.177 s`, not
    /// `0.176000123 s`).
    Seconds,
    /// JavaScript and HTTP: whole milliseconds, rounded up (a retry sooner
    /// than the wait would be refused again).
    Millis,
}

impl Unit {
    fn show(self, ns: u64) -> String {
        match self {
            Unit::Seconds => format!("{} s", ns.div_ceil(1_000_000) as f64 / 1e3),
            Unit::Millis => format!("{} ms", ns.div_ceil(1_000_000)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(Unit::Millis))
    }
}

impl SnapshotError {
    /// A short machine-readable name for why a snapshot was refused.
    pub fn reason(&self) -> &'static str {
        match self {
            SnapshotError::Truncated => "truncated",
            SnapshotError::Foreign => "foreign",
            SnapshotError::UnsupportedVersion { .. } => "unsupported_version",
            SnapshotError::Checksum => "checksum",
            SnapshotError::Malformed => "malformed",
            SnapshotError::Invalid { .. } => "invalid",
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
            StoreError::Recovering { retry_after } => {
                write!(f, "recovering from a change of the store's history ({} ms left)", retry_after / 1_000_000)
            }
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

/// Core errors met in the host itself (outcome parsing, the linked-in core
/// of the differential test) map the same way the WIT variants do.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_sampled_and_has_its_row() {
        let samples = Error::examples();
        let rows: Vec<&str> = samples.iter().map(|e| e.info().code).collect();
        let table: Vec<&str> = codes::CODES.iter().map(|row| row.code).collect();
        assert_eq!(rows, table, "one sample per row, in table order");
        for e in &samples {
            assert_eq!(e.code(), e.info().code);
            assert_eq!(codes::lookup(e.code()), Some(e.info()));
        }
    }

    #[test]
    fn fields_are_the_rows_fields_in_order() {
        for e in Error::examples() {
            let names: Vec<&str> = e.fields().iter().map(|(name, _)| *name).collect();
            assert_eq!(names, e.info().fields, "{}", e.code());
        }
    }

    #[test]
    fn messages_state_durations_in_the_asked_unit() {
        let rate = Error::RateLimited { retry_after: 250_000_000 };
        assert_eq!(rate.message(Unit::Seconds), "rate limited (retry after 0.25 s)");
        assert_eq!(rate.message(Unit::Millis), "rate limited (retry after 250 ms)");
        assert_eq!(rate.to_string(), rate.message(Unit::Millis));
        let odd = Error::RateLimited { retry_after: 176_000_123 };
        assert_eq!(odd.message(Unit::Seconds), "rate limited (retry after 0.177 s)", "whole ms, rounded up");
        assert_eq!(odd.message(Unit::Millis), "rate limited (retry after 177 ms)");
        let none = &Error::examples()[6];
        assert_eq!(
            none.message(Unit::Seconds),
            "no resource available (1 blocked, 1 rate limited, 1 cooling; retry after 1.5 s, expected after 290 s)"
        );
        assert_eq!(
            none.message(Unit::Millis),
            "no resource available (1 blocked, 1 rate limited, 1 cooling; retry after 1500 ms, expected after 290000 ms)"
        );
        for e in Error::examples() {
            for unit in [Unit::Seconds, Unit::Millis] {
                assert!(!e.message(unit).contains(" ns"), "{}", e.message(unit));
            }
        }
    }

    #[test]
    fn a_selectors_label_filters_are_named_where() {
        let renamed = |field: &str| match selector_error(Error::invalid(field, "r")) {
            Error::InvalidInput { field, .. } => field,
            e => panic!("{e:?}"),
        };
        assert_eq!(renamed("labels"), "where");
        assert_eq!(renamed("labels.values"), "where.values");
        assert_eq!(renamed("labelset"), "labelset");
        assert_eq!(renamed("exclude"), "exclude");
        assert_eq!(selector_error(Error::Blocked), Error::Blocked);
    }

    #[test]
    fn snapshot_fields_name_the_reason() {
        let e = Error::Snapshot(SnapshotError::Checksum);
        assert_eq!(
            e.fields(),
            vec![("reason", Field::Text("checksum")), ("field", Field::Absent), ("rule", Field::Absent)]
        );
    }
}
