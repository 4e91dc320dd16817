//! Startup: from the flags to a listening server, and the drain and final
//! checkpoint after it stops; also the same API in process, for the fuzzer.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use repute_host::{OwnersSpec, Policy, PoolSet, Profiles, Recovery, ShardLimits, StoreSpec, SystemClock};
use tokio::sync::watch;

use super::args::ServeMode;
use super::state::AppState;
use super::{args, auth, connections, probe, shutdown, ticker, Args};

/// Targets kept at `info` whatever `--log` asks: PostgreSQL's client logs
/// every statement's parameters at `debug` (a resource's secret among
/// them) and what it sends and reads at `trace`.
const QUIET: &[&str] = &["tokio_postgres=info"];

pub fn main(args: &Args) -> Result<(), String> {
    let mut filter = tracing_subscriber::EnvFilter::try_new(&args.log).map_err(|e| format!("--log: {e}"))?;
    for directive in QUIET {
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
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
    let policy = args.policy()?;
    let profiles = args::profile_flags(&args.profiles)?;
    let max_body_bytes = args.max_body_bytes.unwrap_or_else(|| args::body_limit(&policy, args.max_tenant_bytes));
    let header_timeout = args::seconds(args.header_timeout, "--header-timeout")?;
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
    let probe_every = args::seconds(args.probe_every, "--probe-every")?;
    let checkpoint_every = args::seconds(args.checkpoint_every, "--checkpoint-every")?;
    let shards = args.shards.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let limits = ShardLimits { memory_bytes: (args.shard_memory_mib as usize) << 20, ..ShardLimits::default() };
    let set = PoolSet::new(shards, limits).map_err(|e| format!("cannot start the pool: {e}"))?;
    let owner_ttl = args::seconds(args.owner_ttl, "--owner-ttl")?;
    let sync_every = args::seconds(args.sync_every, "--sync-every")?;
    let partitions = args.partitions()?;
    if partitions.is_some() && args.store.backend() != "postgres" {
        return Err(
            "--mode partitioned: needs a postgres:// store (each partition reads its own part of its log)".into()
        );
    }
    let mut server_lock = args.store.local_file().map(lock_sqlite).transpose()?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let spec = args.store.clone();
    let (store, durability) = tokio::task::spawn_blocking(move || spec.open().map(|s| (s.clone(), s.durability())))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("--store: {e}"))?;
    if let Some(lost) = durability {
        tracing::warn!(
            %lost,
            "the store can lose writes it acknowledged: leases stay exclusive and tokens unique (a new store \
             generation waits out the leases it may have lost), but reports and usage in what it loses are gone"
        );
    }
    let advertise = args.advertise.clone().unwrap_or_else(|| format!("http://{addr}"));
    if let Some(file) = &mut server_lock {
        // Read by the next server refused the file, to say where this one is.
        let _ = write!(file, "process {} serving {advertise}", std::process::id());
    }
    let ownership = match args.mode {
        ServeMode::Sharded | ServeMode::Partitioned => {
            let (owners, store, advertise) = (args.owners.clone(), store.clone(), advertise.clone());
            tokio::task::spawn_blocking(move || owners.ownership(&*store, &advertise, owner_ttl))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("--owners: {e}"))?
        }
        ServeMode::Shared if args.owners != OwnersSpec::Store => {
            return Err("--owners: owner leases are kept in sharded and partitioned modes only".into())
        }
        ServeMode::Shared => None,
    };
    if args.mode == ServeMode::Sharded && ownership.is_none() && store.is_shared() {
        return Err("--mode sharded: this store cannot hold owner leases; use --mode shared".into());
    }
    // Both fold what other processes log: every entry (shared), or those
    // of the partitions held here and every registration (partitioned).
    let folds = store.is_shared() && args.mode != ServeMode::Sharded;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut state = AppState::new(
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
    );
    state.partitions = partitions;
    let state = Arc::new(state);
    println!("listening on {addr}");
    tracing::info!(%addr, store = ?args.store, mode = args.mode.as_str(), shards, "serving");

    let timers = ticker::Timers {
        checkpoint: checkpoint_every,
        renew: owner_ttl / 4,
        sync: folds.then_some(sync_every),
        probe: probe_every,
    };
    let ticker = tokio::spawn(ticker::background(state.clone(), timers, stop_rx));
    state.ready.store(true, Ordering::Release);
    let app = super::routes::router(state.clone());
    let shutdown = async move {
        shutdown::signal().await;
        tracing::info!("shutting down: draining requests");
        let _ = stop_tx.send(true);
    };
    connections::serve(listener, app, header_timeout, args.max_connections, shutdown).await;
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
    Ok(super::routes::router(Arc::new(state)))
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
