//! The one place host errors become JavaScript errors.
//!
//! N-API can only throw a plain `Error` from Rust (and an async task can only
//! reject with one), so the typed information travels as a JSON payload in
//! the message: `{"repute":{"code":..,"message":..,<fields>}}`. `index.js`
//! recognises that prefix and builds the matching error class; every field a
//! class exposes comes from here. Times are in ms; fencing tokens are decimal
//! strings so that no `u64` loses precision on the way.

use repute_host::{Error, SnapshotError, StoreError};
use serde_json::{json, Map, Value};

use crate::units::ns_to_ms;

/// The fields of one host error, keyed by the names the JavaScript error
/// classes use.
fn details(e: &Error) -> Map<String, Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    match e {
        Error::InvalidInput { field, rule } => {
            put("field", json!(field));
            put("rule", json!(rule));
        }
        Error::NoResourceAvailable(r) => {
            put("retryAfterMs", json!(r.retry_after.map(ns_to_ms)));
            put("noneRegistered", json!(r.registered == 0));
            put("blocked", json!(r.blocked));
            put("rateLimited", json!(r.rate_limited));
            put("cooling", json!(r.cooling));
            put("leased", json!(r.leased));
        }
        Error::RateLimited { retry_after } => put("retryAfterMs", json!(ns_to_ms(*retry_after))),
        Error::Leased { live } => put("live", json!(live)),
        Error::BudgetExhausted { budget, limit } => {
            put("budget", json!(budget));
            put("limit", json!(limit));
        }
        Error::NotOwner { owner } => put("owner", json!(owner)),
        Error::Snapshot(s) => put("reason", json!(snapshot_reason(s))),
        Error::Store(StoreError::Conflict { expected, found }) => {
            put("expected", json!(expected));
            put("found", json!(found));
        }
        Error::Store(StoreError::StaleEpoch { mine, stored }) => {
            put("mine", json!(mine));
            put("stored", json!(stored));
        }
        _ => {}
    }
    m
}

/// A short machine-readable name for why a snapshot was refused.
fn snapshot_reason(s: &SnapshotError) -> &'static str {
    match s {
        SnapshotError::Truncated => "truncated",
        SnapshotError::Foreign => "foreign",
        SnapshotError::UnsupportedVersion { .. } => "unsupported_version",
        SnapshotError::Checksum => "checksum",
        SnapshotError::Malformed => "malformed",
        SnapshotError::Invalid { .. } => "invalid",
    }
}

/// The error a native call throws or an async task rejects with.
pub(crate) fn to_js(e: Error) -> napi::Error {
    let mut m = details(&e);
    m.insert("code".to_owned(), json!(e.code()));
    m.insert("message".to_owned(), json!(e.to_string()));
    napi::Error::from_reason(json!({ "repute": m }).to_string())
}

/// `to_js` for `?` on host results.
pub(crate) trait OrThrow<T> {
    fn or_throw(self) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, Error> {
    fn or_throw(self) -> napi::Result<T> {
        self.map_err(to_js)
    }
}

pub(crate) fn invalid(field: &str, rule: &str) -> Error {
    Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() }
}
