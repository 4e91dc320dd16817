//! Every route of the API, once: its method and path, its handler, and its
//! documentation, each listed by the module of its resource beside its
//! handler. The router and the OpenAPI document are both made from this
//! table, so a route cannot be served undocumented or documented unserved.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};

use super::{events, leases, outcomes, probes, resources, snapshot, status};
use crate::serve::extract::App;
use crate::serve::openapi::Doc;

/// One method of one path.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    /// The handler, for `method` only.
    pub handler: MethodRouter<App>,
    pub doc: Doc,
}

pub(super) fn route<H: Handler<T, App>, T: 'static>(method: Method, path: &'static str, handler: H, doc: Doc) -> Route {
    let filter = MethodFilter::try_from(method.clone()).expect("the table names standard methods");
    Route { method, path, handler: on(filter, handler), doc }
}

pub(super) const UNKNOWN: &str = "Unknown resource";
pub(super) const CELL_BUDGET: &str = "Budget exhausted: `max_cells`, or the memory share (`field` max_tenant_bytes)";

/// Every route: each resource's module lists its own, beside its handlers.
pub fn routes() -> Vec<Route> {
    [
        resources::routes,
        leases::routes,
        outcomes::routes,
        probes::routes,
        snapshot::routes,
        events::routes,
        status::routes,
    ]
    .into_iter()
    .flat_map(|rows| rows())
    .collect()
}
