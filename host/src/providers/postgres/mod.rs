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
//!   locks the usage rows of the resource and of the acquire's context,
//!   judges the claim in each over every process's grants of the last
//!   minute, grants and counts (one round trip);
//! - checkpoints and log appends carry the writer's owner epoch and are
//!   refused by the database once the epoch moved on (I3, I4);
//! - tenant ownership (sharded mode) is an owner row with a strictly
//!   increasing epoch and an expiry on the database clock.
//!
//! The schema is created and upgraded by the migrations in `host/migrations`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ::postgres::types::ToSql;
use ::postgres::{Client, Config, NoTls, Row, Statement};
use repute_core::{Command, GrantAnswer, RateLimit, SECOND};

use super::fencing::{Fencing, Permit};
use super::owners::{owner_margin, Claim, OwnerStore};
use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use super::usage::RESOURCE_SCOPE;
use super::{Backend, Clock, Providers};
use crate::error::StoreError;
use crate::ownership::Ownership;

/// Schema versions in order; each runs once, in one transaction.
const MIGRATIONS: &[(i32, &str)] =
    &[(1, include_str!("../../../migrations/0001_init.sql")), (2, include_str!("../../../migrations/0002_limits.sql"))];

/// Any lock number, the same in every process: serialises migrations.
const MIGRATION_LOCK: i64 = 0x7265_7075_7465;

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("postgres: {e}"))
}

/// One connection, opened again after it broke (server restart, cut
/// network). Calls are bounded by the connection's timeouts, so a dead peer
/// surfaces as an error instead of a hang.
struct Link {
    config: Config,
    client: Option<(Client, Statements)>,
}

/// Statements prepared on the current connection. A statement sent as text
/// costs a second round trip (parse, then execute) on every call; prepared
/// once, each call is one round trip.
type Statements = HashMap<&'static str, Statement>;

/// The current connection as a call sees it.
struct Session<'a> {
    client: &'a mut Client,
    statements: &'a mut Statements,
}

impl Session<'_> {
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, ::postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    fn query(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query(&statement, params)
    }

    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query_opt(&statement, params)
    }

    fn query_one(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query_one(&statement, params)
    }

    fn execute(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.execute(&statement, params)
    }
}

impl Link {
    fn run<T>(&mut self, f: impl FnOnce(&mut Session<'_>) -> Result<T, ::postgres::Error>) -> Result<T, StoreError> {
        if self.client.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            self.client = None;
            self.client = Some((self.config.connect(NoTls).map_err(unavailable)?, Statements::new()));
        }
        let (client, statements) = self.client.as_mut().expect("connected above");
        f(&mut Session { client, statements })
            .inspect_err(|e| {
                // Only a refusal by the server leaves the session usable.
                if e.as_db_error().is_none() {
                    self.client = None;
                }
            })
            .map_err(unavailable)
    }
}

