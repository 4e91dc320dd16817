//! The flags of `repute serve`, and the policy of new pools they make.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use repute_host::{
    CoolingRule, FailureKind, OwnersSpec, Policy, Profiles, RateLimit, Recovery, StoreSpec, Strategy, MAX_PARTITIONS,
};

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
    /// 421 naming it), `shared` (every process serves every tenant) or
    /// `partitioned` (each tenant split by context into --partitions parts,
    /// each with one owner process; the database stays the lease authority
    /// of all of them).
    #[arg(long, env = "REPUTE_MODE", value_enum, default_value_t = ServeMode::Sharded)]
    pub mode: ServeMode,
    /// Partitioned mode: how many partitions each tenant is split into, 1 to
    /// 64; every process of a tenant must be started with the same number.
    #[arg(long, env = "REPUTE_PARTITIONS", value_parser = clap::value_parser!(u32).range(1..=MAX_PARTITIONS as i64))]
    pub partitions: Option<u32>,
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
    /// Linear memory, in MiB, one shard's wasm instance may grow to (every
    /// tenant of the shard shares it): at most 4096, the most a 32-bit
    /// instance can address. A tenant (or partition) larger than this
    /// cannot open here.
    #[arg(long, env = "REPUTE_SHARD_MEMORY_MIB", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(16..=4096))]
    pub shard_memory_mib: u32,
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

/// How the processes of a server share tenants (see `--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeMode {
    Sharded,
    Shared,
    Partitioned,
}

impl ServeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ServeMode::Sharded => "sharded",
            ServeMode::Shared => "shared",
            ServeMode::Partitioned => "partitioned",
        }
    }
}

impl Args {
    /// `--partitions` in partitioned mode, and `None` in the others, where
    /// the flag is refused.
    pub(super) fn partitions(&self) -> Result<Option<u32>, String> {
        match (self.mode, self.partitions) {
            (ServeMode::Partitioned, None) => Err("--mode partitioned: needs --partitions".into()),
            (ServeMode::Partitioned, count) => Ok(count),
            (_, Some(_)) => Err("--partitions: goes with --mode partitioned".into()),
            (_, None) => Ok(None),
        }
    }

    /// The policy of new pools, the operator's caps included, from the flags.
    pub(super) fn policy(&self) -> Result<Policy, String> {
        let mut policy =
            Policy { lease_ttl: seconds(self.lease_ttl, "--lease-ttl")?.as_nanos() as u64, ..Policy::default() };
        if let Some(s) = &self.strategy {
            policy.strategy =
                Strategy::parse(s).map_err(|_| format!("--strategy {s:?}: must be thompson, classic or first"))?;
        }
        if let Some(r) = &self.recovery {
            policy.recovery =
                Recovery::parse(r).map_err(|_| format!("--recovery {r:?}: must be traffic, probe or classic"))?;
        }
        policy.fail_open = self.fail_open;
        policy.max_resources = self.max_resources;
        policy.max_cells = self.max_cells;
        if let Some(rate) = self.rate {
            let burst = self.burst.unwrap_or_else(|| (rate.ceil() as u32).max(1));
            policy.rate_limit = Some(RateLimit { rate, burst });
        }
        for rule in &self.cooldowns {
            policy.rules.push(cooldown_flag(&policy, rule)?);
        }
        policy.validate().map_err(|e| match e {
            repute_core::Error::InvalidInput { field: "policy.rate_limit.rate", rule } => format!("--rate: {rule}"),
            repute_core::Error::InvalidInput { field: "policy.rate_limit.burst", rule } => format!("--burst: {rule}"),
            e => e.to_string(),
        })?;
        Ok(policy)
    }
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

pub(super) fn profile_flags(flags: &[String]) -> Result<Profiles, String> {
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

pub(super) fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
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
pub(super) fn body_limit(policy: &Policy, max_tenant_bytes: Option<u64>) -> usize {
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
