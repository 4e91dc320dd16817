//! The permit table as the tenant's lease authority, and the shared rate
//! limit: each decision one statement (or one function call) under the
//! locks of the rows it reads, judged on the database clock (I1, I2, I6).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::postgres::fallible_iterator::FallibleIterator;

use repute_core::{GrantAnswer, RateLimit, Window, SECOND};

use super::link::Link;
use super::{lock, Inner};
use crate::error::StoreError;
use crate::providers::fencing::{Fencing, GroupCounts, Permit, Releases};
use crate::providers::usage::RESOURCE_SCOPE;

/// The permit table as the tenant's lease authority.
pub struct PgFencing {
    pub(super) inner: Arc<Mutex<Inner>>,
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

/// The refusal while the tenant's generation waits `wait_us` more µs (see
/// `repute_generation`).
fn recovering(wait_us: i64) -> StoreError {
    StoreError::Recovering { retry_after: (wait_us.max(1) as u64).saturating_mul(1_000) }
}

impl Fencing for PgFencing {
    /// One statement: free (no unexpired lease) or refused; the new token is
    /// above both the stored one and the pool's `last`. An owner's grant
    /// also needs its epoch to still be the tenant's. A claim makes it the
    /// one call of `repute_claimed_grant` (see the migrations): the same
    /// grant, judged and counted against the resource's limits (its minute
    /// and day), its context's and its groups' (their minute, day and live
    /// leases) under their usage rows' locks. Either is refused as stale,
    /// granting and counting nothing, while `view` is behind the tenant's
    /// last change of registrations or groups (`repute_viewed_grant`).
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        _now: u64,
        claim: Option<&repute_core::Claim>,
        view: u64,
    ) -> Result<GrantAnswer, StoreError> {
        let mut inner = lock(&self.inner);
        let (tenant, epoch) = (inner.tenant.clone(), inner.epoch);
        let (index, last, ttl, view) = (permit.index as i32, last as i64, micros(ttl), bigint(view));
        let Some(claim) = claim else {
            let grant = |c: &mut super::link::Session<'_>| {
                c.query_one(
                    "WITH v AS (
                         SELECT coalesce((SELECT changed_seq FROM repute_tenant WHERE tenant = $1), 0) > $8::bigint
                             AS stale
                     ), h AS (
                         SELECT r.floor, greatest(r.resume - (extract(epoch FROM now()) * 1000000)::bigint, 0) AS wait
                         FROM repute_generation r
                         WHERE r.tenant = $1 AND r.server = repute_server() AND r.ttl >= $6::bigint
                     ), g AS (
                         INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
                         SELECT $1, $2, $3, $4::integer, greatest($5::bigint, h.floor) + 1,
                                now() + $6::bigint * interval '1 microsecond'
                         FROM h
                         WHERE h.wait = 0 AND NOT (SELECT stale FROM v)
                           AND ($7::bigint = 0
                             OR EXISTS (SELECT 1 FROM repute_tenant t WHERE t.tenant = $1 AND t.epoch = $7::bigint))
                         ON CONFLICT (tenant, kind, value, permit) DO UPDATE
                         SET token = greatest(p.token, EXCLUDED.token - 1) + 1, expires_at = EXCLUDED.expires_at
                         WHERE p.expires_at <= now()
                         RETURNING token
                     )
                     SELECT (SELECT stale FROM v), (SELECT token FROM g), (SELECT wait FROM h)",
                    &[&tenant, &permit.kind, &permit.value, &index, &last, &ttl, &epoch, &view],
                )
            };
            let mut row = inner.link.run(grant)?;
            if !row.get::<_, bool>(0) && row.get::<_, Option<i64>>(2).is_none() {
                // No generation row names this server for a TTL this long:
                // start (or move to) this server's generation, then grant.
                inner
                    .link
                    .run(|c| c.query_one("SELECT 1 FROM repute_generation($1, $2, $3)", &[&tenant, &ttl, &view]))?;
                row = inner.link.run(grant)?;
            }
            let (stale, token, wait): (bool, Option<i64>, Option<i64>) = (row.get(0), row.get(1), row.get(2));
            return match (stale, token, wait) {
                (true, _, _) => Ok(GrantAnswer::Stale),
                (false, Some(token), _) => Ok(GrantAnswer::Granted(token as u64)),
                (false, None, Some(wait)) if wait > 0 => Err(recovering(wait)),
                (false, None, _) => Ok(GrantAnswer::Held),
            };
        };
        let l = &claim.limits;
        let (rpm, tpm) = (l.rpm.map(|r| r as i32), l.tpm.map(bigint));
        let (gap, max_uses, cost) = (l.min_interval.map(micros_up), l.max_uses.map(bigint), bigint(claim.cost));
        let (pc, context) = (&l.per_context, claim.context.as_ref().map(|c| c.as_str()));
        let (crpm, ctpm, cgap) = (pc.rpm.map(|r| r as i32), pc.tpm.map(bigint), pc.min_interval.map(micros_up));
        let (rpd, tpd) = (l.rpd.map(|r| r as i32), l.tpd.map(bigint));
        let groups = &claim.groups;
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        let grpm: Vec<Option<i32>> = groups.iter().map(|g| g.limits.rpm.map(|r| r as i32)).collect();
        let gtpm: Vec<Option<i64>> = groups.iter().map(|g| g.limits.tpm.map(bigint)).collect();
        let ggap: Vec<Option<i64>> = groups.iter().map(|g| g.limits.min_interval.map(micros_up)).collect();
        let grpd: Vec<Option<i32>> = groups.iter().map(|g| g.limits.rpd.map(|r| r as i32)).collect();
        let gtpd: Vec<Option<i64>> = groups.iter().map(|g| g.limits.tpd.map(bigint)).collect();
        let gconc: Vec<Option<i32>> = groups.iter().map(|g| g.concurrency.map(|c| c as i32)).collect();
        let row = inner.link.run(|c| {
            c.query_one(
                "SELECT status, found, grp FROM repute_viewed_grant(
                     $26, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                     $17, $18, $19, $20, $21, $22, $23, $24, $25)",
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
                    &rpd,
                    &tpd,
                    &names,
                    &grpm,
                    &gtpm,
                    &ggap,
                    &grpd,
                    &gtpd,
                    &gconc,
                    &view,
                ],
            )
        })?;
        let (status, found, group): (String, Option<i64>, Option<i32>) = (row.get(0), row.get(1), row.get(2));
        let wait = |us: i64| (us.max(1) as u64).saturating_mul(1_000);
        if let ("recovering", Some(wait_us)) = (status.as_str(), found) {
            return Err(recovering(wait_us));
        }
        Ok(match (status.as_str(), found) {
            ("granted", Some(token)) => GrantAnswer::Granted(token as u64),
            ("limited", Some(wait_us)) => GrantAnswer::Limited(Some(wait(wait_us))),
            ("context_limited", Some(wait_us)) => GrantAnswer::ContextLimited(wait(wait_us)),
            ("group_limited", Some(wait_us)) => GrantAnswer::GroupLimited(group.unwrap_or(0) as u32, wait(wait_us)),
            ("spent", _) => GrantAnswer::Limited(None),
            ("stale", _) => GrantAnswer::Stale,
            _ => GrantAnswer::Held,
        })
    }

    /// One call of `repute_reconcile`: the grant's minute rows (in the
    /// resource's scope and, given, the context's) count `used` from now
    /// on, none once they were pruned; the bucket rows holding it (the
    /// resource's day, its groups' windows) count `used` for `reserved`
    /// while it is its permit's newest claimed grant.
    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let context = context.unwrap_or(RESOURCE_SCOPE);
        inner.link.run(|c| {
            c.execute(
                "SELECT repute_reconcile($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &tenant,
                    &permit.kind,
                    &permit.value,
                    &(permit.index as i32),
                    &(token as i64),
                    &context,
                    &bigint(reserved),
                    &bigint(used),
                ],
            )
        })?;
        Ok(())
    }

    /// One statement for the whole list, on the database clock: the
    /// grants `repute_claimed_grant` would keep at `clock_timestamp()`
    /// (those made less than 60 s before it), read, not pruned.
    fn window(&mut self, resources: &[(&str, &str)], _now: u64) -> Result<Vec<Window>, StoreError> {
        if resources.is_empty() {
            return Ok(Vec::new());
        }
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let kinds: Vec<&str> = resources.iter().map(|r| r.0).collect();
        let values: Vec<&str> = resources.iter().map(|r| r.1).collect();
        let rows = inner.link.run(|c| {
            c.query(
                "SELECT count(g.at), coalesce(sum(g.cost), 0)::bigint
                 FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS r(kind, value, i)
                 LEFT JOIN repute_grant g
                   ON g.tenant = $1 AND g.kind = r.kind AND g.value = r.value AND g.scope = $4
                  AND g.at > clock_timestamp() - interval '60 seconds'
                 GROUP BY r.i ORDER BY r.i",
                &[&tenant, &kinds, &values, &RESOURCE_SCOPE],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| Window { grants: r.get::<_, i64>(0) as u64, tokens: r.get::<_, i64>(1) as u64 })
            .collect())
    }

    /// One statement for the whole list, on the database clock: the bucket
    /// rows `repute_judge_window` would keep at `now()` (whose newest grant
    /// has not left the window) and the group leases whose permit still
    /// holds their token unexpired, read, not pruned.
    fn groups(&mut self, names: &[&str], _now: u64) -> Result<Vec<GroupCounts>, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let rows = inner.link.run(|c| {
            c.query(
                "SELECT
                     coalesce(sum(b.grants) FILTER (WHERE b.span = 'minute'), 0)::bigint,
                     coalesce(sum(b.tokens) FILTER (WHERE b.span = 'minute'), 0)::bigint,
                     coalesce(sum(b.grants) FILTER (WHERE b.span = 'day'), 0)::bigint,
                     coalesce(sum(b.tokens) FILTER (WHERE b.span = 'day'), 0)::bigint,
                     (SELECT count(*) FROM repute_group_lease l JOIN repute_permit p
                        ON p.tenant = l.tenant AND p.kind = l.kind AND p.value = l.value AND p.permit = l.permit
                       AND p.token = l.token AND p.expires_at > now()
                      WHERE l.tenant = $1 AND l.grp = g.name)
                 FROM unnest($2::text[]) WITH ORDINALITY AS g(name, i)
                 LEFT JOIN repute_bucket b
                   ON b.tenant = $1 AND b.kind = '' AND b.value = g.name AND b.scope = ''
                  AND ((b.span = 'minute' AND b.at > now() - interval '60 seconds')
                    OR (b.span = 'day' AND b.at > now() - interval '86400 seconds'))
                 GROUP BY g.i, g.name ORDER BY g.i",
                &[&tenant, &names],
            )
        })?;
        let count = |r: &::postgres::Row, i: usize| r.get::<_, i64>(i) as u64;
        Ok(rows
            .iter()
            .map(|r| GroupCounts {
                minute: Window { grants: count(r, 0), tokens: count(r, 1) },
                day: Window { grants: count(r, 2), tokens: count(r, 3) },
                leased: count(r, 4) as u32,
            })
            .collect())
    }

    /// Extends while `token` is still the permit's newest; a newer token
    /// than any issued is a lease restored from a snapshot and is adopted if
    /// nobody holds the permit (I5). A token below the tenant's generation
    /// floor was granted in a history the server may have lost, and never
    /// extends.
    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, _now: u64) -> Result<bool, StoreError> {
        if token == 0 {
            return Ok(false);
        }
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let row = inner.link.run(|c| {
            c.query_opt(
                "INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
                 SELECT $1, $2, $3, $4::integer, $5::bigint, now() + $6::bigint * interval '1 microsecond'
                 FROM repute_generation($1, $6::bigint, NULL) h
                 WHERE $5::bigint > h.floor
                 ON CONFLICT (tenant, kind, value, permit) DO UPDATE
                 SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
                 WHERE p.token = EXCLUDED.token OR (p.token < EXCLUDED.token AND p.expires_at <= now())
                 RETURNING token",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32), &(token as i64), &micros(ttl)],
            )
        })?;
        Ok(row.is_some())
    }

    /// Revoked (its expiry set to `-infinity`), superseded by a newer
    /// token, or granted below the tenant's generation floor (in a history
    /// the server may have lost): a checkpoint's lease that a new owner
    /// must not bring back.
    fn ended(&mut self, permit: Permit<'_>, token: u64) -> Result<bool, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let row = inner.link.run(|c| {
            c.query_one(
                "SELECT p.token, p.expires_at = '-infinity', (SELECT floor FROM repute_generation($1, 0, NULL))
                 FROM (SELECT 1) one
                 LEFT JOIN repute_permit p ON p.tenant = $1 AND p.kind = $2 AND p.value = $3 AND p.permit = $4",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32)],
            )
        })?;
        let (stored, revoked, floor): (Option<i64>, Option<bool>, i64) = (row.get(0), row.get(1), row.get(2));
        let below_floor = token as i64 <= floor;
        Ok(below_floor
            || stored.is_some_and(|stored| stored as u64 > token || (stored as u64 == token && revoked == Some(true))))
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

    /// One statement, on the database clock.
    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, _now: u64) -> Result<u32, StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        let (first, permits) = (first as i32, permits as i32);
        let row = inner.link.run(|c| {
            c.query_one(
                "SELECT count(*) FROM repute_permit
                 WHERE tenant = $1 AND kind = $2 AND value = $3 AND permit >= $4 AND permit < $5
                   AND expires_at > now()",
                &[&tenant, &kind, &value, &first, &permits],
            )
        })?;
        Ok(row.get::<_, i64>(0) as u32)
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        let tenant = inner.tenant.clone();
        inner.link.run(|c| {
            c.execute(
                "WITH released AS (
                     UPDATE repute_permit SET expires_at = '-infinity'
                     WHERE tenant = $1 AND kind = $2 AND value = $3 AND permit = $4 AND token = $5
                     RETURNING 1
                 )
                 SELECT pg_notify('repute_freed', $1) FROM released
                 WHERE EXISTS (SELECT 1 FROM repute_line WHERE tenant = $1 AND alive_until > now())",
                &[&tenant, &permit.kind, &permit.value, &(permit.index as i32), &(token as i64)],
            )
        })?;
        Ok(())
    }

    fn releases(&self) -> Option<Box<dyn Releases>> {
        let inner = lock(&self.inner);
        let (config, tenant) = (inner.link.config.clone(), inner.tenant.clone());
        Some(Box::new(PgReleases { link: Link { config, client: None }, tenant, listening: false }))
    }
}

/// The tenant's releases as notifications on the channel `repute_freed`
/// (see the migration `0007_lines`), heard on a connection of their own.
struct PgReleases {
    link: Link,
    tenant: String,
    /// The connection listens: false again once it broke.
    listening: bool,
}

impl Releases for PgReleases {
    fn next(&mut self, at_most: Duration) -> Result<bool, StoreError> {
        if self.link.client.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            self.listening = false;
        }
        if !self.listening {
            self.link.run(|c| c.client.batch_execute("LISTEN repute_freed"))?;
            self.listening = true;
        }
        let tenant = &self.tenant;
        self.link.run(|c| {
            let mut heard = c.client.notifications();
            let mut notes = heard.timeout_iter(at_most);
            while let Some(note) = notes.next()? {
                if note.payload() == tenant {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }
}
