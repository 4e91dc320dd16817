//! What a row of the routes table is (a route's method and path, its handler
//! and its documentation), and what several resources' rows share: problem
//! texts and path segments. Each resource's module lists its rows beside its
//! handlers; `routes` gathers them for the router and the OpenAPI document,
//! so a route cannot be served undocumented or documented unserved.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::serve::extract::App;
use crate::serve::openapi::{schema, Doc};

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

/// `{kind}/{value}` of a resource path.
#[derive(Deserialize, JsonSchema)]
pub(super) struct KindValue {
    #[schemars(with = "schema::Name")]
    pub(super) kind: String,
    /// percent-encode '/'
    #[schemars(with = "schema::Name")]
    pub(super) value: String,
}

/// `{id}` of a lease path.
#[derive(Deserialize, JsonSchema)]
pub(super) struct LeaseId {
    #[schemars(with = "schema::Uint64")]
    pub(super) id: u64,
}
