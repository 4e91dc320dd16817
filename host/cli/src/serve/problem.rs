//! RFC 9457 problem details: every error the API returns, naming the field and
//! the rule where an input was refused.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem response. Boxed: it travels in every handler's `Err`, which
/// should stay one pointer wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem(pub Box<ProblemBody>);

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
#[schemars(rename = "Problem", transform = crate::serve::openapi::schema::left_out_not_null)]
pub struct ProblemBody {
    /// `urn:repute:problem:<code>`, stable across versions.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Milliseconds until a retry may succeed (the Retry-After header has it
    /// in whole seconds)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<f64>,
    /// Milliseconds until a resource is expected to free up: as
    /// `retry_after_ms`, but a ban's early trial, which mostly finds the ban
    /// still on, does not count
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_after_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Why an acquire found nothing: each registered resource counted once,
    /// under the first reason that holds it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Reasons>,
}

/// The counts of a refusal, by reason.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, JsonSchema)]
#[schemars(inline)]
pub struct Reasons {
    pub none_registered: bool,
    pub blocked: u32,
    pub rate_limited: u32,
    pub cooling: u32,
    pub leased: u32,
    /// Over a usage limit until its window frees up, or retired by its limits.
    pub limited: u32,
    /// Nothing known can free a resource before `retry_after`: no release,
    /// report or usage of a live lease, no probe.
    pub settled: bool,
}

impl From<&repute_host::Refusal> for Reasons {
    fn from(r: &repute_host::Refusal) -> Reasons {
        Reasons {
            none_registered: r.registered == 0,
            blocked: r.blocked,
            rate_limited: r.rate_limited,
            cooling: r.cooling,
            leased: r.leased,
            limited: r.limited,
            settled: r.settled,
        }
    }
}

impl From<ProblemBody> for Problem {
    fn from(body: ProblemBody) -> Problem {
        Problem(Box::new(body))
    }
}

impl ProblemBody {
    pub fn new(status: StatusCode, code: &str, title: impl Into<String>) -> ProblemBody {
        ProblemBody {
            kind: format!("urn:repute:problem:{code}"),
            title: title.into(),
            status: status.as_u16(),
            detail: None,
            field: None,
            rule: None,
            retry_after_ms: None,
            expected_after_ms: None,
            owner: None,
            reasons: None,
        }
    }

    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> ProblemBody {
        let (field, rule) = (field.into(), rule.into());
        ProblemBody {
            detail: Some(format!("invalid {field}: {rule}")),
            field: Some(field),
            rule: Some(rule),
            ..ProblemBody::new(StatusCode::BAD_REQUEST, "invalid_input", "Invalid input")
        }
    }
}

impl Problem {
    pub fn new(status: StatusCode, code: &str, title: impl Into<String>) -> Problem {
        ProblemBody::new(status, code, title).into()
    }

    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Problem {
        ProblemBody::invalid(field, rule).into()
    }

    pub fn not_found(what: &str) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, "not_found", format!("No such {what}"))
    }

    /// A body over `--max-body-bytes`.
    pub fn too_large(max: usize) -> Problem {
        ProblemBody {
            field: Some("body".into()),
            rule: Some(format!("must be at most {max} bytes")),
            detail: Some(format!("the body is over this server's --max-body-bytes ({max})")),
            ..ProblemBody::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "Request body too large")
        }
        .into()
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Problem {
        self.0.detail = Some(detail.into());
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Problem {
        self.0.status = status.as_u16();
        self
    }
}

/// The request field a pool error's field comes from. The pool names its own
/// values (`resource.kind`, `latency`); a client needs the name it sent.
fn request_field(pool_field: &str) -> &str {
    match pool_field {
        "resource.kind" => "kind",
        "resource.value" => "value",
        "latency" => "latency_ms",
        "retry_after" => "retry_after_ms",
        "expected_after" => "expected_after_ms",
        "duration" => "duration_ms",
        "failure.kind" => "outcome",
        "status" => "http_status",
        "limits.min_interval" => "limits.min_interval_ms",
        "limits.per_context.min_interval" => "limits.per_context.min_interval_ms",
        "limits.max_age" => "limits.max_age_ms",
        other => other,
    }
}

fn millis(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Status, code and title come from the host's code table (the bindings pick
/// their classes from the same rows); the detail is the host's message in ms,
/// the unit of `retry_after_ms`.
impl From<repute_host::Error> for Problem {
    fn from(e: repute_host::Error) -> Problem {
        use repute_host::Error as E;
        let info = e.info();
        let status = StatusCode::from_u16(info.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let base = ProblemBody {
            detail: Some(e.message(repute_host::Unit::Millis)),
            ..ProblemBody::new(status, info.code, info.title)
        };
        let body = match e {
            E::InvalidInput { field, rule } => ProblemBody::invalid(request_field(&field), rule),
            E::NoResourceAvailable(refusal) => ProblemBody {
                retry_after_ms: refusal.retry_after.map(millis),
                expected_after_ms: refusal.expected_after.map(millis),
                reasons: Some(Reasons::from(&refusal)),
                ..base
            },
            E::BudgetExhausted { budget, .. } => ProblemBody { field: Some(budget), ..base },
            E::RateLimited { retry_after } | E::Store(repute_host::StoreError::Recovering { retry_after }) => {
                ProblemBody { retry_after_ms: Some(millis(retry_after)), ..base }
            }
            E::Snapshot(repute_host::SnapshotError::Invalid { field, rule }) => {
                ProblemBody { field: Some(field), rule: Some(rule), ..base }
            }
            E::NotOwner { owner } => ProblemBody { owner: Some(owner), ..base },
            _ => base,
        };
        body.into()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry = self.0.retry_after_ms.map(|ms| (ms / 1e3).ceil().max(1.0) as u64);
        let body = serde_json::to_vec(&*self.0).unwrap_or_default();
        let mut res = (status, body).into_response();
        res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = retry {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_answers_with_its_rows_status_code_and_title() {
        for e in repute_host::Error::examples() {
            let info = e.info();
            let problem = Problem::from(e.clone());
            assert_eq!(problem.0.status, info.status, "{}", info.code);
            assert_eq!(problem.0.kind, format!("urn:repute:problem:{}", info.code));
            if !matches!(e, repute_host::Error::InvalidInput { .. }) {
                assert_eq!(problem.0.title, info.title);
                assert_eq!(problem.0.detail.as_deref(), Some(e.message(repute_host::Unit::Millis).as_str()));
            }
        }
    }

    #[test]
    fn a_refusal_states_its_wait_in_ms_in_the_detail_and_the_field() {
        let e = repute_host::Error::RateLimited { retry_after: 1_500_000_000 };
        let problem = Problem::from(e);
        assert_eq!(problem.0.retry_after_ms, Some(1500.0));
        assert_eq!(problem.0.detail.as_deref(), Some("rate limited (retry after 1500 ms)"));
        let res = problem.into_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_store_recovering_from_a_failover_says_when_to_come_back() {
        let e = repute_host::Error::Store(repute_host::StoreError::Recovering { retry_after: 2_400_000_000 });
        let problem = Problem::from(e);
        assert_eq!(problem.0.kind, "urn:repute:problem:store_recovering");
        assert_eq!(problem.0.retry_after_ms, Some(2400.0));
        let res = problem.into_response();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers()[header::RETRY_AFTER], "3");
    }
}
