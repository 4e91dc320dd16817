//! Registering, listing, unregistering and blocking resources, and their cells.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use repute_host::{CellView, PoolOps, ResourceView};
use serde::Deserialize;
use serde_json::Value;

use super::KindValue;
use crate::serve::extract::{App, AppResult, Body, Tenant, P, Q};
use crate::serve::labels;
use crate::serve::problem::Problem;
use crate::serve::share::{self, Growth};
use crate::serve::units::{http_view, nanos};
use crate::serve::usage::LimitsIn;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegisterIn {
    kind: String,
    value: String,
    #[serde(default = "one")]
    permits: u32,
    #[serde(default)]
    limits: LimitsIn,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
    secret: Option<String>,
}

fn one() -> u32 {
    1
}

/// Registering a resource again replaces its permits, limits, labels and
/// secret with the body's (none of the last three when left out).
pub(super) async fn register(
    State(state): State<App>,
    Tenant(t): Tenant,
    Body(b): Body<RegisterIn>,
) -> AppResult<StatusCode> {
    let registration = labels::registration(b.permits, b.limits.into_limits()?, b.labels, b.secret)?;
    let max = state.max_tenant_bytes;
    state
        .call(&t, move |p| match share::admit(p, max, Growth::Resource { kind: &b.kind, value: &b.value })? {
            Ok(()) => p.register_with(&b.kind, &b.value, &registration).map(|_| Ok(())),
            Err(refused) => Ok(Err(refused)),
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

/// The views with `labels` as an object and `limits` in ms; a view never
/// carries a secret.
pub(super) async fn resources(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Value>> {
    let views: Vec<ResourceView> = state.call(&t, |p| p.resources()).await?;
    let mut out = http_view(&views, &*state.clock);
    if let Value::Array(items) = &mut out {
        for (item, view) in items.iter_mut().zip(&views) {
            item["labels"] = labels::object(&view.labels);
        }
    }
    Ok(Json(out))
}

#[derive(Deserialize)]
pub(super) struct ForceQuery {
    #[serde(default)]
    force: bool,
}

pub(super) async fn unregister(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Q(q): Q<ForceQuery>,
) -> AppResult<StatusCode> {
    state.call(&t, move |p| p.unregister(&kind, &value, q.force)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn cells(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
) -> AppResult<Json<Value>> {
    let views: Vec<CellView> = state.call(&t, move |p| p.cells(&kind, &value)).await?;
    Ok(Json(http_view(&views, &*state.clock)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BlockIn {
    context: Option<String>,
    duration_ms: Option<f64>,
    reason: Option<String>,
}

pub(super) async fn block(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Body(b): Body<BlockIn>,
) -> AppResult<StatusCode> {
    let duration = b.duration_ms.map(|ms| nanos(ms, "duration_ms")).transpose()?;
    let max = state.max_tenant_bytes;
    state
        .call(&t, move |p| {
            // A resource-wide block adds no cell; one in a context may.
            if let Some(context) = &b.context {
                if let Err(refused) = share::admit(p, max, Growth::Cell { kind: &kind, value: &value, context })? {
                    return Ok(Err(refused));
                }
            }
            p.block(&kind, &value, b.context.as_deref(), duration, b.reason.as_deref()).map(Ok)
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub(super) struct ContextQuery {
    context: Option<String>,
}

pub(super) async fn unblock(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Q(q): Q<ContextQuery>,
) -> AppResult<StatusCode> {
    let lifted = state.call(&t, move |p| p.unblock(&kind, &value, q.context.as_deref())).await?;
    if lifted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found("block"))
    }
}
