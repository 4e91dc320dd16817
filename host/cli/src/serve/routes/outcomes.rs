//! Reporting how a use of a resource went.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use repute_host::PoolOps;
use schemars::JsonSchema;
use serde::Deserialize;

use super::table::{route, Route, CELL_BUDGET, UNKNOWN};
use crate::serve::extract::{App, AppResult, Body, Tenant};
use crate::serve::openapi::schema;
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::share::{self, Growth};
use crate::serve::state::By;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![route(
        M::POST,
        "/v1/outcomes",
        report,
        Doc::tenant("Report how a use went")
            .body::<OutcomeIn>()
            .empty(204, "Recorded")
            .problem(404, UNKNOWN)
            .problem(422, CELL_BUDGET),
    )]
}

/// Exactly one of `outcome` (with `retry_after_ms` for rate_limited and
/// quota_exhausted) and `http_status` (with the upstream's `headers` and
/// `body`), read by the profile of the resource's kind (`repute serve
/// --profile KIND=PROFILE`; a kind named proxy, api-key, openai, anthropic or
/// gemini has that profile, any other the generic one).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OutcomeIn {
    #[schemars(with = "schema::Name")]
    kind: String,
    #[schemars(with = "schema::Name")]
    value: String,
    #[schemars(with = "schema::Name")]
    context: String,
    /// `success`, or the failure kind; or, instead, `http_status`.
    #[schemars(with = "Option<schema::Outcome>")]
    outcome: Option<String>,
    /// With `rate_limited` or `quota_exhausted`: the provider's wait, in ms.
    #[schemars(range(max = 2_592_000_000u64))]
    retry_after_ms: Option<u64>,
    /// The upstream's HTTP status, read by the kind's profile.
    #[schemars(range(min = 100, max = 599))]
    http_status: Option<u16>,
    /// With `http_status`: the upstream's response headers (waits are read).
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    /// With `http_status`: the upstream's response body; an error's code,
    /// type and stated delay are read from at most 64 KiB.
    body: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 0))]
    latency_ms: f64,
}

pub(super) async fn report(
    State(state): State<App>,
    Tenant(t): Tenant,
    Body(b): Body<OutcomeIn>,
) -> AppResult<StatusCode> {
    let outcome = match (&b.outcome, b.http_status) {
        (Some(_), None) if b.body.is_some() => {
            return Err(Problem::invalid("body", "goes with http_status"));
        }
        (Some(outcome), None) => {
            let failure = (outcome != "success").then_some(outcome.as_str());
            let retry_after = b.retry_after_ms.map(|ms| ms.saturating_mul(1_000_000));
            repute_host::parse_outcome(failure, b.latency_ms, retry_after)
                .map_err(|e| match e {
                    repute_host::Error::InvalidInput { field, rule } if field == "failure.kind" => Problem::invalid(
                        "outcome",
                        format!("must be success or {}", rule.trim_start_matches("must be one of ")),
                    ),
                    e => Problem::from(e),
                })
                .map(Some)?
        }
        (None, Some(status)) => {
            if b.retry_after_ms.is_some() {
                return Err(Problem::invalid("retry_after_ms", "goes with outcome; with http_status send headers"));
            }
            let answer = repute_host::HttpAnswer {
                status,
                headers: b.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                body: b.body.clone(),
                latency_ms: b.latency_ms,
                now: std::time::SystemTime::now(),
            };
            state.profiles.classify(&b.kind, &answer)?
        }
        _ => return Err(Problem::invalid("outcome", "exactly one of outcome and http_status is required")),
    };
    let max = state.max_tenant_bytes;
    let pool = state.pool(&t, By::Context(&b.context));
    state
        .call(&pool, move |p| {
            match share::admit(p, max, Growth::Cell { kind: &b.kind, value: &b.value, context: &b.context })? {
                Ok(()) => match &outcome {
                    Some(outcome) => p.report(&b.kind, &b.value, &b.context, outcome).map(Ok),
                    None => Ok(Ok(())),
                },
                Err(refused) => Ok(Err(refused)),
            }
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}
