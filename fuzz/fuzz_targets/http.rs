//! The HTTP API in process: two servers over in-memory stores (one without
//! API keys, one with) live as long as the process, as real ones do. Each
//! input decodes (with `arbitrary`) into a choice of server and tenant, a
//! policy that tenant is first restored to (a new pool's snapshot, so an
//! input replays alone but for lease ids and fencing tokens, which only
//! grow) and a sequence of requests, sent through the axum router on a current-thread
//! runtime. The generator is biased to the real routes and request shapes
//! (fields of the right type, ids and tokens of leases it was granted,
//! snapshots it exported, labels, secrets and selectors) and mixes in wrong
//! types, unknown fields, invented methods and paths, bad headers and
//! oversized bodies.
//!
//! Oracle: no panic; no 5xx; on a route of the OpenAPI document, a status
//! that document lists for it (a method the route lacks: 405); every
//! non-2xx answer is `application/problem+json` whose JSON body carries
//! the same status and a `urn:repute:problem:` type; JSON success bodies
//! parse (the OpenAPI document is served as written); every response body ends; across inputs the process's resident
//! memory stays within a fixed allowance over what it used once warmed up.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arbitrary::{Result, Unstructured};
use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::Router;
use libfuzzer_sys::fuzz_target;
use repute_cli::serve::{auth, in_memory_app, problem::PROBLEM_JSON, routes};
use repute_host::{ManualClock, Policy, RateLimit, SECOND};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

/// Requests per input.
const MAX_REQUESTS: usize = 24;
/// `--max-body-bytes` of the servers; an oversized body goes past it.
const MAX_BODY: usize = 16 << 10;
/// Inputs run before the resident memory baseline is taken.
const WARM_UP: u64 = 20_000;
/// How far resident memory may grow past the baseline (allocator and
/// sanitizer caches fill up to a bound of their own).
const RSS_ALLOWANCE_KB: u64 = 768 << 10;

const TENANTS: [&str; 3] = ["default", "alpha", "beta"];
const KINDS: [&str; 2] = ["proxy", "key"];
const VALUES: [&str; 2] = ["a", "b"];
const CONTEXTS: [&str; 3] = ["x.com", "y.com", "*"];
const LABELS: [&str; 2] = ["region", "a b"];
const REGIONS: [&str; 2] = ["eu", "us"];
const OUTCOMES: [&str; 9] = [
    "success",
    "connection_reset",
    "tls_handshake",
    "timeout",
    "blocked",
    "slow",
    "rate_limited",
    "quota_exhausted",
    "teapot",
];

/// A route of the API: its path template and the request it takes.
#[derive(Clone, Copy, PartialEq)]
enum Route {
    Resources,
    Resource,
    Cells,
    Block,
    Leases,
    Lease,
    Renewals,
    Outcomes,
    Probes,
    Stats,
    Snapshot,
    Events,
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
}

const ROUTES: [(Route, &str); 16] = [
    (Route::Resources, "/v1/resources"),
    (Route::Resource, "/v1/resources/{kind}/{value}"),
    (Route::Cells, "/v1/resources/{kind}/{value}/cells"),
    (Route::Block, "/v1/resources/{kind}/{value}/block"),
    (Route::Leases, "/v1/leases"),
    (Route::Lease, "/v1/leases/{id}"),
    (Route::Renewals, "/v1/leases/{id}/renewals"),
    (Route::Outcomes, "/v1/outcomes"),
    (Route::Probes, "/v1/probes"),
    (Route::Stats, "/v1/stats"),
    (Route::Snapshot, "/v1/snapshot"),
    (Route::Events, "/v1/events"),
    (Route::Healthz, "/healthz"),
    (Route::Readyz, "/readyz"),
    (Route::Metrics, "/metrics"),
    (Route::OpenApi, "/openapi.json"),
];

