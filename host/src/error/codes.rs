//! The one table of error codes. Every front end reads it: the CLI for the
//! HTTP status and problem title, the Python and Node bindings for the
//! exception class (one name in both languages) and the fields that class
//! carries. A case added to [`Error`](super::Error) without a row here does
//! not compile ([`Error::info`](super::Error::info) matches exhaustively), and
//! the tests below check the rows against each other.

/// One error code as every front end shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The stable machine-readable code: `e.code` in Python and JavaScript,
    /// `urn:repute:problem:<code>` in HTTP.
    pub code: &'static str,
    /// The HTTP status the server answers with.
    pub status: u16,
    /// The problem title in HTTP.
    pub title: &'static str,
    /// The exception class, the same name in Python and JavaScript. Codes
    /// that differ only in detail share a class (`StoreError`).
    pub class: &'static str,
    /// The fields an error of this class carries, in snake_case. Each front
    /// end renames them to its own convention and shows a duration in its
    /// own unit: `retry_after` is seconds in Python, `retryAfterMs` in
    /// JavaScript, `retry_after_ms` in HTTP. Every code of one class has the
    /// same fields, so a field is always there (absent values are
    /// `None`/`null`).
    pub fields: &'static [&'static str],
}

const STORE_FIELDS: &[&str] = &["expected", "found", "mine", "stored", "retry_after"];

pub const INVALID_INPUT: Code = Code {
    code: "invalid_input",
    status: 400,
    title: "Invalid input",
    class: "InvalidInputError",
    fields: &["field", "rule"],
};
pub const UNKNOWN_RESOURCE: Code = Code {
    code: "unknown_resource",
    status: 404,
    title: "Resource is not registered",
    class: "UnknownResourceError",
    fields: &[],
};
pub const UNKNOWN_LEASE: Code = Code {
    code: "unknown_lease",
    status: 404,
    title: "No live lease with that id",
    class: "UnknownLeaseError",
    fields: &[],
};
pub const STALE_LEASE: Code =
    Code { code: "stale_lease", status: 409, title: "Stale fencing token", class: "StaleLeaseError", fields: &[] };
pub const LEASE_EXPIRED: Code =
    Code { code: "lease_expired", status: 409, title: "Lease expired", class: "LeaseExpiredError", fields: &[] };
pub const BLOCKED: Code =
    Code { code: "blocked", status: 409, title: "Resource is blocklisted", class: "BlockedError", fields: &[] };
pub const NO_RESOURCE_AVAILABLE: Code = Code {
    code: "no_resource_available",
    status: 409,
    title: "No resource available",
    class: "NoResourceAvailableError",
    fields: &[
        "retry_after",
        "expected_after",
        "none_registered",
        "blocked",
        "rate_limited",
        "cooling",
        "leased",
        "limited",
        "settled",
    ],
};
pub const LEASED: Code =
    Code { code: "leased", status: 409, title: "Resource is leased", class: "LeasedError", fields: &["live"] };
pub const BUDGET_EXHAUSTED: Code = Code {
    code: "budget_exhausted",
    status: 422,
    title: "Budget exhausted",
    class: "BudgetExhaustedError",
    fields: &["budget", "limit"],
};
pub const RATE_LIMITED: Code = Code {
    code: "rate_limited",
    status: 429,
    title: "Rate limited",
    class: "RateLimitedError",
    fields: &["retry_after", "settled"],
};
pub const INVALID_SNAPSHOT: Code = Code {
    code: "invalid_snapshot",
    status: 422,
    title: "Snapshot refused",
    class: "InvalidSnapshotError",
    fields: &["reason", "field", "rule"],
};
pub const STORAGE_CONFLICT: Code = Code {
    code: "storage_conflict",
    status: 503,
    title: "Store refused or failed",
    class: "StoreError",
    fields: STORE_FIELDS,
};
pub const STALE_EPOCH: Code = Code {
    code: "stale_epoch",
    status: 503,
    title: "Store refused or failed",
    class: "StoreError",
    fields: STORE_FIELDS,
};
pub const STORAGE_UNAVAILABLE: Code = Code {
    code: "storage_unavailable",
    status: 503,
    title: "Store refused or failed",
    class: "StoreError",
    fields: STORE_FIELDS,
};
pub const STORE_RECOVERING: Code = Code {
    code: "store_recovering",
    status: 503,
    title: "Store refused or failed",
    class: "StoreError",
    fields: STORE_FIELDS,
};
pub const NOT_OWNER: Code = Code {
    code: "not_owner",
    status: 421,
    title: "Not the owner of this tenant",
    class: "NotOwnerError",
    fields: &["owner"],
};
pub const TRAP: Code = Code { code: "trap", status: 500, title: "Internal error", class: "InternalError", fields: &[] };
pub const RUNTIME: Code =
    Code { code: "runtime", status: 500, title: "Internal error", class: "InternalError", fields: &[] };
