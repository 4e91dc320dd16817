//! PostgreSQL: the store that lets many processes serve tenants together.
//!
//! Every rule that keeps processes apart is enforced by the database under
//! the row locks of one statement, with expiry judged by the database clock
//! (I6), so a paused or partitioned process cannot talk its way past it:
//!
//! - the permit table is the lease authority: a grant is one upsert that
//!   succeeds only while no unexpired lease holds the permit, and mints the
//!   next token of a counter row that is never deleted (I1, I2); a grant
//!   that claims usage limits is one call of `repute_claimed_grant`, which
//!   locks the usage rows of the resource, of the acquire's context and of
//!   the claim's groups (in that order, the groups by name, so grants
//!   sharing rows never deadlock), judges the claim in each over every
//!   process's grants of the last minute and day (and a group's live
//!   leases against its concurrency), grants and counts (one round trip);
//!   a reconcile is one call of `repute_reconcile`;
//! - checkpoints and log appends carry the writer's owner epoch and are
//!   refused by the database once the epoch moved on (I3, I4);
//! - tenant ownership (sharded mode) is an owner row with a strictly
//!   increasing epoch and an expiry on the database clock.
//!
//! The schema is created and upgraded by the migrations in `host/migrations`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ::postgres::{Client, Config};

use super::{Backend, Clock, Providers};
use crate::error::StoreError;
use crate::ownership::Ownership;
use crate::partition::Partition;

mod link;
mod owners;
mod permits;
mod storage;

use link::Link;
pub use owners::PgOwners;
pub use permits::PgFencing;
pub use storage::PgStorage;

/// Schema versions in order; each runs once, in one transaction.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../../migrations/0001_init.sql")),
    (2, include_str!("../../../migrations/0002_limits.sql")),
    (3, include_str!("../../../migrations/0003_groups.sql")),
    (4, include_str!("../../../migrations/0004_partitions.sql")),
    (5, include_str!("../../../migrations/0005_views.sql")),
    (6, include_str!("../../../migrations/0006_generations.sql")),
    (7, include_str!("../../../migrations/0007_lines.sql")),
];

/// Every connection's session settings: a statement or a lock wait that
/// outlasts them is an error, not a hang.
const SESSION: &str = "-c statement_timeout=5000 -c lock_timeout=5000";

/// Any lock number, the same in every process: serialises migrations.
const MIGRATION_LOCK: i64 = 0x7265_7075_7465;

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("postgres: {e}"))
}

/// A PostgreSQL database that repute's tables live in.
#[derive(Clone)]
pub struct Postgres {
    config: Arc<Config>,
}

opaque_debug!(Postgres, PgStorage, PgFencing, PgOwners);

