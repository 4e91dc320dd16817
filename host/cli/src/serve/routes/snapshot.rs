//! Exporting and importing a tenant's pool.

use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use repute_core::snapshot::{capped, CappedInput};
use repute_host::PoolOps;
use schemars::JsonSchema;
use serde::Deserialize;

use super::table::{route, Route};
use crate::serve::extract::{App, AppResult, Raw, Tenant, Q};
use crate::serve::openapi::schema;
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::share;
use crate::serve::state::blocking;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::GET, "/v1/snapshot", export,
            Doc::tenant("Export (binary by default, JSON with format=json)")
                .query::<ExportQuery>()
                .media(200, "Snapshot", &["application/octet-stream", "application/json"])
                .problem(409, PARTITIONED)),
        route(M::PUT, "/v1/snapshot", import,
            Doc::tenant("Import (replaces the tenant's state; fence counters never go back; the policy is held to the operator's --max-resources, --max-cells and --rate)")
                .raw_body(&["application/octet-stream", "application/json"])
                .empty(204, "Restored")
                .problem(409, PARTITIONED)
                .problem(422, "Snapshot refused (corrupt, foreign, newer format, trailing bytes, unknown flags, counters above u64::MAX / 2, more than the caps allow); `field` and `rule` name the snapshot value when one broke a rule; nothing changed; or the pool it builds is over the memory share (`field` max_tenant_bytes)")),
    ]
}

const PARTITIONED: &str = "Partitioned mode: no process holds the whole tenant to snapshot";

/// A snapshot is the whole of a tenant's pool, which no process of
/// partitioned mode holds: refused there rather than one partition passed
/// off as the tenant.
fn whole(state: &App) -> Result<(), Problem> {
    match state.partitions {
        None => Ok(()),
        Some(count) => Err(Problem::new(StatusCode::CONFLICT, "partitioned", PARTITIONED).detail(format!(
            "this server splits each tenant into {count} partitions by context (--mode partitioned); \
             snapshots are of a whole tenant, served in the other modes"
        ))),
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct ExportQuery {
    #[schemars(with = "Option<schema::SnapshotFormat>")]
    format: Option<String>,
    leases: Option<bool>,
}

pub(super) async fn export(State(state): State<App>, Tenant(t): Tenant, Q(q): Q<ExportQuery>) -> AppResult<Response> {
    whole(&state)?;
    let with_leases = q.leases.unwrap_or(true);
    match q.format.as_deref() {
        None | Some("binary") => {
            let bytes = state.call(&t, move |p| p.snapshot(with_leases)).await?;
            Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
        }
        Some("json") => {
            let json = state.call(&t, move |p| p.snapshot_json(with_leases)).await?;
            Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
        }
        Some(_) => Err(Problem::invalid("format", "must be binary or json")),
    }
}

/// Restores a binary or JSON snapshot, its policy held to the operator's caps
/// first (`--max-resources`, `--max-cells`, `--rate`), so an import can lower
/// a budget but never lift one; with `--max-tenant-bytes`, the pool it
/// builds must fit the tenant's memory share (its footprint as built here,
/// by the core linked into the server, where sizes are at least those of the
/// wasm instance).
pub(super) async fn import(
    State(state): State<App>,
    Tenant(t): Tenant,
    headers: HeaderMap,
    Raw(body): Raw,
) -> AppResult<StatusCode> {
    whole(&state)?;
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (caps, max) = (state.caps, state.max_tenant_bytes);
    let bytes = blocking(move || {
        let input = if json {
            let text = std::str::from_utf8(&body).map_err(|_| Problem::invalid("body", "must be UTF-8 JSON"))?;
            capped(CappedInput::Json(text), &caps)
        } else {
            capped(CappedInput::Binary(&body), &caps)
        };
        let bytes = input.map_err(|e| Problem::from(repute_host::Error::Snapshot(e.into())))?;
        if let Some(max) = max {
            let built =
                repute_core::Pool::from_snapshot(&bytes, 0).map_err(|e| Problem::from(repute_host::Error::from(e)))?;
            let held = built.footprint();
            if held > max {
                return Err(share::exceeded(max, held));
            }
        }
        Ok(bytes)
    })
    .await?;
    state.call(&t, move |p| p.restore(&bytes)).await?;
    Ok(StatusCode::NO_CONTENT)
}
