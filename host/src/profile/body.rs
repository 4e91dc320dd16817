//! What an API's error body says, read from the three shapes providers
//! document: OpenAI's (and the many OpenAI-compatible APIs')
//! `{"error": {"message", "type", "code"}}`, Anthropic's
//! `{"type": "error", "error": {"type", "message"}}`, and Google's
//! `{"error": {"code", "status", "message", "details": [...]}}` with its
//! `ErrorInfo` reason, `QuotaFailure` quota ids and `RetryInfo` delay. A
//! body that is not JSON, or too long to be an error, says nothing.

use serde_json::Value;

use super::wait;

/// Longest body read: error bodies are small, and a long body is content.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// The parts of an error body the tables look at; each `None` or empty when
/// the body does not say it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ApiError {
    /// OpenAI's `code` (`insufficient_quota`, `rate_limit_exceeded`, `invalid_api_key`, ...).
    pub code: Option<String>,
    /// OpenAI's or Anthropic's `type` (`insufficient_quota`, `rate_limit_error`, `overloaded_error`, ...).
    pub kind: Option<String>,
    /// Google's canonical `status` (`RESOURCE_EXHAUSTED`, `PERMISSION_DENIED`, ...).
    pub status: Option<String>,
    /// Google's `ErrorInfo` reasons (`API_KEY_INVALID`, ...).
    pub reasons: Vec<String>,
    /// Google's `QuotaFailure` quota ids (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`, ...).
    pub quota_ids: Vec<String>,
    /// Anthropic's `details.error_code` (`enforced_spend_limit_reached`).
    pub detail_code: Option<String>,
    /// The delay the body states: Google's `RetryInfo`, or OpenAI's "try again in" (ns).
    pub delay: Option<u64>,
    pub message: Option<String>,
}

impl ApiError {
    pub fn parse(body: Option<&str>) -> ApiError {
        let value = match body {
            Some(b) if b.len() <= MAX_ERROR_BODY => serde_json::from_str::<Value>(b).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        let error = &value["error"];
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let message = text(&error["message"]);
        let details = error["details"].as_array().map(Vec::as_slice).unwrap_or_default();
        let of_type = |suffix: &'static str| {
            details.iter().filter(move |d| d["@type"].as_str().is_some_and(|t| t.ends_with(suffix)))
        };
        let reasons = of_type("google.rpc.ErrorInfo").filter_map(|d| text(&d["reason"])).collect();
        let quota_ids = of_type("google.rpc.QuotaFailure")
            .flat_map(|d| d["violations"].as_array().map(Vec::as_slice).unwrap_or_default())
            .filter_map(|v| text(&v["quotaId"]))
            .collect();
        let retry_info =
            of_type("google.rpc.RetryInfo").find_map(|d| d["retryDelay"].as_str().and_then(wait::go_duration));
        ApiError {
            code: text(&error["code"]),
            kind: text(&error["type"]),
            status: text(&error["status"]),
            reasons,
            quota_ids,
            detail_code: text(&error["details"]["error_code"]),
            delay: retry_info.or_else(|| message.as_deref().and_then(wait::stated_in_message)),
            message,
        }
    }

    /// Whether the code or type names the quota as spent (OpenAI and the
    /// APIs that copy its format: `insufficient_quota`).
    pub fn says_quota_spent(&self) -> bool {
        [&self.code, &self.kind].into_iter().flatten().any(|s| s == "insufficient_quota")
    }

    /// Whether one of Google's quota ids counts per day.
    pub fn per_day_quota(&self) -> bool {
        self.quota_ids.iter().any(|q| q.contains("PerDay"))
    }

    pub fn kind_is(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    #[test]
    fn openai_bodies() {
        let quota = r#"{"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}"#;
        let e = ApiError::parse(Some(quota));
        assert!(e.says_quota_spent());
        assert_eq!(e.delay, None);
        let rate = r#"{"error": {"message": "Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
            "type": "requests", "param": null, "code": "rate_limit_exceeded"}}"#;
        let e = ApiError::parse(Some(rate));
        assert_eq!(e.code.as_deref(), Some("rate_limit_exceeded"));
        assert!(!e.says_quota_spent());
        assert_eq!(e.delay, Some(20 * SECOND));
    }

    #[test]
    fn anthropic_bodies() {
        let e = ApiError::parse(Some(
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        ));
        assert!(e.kind_is("overloaded_error"));
        assert_eq!((e.code, e.status), (None, None));
        let spend = ApiError::parse(Some(
            r#"{"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your monthly spend limit.",
                "details": {"error_code": "enforced_spend_limit_reached"}}, "request_id": "req_1"}"#,
        ));
        assert_eq!(spend.detail_code.as_deref(), Some("enforced_spend_limit_reached"));
    }

    #[test]
    fn google_bodies() {
        let day = r#"{"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
            "details": [
              {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
              {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}"#;
        let e = ApiError::parse(Some(day));
        assert_eq!(e.status.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert!(e.per_day_quota());
        assert_eq!(e.delay, Some(37 * SECOND));
        assert_eq!(e.code, None, "Google's numeric code is not a code name");
        let key = r#"{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}"#;
        assert_eq!(ApiError::parse(Some(key)).reasons, ["API_KEY_INVALID"]);
    }

    #[test]
    fn anything_else_says_nothing() {
        for body in [None, Some(""), Some("<html>Too Many Requests</html>"), Some("[1, 2]"), Some(r#"{"error": 5}"#)] {
            assert_eq!(ApiError::parse(body), ApiError::default(), "{body:?}");
        }
        let long = format!(r#"{{"error": {{"code": "insufficient_quota", "pad": "{}"}}}}"#, "x".repeat(MAX_ERROR_BODY));
        assert_eq!(ApiError::parse(Some(&long)), ApiError::default());
    }
}
