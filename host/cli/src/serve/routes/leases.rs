//! Acquiring, reading, renewing and releasing leases, and reporting what one used.

use axum::extract::State;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use repute_host::{selector_error, Lease, LeaseKind, PoolOps, Secret, TenantPool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::table::{route, LeaseId, Route};
use crate::serve::extract::{App, AppResult, Body, Tenant, P, Q};
use crate::serve::labels::{self, Values};
use crate::serve::openapi::schema;
use crate::serve::problem::Problem;
use crate::serve::state::By;

const NO_LEASE: &str = "No live lease";
use crate::serve::openapi::Doc;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::POST, "/v1/leases", acquire,
            Doc::tenant("Acquire the best resource for a context, among those the selector admits")
                .body::<AcquireIn>()
                .json::<LeaseOut>(201, "Granted")
                .header("Location", "/v1/leases/{id}", "string")
                .problem(409, "Nothing available: `reasons` counts each resource under what holds it back (`limited`: over a usage limit or retired by one), `retry_after_ms` says when the first may free up, `expected_after_ms` when one is expected to (a ban's early trial mostly fails)")
                .header("Retry-After", "Seconds until a retry may succeed", "integer")
                .problem(429, "Rate limited")
                .header("Retry-After", "Seconds until a retry may succeed", "integer")),
        route(M::GET, "/v1/leases", leases, Doc::tenant("Live leases").list::<LeaseOut>(200, "Leases")),
        route(M::GET, "/v1/leases/{id}", lease,
            Doc::tenant("One live lease").path::<LeaseId>().json::<LeaseOut>(200, "Lease").problem(404, NO_LEASE)),
        route(M::DELETE, "/v1/leases/{id}", release,
            Doc::tenant("Release")
                .path::<LeaseId>()
                .query::<TokenQuery>()
                .empty(204, "Released")
                .problem(404, NO_LEASE)
                .problem(409, "Stale token or expired")),
        route(M::POST, "/v1/leases/{id}/renewals", renew,
            Doc::tenant("Renew: extend by the lease's TTL from now")
                .path::<LeaseId>()
                .body::<RenewIn>()
                .json::<LeaseOut>(200, "Renewed")
                .problem(404, NO_LEASE)
                .problem(409, "Stale token, expired, or blocked")),
        route(M::POST, "/v1/leases/{id}/usage", usage,
            Doc::tenant("Report what the lease used of its resource's `tpm` instead of the `cost` it reserved")
                .describe("The pool and the lease authority count `used` tokens for the lease from now on (nothing to count when the resource has no `tpm`, or once the grant has left the 60 s window). Send it while the lease is live, before releasing it.")
                .path::<LeaseId>()
                .body::<UsageIn>()
                .empty(204, "Counted")
                .problem(404, NO_LEASE)
                .problem(409, "Stale token or expired")),
    ]
}

#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Lease", transform = schema::left_out_not_null)]
pub(super) struct LeaseOut {
    #[schemars(with = "schema::Uint64")]
    id: u64,
    kind: String,
    value: String,
    context: String,
    permit: u32,
    /// fencing token, strictly increasing per permit
    #[schemars(with = "schema::Uint64")]
    token: u64,
    #[schemars(with = "schema::Kind")]
    lease_kind: LeaseKind,
    ttl_ms: f64,
    expires_in_ms: f64,
    /// The resource's secret: only in the 201 answer of a grant, and only
    /// when the resource was registered with one (the one way a client learns it).
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

fn lease_out(l: &Lease, now: u64) -> LeaseOut {
    LeaseOut {
        id: l.id,
        kind: l.resource.kind().to_owned(),
        value: l.resource.value().to_owned(),
        context: l.context.as_str().to_owned(),
        permit: l.permit,
        token: l.token,
        lease_kind: l.kind,
        ttl_ms: l.ttl as f64 / 1e6,
        expires_in_ms: l.expires_at.saturating_sub(now) as f64 / 1e6,
        secret: None,
    }
}

/// What an acquire may choose; every part but `context` is optional.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AcquireIn {
    #[schemars(with = "schema::Name")]
    context: String,
    /// Only resources of this kind.
    #[schemars(with = "Option<schema::Name>")]
    kind: Option<String>,
    /// Only resources whose label of each name has the value given (or one of
    /// the values of an array), e.g. {"region": "eu", "tier": ["paid", "trial"]}.
    #[serde(default, rename = "where")]
    #[schemars(with = "schema::Filters", extend("default" = {}))]
    filters: std::collections::BTreeMap<String, Values>,
    /// Never resources with these values, of any kind.
    #[serde(default)]
    #[schemars(with = "schema::Names")]
    exclude: Vec<String>,
    /// Try the resource with this value first (of `kind` when given), if it
    /// is selectable and matches; otherwise choose as usual.
    #[schemars(with = "Option<schema::Name>")]
    prefer: Option<String>,
    /// A key (a user, a session): the resource the last lease with this key
    /// got is tried first, if still selectable and matching; otherwise one is
    /// chosen as usual and the key is bound to it. Bindings are kept in
    /// memory only, a bounded number per tenant.
    #[schemars(with = "Option<schema::Name>")]
    affinity: Option<String>,
    /// Tokens the grant reserves against a resource's `tpm` limit (1 when
    /// left out); only resources whose `tpm` is at least this are chosen.
    /// Report what the lease really used with POST /v1/leases/{id}/usage.
    #[schemars(with = "Option<schema::Count>")]
    cost: Option<u64>,
}

