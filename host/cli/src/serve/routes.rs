//! The HTTP API. Bodies are JSON; every error is problem+json (see `problem`).
//! Paths and status codes follow the REST contract published with
//! reputation-pool 0.5.0 where it has one.

use std::convert::Infallible;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use futures_util::stream::{Stream, StreamExt as _};
use repute_core::snapshot::{capped, CappedInput};
use repute_host::{selector_error, CellView, Lease, LeaseKind, PoolOps, ResourceView, Secret, Stats, TenantPool};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

use super::extract::{bearer, App, AppResult, Body, Raw, Tenant, P, Q};
use super::labels::{self, Values};
use super::problem::Problem;
use super::share::{self, Growth};
use super::units::{http_view, nanos};
use super::usage::LimitsIn;

/// The OpenAPI document of this API, kept in the repository beside the code.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// Header naming the tenant when auth is off (with a key, the key names it).
pub const TENANT_HEADER: &str = "repute-tenant";

pub fn router(state: App) -> Router {
    let v1 = Router::new()
        .route("/resources", post(register).get(resources))
        .route("/resources/{kind}/{value}", axum::routing::delete(unregister))
        .route("/resources/{kind}/{value}/cells", get(cells))
        .route("/resources/{kind}/{value}/block", put(block).delete(unblock))
        .route("/leases", post(acquire).get(leases))
        .route("/leases/{id}", get(lease).delete(release))
        .route("/leases/{id}/renewals", post(renew))
        .route("/leases/{id}/usage", post(usage))
        .route("/outcomes", post(report))
        .route("/probes", get(due_for_probe).post(probe))
        .route("/stats", get(stats))
        .route("/snapshot", get(export).put(import))
        .route("/events", get(events));
    Router::new()
        .nest("/v1", v1)
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }))
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

// ---- views ----

#[derive(Serialize)]
struct LeaseOut {
    id: u64,
    kind: String,
    value: String,
    context: String,
    permit: u32,
    token: u64,
    lease_kind: LeaseKind,
    ttl_ms: f64,
    expires_in_ms: f64,
    /// Only in the answer to the grant: the one way a client learns it.
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

// ---- handlers ----

async fn readyz(State(state): State<App>) -> Response {
    if state.is_ready() {
        "ready".into_response()
    } else {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "Starting").into_response()
    }
}