impl Backend for Postgres {
    fn open(url: &str) -> crate::error::Result<Postgres> {
        Ok(Postgres::connect(url)?)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn tenant_providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> crate::error::Result<Providers> {
        Ok(match Partition::parse(tenant) {
            Some(partition) => Providers::new(clock, self.partition(partition, epoch)),
            None => Providers::postgres(self, tenant, epoch, clock),
        })
    }

    /// Makes `epoch` the tenant's if it is higher than the stored one: an
    /// owner chosen elsewhere (etcd) fences this store's earlier writers.
    /// An epoch taken here (`PgOwners`) is already stored; this is a no-op.
    fn raise_epoch(&self, tenant: &str, epoch: u64) -> Result<(), StoreError> {
        self.link().run(|c| {
            c.execute(
                "INSERT INTO repute_tenant AS t (tenant, epoch) VALUES ($1, $2::bigint)
                 ON CONFLICT (tenant) DO UPDATE SET epoch = greatest(t.epoch, EXCLUDED.epoch)",
                &[&tenant, &(epoch as i64)],
            )
        })?;
        Ok(())
    }

    fn ownership(&self, address: &str, ttl: Duration) -> Option<Ownership> {
        Some(Ownership::new(Box::new(self.owners()), address, ttl))
    }

    /// `synchronous_commit` off or local, or a standby streaming
    /// asynchronously, can lose commits a client was told of.
    fn durability(&self) -> Option<String> {
        let row = self
            .link()
            .run(|s| {
                s.query_one(
                    "SELECT current_setting('synchronous_commit'),
                            (SELECT count(*) FROM pg_stat_replication WHERE sync_state IS DISTINCT FROM 'sync')",
                    &[],
                )
            })
            .ok()?;
        let (commit, async_standbys): (String, i64) = (row.get(0), row.get(1));
        match (commit.as_str(), async_standbys) {
            ("off", _) => Some("synchronous_commit is off: a crash loses the last commits".into()),
            (_, n) if n > 0 => {
                Some(format!("{n} standby(s) replicate asynchronously: a failover to one loses the commits it lacked"))
            }
            ("local", _) => Some("synchronous_commit is local: a failover loses what no standby had".into()),
            _ => None,
        }
    }
}

impl Postgres {
    /// Connects to `url` (`postgres://user@host:port/db`) and brings the
    /// schema up to date. Calls time out after a few seconds of silence from
    /// the server, so a partition is an error, not a hang.
    pub fn connect(url: &str) -> Result<Postgres, StoreError> {
        let mut config: Config = url.parse().map_err(|e| unavailable(format!("store url: {e}")))?;
        config
            .connect_timeout(Duration::from_secs(3))
            .tcp_user_timeout(Duration::from_secs(3))
            .keepalives_idle(Duration::from_secs(5))
            .options(SESSION)
            .application_name("repute");
        let db = Postgres { config: Arc::new(config) };
        db.link().run(|s| migrate(s.client))?;
        Ok(db)
    }

    fn link(&self) -> Link {
        Link { config: (*self.config).clone(), client: None }
    }

    /// A link whose connections name a pool of their own in `repute.pool`,
    /// its place in the lines of groups (see the migration `0007_lines`).
    fn pool_link(&self) -> Link {
        let mut config = (*self.config).clone();
        config.options(&format!("{SESSION} -c repute.pool={}", super::pool_id()));
        Link { config, client: None }
    }

    /// The tenant's storage and lease authority, writing under `epoch` (the
    /// owner epoch a claim by [`Postgres::owners`] took; 0 in shared mode,
    /// where no process owns the tenant).
    pub fn tenant(&self, tenant: &str, epoch: u64) -> (PgStorage, PgFencing) {
        let inner =
            Arc::new(Mutex::new(Inner { link: self.pool_link(), tenant: tenant.to_owned(), epoch: epoch as i64 }));
        (PgStorage { inner: inner.clone(), partition: None }, PgFencing { inner })
    }

    /// One partition's storage, writing under its owner's `epoch`, and the
    /// tenant's lease authority, which every partition shares as the
    /// processes of shared mode do (epoch 0), so a permit or a limit is
    /// judged over every partition's grants (I1, I2).
    pub fn partition(&self, partition: Partition, epoch: u64) -> (PgStorage, PgFencing) {
        let inner = |link: Link, epoch: u64| {
            Arc::new(Mutex::new(Inner { link, tenant: partition.tenant.clone(), epoch: epoch as i64 }))
        };
        let fencing = PgFencing { inner: inner(self.pool_link(), 0) };
        (PgStorage { inner: inner(self.link(), epoch), partition: Some(partition) }, fencing)
    }

    /// Owner leases in this database, on a connection of their own so that
    /// renewals never queue behind a tenant's calls.
    pub fn owners(&self) -> PgOwners {
        PgOwners { link: self.link() }
    }
}

fn migrate(client: &mut Client) -> Result<(), ::postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS repute_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )?;
    let done: i32 = tx.query_one("SELECT coalesce(max(version), 0) FROM repute_migrations", &[])?.get(0);
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > done) {
        tx.batch_execute(sql)?;
        tx.execute("INSERT INTO repute_migrations (version) VALUES ($1)", &[version])?;
    }
    tx.commit()
}

/// What a tenant's storage and authority share: one connection, and the
/// owner epoch they write under.
struct Inner {
    link: Link,
    tenant: String,
    epoch: i64,
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // Every write is one statement or transaction, so a panic while the
    // guard was held cannot have left anything half-written.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}
