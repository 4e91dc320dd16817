//! RFC 9457 problem details: every error the API returns, naming the field and
//! the rule where an input was refused.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem response. Boxed: it travels in every handler's `Err`, which
/// should stay one pointer wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem(pub Box<ProblemBody>);

#[derive(Debug, Clone, Serialize, PartialEq)]
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
    /// Seconds until a retry may succeed (also sent as `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Why an acquire found nothing: resources counted by what holds them back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Reasons>,
}

/// The counts of a refusal, by reason.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Reasons {
    pub none_registered: bool,
    pub blocked: u32,
    pub rate_limited: u32,
    pub cooling: u32,
    pub leased: u32,
}

impl From<&repute_host::Refusal> for Reasons {
    fn from(r: &repute_host::Refusal) -> Reasons {
        Reasons {
            none_registered: r.registered == 0,
            blocked: r.blocked,
            rate_limited: r.rate_limited,
            cooling: r.cooling,
            leased: r.leased,
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
            retry_after: None,
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
        "duration" => "seconds",
        "failure.kind" => "outcome",
        "status" => "http_status",
        other => other,
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl From<repute_host::Error> for Problem {
    fn from(e: repute_host::Error) -> Problem {
        use repute_host::Error as E;
        let code = e.code();
        let detail = Some(e.to_string());
        let p = |status, title: &str| ProblemBody { detail: detail.clone(), ..ProblemBody::new(status, code, title) };
        let body = match e {
            E::InvalidInput { field, rule } => ProblemBody::invalid(request_field(&field), rule),
            E::UnknownResource => p(StatusCode::NOT_FOUND, "Resource is not registered"),
            E::UnknownLease => p(StatusCode::NOT_FOUND, "No live lease with that id"),
            E::StaleLease => p(StatusCode::CONFLICT, "Stale fencing token"),
            E::LeaseExpired => p(StatusCode::CONFLICT, "Lease expired"),
            E::Blocked => p(StatusCode::CONFLICT, "Resource is blocklisted"),
            E::NoResourceAvailable(refusal) => ProblemBody {
                retry_after: refusal.retry_after.map(seconds),
                reasons: Some(Reasons::from(&refusal)),
                ..p(StatusCode::CONFLICT, "No resource available")
            },
            E::Leased { .. } => p(StatusCode::CONFLICT, "Resource is leased"),
            E::BudgetExhausted { budget, .. } => {
                ProblemBody { field: Some(budget), ..p(StatusCode::UNPROCESSABLE_ENTITY, "Budget exhausted") }
            }
            E::RateLimited { retry_after } => ProblemBody {
                retry_after: Some(seconds(retry_after)),
                ..p(StatusCode::TOO_MANY_REQUESTS, "Rate limited")
            },
            E::Snapshot(repute_host::SnapshotError::Invalid { field, rule }) => ProblemBody {
                field: Some(field),
                rule: Some(rule),
                ..p(StatusCode::UNPROCESSABLE_ENTITY, "Snapshot refused")
            },
            E::Snapshot(_) => p(StatusCode::UNPROCESSABLE_ENTITY, "Snapshot refused"),
            E::Store(_) => p(StatusCode::SERVICE_UNAVAILABLE, "Store refused or failed"),
            E::NotOwner { owner } => {
                ProblemBody { owner: Some(owner), ..p(StatusCode::MISDIRECTED_REQUEST, "Not the owner of this tenant") }
            }
            _ => p(StatusCode::INTERNAL_SERVER_ERROR, "Internal error"),
        };
        body.into()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry = self.0.retry_after.map(|s| s.ceil().max(1.0) as u64);
        let body = serde_json::to_vec(&*self.0).unwrap_or_default();
        let mut res = (status, body).into_response();
        res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = retry {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}