async fn metrics(State(state): State<App>, headers: HeaderMap) -> Response {
    if let (true, Some(keys)) = (state.metrics_auth, &state.keys) {
        let known = bearer(&headers).and_then(|k| keys.tenant_of(k));
        if known.is_none() {
            return Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "An API key is required")
                .detail("this server's /metrics wants a key (--metrics-auth)")
                .into_response();
        }
    }
    let s = state.clone();
    let _ = tokio::task::spawn_blocking(move || s.tick()).await;
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render())
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterIn {
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
async fn register(State(state): State<App>, Tenant(t): Tenant, Body(b): Body<RegisterIn>) -> AppResult<StatusCode> {
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
async fn resources(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Value>> {
    let views: Vec<ResourceView> = state.call(&t, |p| p.resources()).await?;
    let mut out = http_view(&views, &*state.clock);
    if let Value::Array(items) = &mut out {
        for (item, view) in items.iter_mut().zip(&views) {
            item["labels"] = labels::object(&view.labels);
        }
    }
    Ok(Json(out))
}

/// `{kind}/{value}` of a resource path.
#[derive(Deserialize)]
struct KindValue {
    kind: String,
    value: String,
}

/// `{id}` of a lease path.
#[derive(Deserialize)]
struct LeaseId {
    id: u64,
}

#[derive(Deserialize)]
struct ForceQuery {
    #[serde(default)]
    force: bool,
}

async fn unregister(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
    Q(q): Q<ForceQuery>,
) -> AppResult<StatusCode> {
    state.call(&t, move |p| p.unregister(&kind, &value, q.force)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn cells(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(KindValue { kind, value }): P<KindValue>,
) -> AppResult<Json<Value>> {
    let views: Vec<CellView> = state.call(&t, move |p| p.cells(&kind, &value)).await?;
    Ok(Json(http_view(&views, &*state.clock)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockIn {
    context: Option<String>,
    duration_ms: Option<f64>,
    reason: Option<String>,
}

async fn block(
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
struct ContextQuery {
    context: Option<String>,
}

async fn unblock(
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

/// What an acquire may choose; every part but `context` is optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireIn {
    context: String,
    kind: Option<String>,
    #[serde(default, rename = "where")]
    filters: std::collections::BTreeMap<String, Values>,
    #[serde(default)]
    exclude: Vec<String>,
    prefer: Option<String>,
    affinity: Option<String>,
    /// Tokens reserved against a resource's `tpm`.
    cost: Option<u64>,
}

async fn acquire(State(state): State<App>, Tenant(t): Tenant, Body(b): Body<AcquireIn>) -> AppResult<Response> {
    let mut selector = labels::selector(b.kind, b.filters, b.exclude, b.prefer, b.affinity);
    selector.cost = b.cost;
    let clock = state.clock.clone();
    let granted = state
        .call(&t, move |p| {
            let lease = p.acquire_with(&b.context, &selector).map_err(selector_error)?;
            with_secret(p, lease, &*clock)
        })
        .await?;
    created(granted)
}

/// A lease just granted, with its resource's secret and the clock reading
/// its expiry counts from, read in the call that granted it.
struct Granted {
    lease: Lease,
    secret: Option<Secret>,
    now: u64,
}

fn with_secret(p: &mut TenantPool<'_>, lease: Lease, clock: &dyn repute_host::Clock) -> repute_host::Result<Granted> {
    let secret = p.secret(lease.resource.kind(), lease.resource.value())?;
    Ok(Granted { lease, secret, now: clock.now() })
}

/// The 201 of a grant: the only answer that carries the resource's secret.
fn created(Granted { lease, secret, now }: Granted) -> AppResult<Response> {
    let location = HeaderValue::from_str(&format!("/v1/leases/{}", lease.id)).expect("digits are a valid header");
    let body = LeaseOut { secret: secret.map(|s| s.expose().to_owned()), ..lease_out(&lease, now) };
    let mut res = (StatusCode::CREATED, Json(body)).into_response();
    res.headers_mut().insert(header::LOCATION, location);
    Ok(res)
}

async fn leases(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Vec<LeaseOut>>> {
    let clock = state.clock.clone();
    let (all, now) = state.call(&t, move |p| p.leases().map(|l| (l, clock.now()))).await?;
    Ok(Json(all.iter().map(|l| lease_out(l, now)).collect()))
}

async fn lease(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
) -> AppResult<Json<LeaseOut>> {
    let clock = state.clock.clone();
    let (found, now) = state.call(&t, move |p| p.lease(id).map(|l| (l, clock.now()))).await?;
    found.map(|l| Json(lease_out(&l, now))).ok_or_else(|| Problem::not_found("lease"))
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<u64>,
}

async fn release(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Q(q): Q<TokenQuery>,
) -> AppResult<StatusCode> {
    let token = q.token.ok_or_else(|| Problem::invalid("token", "is required (the lease's fencing token)"))?;
    state.call(&t, move |p| p.release(id, token)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenewIn {
    token: u64,
}

async fn renew(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Body(b): Body<RenewIn>,
) -> AppResult<Json<LeaseOut>> {
    let clock = state.clock.clone();
    let (lease, now) = state.call(&t, move |p| p.renew(id, b.token).map(|l| (l, clock.now()))).await?;
    Ok(Json(lease_out(&lease, now)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageIn {
    token: u64,
    used: u64,
}

/// What the lease used of its resource's `tpm`, instead of the `cost` its
/// acquire reserved.
async fn usage(
    State(state): State<App>,
    Tenant(t): Tenant,
    P(LeaseId { id }): P<LeaseId>,
    Body(b): Body<UsageIn>,
) -> AppResult<StatusCode> {
    state.call(&t, move |p| p.reconcile(id, b.token, b.used)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeIn {
    kind: String,
    value: String,
    context: String,
    /// `success`, or the failure kind; or, instead, `http_status`.
    outcome: Option<String>,
    /// With `rate_limited` or `quota_exhausted`: the provider's wait, in ms.
    retry_after_ms: Option<u64>,
    /// The upstream's HTTP status, read by the kind's profile.
    http_status: Option<u16>,
    /// With `http_status`: the upstream's response headers (waits are read).
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    /// With `http_status`: the upstream's response body (an error's code
    /// and stated delay are read).
    body: Option<String>,
    #[serde(default)]
    latency_ms: f64,
}

async fn report(State(state): State<App>, Tenant(t): Tenant, Body(b): Body<OutcomeIn>) -> AppResult<StatusCode> {
    let outcome = match (&b.outcome, b.http_status) {
        (Some(_), None) if b.body.is_some() => {
            return Err(Problem::invalid("body", "goes with http_status"));
        }
        (Some(outcome), None) => {
            let failure = (outcome != "success").then_some(outcome.as_str());
            let retry_after = b.retry_after_ms.map(|ms| ms.saturating_mul(1_000_000));
            repute_host::parse_outcome(failure, b.latency_ms, retry_after)
                .map_err(|e| match e {
                    repute_host::Error::InvalidInput { field, rule } if field == "failure.kind" => Problem::invalid(
                        "outcome",
                        format!("must be success or {}", rule.trim_start_matches("must be one of ")),
                    ),
                    e => Problem::from(e),
                })
                .map(Some)?
        }
        (None, Some(status)) => {
            if b.retry_after_ms.is_some() {
                return Err(Problem::invalid("retry_after_ms", "goes with outcome; with http_status send headers"));
            }
            let answer = repute_host::HttpAnswer {
                status,
                headers: b.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                body: b.body.clone(),
                latency_ms: b.latency_ms,
                now: std::time::SystemTime::now(),
            };
            state.profiles.classify(&b.kind, &answer)?
        }
        _ => return Err(Problem::invalid("outcome", "exactly one of outcome and http_status is required")),
    };
    let max = state.max_tenant_bytes;
    state
        .call(&t, move |p| {
            match share::admit(p, max, Growth::Cell { kind: &b.kind, value: &b.value, context: &b.context })? {
                Ok(()) => match &outcome {
                    Some(outcome) => p.report(&b.kind, &b.value, &b.context, outcome).map(Ok),
                    None => Ok(Ok(())),
                },
                Err(refused) => Ok(Err(refused)),
            }
        })
        .await??;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct DueOut {
    kind: String,
    value: String,
    context: String,
}

async fn due_for_probe(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Vec<DueOut>>> {
    let due = state.call(&t, |p| p.due_for_probe()).await?;
    Ok(Json(
        due.into_iter()
            .map(|(r, c)| DueOut { kind: r.kind().into(), value: r.value().into(), context: c.as_str().into() })
            .collect(),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeIn {
    kind: String,
    value: String,
    context: String,
}

/// A probe lease carries the secret as a client's does: a probe of an API
/// key needs the key.
async fn probe(State(state): State<App>, Tenant(t): Tenant, Body(b): Body<ProbeIn>) -> AppResult<Response> {
    let clock = state.clock.clone();
    let granted = state
        .call(&t, move |p| {
            let lease = p.acquire_for_probe(&b.kind, &b.value, &b.context)?;
            with_secret(p, lease, &*clock)
        })
        .await?;
    created(granted)
}

async fn stats(State(state): State<App>, Tenant(t): Tenant) -> AppResult<Json<Stats>> {
    Ok(Json(state.call(&t, |p| p.stats()).await?))
}

#[derive(Deserialize)]
struct ExportQuery {
    format: Option<String>,
    leases: Option<bool>,
}

async fn export(State(state): State<App>, Tenant(t): Tenant, Q(q): Q<ExportQuery>) -> AppResult<Response> {
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
async fn import(
    State(state): State<App>,
    Tenant(t): Tenant,
    headers: HeaderMap,
    Raw(body): Raw,
) -> AppResult<StatusCode> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (caps, max) = (state.caps, state.max_tenant_bytes);
    let bytes = tokio::task::spawn_blocking(move || {
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
    .await
    .map_err(|e| Problem::from(repute_host::Error::Runtime { message: e.to_string() }))??;
    state.call(&t, move |p| p.restore(&bytes)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Server-Sent Events: the event name is the pool event's type, the data its JSON.
async fn events(
    State(state): State<App>,
    Tenant(t): Tenant,
) -> AppResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    state.ensure_open(&t)?;
    let clock = state.clock.clone();
    let stream = BroadcastStream::new(state.subscribe(&t)).map(move |item| {
        Ok(match item {
            Ok(e) => SseEvent::default().event(e.kind.name()).data(http_view(&*e, &*clock).to_string()),
            Err(BroadcastStreamRecvError::Lagged(n)) => SseEvent::default().event("lagged").data(n.to_string()),
        })
    });
    let mut stopping = state.stopping.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    Ok(Sse::new(stream.take_until(stopped)).keep_alive(KeepAlive::default()))
}
