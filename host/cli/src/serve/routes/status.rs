//! What the server says of itself: readiness, the metrics page, a tenant's stats.

use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use repute_host::{PoolOps, Stats};

use super::table::{route, Route};
use crate::serve::extract::{bearer, App, AppResult, Tenant};
use crate::serve::openapi::views;
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::state::By;

/// The OpenAPI document of this API as the repository keeps it, generated
/// from the routes table by `repute openapi` (a test fails when they differ).
pub const OPENAPI: &str = include_str!("../../../openapi.json");

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::GET, "/v1/stats", stats, Doc::tenant("Counters").json::<views::Stats>(200, "Stats")),
        route(M::GET, "/healthz", || async { "ok" }, Doc::open("Liveness").empty(200, "ok")),
        route(M::GET, "/readyz", readyz,
            Doc::open("Readiness").empty(200, "ready").problem(503, "Starting or stopping")),
        route(M::GET, "/metrics", metrics,
            Doc::open("Prometheus metrics: request latency by route template and method (unknown methods as `other`), pool figures summed over tenants (per tenant with --metrics-tenants)")
                .describe("Open by default; with --metrics-auth it wants an API key of any tenant (Authorization: Bearer KEY or X-Api-Key).")
                .empty(200, "OpenMetrics text")
                .problem(401, "--metrics-auth is on and no known key was sent")),
        route(M::GET, "/openapi.json", || async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) },
            Doc::open("This document").empty(200, "OpenAPI 3.1")),
    ]
}

pub(super) async fn readyz(State(state): State<App>) -> Response {
    if state.is_ready() {
        "ready".into_response()
    } else {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "Starting").into_response()
    }
}

pub(super) async fn metrics(State(state): State<App>, headers: HeaderMap) -> Response {
    if let (true, Some(keys)) = (state.metrics_auth, &state.keys) {
        let known = bearer(&headers).and_then(|k| keys.tenant_of(k));
        if known.is_none() {
            return Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "An API key is required")
                .detail("this server's /metrics wants a key (--metrics-auth)")
                .into_response();
        }
    }
    let s = state.clone();
    let _ = tokio::task::spawn_blocking(move || s.tick()).await;
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render())
        .into_response()
}

pub(super) async fn stats(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Stats>> {
    Ok(Json(state.call(&state.pool(&t, By::Home), |p| p.stats()).await?))
}
