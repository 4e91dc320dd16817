//! `repute serve`: the pool over HTTP/JSON for services in any language.
//!
//! Tenants open on first use (from their newest checkpoint on a durable
//! store); a ticker lets expiry and cooldown ends happen without traffic;
//! checkpoints are written periodically and once more after a graceful
//! shutdown (SIGTERM or ctrl-c drains in-flight requests, then saves).

pub mod auth;
mod extract;
mod labels;
mod metrics;
mod probe;
pub mod problem;
pub mod routes;
mod share;
mod state;
pub mod tenant;
mod units;
mod usage;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use repute_host::{
    CoolingRule, FailureKind, Mode, OwnersSpec, Policy, PoolSet, Profiles, RateLimit, Recovery, ShardLimits, StoreSpec,
    Strategy, SystemClock,
};
use tokio::sync::watch;

use state::AppState;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free one (the chosen address is printed).
    #[arg(long, env = "REPUTE_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Where tenants live: `memory`, `sqlite:PATH` (durable, one process per
    /// tenant) or a `postgres://` URL (durable, many processes; see --mode).
    #[arg(long, env = "REPUTE_STORE", default_value = "sqlite:repute.db")]
    pub store: StoreSpec,
    /// With PostgreSQL: `sharded` (one owner process per tenant, others answer
    /// 421 naming it) or `shared` (every process serves every tenant).
    #[arg(long, env = "REPUTE_MODE", default_value = "sharded", value_parser = Mode::parse)]
    pub mode: Mode,
    /// Base URL other processes name when they send a client here (sharded
    /// mode); defaults to http:// and the address bound.
    #[arg(long, env = "REPUTE_ADVERTISE")]
    pub advertise: Option<String>,
    /// Owner lease of a tenant in sharded mode, in seconds: how long a dead
    /// owner keeps its tenants before another process takes them over.
    #[arg(long, env = "REPUTE_OWNER_TTL", default_value_t = 10.0)]
    pub owner_ttl: f64,
    /// Where owner leases live in sharded mode: `store` (the store itself,
    /// PostgreSQL) or `etcd://HOST:PORT[,HOST:PORT]`, the data staying in the store.
    #[arg(long, env = "REPUTE_OWNERS", default_value = "store")]
    pub owners: OwnersSpec,
    /// Seconds between folds of the other processes' log entries (shared mode).
    #[arg(long, env = "REPUTE_SYNC_EVERY", default_value_t = 0.2)]
    pub sync_every: f64,
    /// API key file, as written by `repute key new`. Checked every second and
    /// re-read when it changed, so keys added while the server runs work at once.
    #[arg(long, env = "REPUTE_KEYS", default_value = "repute.keys")]
    pub keys: PathBuf,
    /// Serve without API keys (tenant from the Repute-Tenant header). For local use only.
    #[arg(long, env = "REPUTE_NO_AUTH")]
    pub no_auth: bool,
    /// Shards (component instances) tenants are spread over; defaults to the number of cores.
    #[arg(long, env = "REPUTE_SHARDS")]
    pub shards: Option<usize>,
    /// Selection strategy of new pools: thompson, classic or first (default: the pool default).
    #[arg(long, env = "REPUTE_STRATEGY")]
    pub strategy: Option<String>,
    /// Lease TTL of new pools, in seconds.
    #[arg(long, env = "REPUTE_LEASE_TTL", default_value_t = 30.0)]
    pub lease_ttl: f64,
    /// Seconds between checkpoints of every tenant (durable stores).
    #[arg(long, env = "REPUTE_CHECKPOINT_EVERY", default_value_t = 30.0)]
    pub checkpoint_every: f64,
    /// How cooled cells of new pools come back: traffic (one client trial at
    /// a time, the default), probe (a probe loop: see --probe-url) or classic.
    #[arg(long, env = "REPUTE_RECOVERY")]
    pub recovery: Option<String>,
    /// New pools grant the candidate whose cooldown ends soonest rather than
    /// nothing when everything is cooling (never a blocked one).
    #[arg(long, env = "REPUTE_FAIL_OPEN")]
    pub fail_open: bool,
    /// A cooling rule of new pools, `KIND=BASE_SECONDS[:COOL_AFTER[:MAX_EXPONENT]]`
    /// (e.g. `timeout=10:2:4`); repeatable, one per kind.
    #[arg(long = "cooldown", value_name = "RULE")]
    pub cooldowns: Vec<String>,
    /// How the answers of a kind's resources are read, `KIND=PROFILE` with
    /// PROFILE one of generic, proxy, api-key, openai, anthropic, gemini
    /// (e.g. `residential=proxy`); repeatable. A kind not named has the
    /// profile its own name names, else generic.
    #[arg(long = "profile", value_name = "KIND=PROFILE")]
    pub profiles: Vec<String>,
    /// With --recovery probe: GET this URL template (`{kind}`, `{value}`,
    /// `{context}` are filled in, percent-encoded) for every cell due for a
    /// probe; 2xx-3xx is healthy, other statuses map like reported responses.
    #[arg(long, env = "REPUTE_PROBE_URL")]
    pub probe_url: Option<String>,
    /// Probes in flight at once per tenant.
    #[arg(long, env = "REPUTE_PROBE_CONCURRENCY", default_value_t = 4)]
    pub probe_concurrency: usize,
    /// Seconds between probe rounds.
    #[arg(long, env = "REPUTE_PROBE_EVERY", default_value_t = 1.0)]
    pub probe_every: f64,
    /// Most resources one tenant may register (new pools, and a cap on any
    /// snapshot a tenant imports: an import can lower it, never lift it).
    #[arg(long, env = "REPUTE_MAX_RESOURCES")]
    pub max_resources: Option<u32>,
    /// Most (resource, context) cells one tenant may hold; capped on import likewise.
    #[arg(long, env = "REPUTE_MAX_CELLS")]
    pub max_cells: Option<u32>,
    /// Heap bytes one tenant's pool may hold in its shard's wasm instance,
    /// which all tenants of the shard share (the pool's own footprint, e.g.
    /// ~300 bytes a resource with a short name, ~790 with the longest names,
    /// ~630 a cell). A request
    /// that would grow a tenant at its share gets a 422; an import must fit.
    #[arg(long, env = "REPUTE_MAX_TENANT_BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tenant_bytes: Option<u64>,
    /// Acquires per second one tenant may make (a token bucket; 429 past it);
    /// capped on import likewise.
    #[arg(long, env = "REPUTE_RATE")]
    pub rate: Option<f64>,
    /// Acquires the bucket of --rate holds at most (default: the rate, at least 1).
    #[arg(long, env = "REPUTE_BURST", requires = "rate")]
    pub burst: Option<u32>,
    /// Largest request body, in bytes; larger ones get a 413. The default
    /// fits the largest snapshot export the budgets allow, so a tenant can
    /// always re-import its own: 3 bytes of JSON per byte of
    /// --max-tenant-bytes, or with --max-resources and --max-cells a
    /// measured bound per resource and cell (one permit each); 16 MiB
    /// without budgets; never under 64 KiB.
    #[arg(long, env = "REPUTE_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Seconds a connection may take to send a request's headers, and may sit
    /// idle between requests, before it is closed.
    #[arg(long, env = "REPUTE_HEADER_TIMEOUT", default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Connections served at once; further ones wait in the listen backlog.
    #[arg(long, env = "REPUTE_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Label the pool metrics with tenant names (one series per tenant);
    /// without it they are sums over tenants.
    #[arg(long, env = "REPUTE_METRICS_TENANTS")]
    pub metrics_tenants: bool,
    /// `/metrics` answers only a request with an API key (of any tenant)
    /// from --keys; without it the page is open, like /healthz.
    #[arg(long, env = "REPUTE_METRICS_AUTH", conflicts_with = "no_auth")]
    pub metrics_auth: bool,
    /// Seed of new pools' selection randomness.
    #[arg(long, env = "REPUTE_SEED", default_value_t = 0)]
    pub seed: u64,
    /// Log filter (tracing env-filter syntax), e.g. `info` or `repute_cli=debug`.
    #[arg(long, env = "REPUTE_LOG", default_value = "info")]
    pub log: String,
}

