//! A store that tenants live in, behind one trait, and the one list of
//! the stores a `store` name can pick. Adding a backend is a folder of
//! `providers/` with an implementation of [`Backend`] and one entry in
//! [`BACKENDS`]; nothing else names the backends one by one.

use std::sync::Arc;
use std::time::Duration;

use super::{memory, sqlite, Clock, Providers};
use crate::error::{Result, StoreError};
use crate::ownership::Ownership;

/// An opened store: what each tenant's providers are made from. Opened
/// once per process and shared by every tenant it serves.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Opens the store at `address`, the part of a store name after its
    /// scheme that [`Registration::address`] found: connects (and, for a
    /// database, brings its schema up to date).
    fn open(address: &str) -> Result<Self>
    where
        Self: Sized;

    /// Durable stores open tenants from their newest checkpoint and log
    /// every change before acknowledging it.
    fn durable(&self) -> bool {
        true
    }

    /// Whether several processes can serve one tenant on this store at once:
    /// the store is then their lease authority and log, and refuses the
    /// writes of an owner older than the newest epoch.
    fn is_shared(&self) -> bool {
        false
    }

    /// Providers for `tenant`. `epoch` is the owner epoch its writes carry
    /// (0: no owner, the store alone arbitrates); the store's own epoch is
    /// raised to it first, so an owner chosen elsewhere fences the earlier
    /// writers.
    fn providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Result<Providers> {
        if epoch > 0 {
            self.raise_epoch(tenant, epoch)?;
        }
        self.tenant_providers(tenant, epoch, clock)
    }

    /// [`Backend::providers`] without raising the epoch.
    fn tenant_providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Result<Providers>;

    /// Makes `epoch` the tenant's if it is higher than the stored one. A
    /// store that keeps no epoch (its owner is a local lock, or nobody)
    /// has nothing to raise.
    fn raise_epoch(&self, tenant: &str, epoch: u64) -> Result<(), StoreError> {
        let _ = (tenant, epoch);
        Ok(())
    }

    /// What the store's settings say it can lose of what it acknowledged
    /// (a crash, a failover to a replica that is behind), for the
    /// operator's log at start; `None` when they say nothing is lost, or a
    /// store keeps nothing beyond the process. Grants stay exclusive
    /// either way (the generation check); reports and usage do not.
    fn durability(&self) -> Option<String> {
        None
    }

    /// Owner leases for sharded mode kept in the store itself, where it can
    /// hold them; `None` for a store that cannot.
    fn ownership(&self, address: &str, ttl: Duration) -> Option<Ownership> {
        let _ = (address, ttl);
        None
    }

    /// The tenant's grants and revokes as bytes, for an application that
    /// runs them on a connection of its own event loop; `None` for a store
    /// that has no such form.
    #[cfg(feature = "redis")]
    fn wire(&self, tenant: &str, epoch: u64) -> Option<super::RedisWire> {
        let _ = (tenant, epoch);
        None
    }
}

/// Opens a store of one backend by its address.
pub type Open = fn(&str) -> Result<Arc<dyn Backend>>;

/// One entry of [`BACKENDS`]: how a backend's names look and how one opens.
pub struct Registration {
    /// The backend's name; a networked backend's Cargo feature is named alike.
    pub name: &'static str,
    /// The names it takes, as the `store` field's rule lists them.
    pub syntax: &'static str,
    /// The address in a store name of this backend, `None` for a name of
    /// another one.
    pub address: fn(&str) -> Option<&str>,
    /// See [`Backend::durable`]; known before the store is opened.
    pub durable: bool,
    /// Opens a store of this backend; `None` when the build left it out, so
    /// its names are refused with the feature to build with, not as unknown.
    pub open: Option<Open>,
}

fn open<B: Backend + 'static>(address: &str) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(B::open(address)?))
}

/// Every store a name can pick, tried in this order.
pub static BACKENDS: &[Registration] = &[
    Registration {
        name: "memory",
        syntax: "\"memory\"",
        address: |s| (s == "memory").then_some(""),
        durable: false,
        open: Some(open::<memory::Memory>),
    },
    Registration {
        name: "sqlite",
        syntax: "\"sqlite:PATH\"",
        address: |s| s.strip_prefix("sqlite:").filter(|path| !path.is_empty()),
        durable: true,
        open: Some(open::<sqlite::SqliteFile>),
    },
    Registration {
        name: "postgres",
        syntax: "a postgres:// URL",
        address: |s| (s.starts_with("postgres://") || s.starts_with("postgresql://")).then_some(s),
        durable: true,
        #[cfg(feature = "postgres")]
        open: Some(open::<super::Postgres>),
        #[cfg(not(feature = "postgres"))]
        open: None,
    },
    Registration {
        name: "redis",
        syntax: "a redis:// URL",
        address: |s| s.starts_with("redis://").then_some(s),
        durable: true,
        #[cfg(feature = "redis")]
        open: Some(open::<super::Redis>),
        #[cfg(not(feature = "redis"))]
        open: None,
    },
];
