//! SQLite, the embedded durable default: checkpoints conditional on owner
//! epoch and version, the command log, and fence counters that survive
//! restarts.
//!
//! One pool owns a tenant of a file at a time. Ownership is an OS file lock
//! beside the database (released by the OS if the process dies, so a restart
//! is never locked out) plus an owner epoch in the database that every
//! checkpoint and log write is checked against.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use repute_core::Command;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::fencing::{Fencing, MemoryFencing, Permit};
use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use crate::error::{Error, StoreError};

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

struct Inner {
    conn: Connection,
    tenant: String,
    epoch: u64,
    /// Held for the life of the pool; the OS drops it with the process.
    _lock: Option<File>,
}

/// Checkpoints and the command log of one tenant in a SQLite file.
pub struct SqliteStorage {
    inner: Arc<Mutex<Inner>>,
}

/// Fence counters of one tenant in the same file. Holders are kept in
/// memory (they are only meaningful on this process's clock); the newest
/// token of every permit is written before it is handed out, so no token is
/// ever issued twice, restarts included.
pub struct SqliteFencing {
    inner: Arc<Mutex<Inner>>,
    holders: MemoryFencing,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SqliteFencing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteFencing").finish_non_exhaustive()
    }
}

/// The tenant's lock file beside the database, named by a stable hash so any
/// tenant name makes a valid file name.
fn lock_path(db: &Path, tenant: &str) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{:016x}.owner", crate::fnv1a(tenant)));
    db.with_file_name(name)
}

/// Takes the tenant's lock file, or says who holds it.
fn claim(db: &Path, tenant: &str) -> crate::Result<File> {
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
    pub fn open(path: impl AsRef<Path>, tenant: &str) -> crate::Result<Self> {
        let path = path.as_ref();
        let lock = claim(path, tenant)?;
        let conn = Connection::open(path).map_err(StoreError::from)?;
        let setup = || -> rusqlite::Result<u64> {
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.execute_batch(SCHEMA)?;
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
        SqliteFencing { inner: self.inner.clone(), holders: MemoryFencing::default() }
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
            out.push(LogEntry { seq: seq as u64, command: decode_command(&entry)? });
        }
        Ok(out)
    }
}

impl SqliteFencing {
    /// Brings the in-memory newest token of `permit` up to the durable one.
    fn sync(&mut self, inner: &Inner, permit: Permit<'_>) -> Result<(), StoreError> {
        let stored: Option<i64> = inner
            .conn
            .prepare_cached("SELECT token FROM fences WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND permit = ?4")?
            .query_row(params![inner.tenant, permit.kind, permit.value, permit.index], |r| r.get(0))
            .optional()?;
        let state = self.holders.state(permit);
        state.last = state.last.max(stored.unwrap_or(0) as u64);
        Ok(())
    }
}

impl Fencing for SqliteFencing {
    fn grant(&mut self, permit: Permit<'_>, ttl: u64, last: u64, now: u64) -> Result<Option<u64>, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        self.sync(&inner, permit)?;
        let state = self.holders.state(permit);
        let before = *state;
        let Some(token) = MemoryFencing::decide(state, ttl, last, now) else { return Ok(None) };
        let written = inner
            .conn
            .prepare_cached(
                "INSERT INTO fences (tenant, kind, value, permit, token) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant, kind, value, permit) DO UPDATE SET token = MAX(token, excluded.token)",
            )
            .and_then(|mut s| s.execute(params![inner.tenant, permit.kind, permit.value, permit.index, token as i64]));
        if let Err(e) = written {
            // Not durable, so not issued.
            *self.holders.state(permit) = before;
            return Err(e.into());
        }
        Ok(Some(token))
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        self.sync(&inner, permit)?;
        let known = self.holders.state(permit).last;
        if !self.holders.extend(permit, token, ttl, now)? {
            return Ok(false);
        }
        if token == known {
            return Ok(true);
        }
        // An adopted (restored) token must be durable too, or a restart could re-issue it.
        inner
            .conn
            .prepare_cached(
                "INSERT INTO fences (tenant, kind, value, permit, token) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant, kind, value, permit) DO UPDATE SET token = MAX(token, excluded.token)",
            )
            .and_then(|mut s| {
                s.execute(params![inner.tenant, permit.kind, permit.value, permit.index, token as i64])
            })?;
        Ok(true)
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        self.holders.revoke(permit, token)
    }
}
