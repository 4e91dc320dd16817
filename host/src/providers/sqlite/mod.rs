//! SQLite, the embedded durable default: checkpoints conditional on owner
//! epoch and version, the command log, and a permit table that is the
//! tenant's lease authority across restarts.
//!
//! One pool owns a tenant of a file at a time. Ownership is an OS file lock
//! beside the database (released by the OS if the process dies, so a restart
//! is never locked out) plus an owner epoch in the database that every
//! checkpoint and log write is checked against.
//!
//! Every grant, renewal and release is committed to the permit table before
//! the pool acts on it, so a `kill -9` loses none of them (I1 through a
//! crash): a permit granted after the last checkpoint stays held until its
//! lease's TTL ends, and a lease released after it does not come back. A
//! grant that claims usage limits is judged against the resource's grants
//! of the last minute and day, its context's and its groups', and recorded
//! with them in the grant's transaction, so grants made before a crash
//! still count after it.
//! Commits use `synchronous=NORMAL` in WAL mode: durable when the process
//! dies, not when the machine loses power.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use repute_core::Command;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use super::{Backend, Clock, Providers};
use crate::error::{Error, StoreError};

mod permits;

pub use permits::SqliteFencing;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS owners (
    tenant TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    tenant TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    version INTEGER NOT NULL,
    log_seq INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS fences (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    permit INTEGER NOT NULL,
    token INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, value, permit)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
    tenant TEXT NOT NULL,
    seq INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
) WITHOUT ROWID;
";

/// Schema changes after `SCHEMA`, applied once each, in order, under the
/// database's write lock; `PRAGMA user_version` counts those applied.
///
/// 1. The permit's holder: `token` is the newest token and so names the
///    lease holding the permit; `expires` is that lease's deadline as wall
///    clock unix nanoseconds (NULL: none recorded, as in rows written
///    before this column existed), `ttl` its TTL in nanoseconds, and
///    `released` is 1 once that lease was revoked.
/// 2. Usage limits: per resource and scope (`''` for the resource's own
///    limits, else a context's name for its `per_context` ones), its grants
///    ever (`uses`) and the time of the newest (`last`); per grant of the
///    last minute that an `rpm` or `tpm` counts, its time and the tokens it
///    counts (`cost`). Times are on the authority's limits clock (see
///    `SqliteFencing`), unix ns.
/// 3. Day windows and quota groups: the entries of the bucketed windows
///    (`span` 'day' for an `rpd` or `tpd`, 'minute' for a group's `rpm` or
///    `tpm`), each the grants made from `first` to `at` and their tokens;
///    a group's scope is kind `''` (no resource's kind is empty) and value
///    the group's name, in `usage` too. `group_lease`: the newest lease of
///    each permit granted with a group that has a `concurrency`.
///    `claimed`: each permit's newest claimed grant, as its reconcile needs
///    it (time, whether the day counted it, and the group windows that did:
///    each `name US flags`, separated by RS; flags 1 minute, 2 day).
const MIGRATIONS: &[&str] = &[
    "
ALTER TABLE fences ADD COLUMN expires INTEGER;
ALTER TABLE fences ADD COLUMN ttl INTEGER;
ALTER TABLE fences ADD COLUMN released INTEGER NOT NULL DEFAULT 0;
",
    "
CREATE TABLE usage (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    scope TEXT NOT NULL,
    uses INTEGER NOT NULL,
    last INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, value, scope)
) WITHOUT ROWID;
CREATE TABLE usage_window (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    scope TEXT NOT NULL,
    at INTEGER NOT NULL,
    permit INTEGER NOT NULL,
    token INTEGER NOT NULL,
    cost INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, value, scope, at, permit, token)
) WITHOUT ROWID;
",
    "