/// `--cooldown KIND=BASE_SECONDS[:COOL_AFTER[:MAX_EXPONENT]]` as a rule; the
/// parts left out keep the kind's default.
fn cooldown_flag(policy: &Policy, flag: &str) -> Result<(FailureKind, CoolingRule), String> {
    let bad = || format!("--cooldown {flag:?}: must be KIND=BASE_SECONDS[:COOL_AFTER[:MAX_EXPONENT]]");
    let (kind, rest) = flag.split_once('=').ok_or_else(bad)?;
    let mut parts = rest.split(':');
    let base = seconds(parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?, "--cooldown")?;
    let number = |p: Option<&str>| p.map(|n| n.parse::<u32>().map_err(|_| bad())).transpose();
    let (cool_after, max_exponent) = (number(parts.next())?, number(parts.next())?);
    if parts.next().is_some() {
        return Err(bad());
    }
    repute_host::cooling_rule(policy, kind, Some(base.as_nanos() as u64), cool_after, max_exponent)
        .map_err(|e| format!("--cooldown {flag:?}: {e}"))
}

fn profile_flags(flags: &[String]) -> Result<Profiles, String> {
    let mut pairs = Vec::new();
    for flag in flags {
        let pair = flag.split_once('=').ok_or_else(|| format!("--profile {flag:?}: must be KIND=PROFILE"))?;
        pairs.push(pair);
    }
    Profiles::new(pairs, "--profile").map_err(|e| match e {
        repute_host::Error::InvalidInput { field, rule } => format!("{field}: {rule}"),
        e => e.to_string(),
    })
}

fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    if !(value.is_finite() && value > 0.0 && value <= 1e9) {
        return Err(format!("{flag}: must be a number of seconds in (0, 1e9]"));
    }
    Ok(Duration::from_secs_f64(value))
}

/// Body limit without budgets: the export of a pool of some 7,500 resources
/// with their cells.
const BODY_LIMIT_UNBUDGETED: u64 = 16 << 20;
/// The least body limit budgets lead to: room for any other request.
const BODY_LIMIT_FLOOR: u64 = 64 << 10;

/// The default `--max-body-bytes`: the largest JSON snapshot (the larger
/// form) of a pool within the budgets, the tighter of the memory share's
/// bound and the resource and cell caps' one.
fn body_limit(policy: &Policy, max_tenant_bytes: Option<u64>) -> usize {
    use repute_core::snapshot::{json_bound, JSON_PER_FOOTPRINT_BYTE};
    let by_share = max_tenant_bytes.map(|b| b.saturating_mul(JSON_PER_FOOTPRINT_BYTE));
    let by_caps = match (policy.max_resources, policy.max_cells) {
        (Some(r), Some(c)) => Some(json_bound(r, c, policy.window)),
        _ => None,
    };
    let bound = match (by_share, by_caps) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(BODY_LIMIT_UNBUDGETED),
    };
    usize::try_from(bound.max(BODY_LIMIT_FLOOR)).unwrap_or(usize::MAX)
}

pub fn main(args: &Args) -> Result<(), String> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).map_err(|e| format!("--log: {e}"))?)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(run(args))
}

