//! Quota groups: setting and removing the limits a group's members share,
//! and the groups' views. A resource joins a group in its registration
//! (`groups` of `POST /v1/resources`); a group is listed while it has
//! members or limits. The limits are their own sub-resource
//! (`/v1/groups/{name}/limits`) because removing them leaves a group with
//! members in place: a DELETE of the group's own path would leave it
//! answering 200.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::Json;
use repute_host::{GroupLimits, GroupName, GroupView, PoolOps};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::resources::ContextQuery;
use super::table::{route, Route};
use crate::serve::extract::{App, AppResult, Body, Tenant, P, Q};
use crate::serve::openapi::schema;
use crate::serve::openapi::views;
use crate::serve::openapi::Doc;
use crate::serve::problem::Problem;
use crate::serve::share::{self, Growth};
use crate::serve::state::By;
use crate::serve::units::http_view;
use crate::serve::usage::{self, GroupLimitsIn};

const UNKNOWN_GROUP: &str = "No group of this name has members or limits";
const GROUP_BUDGET: &str =
    "Budget exhausted: `max_groups` (10000 groups with limits), or the memory share (`field` max_tenant_bytes)";

/// This module's rows of the routes table.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(
            M::GET,
            "/v1/groups",
            list,
            Doc::tenant("List quota groups: each with members or limits, sorted by name")
                .describe("With `context`, from the pool that holds the context (in partitioned mode, its partition's owner; without it, partition 0's).")
                .query::<ContextQuery>()
                .list::<views::Group>(200, "Groups"),
        ),
        route(
            M::GET,
            "/v1/groups/{name}",
            one,
            Doc::tenant("One quota group")
                .path::<GroupPath>()
                .json::<views::Group>(200, "The group")
                .problem(404, UNKNOWN_GROUP),
        ),
        route(
            M::PUT,
            "/v1/groups/{name}/limits",
            set,
            Doc::tenant("Set the limits a quota group's members share (again: replace them all)")
                .path::<GroupPath>()
                .body::<GroupLimitsIn>()
                .empty(204, "Set")
                .problem(422, GROUP_BUDGET),
        ),
        route(
            M::DELETE,
            "/v1/groups/{name}/limits",
            remove,
            Doc::tenant("Remove a quota group's limits; its members stay in it")
                .path::<GroupPath>()
                .empty(204, "Removed")
                .problem(404, "The group has no limits"),
        ),
    ]
}

/// `{name}` of a group path.
#[derive(Deserialize, JsonSchema)]
pub(super) struct GroupPath {
    /// percent-encode '/'
    #[schemars(with = "schema::Name")]
    name: String,
}

/// The path's name by the core's rules, refused as the path's `name`.
fn group_name(name: String) -> AppResult<GroupName> {
    GroupName::new(name).map_err(|e| match repute_host::Error::from(e) {
        repute_host::Error::InvalidInput { rule, .. } => Problem::invalid("name", rule),
        other => Problem::from(other),
    })
}

/// A group as the API shows it: its windows as `usage` and `day_usage`
/// (null where no limit of that window applies), `limited_until` as Unix ms.
fn view(g: &GroupView, state: &App) -> Value {
    let l = &g.limits;
    http_view(
        &json!({
            "name": g.name,
            "limits": l,
            "members": g.members,
            "leased": g.leased,
            "usage": usage::shown(l.rpm.is_some() || l.tpm.is_some(), &g.window),
            "day_usage": usage::shown(l.rpd.is_some() || l.tpd.is_some(), &g.day),
            "limited_until": g.limited_until,
        }),
        &*state.clock,
    )
}

pub(super) async fn list(State(state): State<App>, Tenant(t): Tenant, Q(q): Q<ContextQuery>) -> AppResult<Json<Value>> {
    let groups: Vec<GroupView> = state.call(&q.pool(&state, &t)?, |p| p.groups()).await?;
    Ok(Json(Value::Array(groups.iter().map(|g| view(g, &state)).collect())))
}

pub(super) async fn one(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(GroupPath { name }): P<GroupPath>,
) -> AppResult<Json<Value>> {
    let name = group_name(name)?;
    let groups: Vec<GroupView> = state.call(&state.pool(&t, By::Home), |p| p.groups()).await?;
    let group = groups.iter().find(|g| g.name == name).ok_or_else(|| Problem::not_found("group"))?;
    Ok(Json(view(group, &state)))
}

/// Every limit is checked before the pool takes any, so a refused body
/// changes nothing; a body of no limits removes them, as DELETE does.
pub(super) async fn set(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(GroupPath { name }): P<GroupPath>,
    Body(b): Body<GroupLimitsIn>,
) -> AppResult<StatusCode> {
    let name = group_name(name)?;
    let limits = b.into_limits()?;
    let max = state.max_tenant_bytes;
    state
        .call(&state.pool(&t, By::Home), move |p| match share::admit(p, max, Growth::Group { name: name.as_str() })? {
            Ok(()) => p.set_group(name.as_str(), &limits).map(|_| Ok(())),
            Err(refused) => Ok(Err(refused)),
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

/// 404 when the group had no limits to remove, as lifting a block that is
/// not there is.
pub(super) async fn remove(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(GroupPath { name }): P<GroupPath>,
) -> AppResult<StatusCode> {
    let name = group_name(name)?;
    let removed =
        state.call(&state.pool(&t, By::Home), move |p| p.set_group(name.as_str(), &GroupLimits::default())).await?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found("group limits"))
    }
}
