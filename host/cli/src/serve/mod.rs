//! `repute serve`: the pool over HTTP/JSON for services in any language.
//!
//! Tenants open on first use (from their newest checkpoint on a durable
//! store); a ticker lets expiry and cooldown ends happen without traffic;
//! checkpoints are written periodically and once more after a graceful
//! shutdown (SIGTERM or ctrl-c drains in-flight requests, then saves).

pub mod auth;
mod metrics;
pub mod problem;
pub mod routes;
mod state;
pub mod tenant;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use repute_host::{Limits, Policy, PoolSet, Strategy};
use tokio::sync::watch;

use crate::store::StoreSpec;
use state::AppState;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free one (the chosen address is printed).
    #[arg(long, env = "REPUTE_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Where tenants live: `memory`, or `sqlite:PATH` (durable).
    #[arg(long, env = "REPUTE_STORE", default_value = "sqlite:repute.db")]
    pub store: StoreSpec,
    /// API key file, as written by `repute key new`.
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
    /// Seed of new pools' selection randomness.
    #[arg(long, env = "REPUTE_SEED", default_value_t = 0)]
    pub seed: u64,
    /// Log filter (tracing env-filter syntax), e.g. `info` or `repute_cli=debug`.
    #[arg(long, env = "REPUTE_LOG", default_value = "info")]
    pub log: String,
}

fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    if !(value.is_finite() && value > 0.0 && value <= 1e9) {
        return Err(format!("{flag}: must be a number of seconds in (0, 1e9]"));
    }
    Ok(Duration::from_secs_f64(value))
}

pub fn main(args: &Args) -> Result<(), String> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).map_err(|e| format!("--log: {e}"))?)
        .with_writer(std::io::stderr)
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
        let ring = auth::KeyRing::load(&args.keys)?;
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
    policy.validate().map_err(|e| e.to_string())?;
    let checkpoint_every = seconds(args.checkpoint_every, "--checkpoint-every")?;
    let shards = args.shards.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let set = PoolSet::new(shards, Limits::default()).map_err(|e| format!("cannot start the pool: {e}"))?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let state = Arc::new(AppState::new(
        set,
        args.store.clone(),
        StoreSpec::system_clock(),
        policy,
        args.seed,
        keys,
        stop_rx.clone(),
    ));

    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {addr}");
    tracing::info!(%addr, store = ?args.store, shards, "serving");

    let ticker = tokio::spawn(background(state.clone(), checkpoint_every, stop_rx));
    state.ready.store(true, Ordering::Release);
    let app = routes::router(state.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("shutting down: draining requests");
            let _ = stop_tx.send(true);
        })
        .await
        .map_err(|e| format!("server: {e}"))?;
    state.ready.store(false, Ordering::Release);
    ticker.abort();
    let s = state.clone();
    tokio::task::spawn_blocking(move || s.checkpoint_all()).await.map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// Publishes time-driven events every second and checkpoints on schedule.
async fn background(state: Arc<AppState>, checkpoint_every: Duration, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut checkpoint = tokio::time::interval(checkpoint_every);
    checkpoint.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let s = state.clone();
                let _ = tokio::task::spawn_blocking(move || s.tick()).await;
            }
            _ = checkpoint.tick(), if state.store.durable() => {
                let s = state.clone();
                let _ = tokio::task::spawn_blocking(move || s.checkpoint_all()).await;
            }
            _ = stop.changed() => return,
        }
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