pub(super) async fn acquire(
    State(state): State<App>,
    Tenant(t): Tenant,
    Body(b): Body<AcquireIn>,
) -> AppResult<Response> {
    let mut selector = labels::selector(b.kind, b.filters, b.exclude, b.prefer, b.affinity);
    selector.cost = b.cost;
    let clock = state.clock.clone();
    let pool = state.pool(&t, By::Context(&b.context));
    let granted = state
        .call(&pool, move |p| {
            let (lease, secret) = p.acquire_with_secret(&b.context, &selector).map_err(selector_error)?;
            Ok(Granted { lease, secret, now: clock.now() })
        })
        .await?;
    created(granted)
}

/// A lease just granted, with its resource's secret and the clock reading
/// its expiry counts from, read in the call that granted it.
pub(super) struct Granted {
    lease: Lease,
    secret: Option<Secret>,
    now: u64,
}

pub(super) fn with_secret(
    p: &mut TenantPool<'_>,
    lease: Lease,
    clock: &dyn repute_host::Clock,
) -> repute_host::Result<Granted> {
    let secret = p.secret(lease.resource.kind(), lease.resource.value())?;
    Ok(Granted { lease, secret, now: clock.now() })
}

/// The 201 of a grant: the only answer that carries the resource's secret.
pub(super) fn created(Granted { lease, secret, now }: Granted) -> AppResult<Response> {
    let location = HeaderValue::from_str(&format!("/v1/leases/{}", lease.id)).expect("digits are a valid header");
    let body = LeaseOut { secret: secret.map(|s| s.expose().to_owned()), ..lease_out(&lease, now) };
    let mut res = (StatusCode::CREATED, Json(body)).into_response();
    res.headers_mut().insert(header::LOCATION, location);
    Ok(res)
}

pub(super) async fn leases(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Vec<LeaseOut>>> {
    let clock = state.clock.clone();
    let (all, now) = state.call(&state.pool(&t, By::Home), move |p| p.leases().map(|l| (l, clock.now()))).await?;
    Ok(Json(all.iter().map(|l| lease_out(l, now)).collect()))
}

pub(super) async fn lease(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
) -> AppResult<Json<LeaseOut>> {
    let clock = state.clock.clone();
    let (found, now) =
        state.call(&state.pool(&t, By::Lease(id)), move |p| p.lease(id).map(|l| (l, clock.now()))).await?;
    found.map(|l| Json(lease_out(&l, now))).ok_or_else(|| Problem::not_found("lease"))
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct TokenQuery {
    /// The lease's fencing token. An `Option` so that the handler, not the
    /// query parser, refuses a request without it, naming the field.
    #[schemars(required, with = "schema::Uint64")]
    token: Option<u64>,
}

pub(super) async fn release(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Q(q): Q<TokenQuery>,
) -> AppResult<StatusCode> {
    let token = q.token.ok_or_else(|| Problem::invalid("token", "is required (the lease's fencing token)"))?;
    state.call(&state.pool(&t, By::Lease(id)), move |p| p.release(id, token)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RenewIn {
    #[schemars(with = "schema::Uint64")]
    token: u64,
}

pub(super) async fn renew(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Body(b): Body<RenewIn>,
) -> AppResult<Json<LeaseOut>> {
    let clock = state.clock.clone();
    let (lease, now) =
        state.call(&state.pool(&t, By::Lease(id)), move |p| p.renew(id, b.token).map(|l| (l, clock.now()))).await?;
    Ok(Json(lease_out(&lease, now)))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageIn {
    /// The lease's fencing token.
    #[schemars(with = "schema::Uint64")]
    token: u64,
    /// Tokens the lease used, counted against the resource's `tpm` instead of its acquire's `cost`.
    #[schemars(with = "schema::Uint64")]
    used: u64,
}

/// What the lease used of its resource's `tpm`, instead of the `cost` its
/// acquire reserved.
pub(super) async fn usage(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Body(b): Body<UsageIn>,
) -> AppResult<StatusCode> {
    state.call(&state.pool(&t, By::Lease(id)), move |p| p.reconcile(id, b.token, b.used)).await?;
    Ok(StatusCode::NO_CONTENT)
}
