//! What the server says of itself: readiness, the metrics page, a tenant's stats.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use repute_host::{PoolOps, Stats};

use crate::serve::extract::{bearer, App, AppResult, Tenant};
use crate::serve::problem::Problem;

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
    Ok(Json(state.call(&t, |p| p.stats()).await?))
}
