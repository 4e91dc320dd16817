//! The permit table as the tenant's lease authority: every decision is
//! made in memory and committed to the table in the same transaction as
//! the grant, renewal or release it records.

use std::sync::{Arc, Mutex};

use repute_core::usage::{Buckets, Entry};
use repute_core::{Claim, GrantAnswer, Window, DAY, WINDOW};
use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::{lock, Inner};
use crate::error::StoreError;
use crate::providers::fencing::{Fencing, GroupLease, GroupState, MemoryFencing, Permit};
use crate::providers::usage::{self, Claimed, Counts, Grant, GroupUsage, Usage, UsageState, RESOURCE_SCOPE};

/// The kind under which a group's usage is kept: no resource's kind is
/// empty, so a group's name is never a resource's.
const GROUP_KIND: &str = "";

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
/// Usage limits count grants over a minute and a day, which a restart
/// must not forget, so their clock is wall time anchored once: the wall clock's
/// reading at this authority's first call, advanced by the tenant's clock
/// from then on. Within a process it moves with the tenant's monotonic
/// clock (no wall-clock step reaches it); across processes it continues
/// in unix time, so the next owner counts the grants of the last minute
/// and day before the restart as such. A group's `concurrency` counts
/// leases on the tenant's clock, as permits are held: after a restart the
/// group's leases are those of its permits' rows that are still held.
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
    if let Some((uses, last)) = read_head(inner, permit.kind, permit.value, scope)? {
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
    usage.day = read_buckets(inner, permit.kind, permit.value, scope, "day")?;
    Ok(usage)
}

/// The entries of one bucketed window (`span` 'minute' or 'day') of a scope.
fn read_buckets<const SPAN: u64>(
    inner: &Inner,
    kind: &str,
    value: &str,
    scope: &str,
    span: &str,
) -> rusqlite::Result<Buckets<SPAN>> {
    let mut stmt = inner.conn.prepare_cached(
        "SELECT first, at, grants, tokens FROM usage_bucket
         WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4 AND span = ?5 ORDER BY first",
    )?;
    let rows = stmt.query_map(params![inner.tenant, kind, value, scope, span], |r| {
        Ok(Entry {
            from: r.get::<_, i64>(0)? as u64,
            at: r.get::<_, i64>(1)? as u64,
            grants: r.get(2)?,
            tokens: r.get::<_, i64>(3)? as u64,
        })
    })?;
    let entries = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let corrupt = || rusqlite::Error::InvalidQuery;
    // Only ever the entries this authority wrote, at most 1026 of them.
    Buckets::from_entries(entries).ok_or_else(corrupt)
}

/// Writes `entry` of one bucketed window of a scope (the one a grant landed
/// in, see `usage::landing`) and drops the entries that left the window by `at`.
fn write_bucket(
    inner: &Inner,
    scope: (&str, &str, &str),
    span: (&str, u64),
    entry: Entry,
    at: u64,
) -> rusqlite::Result<()> {
    let (kind, value, scope) = scope;
    inner
        .conn
        .prepare_cached(
            "INSERT INTO usage_bucket (tenant, kind, value, scope, span, first, at, grants, tokens)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (tenant, kind, value, scope, span, first) DO UPDATE
             SET at = excluded.at, grants = excluded.grants, tokens = excluded.tokens",
        )?
        .execute(params![
            inner.tenant,
            kind,
            value,
            scope,
            span.0,
            int(entry.from),
            int(entry.at),
            entry.grants,
            int(entry.tokens)
        ])?;
    inner
        .conn
        .prepare_cached(
            "DELETE FROM usage_bucket
             WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4 AND span = ?5 AND at <= ?6",
        )?
        .execute(params![inner.tenant, kind, value, scope, span.0, int(at.saturating_sub(span.1))])?;
    Ok(())
}

/// A reconcile of the grant made at `at` in one bucketed window of a scope:
/// the entry holding it (if still kept) counts `used` for `reserved`.
fn reconcile_bucket(
    inner: &Inner,
    scope: (&str, &str, &str),
    span: &str,
    at: u64,
    reserved: u64,
    used: u64,
) -> rusqlite::Result<()> {
    let (kind, value, scope) = scope;
    inner
        .conn
        .prepare_cached(
            "UPDATE usage_bucket SET tokens = MAX(tokens - ?7, 0) + ?8
             WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4 AND span = ?5 AND first <= ?6 AND at >= ?6",
        )?
        .execute(params![inner.tenant, kind, value, scope, span, int(at), int(reserved), int(used)])?;
    Ok(())
}

