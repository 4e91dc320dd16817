//! Where tenants live: the `--store` value shared by every subcommand.

use std::path::PathBuf;
use std::sync::Arc;

use repute_host::{Clock, Providers, SystemClock};

/// A parsed `--store` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Nothing durable: state lives as long as the process.
    Memory,
    /// One SQLite file for every tenant; checkpoints, report log and fence counters survive restarts.
    Sqlite(PathBuf),
}

impl StoreSpec {
    pub fn parse(s: &str) -> Result<StoreSpec, String> {
        if s == "memory" {
            return Ok(StoreSpec::Memory);
        }
        match s.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() => Ok(StoreSpec::Sqlite(PathBuf::from(path))),
            _ => Err(format!("store {s:?}: expected \"memory\" or \"sqlite:PATH\"")),
        }
    }

    /// Durable stores are opened from their newest checkpoint and log every report before acknowledging it.
    pub fn durable(&self) -> bool {
        matches!(self, StoreSpec::Sqlite(_))
    }

    pub fn providers(&self, tenant: &str, clock: Arc<dyn Clock>) -> repute_host::Result<Providers> {
        match self {
            StoreSpec::Memory => Ok(Providers::memory_with_clock(clock)),
            StoreSpec::Sqlite(path) => Providers::sqlite(path, tenant, clock),
        }
    }

    pub fn system_clock() -> Arc<dyn Clock> {
        Arc::new(SystemClock::new())
    }
}

impl std::str::FromStr for StoreSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StoreSpec::parse(s)
    }
}