CREATE TABLE usage_bucket (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    scope TEXT NOT NULL,
    span TEXT NOT NULL,
    first INTEGER NOT NULL,
    at INTEGER NOT NULL,
    grants INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, value, scope, span, first)
) WITHOUT ROWID;
CREATE TABLE group_lease (
    tenant TEXT NOT NULL,
    grp TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    permit INTEGER NOT NULL,
    token INTEGER NOT NULL,
    PRIMARY KEY (tenant, grp, kind, value, permit)
) WITHOUT ROWID;
CREATE TABLE claimed (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    permit INTEGER NOT NULL,
    token INTEGER NOT NULL,
    at INTEGER NOT NULL,
    day INTEGER NOT NULL,
    groups TEXT NOT NULL,
    PRIMARY KEY (tenant, kind, value, permit)
) WITHOUT ROWID;
",
];

/// Creates the tables and brings them up to date. `BEGIN IMMEDIATE` takes
/// the write lock first, so two processes opening tenants of one new file
/// cannot both apply a migration.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    let done: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for sql in MIGRATIONS.iter().skip(done.max(0) as usize) {
        tx.execute_batch(sql)?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {}", MIGRATIONS.len()))?;
    tx.commit()
}

struct Inner {
    conn: Connection,
    tenant: String,
    epoch: u64,
    /// Held for the life of the pool; the OS drops it with the process.
    _lock: Option<File>,
}

/// Checkpoints and the command log of one tenant in a SQLite file.
/// One SQLite file for every tenant; one process owns a tenant at a time.
#[derive(Debug, Clone)]
pub struct SqliteFile {
    path: PathBuf,
}

impl Backend for SqliteFile {
    fn open(path: &str) -> crate::error::Result<SqliteFile> {
        Ok(SqliteFile { path: PathBuf::from(path) })
    }

    /// The file lock is the owner here: no epoch comes from outside.
    fn tenant_providers(&self, tenant: &str, _: u64, clock: Arc<dyn Clock>) -> crate::error::Result<Providers> {
        Providers::sqlite(&self.path, tenant, clock)
    }
}

pub struct SqliteStorage {
    inner: Arc<Mutex<Inner>>,
}

opaque_debug!(SqliteStorage);

/// The tenant's lock file beside the database, named by a stable hash so any
/// tenant name makes a valid file name.
fn lock_path(db: &Path, tenant: &str) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{:016x}.owner", crate::hash::fnv1a(tenant)));
    db.with_file_name(name)
}

/// Takes the tenant's lock file, or says who holds it.
fn claim(db: &Path, tenant: &str) -> crate::error::Result<File> {
    let path = lock_path(db, tenant);
    let unavailable = |e: std::io::Error| Error::Store(StoreError::Unavailable(format!("lock file: {e}")));
    let mut file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(unavailable)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut owner = String::new();
            let _ = file.read_to_string(&mut owner);
            let owner = if owner.is_empty() { "another pool".to_owned() } else { owner };
            return Err(Error::NotOwner { owner });
        }
        Err(TryLockError::Error(e)) => return Err(unavailable(e)),
    }
    file.set_len(0).map_err(unavailable)?;
    file.rewind().map_err(unavailable)?;
    write!(file, "process {} (tenant {tenant:?})", std::process::id()).map_err(unavailable)?;
    Ok(file)
}

impl SqliteStorage {
    /// Opens (creating if needed) the database at `path` and takes ownership
    /// of `tenant`: refused with `Error::NotOwner` while another pool holds
    /// it; otherwise the owner epoch is raised, fencing out any writer that
    /// still carries the old one.
    pub fn open(path: impl AsRef<Path>, tenant: &str) -> crate::error::Result<Self> {
        let path = path.as_ref();
        let lock = claim(path, tenant)?;
        let mut conn = Connection::open(path).map_err(StoreError::from)?;
        let mut setup = || -> rusqlite::Result<u64> {
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            migrate(&mut conn)?;
            conn.query_row(
                "INSERT INTO owners (tenant, epoch) VALUES (?1, 1)
                 ON CONFLICT (tenant) DO UPDATE SET epoch = epoch + 1
                 RETURNING epoch",
                params![tenant],
                |row| row.get::<_, i64>(0),
            )
            .map(|e| e as u64)
        };
        let epoch = setup().map_err(StoreError::from)?;
        let inner = Inner { conn, tenant: tenant.to_owned(), epoch, _lock: Some(lock) };
        Ok(SqliteStorage { inner: Arc::new(Mutex::new(inner)) })
    }

