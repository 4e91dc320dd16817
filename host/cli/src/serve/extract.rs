//! The request extractors of the HTTP API: the tenant a request acts on,
//! JSON and raw bodies, path and query parameters, each refused as
//! problem+json naming the request's field.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};

use super::problem::Problem;
use super::state::AppState;
use super::tenant;

/// Header naming the tenant when auth is off (with a key, the key names it).
pub const TENANT_HEADER: &str = "repute-tenant";

pub type AppResult<T> = Result<T, Problem>;
/// The server's state as every handler receives it.
pub type App = Arc<AppState>;

/// The tenant a request acts on: the one its API key is bound to, or (with
/// auth off) the `Repute-Tenant` header, defaulting to `default`.
pub struct Tenant(pub String);

impl FromRequestParts<App> for Tenant {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> AppResult<Tenant> {
        let named = match parts.headers.get(TENANT_HEADER) {
            None => None,
            Some(v) => {
                let v = v.to_str().map_err(|_| Problem::invalid("Repute-Tenant", "must be ASCII"))?;
                tenant::check(v).map_err(|rule| Problem::invalid("Repute-Tenant", rule))?;
                Some(v.to_owned())
            }
        };
        let Some(keys) = &state.keys else {
            return Ok(Tenant(named.unwrap_or_else(|| "default".into())));
        };
        let presented = bearer(&parts.headers).ok_or_else(|| {
            Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "An API key is required")
                .detail("send it as `Authorization: Bearer KEY` or `X-Api-Key: KEY`")
        })?;
        let owner = keys
            .tenant_of(presented)
            .ok_or_else(|| Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unknown API key"))?;
        match named {
            Some(t) if t != owner => {
                Err(Problem::new(StatusCode::FORBIDDEN, "forbidden", "The key is for another tenant")
                    .detail(format!("this key may act on tenant {owner:?} only")))
            }
            _ => Ok(Tenant(owner)),
        }
    }
}

/// The key of `Authorization: Bearer KEY` (the scheme is case-insensitive,
/// RFC 9110 11.1) or of `X-Api-Key`.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, key) = v.trim_start().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| key.trim());
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok())
}

/// A JSON body whose refusals are problem+json naming the request's field
/// (the path serde was at) and the rule; an oversized body is a 413.
pub struct Body<T>(pub T);

impl<T: serde::de::DeserializeOwned> FromRequest<App> for Body<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &App) -> AppResult<Self> {
        // `application/json` or a `+json` type, parameters (charset) aside, as axum's `Json` takes.
        let json = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
        });
        if !json {
            return Err(Problem::invalid("body", "must be sent as Content-Type: application/json")
                .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        }
        let Raw(bytes) = Raw::from_request(req, state).await?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(json_problem)?;
        de.end().map_err(|e| Problem::invalid("body", format!("must be one JSON value: {}", serde_rule(&e))))?;
        Ok(Body(value))
    }
}

/// A serde_json error's message without its position.
fn serde_rule(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&at).unwrap_or(&text).to_owned()
}

/// The name inside serde's "missing field `x`" / "unknown field `x`, …".
fn named_in(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    Some(rest[..rest.find('`')?].to_owned())
}

fn json_problem(e: serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let path = e.path().to_string();
    let inner = e.into_inner();
    let rule = serde_rule(&inner);
    if inner.is_syntax() || inner.is_eof() {
        return Problem::invalid("body", format!("must be valid JSON: {rule}"));
    }
    if let Some(field) = named_in(&rule, "missing field `") {
        let field = if path == "." { field } else { format!("{path}.{field}") };
        return Problem::invalid(field, "is required");
    }
    if let Some(field) = named_in(&rule, "unknown field `") {
        // The path already ends at the unknown key.
        return Problem::invalid(if path == "." { field } else { path }, "is not a field of this request");
    }
    Problem::invalid(if path == "." { "body".to_owned() } else { path }, rule)
}

/// The raw body, at most `--max-body-bytes`; a longer one is a 413 problem.
pub struct Raw(pub Bytes);

impl FromRequest<App> for Raw {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &App) -> AppResult<Self> {
        match Bytes::from_request(req, state).await {
            Ok(b) => Ok(Raw(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(Problem::too_large(state.max_body_bytes)),
            Err(e) => Err(Problem::invalid("body", e.body_text()).with_status(e.status())),
        }
    }
}

/// Path parameters, refused as problem+json naming the parameter.
pub struct P<T>(pub T);

impl<T: serde::de::DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> AppResult<Self> {
        use axum::extract::path::ErrorKind;
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(P(v)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => Err(match e.into_kind() {
                ErrorKind::ParseErrorAtKey { key, expected_type, .. } => {
                    Problem::invalid(key, path_rule(expected_type))
                }
                ErrorKind::InvalidUtf8InPathParam { key } => {
                    Problem::invalid(key, "must be UTF-8 once percent-decoded")
                }
                ErrorKind::DeserializeError { key, message, .. } => Problem::invalid(key, message),
                kind => Problem::invalid("path", kind.to_string()),
            }),
            Err(e) => Err(Problem::invalid("path", e.body_text()).with_status(e.status())),
        }
    }
}

fn path_rule(expected_type: &str) -> String {
    match expected_type {
        "u64" => "must be an integer in 0..=18446744073709551615".to_owned(),
        other => format!("must be a {other}"),
    }
}

/// The query string, refused as problem+json naming the parameter.
pub struct Q<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> AppResult<Self> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(Q).map_err(|e| {
            let path = e.path().to_string();
            let rule = e.into_inner().to_string();
            match named_in(&rule, "missing field `") {
                Some(field) => Problem::invalid(field, "is required"),
                None => Problem::invalid(if path == "." { "query".to_owned() } else { path }, rule),
            }
        })
    }
}