/// The statuses the OpenAPI document lists, by (template, METHOD).
fn documented() -> &'static BTreeMap<(String, String), BTreeSet<u16>> {
    static DOC: OnceLock<BTreeMap<(String, String), BTreeSet<u16>>> = OnceLock::new();
    DOC.get_or_init(|| {
        let doc: Value = serde_json::from_str(routes::OPENAPI).expect("the OpenAPI document is JSON");
        let mut out = BTreeMap::new();
        for (path, ops) in doc["paths"].as_object().expect("paths") {
            for (method, op) in ops.as_object().expect("operations") {
                let codes = op["responses"].as_object().expect("responses").keys();
                let codes = codes.map(|c| c.parse().expect("numeric status")).collect();
                out.insert((path.clone(), method.to_ascii_uppercase()), codes);
            }
        }
        out
    })
}

/// A server that lives as long as the process, as a real one does.
struct Server {
    app: Router,
    clock: ManualClock,
    /// The keys of `tenants` (none without auth).
    keys: Vec<String>,
    tenants: &'static [&'static str],
}

/// Two servers: one without API keys, one with keys for `alpha` and `beta`
/// (whose `/metrics` wants a key). Their caps bound what a tenant can hold.
fn servers() -> &'static [Server; 2] {
    static SERVERS: OnceLock<[Server; 2]> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("repute-fuzz-http-{}.keys", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let keys: Vec<String> = TENANTS[1..].iter().map(|t| auth::new_key(t, &path).expect("write a key")).collect();
        let file = auth::KeyFile::load(&path).expect("the key file loads");
        let _ = std::fs::remove_file(&path);
        let caps = Policy { lease_ttl: 30 * SECOND, max_resources: Some(6), max_cells: Some(24), ..Policy::default() };
        let server = |keys: Vec<String>, file: Option<auth::KeyFile>, tenants| {
            let clock = ManualClock::new(1_000);
            let metrics_auth = file.is_some();
            let app = in_memory_app(caps.clone(), file, Arc::new(clock.clone()), MAX_BODY, metrics_auth)
                .expect("an in-memory server starts");
            Server { app, clock, keys, tenants }
        };
        [server(Vec::new(), None, &TENANTS[..]), server(keys, Some(file), &TENANTS[1..])]
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime"))
}

/// What the requests so far were given back, for the next ones to use.
struct Session {
    app: Router,
    clock: ManualClock,
    keys: Vec<String>,
    /// The tenant the input speaks to (and restored), by index into the
    /// server's tenants and keys: `default` on the server without keys.
    home: usize,
    tenant: &'static str,
    leases: Vec<(u64, u64)>,
    export: Option<(Vec<u8>, bool)>,
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(mut session) = session(&mut u) else { return };
    for _ in 0..MAX_REQUESTS {
        let Ok(next) = request(&mut u, &session) else { break };
        if let Some((req, route, template)) = next {
            let method = req.method().clone();
            runtime().block_on(send(&mut session, req, route, template.as_deref(), &method));
        }
        if u.is_empty() {
            break;
        }
    }
    memory_bound();
});

/// Picks a server and a tenant of it, and starts that tenant afresh from
/// the snapshot of a new pool with a policy drawn from the input (held to
/// the server's caps on import). Fence counters and lease ids go on from
/// where they were, as after any restore; the tenant's state is otherwise
/// the input's own. Now and then a request names another tenant, which
/// holds whatever earlier inputs left (within the caps).
fn session(u: &mut Unstructured) -> Result<Session> {
    let server = u.choose(servers())?;
    let policy = Policy {
        lease_ttl: 30 * SECOND,
        max_resources: Some(u.int_in_range(1..=6)?),
        max_cells: Some(u.int_in_range(2..=24)?),
        rate_limit: u.ratio(1, 3)?.then_some(RateLimit { rate: 3.0, burst: 4 }),
        ..Policy::default()
    };
    let fresh = repute_core::Pool::new(policy, u.arbitrary()?).expect("a valid policy").snapshot(0, false);
    let home = if server.keys.is_empty() { 0 } else { u.choose_index(server.keys.len())? };
    let session = Session {
        app: server.app.clone(),
        clock: server.clock.clone(),
        keys: server.keys.clone(),
        home,
        tenant: server.tenants[home],
        leases: Vec::new(),
        export: None,
    };
    let tenant = session.tenant;
    let mut req = Request::put("/v1/snapshot")
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(routes::TENANT_HEADER, tenant);
    if let Some(key) = server.keys.get(session.home) {
        req = req.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let req = req.body(Body::from(fresh)).expect("a valid request");
    let res = runtime().block_on(session.app.clone().oneshot(req)).expect("the router is infallible");
    assert_eq!(res.status(), StatusCode::NO_CONTENT, "resetting tenant {tenant}");
    Ok(session)
}

/// Mostly `good`; sometimes left out, sometimes a value of any type.
fn field(u: &mut Unstructured, good: Value) -> Result<Option<Value>> {
    Ok(match u.int_in_range(0..=15)? {
        0 => None,
        1 => Some(any_value(u, 2)?),
        _ => Some(good),
    })
}

fn any_value(u: &mut Unstructured, depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=if depth == 0 { 5 } else { 7 })? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => json!(u.arbitrary::<i64>()?),
        3 => json!(u.arbitrary::<u64>()?),
        4 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        5 => Value::String(u.arbitrary()?),
        6 => Value::Array((0..u.int_in_range(0..=3)?).map(|_| any_value(u, depth - 1)).collect::<Result<_>>()?),
        _ => {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=3)? {
                m.insert(u.arbitrary()?, any_value(u, depth - 1)?);
            }
            Value::Object(m)
        }
    })
}

