//! Checkpoints and the command log of one tenant, or of one partition of
//! it, conditional on the owner epoch in the database (I3, I4).

use std::sync::{Arc, Mutex};

use repute_core::Command;

use super::{lock, Inner};
use crate::error::StoreError;
use crate::partition::{context_hash, Partition};
use crate::providers::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};

/// Checkpoints and the command log of one tenant. A partition's storage
/// keeps its checkpoint under the partition's name, appends under the
/// partition's owner epoch, and reads of the tenant's log only the entries
/// about its own contexts and those every partition folds.
pub struct PgStorage {
    pub(super) inner: Arc<Mutex<Inner>>,
    pub(super) partition: Option<Partition>,
}

impl PgStorage {
    /// Whom checkpoints and the owner epoch belong to: the partition, or the tenant.
    fn owner(&self, inner: &Inner) -> String {
        self.partition.as_ref().map_or_else(|| inner.tenant.clone(), Partition::name)
    }
}

impl Storage for PgStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = self.owner(&inner);
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
        let (tenant, epoch) = (self.owner(&inner), inner.epoch);
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
        // The hash as the column holds it: the same 64 bits, signed.
        let hash = context_hash(command).map(|h| h as i64);
        let changes = command.changes_grants();
        let mut inner = lock(&self.inner);
        let (tenant, owner, epoch) = (inner.tenant.clone(), self.owner(&inner), inner.epoch);
        // The position comes from the tenant row, locked until commit: no
        // entry becomes visible below one a reader has already seen. The
        // row also keeps the position of the last change that grants are
        // judged against (see the migration `0005_views.sql`). An
        // owner's append is refused once its epoch is no longer that of
        // what it owns (the tenant, or its partition, whose row the append
        // holds shared so a takeover waits for it).
        let row = inner.link.run(|c| {
            c.query_opt(
                "WITH owner AS (
                     SELECT 1 FROM repute_tenant WHERE $2::bigint <> 0 AND tenant = $4 AND epoch = $2::bigint
                     FOR SHARE
                 ), pos AS (
                     INSERT INTO repute_tenant AS t (tenant, log_seq, changed_seq)
                     SELECT $1, 1, CASE WHEN $6 THEN 1 ELSE 0 END
                     WHERE $2::bigint = 0 OR EXISTS (SELECT 1 FROM owner)
                     ON CONFLICT (tenant) DO UPDATE SET log_seq = t.log_seq + 1,
                         changed_seq = CASE WHEN $6 THEN t.log_seq + 1 ELSE t.changed_seq END
                     RETURNING t.log_seq
                 )
                 INSERT INTO repute_log (tenant, seq, entry, ctx_hash)
                 SELECT $1, log_seq, $3::text::jsonb, $5 FROM pos RETURNING seq",
                &[&tenant, &epoch, &entry, &owner, &hash, &changes],
            )
        })?;
        match row {
            Some(r) => Ok(r.get::<_, i64>(0) as u64),
            None => {
                let stored = inner.link.run(|c| {
                    c.query_opt("SELECT epoch FROM repute_tenant WHERE tenant = $1", &[&owner])
                        .map(|r| r.map_or(0, |r| r.get::<_, i64>(0)))
                })?;
                Err(StoreError::StaleEpoch { mine: epoch as u64, stored: stored as u64 })
            }
        }
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        // Without a partition, every entry: index 0 of 1 folds them all.
        let (index, count) = self.partition.as_ref().map_or((0, 1), |p| (p.index as i32, p.count as i32));
        let rows = inner.link.run(|c| {
            c.query(
                "SELECT seq, entry::text FROM repute_log WHERE tenant = $1 AND seq > $2
                   AND ($4 = 1 OR ctx_hash IS NULL OR repute_partition(ctx_hash, $4) = $5)
                 ORDER BY seq LIMIT $3",
                &[&tenant, &(after as i64), &(limit as i64), &count, &index],
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
    /// above any the deposed one handed out (0 in shared mode: ids are per
    /// process); a partition's also name the partition.
    fn lease_id_floor(&self) -> u64 {
        let epoch = lock(&self.inner).epoch as u64;
        self.partition.as_ref().map_or(epoch << 32, |p| p.lease_floor(epoch))
    }
}
