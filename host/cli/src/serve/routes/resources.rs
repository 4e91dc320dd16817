//! Registering, listing, unregistering and blocking resources, and their cells.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::Json;
use repute_host::{CellView, PoolOps};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::listing;
use super::table::{route, KindValue, Route, CELL_BUDGET, UNKNOWN};
use crate::serve::extract::{App, AppResult, Body, Tenant, P, Q};
use crate::serve::labels;
use crate::serve::openapi::schema;
use crate::serve::openapi::views;
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::share::{self, Growth};
use crate::serve::state::By;
use crate::serve::units::{http_view, nanos};
use crate::serve::usage::LimitsIn;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(
            M::POST,
            "/v1/resources",
            register,
            Doc::tenant("Register a resource (again: replace its permits, limits, labels, secret and groups)")
                .body::<RegisterIn>()
                .empty(204, "Registered")
                .problem(409, "Lowering permits under a live lease")
                .problem(422, "Budget exhausted: `max_resources`, or the memory share (`field` max_tenant_bytes)"),
        ),
        route(
            M::GET,
            "/v1/resources",
            listing::resources,
            Doc::tenant("List resources: filtered, sorted and paged when asked")
                .query::<listing::ListQuery>()
                .list::<views::Resource>(200, "Resources sorted by id unless `sort` says otherwise")
                .header("Repute-Total", "How many resources match the filters, every page together", "integer"),
        ),
        route(
            M::DELETE,
            "/v1/resources/{kind}/{value}",
            unregister,
            Doc::tenant("Unregister; refused while leased unless force=true (revokes the leases)")
                .path::<KindValue>()
                .query::<ForceQuery>()
                .empty(204, "Unregistered")
                .problem(404, UNKNOWN)
                .problem(409, "Leased"),
        ),
        route(
            M::GET,
            "/v1/resources/{kind}/{value}/cells",
            cells,
            Doc::tenant("Reputation cells: the global one first, then one per context")
                .describe("With `context`, the global cell and that context's only, from the pool that holds the context (in partitioned mode, its partition's owner; without it, partition 0's).")
                .path::<KindValue>()
                .query::<ContextQuery>()
                .list::<views::Cell>(200, "Cells")
                .problem(404, UNKNOWN),
        ),
        route(
            M::PUT,
            "/v1/resources/{kind}/{value}/block",
            block,
            Doc::tenant("Block everywhere or in one context, for `duration_ms` or permanently")
                .path::<KindValue>()
                .body::<BlockIn>()
                .empty(204, "Blocked")
                .problem(404, UNKNOWN)
                .problem(422, CELL_BUDGET),
        ),
        route(
            M::DELETE,
            "/v1/resources/{kind}/{value}/block",
            unblock,
            Doc::tenant("Lift a block")
                .path::<KindValue>()
                .query::<ContextQuery>()
                .empty(204, "Lifted")
                .problem(404, "No such block or resource"),
        ),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RegisterIn {
    #[schemars(with = "schema::Name")]
    kind: String,
    #[schemars(with = "schema::Name")]
    value: String,
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 1024))]
    permits: u32,
    /// Usage limits, counted by the tenant's lease authority in the same step
    /// as each grant, across every process serving the tenant (on a shared
    /// store, on its clock): a resource over one is not selected until it
    /// frees up. Left out, a limit does not apply; registering again replaces
    /// them all.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    limits: LimitsIn,
    /// What acquire filters (`where`) match, e.g. {"region": "eu", "tier":
    /// "paid"}. Registering again replaces them; left out, the resource has none.
    #[serde(default)]
    #[schemars(with = "schema::Labels")]
    labels: std::collections::BTreeMap<String, String>,
    /// An opaque payload for the holders of the resource's leases (an API
    /// key, a password): handed back in the 201 answer of a grant and shown
    /// nowhere else (views, lease lookups, lists, events, the JSON snapshot,
    /// errors, logs). The binary snapshot keeps it, so an import restores it.
    /// Registering again without it removes it.
    #[schemars(length(min = 1, max = 4096))]
    secret: Option<String>,
    /// The quota groups it belongs to (at most 8, each once): every grant of
    /// it also counts against each group's limits (PUT /v1/groups/{name}/limits).
    /// Registering again replaces them; left out, it belongs to none.
    #[serde(default)]
    #[schemars(with = "schema::Groups")]
    groups: Vec<String>,
}