/// Unsigned as SQLite's integer, saturating.
fn int(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

/// The head (grants ever, newest grant) of a scope's usage.
fn read_head(inner: &Inner, kind: &str, value: &str, scope: &str) -> rusqlite::Result<Option<(u64, u64)>> {
    inner
        .conn
        .prepare_cached("SELECT uses, last FROM usage WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND scope = ?4")?
        .query_row(params![inner.tenant, kind, value, scope], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
        .optional()
}

/// Counts one more grant made at `at` in a scope's head.
fn write_head(inner: &Inner, kind: &str, value: &str, scope: &str, at: u64) -> rusqlite::Result<()> {
    inner
        .conn
        .prepare_cached(
            "INSERT INTO usage (tenant, kind, value, scope, uses, last) VALUES (?1, ?2, ?3, ?4, 1, ?5)
             ON CONFLICT (tenant, kind, value, scope) DO UPDATE SET uses = uses + 1, last = MAX(last, excluded.last)",
        )?
        .execute(params![inner.tenant, kind, value, scope, int(at)])?;
    Ok(())
}

/// What the tables hold of group `name`: its usage and the leases granted with it.
fn read_group(inner: &Inner, name: &str) -> rusqlite::Result<GroupState> {
    let mut usage = GroupUsage::default();
    if let Some((uses, last)) = read_head(inner, GROUP_KIND, name, RESOURCE_SCOPE)? {
        usage.uses = uses;
        usage.last = Some(last);
    }
    usage.minute = read_buckets(inner, GROUP_KIND, name, RESOURCE_SCOPE, "minute")?;
    usage.day = read_buckets(inner, GROUP_KIND, name, RESOURCE_SCOPE, "day")?;
    let mut stmt = inner
        .conn
        .prepare_cached("SELECT kind, value, permit, token FROM group_lease WHERE tenant = ?1 AND grp = ?2")?;
    let leases = stmt
        .query_map(params![inner.tenant, name], |r| {
            Ok(GroupLease { kind: r.get(0)?, value: r.get(1)?, permit: r.get(2)?, token: r.get::<_, i64>(3)? as u64 })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(GroupState { usage, leases, loaded: true })
}

/// Separates a claimed grant's groups, and a group's name from its flags.
const RS: char = '\u{1e}';
const US: char = '\u{1f}';

/// The permit's newest claimed grant as the tables hold it.
fn read_claimed(inner: &Inner, permit: Permit<'_>) -> rusqlite::Result<Option<Claimed>> {
    inner
        .conn
        .prepare_cached(
            "SELECT token, at, day, groups FROM claimed WHERE tenant = ?1 AND kind = ?2 AND value = ?3 AND permit = ?4",
        )?
        .query_row(params![inner.tenant, permit.kind, permit.value, permit.index], |r| {
            let groups: String = r.get(3)?;
            let groups = groups.split(RS).filter(|g| !g.is_empty()).filter_map(|g| {
                let (name, flags) = g.split_once(US)?;
                let flags: u8 = flags.parse().ok()?;
                Some((name.to_owned(), Counts { minute: flags & 1 != 0, day: flags & 2 != 0 }))
            });
            Ok(Claimed {
                token: r.get::<_, i64>(0)? as u64,
                at: r.get::<_, i64>(1)? as u64,
                day: r.get(2)?,
                groups: groups.collect(),
            })
        })
        .optional()
}

/// Records the grant of `token` that `claim` made at `at` in its day and
/// its groups (the windows' entries it lands in, taken from `memory`,
/// which counts it after the commit), and as its permit's newest claimed
/// grant.
fn write_counts(
    inner: &Inner,
    memory: &mut MemoryFencing,
    permit: Permit<'_>,
    claim: &Claim,
    token: u64,
    at: u64,
) -> rusqlite::Result<()> {
    let cost = claim.cost;
    if claim.limits.daily() {
        let day = &memory.usage(permit).scope(RESOURCE_SCOPE).usage.day;
        let entry = usage::landing(day, cost, at);
        write_bucket(inner, (permit.kind, permit.value, RESOURCE_SCOPE), ("day", DAY), entry, at)?;
    }
    for g in &claim.groups {
        let name = g.name.as_str();
        let scope = (GROUP_KIND, name, RESOURCE_SCOPE);
        let group = &memory.group(name).usage;
        if g.limits.windowed() {
            write_bucket(inner, scope, ("minute", WINDOW), usage::landing(&group.minute, cost, at), at)?;
        }
        if g.limits.daily() {
            write_bucket(inner, scope, ("day", DAY), usage::landing(&group.day, cost, at), at)?;
        }
        if g.limits.counted() {
            write_head(inner, GROUP_KIND, name, RESOURCE_SCOPE, at)?;
        }
        if g.concurrency.is_some() {
            inner
                .conn
                .prepare_cached(
                    "INSERT INTO group_lease (tenant, grp, kind, value, permit, token) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (tenant, grp, kind, value, permit) DO UPDATE SET token = excluded.token",
                )?
                .execute(params![inner.tenant, name, permit.kind, permit.value, permit.index, int(token)])?;
        }
    }
    let claimed = Claimed::new(claim, token, at);
    let groups: Vec<String> = claimed
        .groups
        .iter()
        .map(|(name, c)| format!("{name}{US}{}", u8::from(c.minute) | (u8::from(c.day) << 1)))
        .collect();
    inner
        .conn
        .prepare_cached(
            "INSERT INTO claimed (tenant, kind, value, permit, token, at, day, groups)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (tenant, kind, value, permit) DO UPDATE
             SET token = excluded.token, at = excluded.at, day = excluded.day, groups = excluded.groups",
        )?
        .execute(params![
            inner.tenant,
            permit.kind,
            permit.value,
            permit.index,
            int(token),
            int(at),
            claimed.day,
            groups.join(&RS.to_string())
        ])?;
    Ok(())
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
        write_head(inner, kind, value, scope, at)?;
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

    /// What the authority keeps of each group of the claim, loaded from the
    /// tables the first time, with the permits of the leases granted with
    /// it (whose rows say which are still held).
    fn load_groups(&mut self, inner: &Inner, claim: &Claim, now: u64) -> Result<(), StoreError> {
        for g in &claim.groups {
            if self.permits.group(g.name.as_str()).loaded {
                continue;
            }
            let group = read_group(inner, g.name.as_str())?;
            for l in &group.leases {
                self.load(inner, Permit { kind: &l.kind, value: &l.value, index: l.permit }, now)?;
            }
            *self.permits.group(g.name.as_str()) = group;
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
        _view: u64,
    ) -> Result<GrantAnswer, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        self.load(&inner, permit, now)?;
        let at = self.limits_now(now);
        if let Some(claim) = claim {
            self.load_usage(&inner, permit, claim)?;
            self.load_groups(&inner, claim, now)?;
        }
        let token = match self.permits.decide(permit, last, now, claim.map(|c| (c, at))) {
            Ok(token) => token,
            Err(refused) => return Ok(refused),
        };
        match claim {
            Some(claim) => {
                let tx = Transaction::new_unchecked(&inner.conn, TransactionBehavior::Immediate)?;
                write_held(&inner, permit, token, ttl)?;
                write_usage(&inner, permit, claim, token, at)?;
                write_counts(&inner, &mut self.permits, permit, claim, token, at)?;
                tx.commit()?;
                self.permits.count(permit, claim, token, at);
            }
            None => write_held(&inner, permit, token, ttl)?,
        }
        MemoryFencing::take(self.permits.state(permit), token, ttl, now);
        Ok(GrantAnswer::Granted(token))
    }

    /// Committed first; the loaded windows follow. The day's and the
    /// groups' entries are found by the permit's newest claimed grant.
    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        let claimed = match self.permits.claimed(permit) {
            Some(claimed) => Some(claimed.clone()),
            None => read_claimed(&inner, permit)?,
        };
        let claimed = claimed.filter(|c| c.token == token);
        let tx = Transaction::new_unchecked(&inner.conn, TransactionBehavior::Immediate)?;
        if let Some(c) = &claimed {
            if c.day {
                let scope = (permit.kind, permit.value, RESOURCE_SCOPE);
                reconcile_bucket(&inner, scope, "day", c.at, reserved, used)?;
            }
            for (name, counts) in &c.groups {
                let scope = (GROUP_KIND, name.as_str(), RESOURCE_SCOPE);
                for (span, counted) in [("minute", counts.minute), ("day", counts.day)] {
                    if counted {
                        reconcile_bucket(&inner, scope, span, c.at, reserved, used)?;
                    }
                }
            }
        }
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
        tx.commit()?;
        self.permits.settle(permit, context, token, claimed.as_ref(), reserved, used);
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

    /// Each permit's row is read first where this process has not yet:
    /// a lease granted before a restart holds its permit until its TTL ends.
    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, now: u64) -> Result<u32, StoreError> {
        let inner = self.inner.clone();
        let inner = lock(&inner);
        for index in first..permits {
            self.load(&inner, Permit { kind, value, index }, now)?;
        }
        Ok(self.permits.held(kind, value, first, permits, now))
    }

    fn ended(&mut self, permit: Permit<'_>, token: u64) -> Result<bool, StoreError> {
        let inner = lock(&self.inner);
        Ok(read_row(&inner, permit)?.is_some_and(|row| row.token > token || (row.token == token && row.released)))
    }
}
