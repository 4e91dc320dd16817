//! An HTTP response as an outcome: the one mapping every front end uses
//! (`report_http` in Python, `reportHttp` in Node, `http_status` on the
//! server's outcomes route), so a 429 means the same wherever it is reported.
//!
//! | status | outcome |
//! |---|---|
//! | 1xx, 2xx, 3xx | success |
//! | 401, 403, 407 | `auth_failed`: the credential is refused, block it until lifted |
//! | 402 | `quota_exhausted`, for `Retry-After` if given |
//! | 408 | `timeout` |
//! | 429 | `rate_limited`, for `Retry-After` if given (else the rule's base) |
//! | other 4xx | success: the resource worked, the request itself was refused |
//! | 503 with `Retry-After` | `rate_limited` for that long (an overloaded upstream asking to wait) |
//! | 504 | `timeout` |
//! | other 5xx | `connection_reset` |
//!
//! `Retry-After` is delta-seconds or an HTTP-date (RFC 9110 §10.2.3); a date
//! is turned into a wait from the caller's wall clock, so only the caller's
//! own clock is compared with the provider's. A value that parses as neither
//! is ignored, as if absent.

use std::time::{Duration, SystemTime};

use repute_core::{FailureKind, Outcome, MAX_RETRY_AFTER};

use crate::error::{Error, Result};

/// The outcome of a response with `status`, its `Retry-After` header (if
/// any) and its latency in milliseconds, at wall-clock time `now`.
pub fn http_outcome(status: u16, retry_after: Option<&str>, latency_ms: f64, now: SystemTime) -> Result<Outcome> {
    if !(100..=599).contains(&status) {
        return Err(Error::invalid("status", "must be an HTTP status code in 100..=599"));
    }
    let wait = retry_after.and_then(|v| parse_retry_after(v, now));
    let outcome = match (status, wait) {
        (100..=399, _) => Outcome::success(latency_ms)?,
        (401 | 403 | 407, _) => Outcome::failure(FailureKind::AuthFailed, latency_ms)?,
        (402, Some(w)) => Outcome::failure_retry_after(FailureKind::QuotaExhausted, latency_ms, w)?,
        (402, None) => Outcome::failure(FailureKind::QuotaExhausted, latency_ms)?,
        (408 | 504, _) => Outcome::failure(FailureKind::Timeout, latency_ms)?,
        (429 | 503, Some(w)) => Outcome::failure_retry_after(FailureKind::RateLimited, latency_ms, w)?,
        (429, None) => Outcome::failure(FailureKind::RateLimited, latency_ms)?,
        (400..=499, _) => Outcome::success(latency_ms)?,
        _ => Outcome::failure(FailureKind::ConnectionReset, latency_ms)?,
    };
    Ok(outcome)
}

/// The value of the `Retry-After` header among `headers` (name case-insensitive).
pub fn retry_after_header<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<&'a str> {
    headers.into_iter().find(|(name, _)| name.eq_ignore_ascii_case("retry-after")).map(|(_, v)| v)
}

/// A `Retry-After` value as a wait in nanoseconds, capped at the longest
/// an outcome may carry; a date in the past is a wait of 0.
fn parse_retry_after(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    let wait = if value.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty() {
        Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX).min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    fn at(status: u16, retry: Option<&str>) -> Outcome {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        http_outcome(status, retry, 12.0, now).unwrap()
    }

    fn failure(kind: FailureKind, retry_after: Option<u64>) -> Outcome {
        Outcome::Failure { kind, latency_ms: 12.0, retry_after }
    }

    #[test]
    fn statuses_map_as_documented() {
        let ok = Outcome::Success { latency_ms: 12.0 };
        for s in [200, 204, 301, 304, 400, 404, 409, 422] {
            assert_eq!(at(s, None), ok, "{s}");
        }
        for s in [401, 403, 407] {
            assert_eq!(at(s, Some("30")), failure(FailureKind::AuthFailed, None), "{s}");
        }
        assert_eq!(at(402, None), failure(FailureKind::QuotaExhausted, None));
        assert_eq!(at(402, Some("3600")), failure(FailureKind::QuotaExhausted, Some(3600 * SECOND)));
        assert_eq!(at(408, None), failure(FailureKind::Timeout, None));
        assert_eq!(at(504, Some("5")), failure(FailureKind::Timeout, None));
        assert_eq!(at(429, None), failure(FailureKind::RateLimited, None));
        assert_eq!(at(429, Some("30")), failure(FailureKind::RateLimited, Some(30 * SECOND)));
        assert_eq!(at(503, Some("7")), failure(FailureKind::RateLimited, Some(7 * SECOND)));
        for s in [500, 502, 503] {
            assert_eq!(at(s, None), failure(FailureKind::ConnectionReset, None), "{s}");
        }
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        assert_eq!(
            at(429, Some("Tue, 14 Nov 2023 22:14:05 GMT")),
            failure(FailureKind::RateLimited, Some(45 * SECOND))
        );
        assert_eq!(at(429, Some("Tue, 14 Nov 2023 22:00:00 GMT")), failure(FailureKind::RateLimited, Some(0)));
        assert_eq!(at(429, Some(" 12 ")), failure(FailureKind::RateLimited, Some(12 * SECOND)));
        assert_eq!(at(429, Some("soon")), failure(FailureKind::RateLimited, None));
        assert_eq!(at(429, Some("-5")), failure(FailureKind::RateLimited, None));
        assert_eq!(at(429, Some("99999999999999999999")), failure(FailureKind::RateLimited, Some(MAX_RETRY_AFTER)));
    }

    #[test]
    fn bad_status_and_latency_are_refused_with_their_field() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            http_outcome(99, None, 1.0, now).unwrap_err(),
            Error::invalid("status", "must be an HTTP status code in 100..=599")
        );
        assert_eq!(http_outcome(200, None, -1.0, now).unwrap_err(), Error::invalid("latency", "must be >= 0"));
    }

    #[test]
    fn the_header_is_found_whatever_its_case() {
        let headers = [("Content-Type", "text/plain"), ("RETRY-AFTER", "9")];
        assert_eq!(retry_after_header(headers), Some("9"));
        assert_eq!(retry_after_header([("x", "y")]), None);
    }
}
