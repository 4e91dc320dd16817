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
//! of the last minute and recorded with them in the grant's transaction,
//! so grants made before a crash still count after it.
//! Commits use `synchronous=NORMAL` in WAL mode: durable when the process
//! dies, not when the machine loses power.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use repute_core::{Claim, Command, GrantAnswer, WINDOW};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::fencing::{Fencing, MemoryFencing, Permit};
use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use super::usage::{self, Grant, Usage, UsageState, RESOURCE_SCOPE};
use super::{Backend, Clock, Providers};
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
    fn open(path: &str) -> crate::Result<SqliteFile> {
        Ok(SqliteFile { path: PathBuf::from(path) })
    }

    /// The file lock is the owner here: no epoch comes from outside.
    fn tenant_providers(&self, tenant: &str, _: u64, clock: Arc<dyn Clock>) -> crate::Result<Providers> {
        Providers::sqlite(&self.path, tenant, clock)
    }
}

pub struct SqliteStorage {
    inner: Arc<Mutex<Inner>>,
}

/// The permit table of one tenant in the same file: the newest token of
/// every permit, and the deadline of the lease holding it, committed before
/// a grant or renewal is handed out and before a release is acknowledged.
/// No token is ever issued twice and no permit is held twice, restarts and
/// `kill -9` included.
///
/// Which clock judges expiry: while the process runs, the tenant's own
/// clock (`now`, the pool's monotonic clock), exactly as in memory: one
/// clock per authority (I6), which no wall-clock step can move. Only one
/// process owns a tenant of the file at a time, so nothing else needs to
/// read the deadlines then. They matter to the next owner, after a restart,
/// and no monotonic reading survives into it: the pool's clock counts from
/// its own start, and `CLOCK_MONOTONIC` itself starts over at a reboot (a
/// boot id would tell a reboot apart, but then every lease would have to
/// count as expired, though holders on other machines may still use theirs).
/// So each row also records the deadline as wall-clock unix time, and the
/// first time the next owner touches a permit it holds it for what is left,
/// `deadline − wall now`, on its own clock from then on. What is left is
/// capped at the lease's TTL, so a wall clock stepped back while no process
/// ran holds a permit at most one TTL longer than needed; a step forward of
/// more than a holder's safety margin while none ran could shorten a hold,
/// which is the one thing this choice trusts the wall clock for.
///
/// Usage limits count grants over a minute, which a restart must not
/// forget, so their clock is wall time anchored once: the wall clock's
/// reading at this authority's first call, advanced by the tenant's clock
/// from then on. Within a process it moves with the tenant's monotonic
/// clock (no wall-clock step reaches it); across processes it continues
/// in unix time, so the next owner counts the grants of the last minute
/// before the restart as such.
pub struct SqliteFencing {
    inner: Arc<Mutex<Inner>>,
    /// The live decisions, permits on the tenant's clock and usage on the
    /// limits clock; each is loaded from the tables the first time this
    /// process touches it.
    permits: MemoryFencing,
    /// (tenant clock, wall clock ns) at the first call: the limits clock's anchor.
    anchor: Option<(u64, u64)>,
}

opaque_debug!(SqliteStorage, SqliteFencing);

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
        SqliteFencing { inner: self.inner.clone(), permits: MemoryFencing::default(), anchor: None }
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

/// Wall-clock unix nanoseconds: only for deadlines a later process reads.
fn wall_ns() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// A permit's row as the table holds it.
struct Row {
    token: u64,
    /// Wall-clock deadline of the lease holding `token`, if one is recorded.
    expires: Option<i64>,
    ttl: Option<i64>,
    released: bool,
}

fn read_row(inner: &Inner, permit: Permit<'_>) -> rusqlite::Result<Option<Row>> {
    inner
        .conn
        .prepare_cached(
            "SELECT token, expires, ttl, released FROM fences
             WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND permit = ?4",
        )?
        .query_row(params![inner.tenant, permit.kind, permit.value, permit.index], |r| {
            Ok(Row { token: r.get::<_, i64>(0)? as u64, expires: r.get(1)?, ttl: r.get(2)?, released: r.get(3)? })
        })
        .optional()
}

