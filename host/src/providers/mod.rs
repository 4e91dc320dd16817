//! The capabilities a host gives the core: a clock, a lease authority
//! (fencing) and durable storage. Each is a trait so that shared backends
//! (PostgreSQL, Redis, etcd) plug in beside the in-memory and SQLite ones
//! without touching the WIT or the core. The stores themselves are
//! [`Backend`]s, listed in [`BACKENDS`]; the networked ones and etcd each
//! sit behind a Cargo feature of their name.

/// `Debug` for providers whose fields are connections, locks and caches:
/// the type's name only.
macro_rules! opaque_debug {
    ($($ty:ident),*) => {
        $(impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty)).finish_non_exhaustive()
            }
        })*
    };
}

mod backend;
mod clock;
#[cfg(feature = "etcd")]
mod etcd;
mod fencing;
mod memory;
mod owners;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
mod sqlite;
mod storage;
mod usage;

pub use backend::{Backend, Registration, BACKENDS};
pub use clock::{Clock, ManualClock, SystemClock};
#[cfg(feature = "etcd")]
pub use etcd::EtcdOwners;
pub(crate) use fencing::{authority_groups, authority_windows};
pub use fencing::{Fencing, GroupCounts, MemoryFencing, Permit, Releases};
pub use memory::Memory;
pub use owners::{owner_margin, Claim, OwnerStore};
#[cfg(feature = "postgres")]
pub use postgres::{PgFencing, PgOwners, PgStorage, Postgres};
#[cfg(feature = "redis")]
pub use redis::{Address, Done, Exchange, Redis, RedisFencing, RedisStorage, RedisWire};
pub use sqlite::{SqliteFencing, SqliteFile, SqliteStorage};
pub use storage::{Checkpoint, FoldCount, LogEntry, MemoryStorage, Storage};

use std::sync::Arc;

/// A name for one pool's place at a shared store (its line entries, its
/// wake-ups), unlike every other pool's in any process or machine: the
/// process, a count of pools it opened, and the hasher's random keys.
#[cfg(any(feature = "postgres", feature = "redis"))]
fn pool_id() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let opened = OPENED.fetch_add(1, Ordering::Relaxed);
    std::collections::hash_map::RandomState::new().hash_one((std::process::id(), opened, std::time::SystemTime::now()))
}

/// Everything one tenant's pool talks to.
pub struct Providers {
    pub clock: Arc<dyn Clock>,
    pub fencing: Box<dyn Fencing>,
    pub storage: Box<dyn Storage>,
}

impl Providers {
    /// Boxes one store's pair of a tenant's storage and lease authority.
    pub fn new(clock: Arc<dyn Clock>, (storage, fencing): (impl Storage + 'static, impl Fencing + 'static)) -> Self {
        Providers { clock, fencing: Box::new(fencing), storage: Box::new(storage) }
    }

    /// The system monotonic clock with in-memory fencing and storage: a
    /// single process with nothing durable.
    pub fn memory() -> Self {
        Providers::memory_with_clock(Arc::new(SystemClock::new()))
    }

    /// In-memory fencing and storage on the given clock (e.g. a `ManualClock`).
    pub fn memory_with_clock(clock: Arc<dyn Clock>) -> Self {
        Providers::new(clock, (MemoryStorage::default(), MemoryFencing::default()))
    }

    /// SQLite at `path` for `tenant`: durable checkpoints, report log and
    /// fence counters. Refused with `NotOwner` while another pool (in this
    /// or another process) has the same tenant of the same file open.
    pub fn sqlite(
        path: impl AsRef<std::path::Path>,
        tenant: &str,
        clock: Arc<dyn Clock>,
    ) -> crate::error::Result<Self> {
        let storage = SqliteStorage::open(path, tenant)?;
        let fencing = storage.fencing();
        Ok(Providers::new(clock, (storage, fencing)))
    }

    /// PostgreSQL for `tenant`, writing under owner `epoch` (0 when the
    /// tenant is shared by many processes).
    #[cfg(feature = "postgres")]
    pub fn postgres(db: &Postgres, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Self {
        Providers::new(clock, db.tenant(tenant, epoch))
    }

    /// Redis for `tenant`, writing under owner `epoch` (0 when the tenant
    /// is shared by many processes).
    #[cfg(feature = "redis")]
    pub fn redis(db: &Redis, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> Self {
        Providers::new(clock, db.tenant(tenant, epoch))
    }
}

opaque_debug!(Providers);
