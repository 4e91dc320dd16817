//! Where tenants live, named the same way by every front end: `memory`,
//! `sqlite:PATH`, a `postgres://` or a `redis://` URL, plus how processes
//! share a tenant.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ownership::Ownership;
use crate::providers::{Clock, Postgres, Providers, Redis};

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
    /// A Redis server (`redis://host:port[/db]`): shared mode.
    Redis(String),
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
        if s.starts_with("redis://") {
            return Ok(StoreSpec::Redis(s.to_owned()));
        }
        match s.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() => Ok(StoreSpec::Sqlite(PathBuf::from(path))),
            _ => Err(Error::InvalidInput {
                field: "store".into(),
                rule: "must be \"memory\", \"sqlite:PATH\", a postgres:// or a redis:// URL".into(),
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
            StoreSpec::Redis(url) => Store::Redis(Redis::connect(url)?),
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
    Redis(Redis),
}

impl Store {
    /// See [`StoreSpec::durable`].
    pub fn durable(&self) -> bool {
        !matches!(self, Store::Memory)
    }

    /// Whether several processes can serve one tenant on this store at once
    /// (the store is then their lease authority and log).
    pub fn is_shared(&self) -> bool {
        matches!(self, Store::Postgres(_) | Store::Redis(_))
    }

    /// Providers for `tenant`. `epoch` is the owner epoch PostgreSQL writes
    /// carry (0: shared); the other stores take ownership themselves.
    pub fn providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Result<Providers> {
        match self {
            Store::Memory => Ok(Providers::memory_with_clock(clock)),
            Store::Sqlite(path) => Providers::sqlite(path, tenant, clock),
            Store::Postgres(db) => {
                if epoch > 0 {
                    db.raise_epoch(tenant, epoch)?;
                }
                Ok(Providers::postgres(db, tenant, epoch, clock))
            }
            Store::Redis(db) => {
                if epoch > 0 {
                    db.raise_epoch(tenant, epoch)?;
                }
                let (storage, fencing) = db.tenant(tenant, epoch);
                Ok(Providers { clock, fencing: Box::new(fencing), storage: Box::new(storage) })
            }
        }
    }

    /// Owner leases for sharded mode kept in the store itself, where it can
    /// hold them (PostgreSQL); `None` for the single-process stores.
    pub fn ownership(&self, address: &str, ttl: Duration) -> Option<Ownership> {
        match self {
            Store::Postgres(db) => Some(Ownership::new(Box::new(db.owners()), address, ttl)),
            _ => None,
        }
    }
}

/// Where sharded mode keeps its owner leases.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OwnersSpec {
    /// In the store itself (PostgreSQL).
    #[default]
    Store,
    /// In an etcd cluster, named by its client endpoints (`http://host:port`).
    /// The data stays in the store, which refuses the writes of every owner
    /// older than the epoch etcd handed out.
    Etcd(Vec<String>),
}

impl OwnersSpec {
    /// Parses `store` or `etcd://HOST:PORT[,HOST:PORT…]`; anything else is
    /// refused naming the `owners` field.
    pub fn parse(s: &str) -> Result<OwnersSpec> {
        if s == "store" {
            return Ok(OwnersSpec::Store);
        }
        let bad = || Error::invalid("owners", "must be \"store\" or etcd://HOST:PORT[,HOST:PORT...]");
        let list = s.strip_prefix("etcd://").ok_or_else(bad)?;
        let endpoints = list
            .split(',')
            .map(|hp| {
                let (host, port) = hp.rsplit_once(':').ok_or_else(bad)?;
                let port: u16 = port.parse().map_err(|_| bad())?;
                let clean = |c: char| c.is_ascii_alphanumeric() || "-._[]:".contains(c);
                if host.is_empty() || port == 0 || !host.chars().all(clean) {
                    return Err(bad());
                }
                Ok(format!("http://{host}:{port}"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OwnersSpec::Etcd(endpoints))
    }

    /// Owner leases for sharded mode on `store` (`None`: the store serves
    /// tenants from one process and needs none). etcd is connected to here;
    /// it is refused beside a store that cannot fence writes by epoch.
    pub fn ownership(&self, store: &Store, address: &str, ttl: Duration) -> Result<Option<Ownership>> {
        match (self, store) {
            (OwnersSpec::Store, _) => Ok(store.ownership(address, ttl)),
            #[cfg(not(feature = "etcd"))]
            (OwnersSpec::Etcd(_), _) => Err(Error::invalid(
                "owners",
                "etcd owner leases need a build with the `etcd` feature (cargo build --features etcd; it needs protoc)",
            )),
            #[cfg(feature = "etcd")]
            (OwnersSpec::Etcd(_), Store::Memory | Store::Sqlite(_)) => Err(Error::invalid(
                "owners",
                "etcd owner leases need a postgres:// or redis:// store: memory and SQLite cannot refuse an older owner's writes",
            )),
            #[cfg(feature = "etcd")]
            (OwnersSpec::Etcd(endpoints), _) => {
                let owners = crate::providers::EtcdOwners::connect(endpoints)?;
                Ok(Some(Ownership::new(Box::new(owners), address, ttl)))
            }
        }
    }
}

impl std::str::FromStr for OwnersSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        OwnersSpec::parse(s)
    }
}

/// Without the `etcd` feature an etcd owners URL still parses (it is a
/// valid name), and opening it is refused naming the field.
#[cfg(all(test, not(feature = "etcd")))]
mod tests {
    use super::*;

    #[test]
    fn etcd_owners_without_the_feature_are_refused_naming_the_field() {
        let spec = OwnersSpec::parse("etcd://127.0.0.1:2379").unwrap();
        match spec.ownership(&Store::Memory, "http://127.0.0.1:7070", Duration::from_secs(10)) {
            Err(Error::InvalidInput { field, rule }) => {
                assert_eq!(field, "owners");
                assert!(rule.contains("`etcd` feature"), "{rule}");
            }
            other => panic!("expected invalid_input on owners, got {other:?}"),
        }
    }
}
