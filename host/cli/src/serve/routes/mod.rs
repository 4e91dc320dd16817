//! The HTTP API. Bodies are JSON; every error is problem+json (see `problem`).
//! Paths and status codes follow the REST contract published with
//! reputation-pool 0.5.0 where it has one. One module per resource holds its
//! handlers and the bodies they read and write.

mod events;
mod groups;
mod leases;
mod listing;
mod outcomes;
mod partitions;
mod probes;
mod resources;
mod snapshot;
mod status;
mod table;

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

use super::extract::App;
use super::problem::Problem;
use table::Route;

pub use status::OPENAPI;

/// The OpenAPI document the routes' table makes, as `repute openapi` prints it.
pub fn openapi() -> String {
    let routes = routes();
    let operations: Vec<_> = routes.iter().map(|r| (r.method.clone(), r.path, &r.doc)).collect();
    super::openapi::render(&operations)
}

pub use super::extract::TENANT_HEADER;

pub fn router(state: App) -> Router {
    let mut app = Router::new();
    for route in routes() {
        app = app.route(route.path, route.handler);
    }
    app.merge(super::console::routes())
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

/// Every route: each resource's module lists its own, beside its handlers.
fn routes() -> Vec<Route> {
    [
        resources::routes,
        groups::routes,
        leases::routes,
        outcomes::routes,
        probes::routes,
        snapshot::routes,
        partitions::routes,
        events::routes,
        status::routes,
    ]
    .into_iter()
    .flat_map(|rows| rows())
    .collect()
}
