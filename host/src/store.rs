//! Where tenants live, named the same way by every front end: `memory`,
//! `sqlite:PATH` or a `postgres://` URL, plus how processes share a tenant
//! on PostgreSQL.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::providers::{Clock, Postgres, Providers};

/// A parsed store name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Nothing durable: state lives as long as the process.
    Memory,
    /// One SQLite file for every tenant; one process owns a tenant at a time.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user@host:port/db`), shared by any
    /// number of processes.
    Postgres(String),
}

/// How processes share a tenant on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Each tenant has one owner process at a time, under an owner lease
    /// with an epoch; the others answer "not owner".
    #[default]
    Sharded,
    /// Every process serves the tenant; the database is the lease authority
    /// and the command log is folded by all.
    Shared,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "sharded" => Ok(Mode::Sharded),
            "shared" => Ok(Mode::Shared),
            _ => Err(Error::InvalidInput { field: "mode".into(), rule: "must be \"sharded\" or \"shared\"".into() }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sharded => "sharded",
            Mode::Shared => "shared",
        }
    }
}

impl StoreSpec {
    /// Parses `memory`, `sqlite:PATH` or `postgres://…` (`postgresql://` too);
    /// anything else is refused naming the `store` field.
    pub fn parse(s: &str) -> Result<StoreSpec> {
        if s == "memory" {
            return Ok(StoreSpec::Memory);
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreSpec::Postgres(s.to_owned()));
        }
        match s.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() => Ok(StoreSpec::Sqlite(PathBuf::from(path))),
            _ => Err(Error::InvalidInput {
                field: "store".into(),
                rule: "must be \"memory\", \"sqlite:PATH\" or a postgres:// URL".into(),
            }),
        }
    }

    /// Durable stores open tenants from their newest checkpoint and log
    /// every change before acknowledging it.
    pub fn durable(&self) -> bool {
        !matches!(self, StoreSpec::Memory)
    }

    /// Connects (PostgreSQL: and migrates the schema) once per process.
    pub fn open(&self) -> Result<Store> {
        Ok(match self {
            StoreSpec::Memory => Store::Memory,
            StoreSpec::Sqlite(path) => Store::Sqlite(path.clone()),
            StoreSpec::Postgres(url) => Store::Postgres(Postgres::connect(url)?),
        })
    }
}

impl std::str::FromStr for StoreSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        StoreSpec::parse(s)
    }
}

/// An opened store: what each tenant's providers are made from.
#[derive(Debug, Clone)]
pub enum Store {
    Memory,
    Sqlite(PathBuf),
    Postgres(Postgres),
}

impl Store {
    /// See [`StoreSpec::durable`].
    pub fn durable(&self) -> bool {
        !matches!(self, Store::Memory)
    }

    /// Providers for `tenant`. `epoch` is the owner epoch PostgreSQL writes
    /// carry (0: shared); the other stores take ownership themselves.
    pub fn providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Result<Providers> {
        match self {
            Store::Memory => Ok(Providers::memory_with_clock(clock)),
            Store::Sqlite(path) => Providers::sqlite(path, tenant, clock),
            Store::Postgres(db) => Ok(Providers::postgres(db, tenant, epoch, clock)),
        }
    }
}