fn one() -> u32 {
    1
}

/// Registering a resource again replaces its permits, limits, labels,
/// secret and groups with the body's (none of the last four when left out).
pub(super) async fn register(
    State(state): State<App>,
    Tenant(t): Tenant,
    Body(b): Body<RegisterIn>,
) -> AppResult<StatusCode> {
    let registration = labels::registration(b.permits, b.limits.into_limits()?, b.labels, b.secret, b.groups)?;
    let max = state.max_tenant_bytes;
    state
        .call(&state.pool(&t, By::Home), move |p| {
            match share::admit(p, max, Growth::Resource { kind: &b.kind, value: &b.value })? {
                Ok(()) => p.register_with(&b.kind, &b.value, &registration).map(|_| Ok(())),
                Err(refused) => Ok(Err(refused)),
            }
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, JsonSchema)]
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
    state.call(&state.pool(&t, By::Home), move |p| p.unregister(&kind, &value, q.force)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn cells(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Q(q): Q<ContextQuery>,
) -> AppResult<Json<Value>> {
    let pool = q.pool(&state, &t)?;
    let mut views: Vec<CellView> = state.call(&pool, move |p| p.cells(&kind, &value)).await?;
    if let Some(context) = &q.context {
        views.retain(|c| c.context.as_ref().is_none_or(|c| c.as_str() == context));
    }
    Ok(Json(http_view(&views, &*state.clock)))
}

/// Each field may be left out or sent as null: without `context` the block
/// is resource-wide, without `duration_ms` permanent.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BlockIn {
    #[schemars(with = "Option<schema::Name>")]
    context: Option<String>,
    /// How long the block lasts, ms
    #[schemars(with = "Option<schema::Ms>")]
    duration_ms: Option<f64>,
    #[schemars(length(max = 1024))]
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
    let pool = state.pool(&t, b.context.as_deref().map_or(By::Home, By::Context));
    state
        .call(&pool, move |p| {
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

#[derive(Deserialize, JsonSchema)]
pub(super) struct ContextQuery {
    #[schemars(with = "Option<schema::Name>")]
    context: Option<String>,
}

impl ContextQuery {
    /// The pool a request about `context` goes to (partition 0's without
    /// one); a context the core would refuse is refused here, naming it:
    /// a filter alone would never reach the pool's own check.
    pub(super) fn pool(&self, state: &App, tenant: &str) -> Result<String, Problem> {
        by_context(state, tenant, self.context.as_deref())
    }
}

/// The pool a request about `context` goes to, `context` checked by the core's rule.
pub(super) fn by_context(state: &App, tenant: &str, context: Option<&str>) -> Result<String, Problem> {
    if let Some(context) = context {
        repute_host::Context::new(context).map_err(|e| match repute_host::Error::from(e) {
            repute_host::Error::InvalidInput { rule, .. } => Problem::invalid("context", rule),
            other => Problem::from(other),
        })?;
    }
    Ok(state.pool(tenant, context.map_or(By::Home, By::Context)))
}

pub(super) async fn unblock(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Q(q): Q<ContextQuery>,
) -> AppResult<StatusCode> {
    let pool = state.pool(&t, q.context.as_deref().map_or(By::Home, By::Context));
    let lifted = state.call(&pool, move |p| p.unblock(&kind, &value, q.context.as_deref())).await?;
    if lifted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found("block"))
    }
}