impl Drop for Link {
    /// Closing a connection blocks on its own runtime, which tokio forbids
    /// on a thread that drives async tasks: there, it is closed on a thread
    /// of its own.
    fn drop(&mut self) {
        if let Some((client, _)) = self.client.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new().name("repute-pg-close".into()).spawn(move || drop(client));
            }
        }
    }
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
        Ok(Providers::postgres(self, tenant, epoch, clock))
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
            .options("-c statement_timeout=5000 -c lock_timeout=5000")
            .application_name("repute");
        let db = Postgres { config: Arc::new(config) };
        db.link().run(|s| migrate(s.client))?;
        Ok(db)
    }

    fn link(&self) -> Link {
        Link { config: (*self.config).clone(), client: None }
    }

    /// The tenant's storage and lease authority, writing under `epoch` (the
    /// owner epoch from [`Postgres::claim`]; 0 in shared mode, where no
    /// process owns the tenant).
    pub fn tenant(&self, tenant: &str, epoch: u64) -> (PgStorage, PgFencing) {
        let inner = Arc::new(Mutex::new(Inner { link: self.link(), tenant: tenant.to_owned(), epoch: epoch as i64 }));
        (PgStorage { inner: inner.clone() }, PgFencing { inner })
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

/// Nanoseconds as whole microseconds, PostgreSQL's interval resolution.
fn micros(ns: u64) -> i64 {
    (ns / 1_000).min(i64::MAX as u64) as i64
}

/// Nanoseconds as microseconds rounded up: a gap the server may not shorten.
fn micros_up(ns: u64) -> i64 {
    ns.div_ceil(1_000).min(i64::MAX as u64) as i64
}

fn bigint(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

/// Checkpoints and the command log of one tenant.
pub struct PgStorage {
    inner: Arc<Mutex<Inner>>,
}

/// The permit table as the tenant's lease authority.
pub struct PgFencing {
    inner: Arc<Mutex<Inner>>,
}

impl Storage for PgStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let row = inner.link.run(|c| {
            c.query_opt("SELECT epoch, version, log_seq, bytes FROM repute_checkpoint WHERE tenant = $1", &[&tenant])
        })?;
        Ok(row.map(|r| Checkpoint {
            epoch: r.get::<_, i64>(0) as u64,
            version: r.get::<_, i64>(1) as u64,
            log_seq: r.get::<_, i64>(2) as u64,
            bytes: r.get(3),
        }))
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        let row = inner.link.run(|c| {
            c.query_one(
                "SELECT status, found FROM repute_save($1, $2, $3, $4, $5)",
                &[&tenant, &epoch, &(expected_version as i64), &(log_seq as i64), &bytes],
            )
        })?;
        let (status, found): (String, i64) = (row.get(0), row.get(1));
        match status.as_str() {
            "ok" => Ok(found as u64),
            "stale_epoch" => Err(StoreError::StaleEpoch { mine: epoch as u64, stored: found as u64 }),
            _ => Err(StoreError::Conflict { expected: expected_version, found: found as u64 }),
        }
    }

    fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
        let entry = encode_command(command)?;
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        // The position comes from the tenant row, locked until commit: no
        // entry becomes visible below one a reader has already seen. An
        // owner's append is refused once its epoch is no longer the tenant's.
        let row = inner.link.run(|c| {
            c.query_opt(
                "WITH pos AS (
                     INSERT INTO repute_tenant AS t (tenant, log_seq) VALUES ($1, 1)
                     ON CONFLICT (tenant) DO UPDATE SET log_seq = t.log_seq + 1
                     WHERE $2::bigint = 0 OR t.epoch = $2::bigint
                     RETURNING t.log_seq
                 )
                 INSERT INTO repute_log (tenant, seq, entry) SELECT $1, log_seq, $3::text::jsonb FROM pos RETURNING seq",
                &[&tenant, &epoch, &entry],
            )
        })?;
        match row {
            Some(r) => Ok(r.get::<_, i64>(0) as u64),
            None => {
                let stored = inner.link.run(|c| {
                    c.query_one("SELECT epoch FROM repute_tenant WHERE tenant = $1", &[&tenant])
                        .map(|r| r.get::<_, i64>(0))
                })?;
                Err(StoreError::StaleEpoch { mine: epoch as u64, stored: stored as u64 })
            }
        }
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let rows = inner.link.run(|c| {
            c.query(
                "SELECT seq, entry::text FROM repute_log WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&tenant, &(after as i64), &(limit as i64)],
            )
        })?;
        rows.iter()
            .map(|r| {
                let seq = r.get::<_, i64>(0) as u64;
                Ok(LogEntry { seq, command: decode_command(seq, r.get(1))? })
            })
            .collect()
    }

    /// A takeover raises the owner epoch, so the new owner's lease ids are
    /// above any the deposed one handed out (0 in shared mode: ids are per process).
    fn lease_id_floor(&self) -> u64 {
        (lock(&self.inner).epoch as u64) << 32
    }
}

