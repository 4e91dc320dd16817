//! The HTTP API. Bodies are JSON; every error is problem+json (see `problem`).
//! Paths and status codes follow the REST contract published with
//! reputation-pool 0.5.0 where it has one. One module per resource holds its
//! handlers and the bodies they read and write.

mod events;
mod leases;
mod outcomes;
mod probes;
mod resources;
mod snapshot;
mod status;

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::Router;
use serde::Deserialize;

use super::extract::App;
use super::problem::Problem;
use events::events;
use leases::{acquire, lease, leases, release, renew, usage};
use outcomes::report;
use probes::{due_for_probe, probe};
use resources::{block, cells, register, resources, unblock, unregister};
use snapshot::{export, import};
use status::{metrics, readyz, stats};

/// The OpenAPI document of this API, kept in the repository beside the code.
pub const OPENAPI: &str = include_str!("../../../openapi.json");

/// Header naming the tenant when auth is off (with a key, the key names it).
pub const TENANT_HEADER: &str = "repute-tenant";

pub fn router(state: App) -> Router {
    let v1 = Router::new()
        .route("/resources", post(register).get(resources))
        .route("/resources/{kind}/{value}", axum::routing::delete(unregister))
        .route("/resources/{kind}/{value}/cells", get(cells))
        .route("/resources/{kind}/{value}/block", put(block).delete(unblock))
        .route("/leases", post(acquire).get(leases))
        .route("/leases/{id}", get(lease).delete(release))
        .route("/leases/{id}/renewals", post(renew))
        .route("/leases/{id}/usage", post(usage))
        .route("/outcomes", post(report))
        .route("/probes", get(due_for_probe).post(probe))
        .route("/stats", get(stats))
        .route("/snapshot", get(export).put(import))
        .route("/events", get(events));
    Router::new()
        .nest("/v1", v1)
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }))
        .fallback(|| async { Problem::not_found("route") })
        // The method router still adds the `Allow` header to this answer.
        .method_not_allowed_fallback(|| async {
            Problem::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "Method not allowed")
                .detail("the Allow header lists the methods of this route")
        })
        .layer(DefaultBodyLimit::max(state.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// Times every request into the latency histogram, by route template and
/// method: both from fixed sets, so invented paths and methods cannot grow
/// the metrics page.
async fn observe(State(state): State<App>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_owned();
    let method = super::metrics::method_label(req.method());
    let start = Instant::now();
    let res = next.run(req).await;
    state.metrics.observe_request(method, &route, res.status().as_u16(), start.elapsed());
    tracing::debug!(%method, %route, status = res.status().as_u16(), "request");
    res
}

/// `{kind}/{value}` of a resource path.
#[derive(Deserialize)]
pub(super) struct KindValue {
    kind: String,
    value: String,
}

/// `{id}` of a lease path.
#[derive(Deserialize)]
pub(super) struct LeaseId {
    id: u64,
}