async fn run(args: &Args) -> Result<(), String> {
    let keys = if args.no_auth {
        tracing::warn!("serving without API keys (--no-auth): any local process can use every tenant");
        None
    } else {
        let ring = auth::KeyFile::load(&args.keys)?;
        if ring.is_empty() {
            return Err(format!(
                "no API keys in {}: create one with `repute key new --tenant NAME`, or pass --no-auth for local use",
                args.keys.display()
            ));
        }
        Some(ring)
    };
    let mut policy =
        Policy { lease_ttl: seconds(args.lease_ttl, "--lease-ttl")?.as_nanos() as u64, ..Policy::default() };
    if let Some(s) = &args.strategy {
        policy.strategy =
            Strategy::parse(s).map_err(|_| format!("--strategy {s:?}: must be thompson, classic or first"))?;
    }
    if let Some(r) = &args.recovery {
        policy.recovery =
            Recovery::parse(r).map_err(|_| format!("--recovery {r:?}: must be traffic, probe or classic"))?;
    }
    policy.fail_open = args.fail_open;
    policy.max_resources = args.max_resources;
    policy.max_cells = args.max_cells;
    if let Some(rate) = args.rate {
        let burst = args.burst.unwrap_or_else(|| (rate.ceil() as u32).max(1));
        policy.rate_limit = Some(RateLimit { rate, burst });
    }
    for rule in &args.cooldowns {
        policy.rules.push(cooldown_flag(&policy, rule)?);
    }
    policy.validate().map_err(|e| match e {
        repute_core::Error::InvalidInput { field: "policy.rate_limit.rate", rule } => format!("--rate: {rule}"),
        repute_core::Error::InvalidInput { field: "policy.rate_limit.burst", rule } => format!("--burst: {rule}"),
        e => e.to_string(),
    })?;
    let profiles = profile_flags(&args.profiles)?;
    let max_body_bytes = args.max_body_bytes.unwrap_or_else(|| body_limit(&policy, args.max_tenant_bytes));
    let header_timeout = seconds(args.header_timeout, "--header-timeout")?;
    if args.max_connections == 0 {
        return Err("--max-connections: must be >= 1".into());
    }
    let probe = match &args.probe_url {
        Some(_) if policy.recovery != Recovery::Probe => {
            return Err("--probe-url: goes with --recovery probe".into());
        }
        Some(url) => Some(probe::ProbeUrl::new(url, args.probe_concurrency, Duration::from_secs(10))?),
        None => None,
    };
    let probe_every = seconds(args.probe_every, "--probe-every")?;
    let checkpoint_every = seconds(args.checkpoint_every, "--checkpoint-every")?;
    let shards = args.shards.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let set = PoolSet::new(shards, ShardLimits::default()).map_err(|e| format!("cannot start the pool: {e}"))?;
    let owner_ttl = seconds(args.owner_ttl, "--owner-ttl")?;
    let sync_every = seconds(args.sync_every, "--sync-every")?;
    let mut server_lock = args.store.local_file().map(lock_sqlite).transpose()?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let spec = args.store.clone();
    let store = tokio::task::spawn_blocking(move || spec.open())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("--store: {e}"))?;
    let advertise = args.advertise.clone().unwrap_or_else(|| format!("http://{addr}"));
    if let Some(file) = &mut server_lock {
        // Read by the next server refused the file, to say where this one is.
        let _ = write!(file, "process {} serving {advertise}", std::process::id());
    }
    let ownership = match args.mode {
        Mode::Sharded => {
            let (owners, store, advertise) = (args.owners.clone(), store.clone(), advertise.clone());
            tokio::task::spawn_blocking(move || owners.ownership(&*store, &advertise, owner_ttl))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("--owners: {e}"))?
        }
        Mode::Shared if args.owners != OwnersSpec::Store => {
            return Err("--owners: owner leases are kept in sharded mode only (--mode sharded)".into())
        }
        Mode::Shared => None,
    };
    if args.mode == Mode::Sharded && ownership.is_none() && store.is_shared() {
        return Err("--mode sharded: this store cannot hold owner leases; use --mode shared".into());
    }
    let shared = store.is_shared() && args.mode == Mode::Shared;
    let (stop_tx, stop_rx) = watch::channel(false);
    let state = Arc::new(AppState::new(
        set,
        store,
        ownership,
        Arc::new(SystemClock::new()),
        policy,
        profiles,
        args.seed,
        keys,
        stop_rx.clone(),
        probe,
        max_body_bytes,
        args.max_tenant_bytes,
        args.metrics_tenants,
        args.metrics_auth,
    ));
    println!("listening on {addr}");
    tracing::info!(%addr, store = ?args.store, mode = args.mode.as_str(), shards, "serving");

    let timers = Timers {
        checkpoint: checkpoint_every,
        renew: owner_ttl / 4,
        sync: shared.then_some(sync_every),
        probe: probe_every,
    };
    let ticker = tokio::spawn(background(state.clone(), timers, stop_rx));
    state.ready.store(true, Ordering::Release);
    let app = routes::router(state.clone());
    let shutdown = async move {
        shutdown_signal().await;
        tracing::info!("shutting down: draining requests");
        let _ = stop_tx.send(true);
    };
    serve(listener, app, header_timeout, args.max_connections, shutdown).await;
    state.ready.store(false, Ordering::Release);
    ticker.abort();
    let s = state.clone();
    tokio::task::spawn_blocking(move || {
        s.checkpoint_all();
        if let Some(ownership) = &s.ownership {
            ownership.resign_all();
        }
    })
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// The API over an in-memory store on one shard, ready to answer and with
/// nothing in the background, for driving the routes in process (the HTTP
/// fuzz target does): `keys` as `--keys` gives them (`None` serves as
/// `--no-auth` does), `policy` that of new pools and the operator's caps.
/// No shutdown can be signalled, so an event stream ends at once.
pub fn in_memory_app(
    policy: Policy,
    keys: Option<auth::KeyFile>,
    clock: Arc<dyn repute_host::Clock>,
    max_body_bytes: usize,
    metrics_auth: bool,
) -> Result<axum::Router, String> {
    let set = PoolSet::new(1, ShardLimits::default()).map_err(|e| format!("cannot start the pool: {e}"))?;
    let store = StoreSpec::memory().open().map_err(|e| e.to_string())?;
    let (_, stopping) = watch::channel(false);
    let state = AppState::new(
        set,
        store,
        None,
        clock,
        policy,
        Profiles::default(),
        0,
        keys,
        stopping,
        None,
        max_body_bytes,
        None,
        false,
        metrics_auth,
    );
    state.ready.store(true, Ordering::Release);
    Ok(routes::router(Arc::new(state)))
}