/// An object of one entry.
fn entry(key: String, value: Value) -> Value {
    Value::Object(Map::from_iter([(key, value)]))
}

fn pick(u: &mut Unstructured, names: &[&str]) -> Result<String> {
    Ok(if u.ratio(1, 10)? { u.arbitrary()? } else { (*u.choose(names)?).to_owned() })
}

fn number(u: &mut Unstructured, good: f64) -> Result<Value> {
    Ok(match u.int_in_range(0..=7)? {
        0 => json!(-1.0),
        1 => json!(0),
        2 => json!(1e300),
        3 => json!(f64::from(u.int_in_range(0..=100_000u32)?) / 10.0),
        _ => json!(good),
    })
}

/// An object of the given fields (each perhaps dropped or mistyped), at
/// times with a field no request has.
fn object(u: &mut Unstructured, fields: Vec<(&str, Value)>) -> Result<Value> {
    let mut m = Map::new();
    for (name, good) in fields {
        if let Some(v) = field(u, good)? {
            m.insert(name.to_owned(), v);
        }
    }
    if u.ratio(1, 16)? {
        m.insert(u.arbitrary()?, any_value(u, 1)?);
    }
    Ok(Value::Object(m))
}

fn lease_ref(u: &mut Unstructured, s: &Session) -> Result<(String, u64)> {
    if !s.leases.is_empty() && u.ratio(5, 6)? {
        let (id, token) = *u.choose(&s.leases)?;
        let token = if u.ratio(1, 6)? { token.wrapping_add(1) } else { token };
        return Ok((id.to_string(), token));
    }
    let id = match u.int_in_range(0..=3)? {
        0 => u.arbitrary::<String>()?,
        1 => "18446744073709551616".to_owned(),
        _ => u.int_in_range(0..=8u64)?.to_string(),
    };
    Ok((id, u.int_in_range(0..=8)?))
}

/// A path segment: a real name, or arbitrary bytes percent-encoded (so the
/// server sees invalid UTF-8 and encoded slashes too). Never empty, so the
/// path still matches its template.
fn segment(u: &mut Unstructured, names: &[&str]) -> Result<String> {
    if u.ratio(7, 8)? {
        return Ok((*u.choose(names)?).to_owned());
    }
    let raw: Vec<u8> = u.arbitrary()?;
    let encoded: String = raw.iter().map(|b| format!("%{b:02X}")).collect();
    Ok(if encoded.is_empty() { "x".to_owned() } else { encoded })
}

fn query(pairs: &[(&str, String)]) -> String {
    let mut q = String::new();
    for (k, v) in pairs {
        q.push(if q.is_empty() { '?' } else { '&' });
        q.push_str(k);
        q.push('=');
        q.extend(v.bytes().map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        }));
    }
    q
}

/// What `request` makes: the request, the route it is for and that route's
/// template (`None` for an invented path).
type Made = (Request<Body>, Option<Route>, Option<String>);