    /// The fence counters of the same tenant, on the same connection.
    pub fn fencing(&self) -> SqliteFencing {
        SqliteFencing::new(self.inner.clone())
    }

    /// This owner's epoch.
    pub fn epoch(&self) -> u64 {
        lock(&self.inner).epoch
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding the guard cannot leave SQLite half-written (every
    // write is one transaction), so a poisoned lock is still usable.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

/// Refuses the write if ownership moved to a higher epoch.
fn check_epoch(tx: &rusqlite::Transaction<'_>, tenant: &str, mine: u64) -> Result<(), StoreError> {
    let stored: i64 = tx.query_row("SELECT epoch FROM owners WHERE tenant = ?1", params![tenant], |r| r.get(0))?;
    if stored as u64 > mine {
        return Err(StoreError::StaleEpoch { mine, stored: stored as u64 });
    }
    Ok(())
}

impl Storage for SqliteStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let inner = lock(&self.inner);
        let row = inner
            .conn
            .query_row(
                "SELECT epoch, version, log_seq, bytes FROM checkpoints WHERE tenant = ?1",
                params![inner.tenant],
                |r| {
                    Ok(Checkpoint {
                        epoch: r.get::<_, i64>(0)? as u64,
                        version: r.get::<_, i64>(1)? as u64,
                        log_seq: r.get::<_, i64>(2)? as u64,
                        bytes: r.get(3)?,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        let tx = inner.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        check_epoch(&tx, &tenant, epoch)?;
        let found: i64 = tx
            .query_row("SELECT version FROM checkpoints WHERE tenant = ?1", params![tenant], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        if found as u64 != expected_version {
            return Err(StoreError::Conflict { expected: expected_version, found: found as u64 });
        }
        let version = found as u64 + 1;
        tx.execute(
            "INSERT OR REPLACE INTO checkpoints (tenant, epoch, version, log_seq, bytes)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![tenant, epoch as i64, version as i64, log_seq as i64, bytes],
        )?;
        // Entries folded into the checkpoint are no longer needed for replay.
        tx.execute("DELETE FROM log WHERE tenant = ?1 AND seq <= ?2", params![tenant, log_seq as i64])?;
        tx.commit()?;
        Ok(version)
    }

    fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
        let entry = encode_command(command)?;
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        let tx = inner.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        check_epoch(&tx, &tenant, epoch)?;
        // Sequence numbers continue past the checkpoint's even after the
        // folded entries were deleted.
        let seq: i64 = tx.query_row(
            "INSERT INTO log (tenant, seq, entry)
             VALUES (?1, MAX(
                 (SELECT COALESCE(MAX(seq), 0) FROM log WHERE tenant = ?1),
                 (SELECT COALESCE(MAX(log_seq), 0) FROM checkpoints WHERE tenant = ?1)) + 1,
                 ?2)
             RETURNING seq",
            params![tenant, entry],
            |r| r.get(0),
        )?;
        tx.commit()?;
        Ok(seq as u64)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let inner = lock(&self.inner);
        let mut stmt = inner
            .conn
            .prepare_cached("SELECT seq, entry FROM log WHERE tenant = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?;
        let rows = stmt.query_map(params![inner.tenant, after as i64, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, entry) = row?;
            out.push(LogEntry { seq: seq as u64, command: decode_command(seq as u64, &entry)? });
        }
        Ok(out)
    }

    /// Every open raises the tenant's owner epoch, so a restarted process
    /// hands out ids no lease of the crashed one had.
    fn lease_id_floor(&self) -> u64 {
        lock(&self.inner).epoch << 32
    }
}