impl Fencing for PgFencing {
    /// One statement: free (no unexpired lease) or refused; the new token is
    /// above both the stored one and the pool's `last`. An owner's grant
    /// also needs its epoch to still be the tenant's. A claim makes it the
    /// one call of `repute_claimed_grant` (see the migration): the same
    /// grant, judged and counted against the resource's limits and its
    /// context's under their usage rows' locks.
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        _now: u64,
        claim: Option<&repute_core::Claim>,
    ) -> Result<GrantAnswer, StoreError> {
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        let (index, last, ttl) = (permit.index as i32, last as i64, micros(ttl));
        let Some(claim) = claim else {
            let row = inner.link.run(|c| {
                c.query_opt(
                    "INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
                     SELECT $1, $2, $3, $4::integer, $5::bigint + 1, now() + $6::bigint * interval '1 microsecond'
                     WHERE $7::bigint = 0
                        OR EXISTS (SELECT 1 FROM repute_tenant t WHERE t.tenant = $1 AND t.epoch = $7::bigint)
                     ON CONFLICT (tenant, kind, value, permit) DO UPDATE
                     SET token = greatest(p.token, $5::bigint) + 1, expires_at = EXCLUDED.expires_at
                     WHERE p.expires_at <= now()
                     RETURNING token",
                    &[&tenant, &permit.kind, &permit.value, &index, &last, &ttl, &epoch],
                )
            })?;
            return Ok(row.map_or(GrantAnswer::Held, |r| GrantAnswer::Granted(r.get::<_, i64>(0) as u64)));
        };
        let l = &claim.limits;
        let (rpm, tpm) = (l.rpm.map(|r| r as i32), l.tpm.map(bigint));
        let (gap, max_uses, cost) = (l.min_interval.map(micros_up), l.max_uses.map(bigint), bigint(claim.cost));
        let (pc, context) = (&l.per_context, claim.context.as_ref().map(|c| c.as_str()));
        let (crpm, ctpm, cgap) = (pc.rpm.map(|r| r as i32), pc.tpm.map(bigint), pc.min_interval.map(micros_up));
        let row = inner.link.run(|c| {
            c.query_one(
                "SELECT status, found FROM repute_claimed_grant(
                     $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
                &[
                    &tenant,
                    &permit.kind,
                    &permit.value,
                    &index,
                    &last,
                    &ttl,
                    &epoch,
                    &rpm,
                    &tpm,
                    &gap,
                    &max_uses,
                    &cost,
                    &context,
                    &crpm,
                    &ctpm,
                    &cgap,
                ],
            )
        })?;
        let (status, found): (String, Option<i64>) = (row.get(0), row.get(1));
        let wait = |us: i64| (us.max(1) as u64).saturating_mul(1_000);
        Ok(match (status.as_str(), found) {
            ("granted", Some(token)) => GrantAnswer::Granted(token as u64),
            ("limited", Some(wait_us)) => GrantAnswer::Limited(Some(wait(wait_us))),
            ("context_limited", Some(wait_us)) => GrantAnswer::ContextLimited(wait(wait_us)),
            ("spent", _) => GrantAnswer::Limited(None),
            _ => GrantAnswer::Held,
        })
    }

    /// The grant's rows (in the resource's scope and, given, the
    /// context's) count `used` from now on; none once they were pruned.
    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        _reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let context = context.unwrap_or(RESOURCE_SCOPE);
        inner.link.run(|c| {
            c.execute(
                "UPDATE repute_grant SET cost = $6
                 WHERE tenant = $1 AND kind = $2 AND value = $3 AND permit = $4 AND token = $5
                   AND scope IN ($7, $8)",
                &[
                    &tenant,
                    &permit.kind,
                    &permit.value,
                    &(permit.index as i32),
                    &(token as i64),
                    &bigint(used),
                    &RESOURCE_SCOPE,
                    &context,
                ],
            )
        })?;
        Ok(())
    }

    /// Extends while `token` is still the permit's newest; a newer token
    /// than any issued is a lease restored from a snapshot and is adopted if
    /// nobody holds the permit (I5).
    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, _now: u64) -> Result<bool, StoreError> {
        if token == 0 {
            return Ok(false);
        }
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let row = inner.link.run(|c| {
            c.query_opt(
                "INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
                 VALUES ($1, $2, $3, $4::integer, $5::bigint, now() + $6::bigint * interval '1 microsecond')
                 ON CONFLICT (tenant, kind, value, permit) DO UPDATE
                 SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
                 WHERE p.token = EXCLUDED.token OR (p.token < EXCLUDED.token AND p.expires_at <= now())
                 RETURNING token",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32), &(token as i64), &micros(ttl)],
            )
        })?;
        Ok(row.is_some())
    }

    /// Revoked (its expiry set to `-infinity`), or superseded by a newer
    /// token: a checkpoint's lease that a new owner must not bring back.
    fn ended(&mut self, permit: Permit<'_>, token: u64) -> Result<bool, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let row = inner.link.run(|c| {
            c.query_opt(
                "SELECT token, expires_at = '-infinity' FROM repute_permit
                 WHERE tenant = $1 AND kind = $2 AND value = $3 AND permit = $4",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32)],
            )
        })?;
        Ok(row.is_some_and(|r| {
            let stored = r.get::<_, i64>(0) as u64;
            stored > token || (stored == token && r.get::<_, bool>(1))
        }))
    }

    /// Shared mode: one rate limit for every process, as a GCRA on the
    /// database clock (the theoretical arrival time of the next acquire is
    /// the tenant's row). An owner's own bucket is already exact.
    fn admit(&mut self, limit: &RateLimit) -> Result<Option<u64>, StoreError> {
        let mut inner = lock(&self.inner);
        if inner.epoch != 0 {
            return Ok(None);
        }
        let tenant = inner.tenant.clone();
        let interval = (SECOND as f64 / limit.rate / 1_000.0).ceil() as i64;
        let tolerance = interval.saturating_mul(limit.burst as i64);
        let wait_us: i64 = inner.link.run(|c| {
            c.query_one(
                "WITH take AS (
                     INSERT INTO repute_rate AS r (tenant, tat) VALUES ($1, now() + $2::bigint * interval '1 microsecond')
                     ON CONFLICT (tenant) DO UPDATE SET tat = greatest(r.tat, now()) + $2::bigint * interval '1 microsecond'
                     WHERE greatest(r.tat, now()) + $2::bigint * interval '1 microsecond' - now()
                           <= $3::bigint * interval '1 microsecond'
                     RETURNING 0::bigint AS wait
                 )
                 SELECT coalesce((SELECT wait FROM take), (
                     SELECT ceil(extract(epoch FROM greatest(r.tat, now()) + $2::bigint * interval '1 microsecond'
                                 - now() - $3::bigint * interval '1 microsecond') * 1e6)::bigint
                     FROM repute_rate r WHERE r.tenant = $1))",
                &[&tenant, &interval, &tolerance],
            )
            .map(|r| r.get(0))
        })?;
        Ok((wait_us > 0).then(|| wait_us as u64 * 1_000))
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        inner.link.run(|c| {
            c.execute(
                "UPDATE repute_permit SET expires_at = '-infinity'
                 WHERE tenant = $1 AND kind = $2 AND value = $3 AND permit = $4 AND token = $5",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32), &(token as i64)],
            )
        })?;
        Ok(())
    }
}

