//! The tables: one function per profile, from an answer to the outcome it
//! is for the resource that carried it. Each row is a documented behaviour
//! of the peer the profile describes; docs/profiles.md lists them all.

use repute_core::{FailureKind, Outcome};

use super::body::ApiError;
use super::{wait, Header, Headers, HttpAnswer, Preset};
use crate::error::Result;

fn success(a: &HttpAnswer) -> Result<Option<Outcome>> {
    Ok(Some(Outcome::success(a.latency_ms)?))
}

fn failure(kind: FailureKind, a: &HttpAnswer) -> Result<Option<Outcome>> {
    Ok(Some(Outcome::failure(kind, a.latency_ms)?))
}

/// `kind` for `wait` ns when one is known, else for the policy's base.
fn waiting(kind: FailureKind, wait: Option<u64>, a: &HttpAnswer) -> Result<Option<Outcome>> {
    match wait {
        Some(w) => Ok(Some(Outcome::failure_retry_after(kind, a.latency_ms, w)?)),
        None => failure(kind, a),
    }
}

/// Any resource, as every kind was read before profiles:
///
/// | status | outcome |
/// |---|---|
/// | 1xx, 2xx, 3xx | success |
/// | 401, 403, 407 | `auth_failed`: blocked everywhere until lifted |
/// | 402 | `quota_exhausted`, for `Retry-After` if given |
/// | 408, 504 | `timeout` |
/// | 429 | `rate_limited`, for `Retry-After` if given |
/// | other 4xx | success: the resource worked, the request was refused |
/// | 503 with `Retry-After` | `rate_limited` for that long |
/// | other 5xx | `connection_reset` |
pub(super) fn generic(a: &HttpAnswer) -> Result<Option<Outcome>> {
    let wait = Headers(&a.headers).get(Header::RetryAfter).and_then(|v| wait::retry_after_value(v, a.now));
    match (a.status, wait) {
        (100..=399, _) => success(a),
        (401 | 403 | 407, _) => failure(FailureKind::AuthFailed, a),
        (402, w) => waiting(FailureKind::QuotaExhausted, w, a),
        (408 | 504, _) => failure(FailureKind::Timeout, a),
        (429, w) | (503, w @ Some(_)) => waiting(FailureKind::RateLimited, w, a),
        (400..=499, _) => success(a),
        _ => failure(FailureKind::ConnectionReset, a),
    }
}

/// A proxy, answering for the site it was sent to (the context):
///
/// | status | outcome |
/// |---|---|
/// | 1xx, 2xx, 3xx | success |
/// | 401, 403 | `blocked`: the site refused this exit; this (proxy, site) cools at once, longer with each refusal in a row, and a success after the cooldown ends the streak |
/// | 407 | `auth_failed`: the proxy refused its credentials, blocked everywhere |
/// | 408, 504 | `timeout` |
/// | 429 | `rate_limited` in this site, for `Retry-After` if given |
/// | other 4xx | success |
/// | 503 with `Retry-After` | `rate_limited` for that long |
/// | other 5xx | `connection_reset` |
pub(super) fn proxy(a: &HttpAnswer) -> Result<Option<Outcome>> {
    match a.status {
        401 | 403 => failure(FailureKind::Blocked, a),
        407 => failure(FailureKind::AuthFailed, a),
        _ => generic(a),
    }
}

