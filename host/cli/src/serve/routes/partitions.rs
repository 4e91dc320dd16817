//! The partitions of a tenant in partitioned mode: which process owns each,
//! the map a client routes by (a context's partition is
//! `partition_of(context, count)`, a lease's `lease_partition(id, count)`,
//! both in the bindings), and handing one partition to another process.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::Json;
use repute_host::Partition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::table::{route, Route};
use crate::serve::extract::{App, AppResult, Body, Tenant, P};
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::state::blocking;

const NOT_PARTITIONED: &str = "This server does not split tenants (it does not run --mode partitioned)";

/// This module's rows of the routes table.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(
            M::GET,
            "/v1/partitions",
            map,
            Doc::tenant("The tenant's partitions and the process that owns each (partitioned mode)")
                .json::<PartitionsOut>(200, "Partitions")
                .problem(404, NOT_PARTITIONED),
        ),
        route(
            M::POST,
            "/v1/partitions/{index}/handoff",
            handoff,
            Doc::tenant("Hand a partition this process owns to another process")
                .describe(
                    "Saves the partition's checkpoint, gives its owner lease up and, for one owner TTL, answers \
                     its requests 421 naming `to`; the process at `to` claims it on the first one it gets.",
                )
                .path::<IndexPath>()
                .body::<HandoffIn>()
                .empty(204, "Handed off")
                .problem(404, NOT_PARTITIONED)
                .problem(421, "This process does not own the partition: `owner` names the one that does"),
        ),
    ]
}

#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Partitions")]
pub(super) struct PartitionsOut {
    /// `--partitions`: a context's partition is FNV-1a of its name modulo this.
    count: u32,
    /// The base URL of each partition's owner, by index; null while none holds it.
    owners: Vec<Option<String>>,
}

/// `{index}` of a partition path.
#[derive(Deserialize, JsonSchema)]
pub(super) struct IndexPath {
    #[schemars(range(max = 63))]
    index: u32,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HandoffIn {
    /// The base URL of the process to take the partition over (its `--advertise`).
    #[schemars(length(min = 8, max = 2048))]
    to: String,
}

/// `--partitions`, or the refusal of a server that does not split tenants.
fn count(state: &App) -> Result<u32, Problem> {
    state.partitions.ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "not_found", NOT_PARTITIONED))
}

pub(super) async fn map(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<PartitionsOut>> {
    let count = count(&state)?;
    let s = state.clone();
    let owners = blocking(move || {
        let Some(ownership) = &s.ownership else { return Ok(Vec::new()) };
        let owner = |index| ownership.owner_of(&Partition { tenant: t.clone(), index, count }.name());
        Ok((0..count).map(owner).collect::<repute_host::Result<Vec<_>>>()?)
    })
    .await?;
    Ok(Json(PartitionsOut { count, owners }))
}

pub(super) async fn handoff(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(IndexPath { index }): P<IndexPath>,
    Body(b): Body<HandoffIn>,
) -> AppResult<StatusCode> {
    let count = count(&state)?;
    if index >= count {
        return Err(Problem::invalid("index", format!("must be below the number of partitions ({count})")));
    }
    let url = b.to.trim_end_matches('/');
    let scheme = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    if url.len() > 2048 || !scheme.is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|c| c.is_ascii_graphic())) {
        return Err(Problem::invalid("to", "must be an http:// or https:// base URL of at most 2048 bytes"));
    }
    let (pool, to) = (Partition { tenant: t, index, count }.name(), url.to_owned());
    let s = state.clone();
    blocking(move || s.hand_off(&pool, &to)).await?;
    Ok(StatusCode::NO_CONTENT)
}