/// A request, or `None` where the header bytes drawn are not valid in a
/// header (no client could send them).
fn request(u: &mut Unstructured, s: &Session) -> Result<Option<Made>> {
    if u.ratio(1, 8)? {
        s.clock.advance(*u.choose(&[SECOND, 31 * SECOND, 400 * SECOND])?);
    }
    let invented = u.ratio(1, 24)?;
    let (mut route, mut template) = *u.choose(&ROUTES)?;
    // Rendering `/metrics` takes longer than any other request (a histogram
    // per route, method and status seen), for output of bounded size: kept
    // to one pick in eight, the rest go to the leases route.
    if route == Route::Metrics && !u.ratio(1, 8)? {
        (route, template) = ROUTES[4];
    }
    let methods = documented()
        .keys()
        .filter(|(p, _)| p == template)
        .map(|(_, m)| Method::from_bytes(m.as_bytes()).expect("documented methods are tokens"))
        .collect::<Vec<_>>();
    let method = match u.int_in_range(0..=15)? {
        0 => Method::from_bytes(u.arbitrary::<String>()?.as_bytes()).unwrap_or(Method::PATCH),
        1 => u.choose(&[Method::HEAD, Method::OPTIONS, Method::PATCH, Method::PUT, Method::POST])?.clone(),
        _ => u.choose(&methods)?.clone(),
    };
    let mut path = if invented {
        let mut p = String::from("/");
        p.push_str(&segment(u, &["v1", "v2", "resources", "leases", ""])?);
        for _ in 0..u.int_in_range(0..=3)? {
            p.push('/');
            p.push_str(&segment(u, &["resources", "leases", "..", "%2e%2e", "cells"])?);
        }
        p
    } else {
        template.to_owned()
    };
    let mut lease = (String::new(), 0);
    if path.contains("{kind}") {
        path = path.replace("{kind}", &segment(u, &KINDS)?).replace("{value}", &segment(u, &VALUES)?);
    }
    if path.contains("{id}") {
        lease = lease_ref(u, s)?;
        let id = if lease.0.is_empty() { "x".to_owned() } else { lease.0.clone() };
        let id = id.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
        path = path.replace("{id}", &id);
    }
    let mut json = true;
    let mut body: Option<Vec<u8>> = None;
    let kv = |u: &mut Unstructured| -> Result<Vec<(&'static str, Value)>> {
        Ok(vec![("kind", json!(pick(u, &KINDS)?)), ("value", json!(pick(u, &VALUES)?))])
    };
    match (route, method.as_str()) {
        (Route::Resources, "POST") => {
            let mut f = kv(u)?;
            if u.arbitrary()? {
                f.push(("permits", json!(u.int_in_range(0..=1100u32)?)));
            }
            if u.ratio(1, 3)? {
                f.push(("labels", entry(pick(u, &LABELS)?, json!(pick(u, &REGIONS)?))));
            }
            if u.ratio(1, 4)? {
                f.push(("secret", json!(pick(u, &["sk-1", ""])?)));
            }
            body = Some(object(u, f)?.to_string().into_bytes());
        }
        (Route::Resource, "DELETE") => {
            let force = if u.ratio(1, 8)? { u.arbitrary()? } else { u.arbitrary::<bool>()?.to_string() };
            path.push_str(&query(&[("force", force)]));
        }
        (Route::Block, "PUT") => {
            let f = vec![
                ("context", json!(pick(u, &CONTEXTS)?)),
                ("duration_ms", number(u, 60_000.0)?),
                ("reason", json!(pick(u, &["manual", "bad\nreason"])?)),
            ];
            body = Some(object(u, f)?.to_string().into_bytes());
        }
        (Route::Block, "DELETE") if u.arbitrary()? => path.push_str(&query(&[("context", pick(u, &CONTEXTS)?)])),
        (Route::Leases, "POST") => {
            let mut f = vec![("context", json!(pick(u, &CONTEXTS)?))];
            if u.ratio(1, 4)? {
                f.push(("kind", json!(pick(u, &KINDS)?)));
            }
            if u.ratio(1, 4)? {
                let values = if u.arbitrary()? { json!(pick(u, &REGIONS)?) } else { json!([pick(u, &REGIONS)?]) };
                f.push(("where", entry(pick(u, &LABELS)?, values)));
            }
            if u.ratio(1, 6)? {
                f.push(("exclude", json!([pick(u, &VALUES)?])));
            }
            if u.ratio(1, 6)? {
                f.push(("prefer", json!(pick(u, &VALUES)?)));
            }
            if u.ratio(1, 4)? {
                f.push(("affinity", json!(pick(u, &["user-1", "user-2"])?)));
            }
            body = Some(object(u, f)?.to_string().into_bytes());
        }
        (Route::Lease, "DELETE") if u.ratio(7, 8)? => path.push_str(&query(&[("token", lease.1.to_string())])),
        (Route::Renewals, "POST") => {
            body = Some(object(u, vec![("token", json!(lease.1))])?.to_string().into_bytes());
        }
        (Route::Outcomes, "POST") => {
            let mut f = kv(u)?;
            f.push(("context", json!(pick(u, &CONTEXTS)?)));
            if u.ratio(3, 4)? {
                f.push(("outcome", json!(pick(u, &OUTCOMES)?)));
                if u.ratio(1, 4)? {
                    f.push(("retry_after_ms", json!(u.int_in_range(0..=3_000_000_000u64)?)));
                }
            } else {
                f.push(("http_status", json!(*u.choose(&[200u16, 301, 404, 408, 429, 500, 503, 999])?)));
                if u.arbitrary()? {
                    let wait = pick(u, &["5", "0", "Wed, 21 Oct 2015 07:28:00 GMT", "-3"])?;
                    f.push(("headers", json!({ "Retry-After": wait })));
                }
            }
            f.push(("latency_ms", number(u, 12.5)?));
            body = Some(object(u, f)?.to_string().into_bytes());
        }
        (Route::Probes, "POST") => {
            let mut f = kv(u)?;
            f.push(("context", json!(pick(u, &CONTEXTS)?)));
            body = Some(object(u, f)?.to_string().into_bytes());
        }
        (Route::Snapshot, "GET") => {
            let format = pick(u, &["json", "binary"])?;
            let leases = pick(u, &["true", "false"])?;
            path.push_str(&query(&[("format", format), ("leases", leases)]));
        }
        (Route::Snapshot, "PUT") => {
            let (mut bytes, is_json) = s.export.clone().unwrap_or_else(|| (b"RPUTSNAP".to_vec(), false));
            if !bytes.is_empty() && u.ratio(1, 3)? {
                let at = u.choose_index(bytes.len())?;
                bytes[at] ^= u.int_in_range(1..=255)?;
            }
            json = is_json;
            body = Some(bytes);
        }
        _ => {}
    }
    if u.ratio(1, 12)? {
        body = Some(u.arbitrary::<Vec<u8>>()?);
    }
    if u.ratio(1, 64)? {
        let mut big = body.take().unwrap_or_default();
        big.resize(MAX_BODY + 1, b' ');
        body = Some(big);
    }
    if u.ratio(1, 16)? {
        path.push_str(&query(&[("extra", u.arbitrary()?)]));
    }
    let mut req = Request::builder().method(method).uri(&path);
    let content_type = match u.int_in_range(0..=15)? {
        0 => None,
        1 => Some(u.arbitrary::<String>()?),
        2 => Some("text/plain".to_owned()),
        3 => Some("application/merge-patch+json; charset=utf-8".to_owned()),
        _ if json => Some("application/json".to_owned()),
        _ => Some("application/octet-stream".to_owned()),
    };
    if let Some(ct) = content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    match u.int_in_range(0..=7)? {
        0 => req = req.header(routes::TENANT_HEADER, pick(u, &["", "no spaces", "ü"])?.as_bytes()),
        1 => req = req.header(routes::TENANT_HEADER, *u.choose(&TENANTS)?),
        2..=3 => req = req.header(routes::TENANT_HEADER, s.tenant),
        _ => {}
    }
    if !s.keys.is_empty() || u.ratio(1, 8)? {
        let key = match u.int_in_range(0..=7)? {
            _ if s.keys.is_empty() => u.arbitrary::<String>()?,
            0 => u.arbitrary::<String>()?,
            1 => u.choose(&s.keys)?.clone(),
            _ => s.keys[s.home].clone(),
        };
        match u.int_in_range(0..=7)? {
            0 => req = req.header("x-api-key", key.as_bytes()),
            1 => req = req.header(header::AUTHORIZATION, format!("bearer  {key} ").as_bytes()),
            2 => req = req.header(header::AUTHORIZATION, format!("Basic {key}").as_bytes()),
            3 => {}
            _ => req = req.header(header::AUTHORIZATION, format!("Bearer {key}").as_bytes()),
        }
    }
    let body = body.map_or_else(Body::empty, Body::from);
    let Ok(req) = req.body(body) else { return Ok(None) };
    let template = (!invented).then(|| template.to_owned());
    Ok(Some((req, (!invented).then_some(route), template)))
}