/// An API key, reading the provider's error body and rate-limit headers:
///
/// | answer | outcome |
/// |---|---|
/// | 1xx, 2xx, 3xx | success |
/// | a quota error: `insufficient_quota` (OpenAI and compatible), 402, Anthropic's `billing_error`, "credit balance is too low" or `enforced_spend_limit_reached`, Google's per-day `RESOURCE_EXHAUSTED` | `quota_exhausted`: the key pauses everywhere, for the stated wait, until the first of the next month (UTC) for Anthropic's monthly spend limit, until the next Pacific midnight for a Google per-day quota, else the policy's base (an hour) |
/// | 401, 403; Google's 400 `API_KEY_INVALID` | `auth_failed`: the key is dead everywhere until lifted |
/// | 429 | `rate_limited` for this model, for `retry-after-ms`, `Retry-After`, the body's stated delay, or the reset of a spent `x-ratelimit-*` / `anthropic-ratelimit-*` window, the first given |
/// | 408, 5xx, Anthropic's 529 | nothing: the provider's overload or failure is no key's fault |
/// | other 4xx | success: the key worked, the request was refused |
pub(super) fn api_key(preset: Preset, a: &HttpAnswer) -> Result<Option<Outcome>> {
    if (100..=399).contains(&a.status) {
        return success(a);
    }
    let error = ApiError::parse(a.body.as_deref());
    let headers = Headers(&a.headers);
    let stated = wait::retry_after(&headers, a.now);
    let quota_spent = error.says_quota_spent()
        || a.status == 402
        || (preset == Preset::Anthropic && anthropic_billing(&error, a.status));
    if quota_spent {
        return waiting(FailureKind::QuotaExhausted, stated, a);
    }
    if preset == Preset::Anthropic && error.detail_code.as_deref() == Some("enforced_spend_limit_reached") {
        return waiting(FailureKind::QuotaExhausted, Some(wait::until_next_month(a.now)), a);
    }
    if preset == Preset::Gemini && error.status.as_deref() == Some("RESOURCE_EXHAUSTED") && error.per_day_quota() {
        return waiting(FailureKind::QuotaExhausted, Some(wait::until_pacific_midnight(a.now)), a);
    }
    let dead_key = preset == Preset::Gemini && error.reasons.iter().any(|r| r == "API_KEY_INVALID");
    match a.status {
        401 | 403 => failure(FailureKind::AuthFailed, a),
        _ if dead_key => failure(FailureKind::AuthFailed, a),
        429 => {
            let wait = stated.or(error.delay).or_else(|| wait::spent_window_reset(&headers, a.now));
            waiting(FailureKind::RateLimited, wait, a)
        }
        408 | 500..=599 => Ok(None),
        _ => success(a),
    }
}

