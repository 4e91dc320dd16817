//! The cells due for a probe, and the probe leases that test them.

use axum::extract::State;
use axum::http::Method;
use axum::response::Response;
use axum::Json;
use repute_host::PoolOps;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::leases::{created, with_secret, LeaseOut};
use super::table::{route, Route};
use crate::serve::extract::{App, AppResult, Body, Tenant};
use crate::serve::openapi::schema;
use crate::serve::openapi::Doc;
use crate::serve::state::By;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::GET, "/v1/probes", due_for_probe, Doc::tenant("Cells due for a probe").list::<DueOut>(200, "Due")),
        route(
            M::POST,
            "/v1/probes",
            probe,
            Doc::tenant("Take a probe lease on a due cell")
                .body::<ProbeIn>()
                .json::<LeaseOut>(201, "Granted")
                .problem(409, "Permits all held")
                .problem(404, "The resource is not registered"),
        ),
    ]
}

#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Due")]
pub(super) struct DueOut {
    kind: String,
    value: String,
    context: String,
}

pub(super) async fn due_for_probe(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Vec<DueOut>>> {
    let due = state.call(&state.pool(&t, By::Home), |p| p.due_for_probe()).await?;
    Ok(Json(
        due.into_iter()
            .map(|(r, c)| DueOut { kind: r.kind().into(), value: r.value().into(), context: c.as_str().into() })
            .collect(),
    ))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ProbeIn {
    #[schemars(with = "schema::Name")]
    kind: String,
    #[schemars(with = "schema::Name")]
    value: String,
    #[schemars(with = "schema::Name")]
    context: String,
}

/// A probe lease carries the secret as a client's does: a probe of an API
/// key needs the key.
pub(super) async fn probe(State(state): State<App>, Tenant(t): Tenant, Body(b): Body<ProbeIn>) -> AppResult<Response> {
    let clock = state.clock.clone();
    let granted = state
        .call(&state.pool(&t, By::Home), move |p| {
            let lease = p.acquire_for_probe(&b.kind, &b.value, &b.context)?;
            with_secret(p, lease, &*clock)
        })
        .await?;
    created(granted)
}
