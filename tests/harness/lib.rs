//! Cross-process fault harness for `repute serve`.
//!
//! The invariants in docs/ARCHITECTURE.md are about many processes sharing
//! one store, and about one process killed and started again on its file, so
//! they are tested that way: real `repute serve` processes, real PostgreSQL,
//! Redis and etcd servers that are restarted or cut off, and clients that
//! behave like careful users (fenced downstream writes, local lease
//! deadlines). The checker then judges only what the clients observed on one
//! monotonic clock.

pub mod checker;
pub mod downstream;
pub mod http;
pub mod limits;
pub mod naive_checkpoint;
pub mod proxy;
pub mod replicated;
pub mod server;
pub mod services;
pub mod workload;

/// A name no earlier run used, so tenants and tables of one run never see
/// another run's rows (the database outlives test runs).
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{prefix}_{}_{}", std::process::id(), nanos % 1_000_000_000_000)
}