/// Anthropic's spent credit: `billing_error` (402), or the 400 whose
/// message says the credit balance is too low.
fn anthropic_billing(error: &ApiError, status: u16) -> bool {
    error.kind_is("billing_error")
        || (status == 400 && error.message.as_deref().is_some_and(|m| m.contains("credit balance")))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::profile::Profile;
    use repute_core::SECOND;

    /// Tue, 14 Nov 2023 22:13:20 GMT.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn answer(profile: Profile, status: u16, headers: &[(&str, &str)], body: Option<&str>) -> Option<Outcome> {
        let headers = headers.iter().map(|(n, v)| ((*n).into(), (*v).into())).collect();
        let body = body.map(str::to_owned);
        profile.classify(&HttpAnswer { status, headers, body, latency_ms: 12.0, now: now() }).unwrap()
    }

    fn fail(kind: FailureKind, retry_after: Option<u64>) -> Option<Outcome> {
        Some(Outcome::Failure { kind, latency_ms: 12.0, retry_after })
    }

    const OK: Option<Outcome> = Some(Outcome::Success { latency_ms: 12.0 });
    const OPENAI: Profile = Profile::ApiKey(Preset::OpenAi);
    const ANTHROPIC: Profile = Profile::ApiKey(Preset::Anthropic);
    const GEMINI: Profile = Profile::ApiKey(Preset::Gemini);

    #[test]
    fn the_generic_table_is_the_one_every_kind_had() {
        let g = Profile::Generic;
        for s in [200, 204, 301, 304, 400, 404, 409, 422] {
            assert_eq!(answer(g, s, &[], None), OK, "{s}");
        }
        for s in [401, 403, 407] {
            assert_eq!(answer(g, s, &[("Retry-After", "30")], None), fail(FailureKind::AuthFailed, None), "{s}");
        }
        assert_eq!(answer(g, 402, &[], None), fail(FailureKind::QuotaExhausted, None));
        assert_eq!(
            answer(g, 402, &[("retry-after", "3600")], None),
            fail(FailureKind::QuotaExhausted, Some(3600 * SECOND))
        );
        assert_eq!(answer(g, 408, &[], None), fail(FailureKind::Timeout, None));
        assert_eq!(answer(g, 504, &[("Retry-After", "5")], None), fail(FailureKind::Timeout, None));
        assert_eq!(answer(g, 429, &[], None), fail(FailureKind::RateLimited, None));
        assert_eq!(answer(g, 429, &[("RETRY-AFTER", "30")], None), fail(FailureKind::RateLimited, Some(30 * SECOND)));
        assert_eq!(answer(g, 503, &[("Retry-After", "7")], None), fail(FailureKind::RateLimited, Some(7 * SECOND)));
        for s in [500, 502, 503] {
            assert_eq!(answer(g, s, &[], None), fail(FailureKind::ConnectionReset, None), "{s}");
        }
        let quota = r#"{"error": {"code": "insufficient_quota"}}"#;
        assert_eq!(answer(g, 429, &[], Some(quota)), fail(FailureKind::RateLimited, None), "generic reads no body");
    }

    #[test]
    fn a_proxy_refused_by_a_site_is_blocked_there_only() {
        let p = Profile::Proxy;
        assert_eq!(answer(p, 403, &[], None), fail(FailureKind::Blocked, None));
        assert_eq!(answer(p, 401, &[], None), fail(FailureKind::Blocked, None));
        assert_eq!(answer(p, 407, &[], None), fail(FailureKind::AuthFailed, None));
        assert_eq!(answer(p, 429, &[("Retry-After", "2")], None), fail(FailureKind::RateLimited, Some(2 * SECOND)));
        assert_eq!(answer(p, 404, &[], None), OK);
        assert_eq!(answer(p, 502, &[], None), fail(FailureKind::ConnectionReset, None));
        assert_eq!(answer(p, 504, &[], None), fail(FailureKind::Timeout, None));
    }

    #[test]
    fn openai_answers() {
        let quota = r#"{"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}"#;
        assert_eq!(answer(OPENAI, 429, &[], Some(quota)), fail(FailureKind::QuotaExhausted, None));
        let revoked = r#"{"error": {"message": "Incorrect API key provided: sk-...abcd.", "type": "invalid_request_error",
            "param": null, "code": "invalid_api_key"}}"#;
        assert_eq!(answer(OPENAI, 401, &[], Some(revoked)), fail(FailureKind::AuthFailed, None));
        let rate = r#"{"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
            "type": "requests", "param": null, "code": "rate_limit_exceeded"}}"#;
        assert_eq!(answer(OPENAI, 429, &[], Some(rate)), fail(FailureKind::RateLimited, Some(20 * SECOND)));
        let ms = [("retry-after-ms", "1500"), ("retry-after", "2")];
        assert_eq!(answer(OPENAI, 429, &ms, Some(rate)), fail(FailureKind::RateLimited, Some(1_500_000_000)));
        let spent = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "1200"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(answer(OPENAI, 429, &spent, None), fail(FailureKind::RateLimited, Some(SECOND)));
        assert_eq!(answer(OPENAI, 429, &[], None), fail(FailureKind::RateLimited, None));
        for s in [500, 502, 503, 504, 408] {
            assert_eq!(answer(OPENAI, s, &[("retry-after", "1")], None), None, "{s}");
        }
        assert_eq!(answer(OPENAI, 400, &[], Some(r#"{"error": {"code": "context_length_exceeded"}}"#)), OK);
        assert_eq!(answer(OPENAI, 403, &[], None), fail(FailureKind::AuthFailed, None));
    }

    #[test]
    fn anthropic_answers() {
        let body = |kind: &str, message: &str| {
            format!(r#"{{"type": "error", "error": {{"type": "{kind}", "message": "{message}"}}}}"#)
        };
        let overloaded = body("overloaded_error", "Overloaded");
        assert_eq!(answer(ANTHROPIC, 529, &[], Some(&overloaded)), None);
        let limited = body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit");
        assert_eq!(
            answer(ANTHROPIC, 429, &[("retry-after", "12")], Some(&limited)),
            fail(FailureKind::RateLimited, Some(12 * SECOND))
        );
        let reset = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2023-11-14T22:13:50Z"),
        ];
        assert_eq!(answer(ANTHROPIC, 429, &reset, Some(&limited)), fail(FailureKind::RateLimited, Some(30 * SECOND)));
        let credit = body("invalid_request_error", "Your credit balance is too low to access the Anthropic API.");
        assert_eq!(answer(ANTHROPIC, 400, &[], Some(&credit)), fail(FailureKind::QuotaExhausted, None));
        assert_eq!(answer(OPENAI, 400, &[], Some(&credit)), OK, "only Anthropic's preset reads its billing message");
        assert_eq!(
            answer(ANTHROPIC, 402, &[], Some(&body("billing_error", "billing"))),
            fail(FailureKind::QuotaExhausted, None)
        );
        assert_eq!(
            answer(ANTHROPIC, 401, &[], Some(&body("authentication_error", "invalid x-api-key"))),
            fail(FailureKind::AuthFailed, None)
        );
        assert_eq!(answer(ANTHROPIC, 413, &[], Some(&body("request_too_large", "too large"))), OK);
        // A usage tier's monthly spend limit: a 429 that no wait within the
        // month lifts, paused until the first of the next month (UTC).
        let spend = r#"{"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your monthly spend limit.",
            "details": {"error_code": "enforced_spend_limit_reached"}}}"#;
        let first_of_december = (16 * 86_400 + 6_400) * SECOND;
        assert_eq!(
            answer(ANTHROPIC, 429, &[], Some(spend)),
            fail(FailureKind::QuotaExhausted, Some(first_of_december))
        );
        assert_eq!(answer(OPENAI, 429, &[], Some(spend)), fail(FailureKind::RateLimited, None));
    }

    #[test]
    fn gemini_answers() {
        let exhausted = |quota: &str| {
            format!(
                r#"{{"error": {{"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "You exceeded your current quota.",
                "details": [{{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{{"quotaId": "{quota}"}}]}},
                            {{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}}]}}}}"#
            )
        };
        let day = exhausted("GenerateRequestsPerDayPerProjectPerModel-FreeTier");
        let to_reset = (9 * 3600 + 46 * 60 + 40) * SECOND;
        assert_eq!(answer(GEMINI, 429, &[], Some(&day)), fail(FailureKind::QuotaExhausted, Some(to_reset)));
        let minute = exhausted("GenerateRequestsPerMinutePerProjectPerModel-FreeTier");
        assert_eq!(answer(GEMINI, 429, &[], Some(&minute)), fail(FailureKind::RateLimited, Some(37 * SECOND)));
        let key = r#"{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}"#;
        assert_eq!(answer(GEMINI, 400, &[], Some(key)), fail(FailureKind::AuthFailed, None));
        assert_eq!(answer(GEMINI, 503, &[], Some(r#"{"error": {"code": 503, "status": "UNAVAILABLE"}}"#)), None);
    }

    #[test]
    fn a_bad_status_or_latency_is_refused_with_its_field() {
        let at = |status, latency_ms| HttpAnswer { status, headers: Vec::new(), body: None, latency_ms, now: now() };
        for p in [Profile::Generic, Profile::Proxy, OPENAI] {
            let e = p.classify(&at(99, 1.0)).unwrap_err();
            assert_eq!(e, crate::error::Error::invalid("status", "must be an HTTP status code in 100..=599"));
            let e = p.classify(&at(200, -1.0)).unwrap_err();
            assert_eq!(e, crate::error::Error::invalid("latency", "must be >= 0"));
        }
    }
}