/// Serves HTTP/1.1 connections until `shutdown`, then drains them. Unlike
/// `axum::serve` it bounds what a client can hold without sending anything:
/// a connection has `header_timeout` to send each request's headers (also
/// the limit on idling between requests), and at most `max_connections` are
/// served at once.
async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    header_timeout: Duration,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone())));
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Takes the lock file beside a SQLite database that says one server has it.
/// Each tenant has its own lock too, but without this one a second server
/// would start and answer 421 to every request; it is refused at start
/// instead, naming the server that has the file. The OS drops the lock with
/// the process, so a crash never locks a restart out.
// `File::try_lock` is newer than the declared MSRV, as in the host's SQLite
// provider, which the CLI links anyway: the build already needs Rust 1.89.
#[allow(clippy::incompatible_msrv)]
fn lock_sqlite(db: &std::path::Path) -> Result<std::fs::File, String> {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".server");
    let path = db.with_file_name(name);
    let fail = |e: std::io::Error| format!("--store sqlite:{}: lock file {}: {e}", db.display(), path.display());
    let mut file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(fail)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = if holder.is_empty() { "another repute serve".to_owned() } else { holder };
            return Err(format!(
                "--store sqlite:{}: already served by {holder}; a SQLite file has one server (use that one, stop it, or use PostgreSQL for several)",
                db.display()
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(fail(e)),
    }
    file.set_len(0).map_err(fail)?;
    Ok(file)
}

/// How often tenants whose owner let go (as the coordination store's watch
/// saw it) are claimed: often, as it costs nothing while none are reported.
const TAKEOVER: Duration = Duration::from_millis(200);

/// How often the background work runs.
struct Timers {
    checkpoint: Duration,
    /// Owner lease renewal (sharded mode).
    renew: Duration,
    /// Log folding (shared mode).
    sync: Option<Duration>,
    /// Probe rounds (with --probe-url).
    probe: Duration,
}

/// Publishes time-driven events every second, checkpoints on schedule,
/// renews owner leases (sharded) and folds other processes' log entries
/// (shared). Each runs on its own task so a slow store does not hold up the
/// others; renewal above all must not wait behind a checkpoint.
async fn background(state: Arc<AppState>, timers: Timers, stop: watch::Receiver<bool>) {
    let every = |period: Duration, job: fn(&AppState)| {
        let state = state.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval.tick().await;
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        let s = state.clone();
                        let _ = tokio::task::spawn_blocking(move || job(&s)).await;
                    }
                    _ = stop.changed() => return,
                }
            }
        })
    };
    let mut jobs = vec![every(Duration::from_secs(1), AppState::tick)];
    if state.keys.is_some() {
        jobs.push(every(Duration::from_secs(1), AppState::reload_keys));
    }
    if state.store.durable() {
        jobs.push(every(timers.checkpoint, AppState::checkpoint_all));
    }
    if state.ownership.is_some() {
        jobs.push(every(timers.renew, AppState::renew_ownership));
        jobs.push(every(TAKEOVER, AppState::take_over_vacated));
    }
    if let Some(period) = timers.sync {
        jobs.push(every(period, AppState::sync_all));
    }
    if state.probe.is_some() {
        jobs.push(every(timers.probe, AppState::probe_all));
    }
    for job in jobs {
        let _ = job.await;
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// `repute key new`: makes an API key bound to one tenant.
#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum KeyCommand {
    /// Creates a key for a tenant, appends its hash to the key file and prints the key (shown once).
    New {
        /// The tenant the key may act on.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Key file the server reads.
        #[arg(long, env = "REPUTE_KEYS", default_value = "repute.keys")]
        keys: PathBuf,
    },
}

pub fn key_main(args: &KeyArgs) -> Result<(), String> {
    match &args.command {
        KeyCommand::New { tenant, keys } => {
            println!("{}", auth::new_key(tenant, keys)?);
            Ok(())
        }
    }
}