/// Records that the lease holding `token` holds the permit until `ttl` ns
/// from now. The token never goes down, whatever the order of writes.
fn write_held(inner: &Inner, permit: Permit<'_>, token: u64, ttl: u64) -> rusqlite::Result<()> {
    let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
    inner
        .conn
        .prepare_cached(
            "INSERT INTO fences (tenant, kind, value, permit, token, expires, ttl, released)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)
             ON CONFLICT (tenant, kind, value, permit) DO UPDATE
             SET token = MAX(token, excluded.token), expires = excluded.expires, ttl = excluded.ttl, released = 0",
        )?
        .execute(params![
            inner.tenant,
            permit.kind,
            permit.value,
            permit.index,
            token as i64,
            wall_ns().saturating_add(ttl),
            ttl
        ])?;
    Ok(())
}

/// The usage of one scope of a resource as the tables hold it.
fn read_usage(inner: &Inner, permit: Permit<'_>, scope: &str) -> rusqlite::Result<Usage> {
    let mut usage = Usage::default();
    let head = inner
        .conn
        .prepare_cached("SELECT uses, last FROM usage WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4")?
        .query_row(params![inner.tenant, permit.kind, permit.value, scope], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
        .optional()?;
    if let Some((uses, last)) = head {
        usage.uses = uses;
        usage.last = Some(last);
    }
    let mut stmt = inner.conn.prepare_cached(
        "SELECT at, permit, token, cost FROM usage_window
         WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4 ORDER BY at, permit, token",
    )?;
    let rows = stmt.query_map(params![inner.tenant, permit.kind, permit.value, scope], |r| {
        Ok(Grant {
            at: r.get::<_, i64>(0)? as u64,
            permit: r.get(1)?,
            token: r.get::<_, i64>(2)? as u64,
            cost: r.get::<_, i64>(3)? as u64,
        })
    })?;
    for grant in rows {
        let grant = grant?;
        usage.tokens += grant.cost;
        usage.window.push_back(grant);
    }
    Ok(usage)
}

/// Records a claimed grant made at `at` (limits clock) in every scope of
/// its claim and prunes what left their windows by then, inside the
/// grant's transaction.
fn write_usage(inner: &Inner, permit: Permit<'_>, claim: &Claim, token: u64, at: u64) -> rusqlite::Result<()> {
    let (tenant, kind, value) = (&inner.tenant, permit.kind, permit.value);
    let at_i = at.min(i64::MAX as u64) as i64;
    for (scope, limits) in usage::scopes(claim) {
        if usage::windowed(&limits) {
            inner
                .conn
                .prepare_cached(
                    "INSERT INTO usage_window (tenant, kind, value, scope, at, permit, token, cost)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?
                .execute(params![
                    tenant,
                    kind,
                    value,
                    scope,
                    at_i,
                    permit.index,
                    token as i64,
                    claim.cost.min(i64::MAX as u64) as i64
                ])?;
        }
        inner
            .conn
            .prepare_cached(
                "DELETE FROM usage_window WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4 AND at <= ?5",
            )?
            .execute(params![tenant, kind, value, scope, at.saturating_sub(WINDOW).min(i64::MAX as u64) as i64])?;
        inner
            .conn
            .prepare_cached(
                "INSERT INTO usage (tenant, kind, value, scope, uses, last) VALUES (?1, ?2, ?3, ?4, 1, ?5)
                 ON CONFLICT (tenant, kind, value, scope) DO UPDATE SET uses = uses + 1, last = MAX(last, excluded.last)",
            )?
            .execute(params![tenant, kind, value, scope, at_i])?;
    }
    Ok(())
}

impl SqliteFencing {
    /// The limits clock's reading at tenant clock `now` (see the type's doc).
    fn limits_now(&mut self, now: u64) -> u64 {
        let (mono, wall) = *self.anchor.get_or_insert_with(|| (now, wall_ns().max(0) as u64));
        wall.saturating_add(now.saturating_sub(mono))
    }

    /// The usage of every scope of the claim, loaded from the tables the first time.
    fn load_usage(&mut self, inner: &Inner, permit: Permit<'_>, claim: &Claim) -> Result<(), StoreError> {
        for (scope, _) in usage::scopes(claim) {
            if self.permits.usage(permit).scope(scope).loaded {
                continue;
            }
            let usage = read_usage(inner, permit, scope)?;
            *self.permits.usage(permit).scope(scope) = UsageState { usage, loaded: true };
        }
        Ok(())
    }

    /// The permit's live state, loaded from its row the first time: the
    /// newest token, and what is left of its holder's lease (see the type's
    /// doc) counted on the tenant's clock from `now`.
    fn load(&mut self, inner: &Inner, permit: Permit<'_>, now: u64) -> Result<(), StoreError> {
        if self.permits.state(permit).loaded {
            return Ok(());
        }
        let row = read_row(inner, permit)?;
        let state = self.permits.state(permit);
        state.loaded = true;
        let Some(row) = row else { return Ok(()) };
        state.last = state.last.max(row.token);
        if let (false, Some(expires), Some(ttl)) = (row.released, row.expires, row.ttl) {
            let left = expires.saturating_sub(wall_ns()).min(ttl);
            if left > 0 {
                state.held_until = Some(now.saturating_add(left as u64));
            }
        }
        Ok(())
    }
}

impl Fencing for SqliteFencing {
    /// Decided in memory, then committed: the permit's row alone, or with
    /// a claim the row, the grant and the pruned window in one
    /// transaction. Only a commit makes the grant, so a failed write
    /// issues nothing.
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        now: u64,
        claim: Option<&Claim>,
    ) -> Result<GrantAnswer, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        self.load(&inner, permit, now)?;
        let at = self.limits_now(now);
        if let Some(claim) = claim {
            self.load_usage(&inner, permit, claim)?;
        }
        let state = *self.permits.state(permit);
        let mut usage = claim.map(|c| (self.permits.usage(permit), c));
        let limits = usage.as_mut().map(|(u, c)| (&mut **u, *c, at));
        let token = match MemoryFencing::decide(&state, last, now, limits) {
            Ok(token) => token,
            Err(refused) => return Ok(refused),
        };
        match usage {
            Some((usage, claim)) => {
                let tx = Transaction::new_unchecked(&inner.conn, TransactionBehavior::Immediate)?;
                write_held(&inner, permit, token, ttl)?;
                write_usage(&inner, permit, claim, token, at)?;
                tx.commit()?;
                usage.record(claim, permit.index, token, at);
            }
            None => write_held(&inner, permit, token, ttl)?,
        }
        MemoryFencing::take(self.permits.state(permit), token, ttl, now);
        Ok(GrantAnswer::Granted(token))
    }

    /// Committed first; the loaded windows follow.
    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        _reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        inner
            .conn
            .prepare_cached(
                "UPDATE usage_window SET cost = ?6
                 WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND permit = ?4 AND token = ?5
                   AND scope IN (?7, ?8)",
            )?
            .execute(params![
                inner.tenant,
                permit.kind,
                permit.value,
                permit.index,
                token as i64,
                used.min(i64::MAX as u64) as i64,
                RESOURCE_SCOPE,
                context.unwrap_or(RESOURCE_SCOPE)
            ])?;
        self.permits.usage(permit).reconcile(context, permit.index, token, used);
        Ok(())
    }

    /// A renewal, or a restored lease adopting its permit (see
    /// `MemoryFencing::prolong`), is committed with its new deadline, so a
    /// crash right after it cannot shorten the hold.
    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        self.load(&inner, permit, now)?;
        let state = self.permits.state(permit);
        let before = *state;
        if !MemoryFencing::prolong(state, token, ttl, now) {
            return Ok(false);
        }
        if let Err(e) = write_held(&inner, permit, token, ttl) {
            *self.permits.state(permit) = before;
            return Err(e.into());
        }
        Ok(true)
    }

    /// The release is committed before the permit is freed here: if it
    /// cannot be, the permit stays held until the lease's TTL ends, which
    /// is what a restart would find.
    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        if self.permits.state(permit).loaded && self.permits.state(permit).last != token {
            return Ok(());
        }
        inner
            .conn
            .prepare_cached(
                "UPDATE fences SET released = 1, expires = NULL
                 WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND permit = ?4 AND token = ?5",
            )?
            .execute(params![inner.tenant, permit.kind, permit.value, permit.index, token as i64])?;
        MemoryFencing::end(self.permits.state(permit), token);
        Ok(())
    }

    fn ended(&mut self, permit: Permit<'_>, token: u64) -> Result<bool, StoreError> {
        let inner = lock(&self.inner);
        Ok(read_row(&inner, permit)?.is_some_and(|row| row.token > token || (row.token == token && row.released)))
    }
}
