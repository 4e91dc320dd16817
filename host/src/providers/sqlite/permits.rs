//! The permit table as the tenant's lease authority: every decision is
//! made in memory and committed to the table in the same transaction as
//! the grant, renewal or release it records.

use std::sync::{Arc, Mutex};

use repute_core::{Claim, GrantAnswer, Window, WINDOW};
use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::{lock, Inner};
use crate::error::StoreError;
use crate::providers::fencing::{Fencing, MemoryFencing, Permit};
use crate::providers::usage::{self, Grant, Usage, UsageState, RESOURCE_SCOPE};

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

opaque_debug!(SqliteFencing);

impl SqliteFencing {
    pub(super) fn new(inner: Arc<Mutex<Inner>>) -> SqliteFencing {
        SqliteFencing { inner, permits: MemoryFencing::default(), anchor: None }
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

    /// On the limits clock, from the window this process loaded, else
    /// from the tables; nothing is written, nor loaded for later.
    fn window(&mut self, resources: &[(&str, &str)], now: u64) -> Result<Vec<Window>, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        let at = self.limits_now(now);
        let mut out = Vec::with_capacity(resources.len());
        for &(kind, value) in resources {
            let window = match self.permits.own_usage(kind, value).filter(|state| state.loaded) {
                Some(state) => state.usage.window_at(at),
                None => read_usage(&inner, Permit { kind, value, index: 0 }, RESOURCE_SCOPE)?.window_at(at),
            };
            out.push(window);
        }
        Ok(out)
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
