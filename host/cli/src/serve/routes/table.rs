//! Every route of the API, once: its method and path, its handler, and its
//! documentation. The router and the OpenAPI document are both made from
//! this table, so a route cannot be served undocumented or documented unserved.

use axum::handler::Handler;
use axum::http::{header, Method};
use axum::routing::{on, MethodFilter, MethodRouter};

use super::events::events;
use super::leases::{acquire, lease, leases, release, renew, usage, AcquireIn, LeaseOut, RenewIn, TokenQuery, UsageIn};
use super::outcomes::{report, OutcomeIn};
use super::probes::{due_for_probe, probe, DueOut, ProbeIn};
use super::resources::{
    block, cells, register, resources, unblock, unregister, BlockIn, ContextQuery, ForceQuery, RegisterIn,
};
use super::snapshot::{export, import, ExportQuery};
use super::status::{metrics, readyz, stats};
use super::{KindValue, LeaseId, OPENAPI};
use crate::serve::extract::App;
use crate::serve::openapi::views::{Cell, Resource, Stats};
use crate::serve::openapi::Doc;

/// One method of one path.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    /// The handler, for `method` only.
    pub handler: MethodRouter<App>,
    pub doc: Doc,
}

fn route<H: Handler<T, App>, T: 'static>(method: Method, path: &'static str, handler: H, doc: Doc) -> Route {
    let filter = MethodFilter::try_from(method.clone()).expect("the table names standard methods");
    Route { method, path, handler: on(filter, handler), doc }
}

const NO_LEASE: &str = "No live lease";
const UNKNOWN: &str = "Unknown resource";
const CELL_BUDGET: &str = "Budget exhausted: `max_cells`, or the memory share (`field` max_tenant_bytes)";

pub fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::POST, "/v1/resources", register,
            Doc::tenant("Register a resource (again: replace its permits, limits, labels and secret)")
                .body::<RegisterIn>()
                .empty(204, "Registered")
                .problem(409, "Lowering permits under a live lease")
                .problem(422, "Budget exhausted: `max_resources`, or the memory share (`field` max_tenant_bytes)")),
        route(M::GET, "/v1/resources", resources,
            Doc::tenant("List resources").list::<Resource>(200, "Resources sorted by id")),
        route(M::DELETE, "/v1/resources/{kind}/{value}", unregister,
            Doc::tenant("Unregister; refused while leased unless force=true (revokes the leases)")
                .path::<KindValue>()
                .query::<ForceQuery>()
                .empty(204, "Unregistered")
                .problem(404, UNKNOWN)
                .problem(409, "Leased")),
        route(M::GET, "/v1/resources/{kind}/{value}/cells", cells,
            Doc::tenant("Reputation cells: the global one first, then one per context")
                .path::<KindValue>()
                .list::<Cell>(200, "Cells")
                .problem(404, UNKNOWN)),
        route(M::PUT, "/v1/resources/{kind}/{value}/block", block,
            Doc::tenant("Block everywhere or in one context, for `duration_ms` or permanently")
                .path::<KindValue>()
                .body::<BlockIn>()
                .empty(204, "Blocked")
                .problem(404, UNKNOWN)
                .problem(422, CELL_BUDGET)),
        route(M::DELETE, "/v1/resources/{kind}/{value}/block", unblock,
            Doc::tenant("Lift a block")
                .path::<KindValue>()
                .query::<ContextQuery>()
                .empty(204, "Lifted")
                .problem(404, "No such block or resource")),
        route(M::POST, "/v1/leases", acquire,
            Doc::tenant("Acquire the best resource for a context, among those the selector admits")
                .body::<AcquireIn>()
                .json::<LeaseOut>(201, "Granted")
                .header("Location", "/v1/leases/{id}", "string")
                .problem(409, "Nothing available: `reasons` counts each resource under what holds it back (`limited`: over a usage limit or retired by one), `retry_after_ms` says when the first may free up")
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
        route(M::POST, "/v1/outcomes", report,
            Doc::tenant("Report how a use went")
                .body::<OutcomeIn>()
                .empty(204, "Recorded")
                .problem(404, UNKNOWN)
                .problem(422, CELL_BUDGET)),
        route(M::GET, "/v1/probes", due_for_probe, Doc::tenant("Cells due for a probe").list::<DueOut>(200, "Due")),
        route(M::POST, "/v1/probes", probe,
            Doc::tenant("Take a probe lease on a due cell")
                .body::<ProbeIn>()
                .json::<LeaseOut>(201, "Granted")
                .problem(409, "Permits all held")
                .problem(404, "The resource is not registered")),
        route(M::GET, "/v1/stats", stats, Doc::tenant("Counters").json::<Stats>(200, "Stats")),
        route(M::GET, "/v1/snapshot", export,
            Doc::tenant("Export (binary by default, JSON with format=json)")
                .query::<ExportQuery>()
                .media(200, "Snapshot", &["application/octet-stream", "application/json"])),
        route(M::PUT, "/v1/snapshot", import,
            Doc::tenant("Import (replaces the tenant's state; fence counters never go back; the policy is held to the operator's --max-resources, --max-cells and --rate)")
                .raw_body(&["application/octet-stream", "application/json"])
                .empty(204, "Restored")
                .problem(422, "Snapshot refused (corrupt, foreign, newer format, trailing bytes, unknown flags, counters above u64::MAX / 2, more than the caps allow); `field` and `rule` name the snapshot value when one broke a rule; nothing changed; or the pool it builds is over the memory share (`field` max_tenant_bytes)")),
        route(M::GET, "/v1/events", events,
            Doc::tenant("Server-Sent Events; the event name is the pool event type")
                .describe("Event names: registered, unregistered, cooled, recovered, blocklisted, unblocked, leased, renewed, released, lease_expired, revoked, rejected, retired (a resource its usage limits retired: `reason` is max_uses or max_age); `lagged` (data: how many were dropped) when the client fell behind.")
                .media(200, "text/event-stream", &["text/event-stream"])),
        route(M::GET, "/healthz", || async { "ok" }, Doc::open("Liveness").empty(200, "ok")),
        route(M::GET, "/readyz", readyz,
            Doc::open("Readiness").empty(200, "ready").problem(503, "Starting or stopping")),
        route(M::GET, "/metrics", metrics,
            Doc::open("Prometheus metrics: request latency by route template and method (unknown methods as `other`), pool figures summed over tenants (per tenant with --metrics-tenants)")
                .describe("Open by default; with --metrics-auth it wants an API key of any tenant (Authorization: Bearer KEY or X-Api-Key).")
                .empty(200, "OpenMetrics text")
                .problem(401, "--metrics-auth is on and no known key was sent")),
        route(M::GET, "/openapi.json", || async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) },
            Doc::open("This document").empty(200, "OpenAPI 3.1")),
    ]
}
