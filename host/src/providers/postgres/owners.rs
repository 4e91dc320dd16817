//! Tenant ownership in the database (sharded mode).

use std::time::{Duration, Instant};

use super::link::Link;
use crate::error::StoreError;
use crate::providers::owners::{owner_margin, Claim, OwnerStore};

/// Tenant ownership for sharded mode: an owner row per tenant whose epoch
/// only grows and whose expiry is judged by the database clock.
pub struct PgOwners {
    pub(super) link: Link,
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

    fn owner(&mut self, tenant: &str) -> Result<Option<String>, StoreError> {
        let row = self.link.run(|c| {
            c.query_opt(
                "SELECT address FROM repute_tenant WHERE tenant = $1 AND owner IS NOT NULL AND expires_at > now()",
                &[&tenant],
            )
        })?;
        Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
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