/// Tenant ownership for sharded mode: an owner row per tenant whose epoch
/// only grows and whose expiry is judged by the database clock.
pub struct PgOwners {
    link: Link,
}

impl OwnerStore for PgOwners {
    fn claim(&mut self, tenant: &str, owner: &str, address: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let sent = Instant::now();
        let ttl_us = ttl.as_micros() as i64;
        let row = self.link.run(|c| {
            c.query_opt(
                "INSERT INTO repute_tenant AS t (tenant, owner, address, epoch, expires_at)
                 VALUES ($1, $2, $3, 1, now() + $4::bigint * interval '1 microsecond')
                 ON CONFLICT (tenant) DO UPDATE
                 SET owner = EXCLUDED.owner, address = EXCLUDED.address, epoch = t.epoch + 1,
                     expires_at = EXCLUDED.expires_at
                 WHERE t.expires_at <= now() OR t.owner IS NULL OR t.owner = EXCLUDED.owner
                 RETURNING epoch",
                &[&tenant, &owner, &address, &ttl_us],
            )
        })?;
        if let Some(r) = row {
            return Ok(Claim::Owned { epoch: r.get::<_, i64>(0) as u64, deadline: sent + ttl - owner_margin(ttl) });
        }
        let r = self.link.run(|c| {
            c.query_one(
                "SELECT coalesce(owner, ''), coalesce(address, '') FROM repute_tenant WHERE tenant = $1",
                &[&tenant],
            )
        })?;
        Ok(Claim::Elsewhere { owner: r.get(0), address: r.get(1) })
    }

    fn renew(&mut self, tenant: &str, owner: &str, epoch: u64, ttl: Duration) -> Result<Option<Instant>, StoreError> {
        let sent = Instant::now();
        let n = self.link.run(|c| {
            c.execute(
                "UPDATE repute_tenant SET expires_at = now() + $4::bigint * interval '1 microsecond'
                 WHERE tenant = $1 AND owner = $2 AND epoch = $3::bigint AND expires_at > now()",
                &[&tenant, &owner, &(epoch as i64), &(ttl.as_micros() as i64)],
            )
        })?;
        Ok((n == 1).then(|| sent + ttl - owner_margin(ttl)))
    }

    fn resign(&mut self, tenant: &str, owner: &str, epoch: u64) -> Result<(), StoreError> {
        self.link.run(|c| {
            c.execute(
                "UPDATE repute_tenant SET owner = NULL, expires_at = '-infinity'
                 WHERE tenant = $1 AND owner = $2 AND epoch = $3",
                &[&tenant, &owner, &(epoch as i64)],
            )
        })?;
        Ok(())
    }
}