/// Sends one request and checks the answer (see the module doc).
async fn send(s: &mut Session, req: Request<Body>, route: Option<Route>, template: Option<&str>, method: &Method) {
    let what = format!("{method} {}", req.uri());
    let res = s.app.clone().oneshot(req).await.expect("the router is infallible");
    let status = res.status();
    let content_type =
        res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("a response body reads to its end");
    assert!(!status.is_server_error(), "{what}: {status} {}", String::from_utf8_lossy(&body));
    if let Some(template) = template {
        let doc = documented();
        let lookup = if method == Method::HEAD { "GET" } else { method.as_str() };
        match doc.get(&(template.to_owned(), lookup.to_owned())) {
            Some(codes) => assert!(
                codes.contains(&status.as_u16()),
                "{what}: {status} is not documented for {lookup} {template} ({codes:?}): {}",
                String::from_utf8_lossy(&body)
            ),
            None => assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}: a method {template} lacks"),
        }
    }
    if !status.is_success() {
        assert_eq!(content_type, PROBLEM_JSON, "{what}: {status} is not problem+json");
        if method == Method::HEAD {
            return;
        }
        let problem: Value = serde_json::from_slice(&body).expect("a problem body is JSON");
        assert_eq!(problem["status"], json!(status.as_u16()), "{what}: problem status differs: {problem}");
        let kind = problem["type"].as_str().unwrap_or_default();
        assert!(kind.starts_with("urn:repute:problem:"), "{what}: problem type {kind:?}");
        assert!(problem["title"].is_string(), "{what}: problem without a title: {problem}");
        return;
    }
    if route == Some(Route::OpenApi) && method == Method::GET {
        // The document is static: served as written, with no need to parse it.
        assert_eq!(&body[..], routes::OPENAPI.as_bytes(), "{what}: the served document differs");
    } else if content_type == "application/json" && method != Method::HEAD {
        let value: Value = serde_json::from_slice(&body).expect("a JSON success body parses");
        if status == StatusCode::CREATED {
            if let (Some(id), Some(token)) = (value["id"].as_u64(), value["token"].as_u64()) {
                s.leases.push((id, token));
            }
        }
        if route == Some(Route::Snapshot) {
            s.export = Some((body.to_vec(), true));
        }
    } else if route == Some(Route::Snapshot) && content_type == "application/octet-stream" {
        s.export = Some((body.to_vec(), false));
    }
}

/// Resident memory, once warmed up, stays within an allowance over its
/// level then: the servers' caps and the reset of every input bound what
/// they hold, so growth past that is memory kept per request.
fn memory_bound() {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    static BASELINE: AtomicU64 = AtomicU64::new(0);
    let runs = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    if !runs.is_multiple_of(1000) || runs < WARM_UP {
        return;
    }
    let Some(rss) = resident_kb() else { return };
    let baseline = match BASELINE.load(Ordering::Relaxed) {
        0 => {
            BASELINE.store(rss, Ordering::Relaxed);
            rss
        }
        b => b,
    };
    assert!(rss <= baseline + RSS_ALLOWANCE_KB, "resident memory grew from {baseline} kB to {rss} kB");
}

fn resident_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