pub const CLOSED: Code =
    Code { code: "closed", status: 503, title: "Pool is closed", class: "PoolClosedError", fields: &[] };

/// Every code, in the order of the [`Error`](super::Error) cases.
pub const CODES: &[Code] = &[
    INVALID_INPUT,
    UNKNOWN_RESOURCE,
    UNKNOWN_LEASE,
    STALE_LEASE,
    LEASE_EXPIRED,
    BLOCKED,
    NO_RESOURCE_AVAILABLE,
    LEASED,
    BUDGET_EXHAUSTED,
    RATE_LIMITED,
    INVALID_SNAPSHOT,
    STORAGE_CONFLICT,
    STALE_EPOCH,
    STORAGE_UNAVAILABLE,
    STORE_RECOVERING,
    NOT_OWNER,
    TRAP,
    RUNTIME,
    CLOSED,
];

/// The base class every error class derives from, in both languages.
pub const BASE_CLASS: &str = "ReputeError";

/// The distinct class names, in table order: what a binding defines.
pub fn classes() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for row in CODES {
        if !names.contains(&row.class) {
            names.push(row.class);
        }
    }
    names
}

/// The row of a code.
pub fn lookup(code: &str) -> Option<&'static Code> {
    CODES.iter().find(|row| row.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_snake_case() {
        for (i, row) in CODES.iter().enumerate() {
            assert!(row.code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", row.code);
            assert!(CODES[i + 1..].iter().all(|other| other.code != row.code), "{} twice", row.code);
            assert_eq!(lookup(row.code), Some(row));
        }
    }

    #[test]
    fn class_names_end_in_error_and_share_fields() {
        for row in CODES {
            assert!(row.class.ends_with("Error"), "{}", row.class);
            for other in CODES.iter().filter(|o| o.class == row.class) {
                assert_eq!(row.fields, other.fields, "{} and {} share a class", row.code, other.code);
            }
        }
        assert_eq!(classes().len(), 15);
        assert!(!classes().contains(&BASE_CLASS));
    }

    /// docs/ARCHITECTURE.md's table of codes lists each row's status,
    /// class and fields, so the documentation cannot drift from the table.
    #[test]
    fn the_architecture_documents_every_row() {
        let doc = include_str!("../../../docs/ARCHITECTURE.md");
        for row in CODES {
            let line = doc
                .lines()
                .find(|l| {
                    l.starts_with("| `") && l.split('|').nth(1).is_some_and(|c| c.contains(&format!("`{}`", row.code)))
                })
                .unwrap_or_else(|| panic!("no line of the code table names {}", row.code));
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            assert_eq!(cells[2], row.status.to_string(), "{}", row.code);
            assert_eq!(cells[3], format!("`{}`", row.class), "{}", row.code);
            let named: Vec<&str> = cells[4].split('`').skip(1).step_by(2).collect();
            assert_eq!(named, row.fields, "{}: the fields as documented", row.code);
        }
    }

    #[test]
    fn statuses_are_http_errors() {
        for row in CODES {
            assert!((400..600).contains(&row.status), "{}: {}", row.code, row.status);
        }
    }
}
