//! The serialized state: records of a pool's parts, taken from a pool and
//! built back into one with every value checked.

use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::id::{Context, ResourceId};
use crate::labels::Labels;
use crate::lease::{Lease, LeaseEntry, LeaseKind};
use crate::limits::{Limits, RetireReason};
use crate::outcome::FailureKind;
use crate::permits::Permits;
use crate::policy::Policy;
use crate::pool::{ContextCell, Pool, Registry, Timer, MAX_LIMITED_GROUPS, MAX_PERMITS};
use crate::quota::{self, GroupLimits, GroupName};
use crate::ratelimit::Bucket;
use crate::rng::Rng;
use crate::secret::Secret;
use crate::usage::{Buckets, Entry, Usage, MAX_WINDOW_ENTRIES};

use super::cell::{
    block_in, block_out, cell_in, cell_out, pause_in, pause_out, BlockRecord, CellRecordData, PauseRecord,
};
use super::{counter, counters, invalid, SnapshotError};

/// The serialized state. Field order is part of the binary format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SnapshotData {
    pub(super) policy: Policy,
    rng: Rng,
    next_lease_id: u64,
    pub(super) rate_tokens: Option<f64>,
    resources: Vec<ResourceRecord>,
    cells: Vec<CellRecord>,
    retired_fences: Vec<(ResourceId, Vec<u64>)>,
    leases: Option<Vec<LeaseRecord>>,
    /// The quota groups with limits.
    #[serde(default)]
    groups: Vec<GroupRecord>,
}

/// A quota group with limits, times as remaining durations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GroupRecord {
    name: GroupName,
    limits: GroupLimits,
    usage: UsageRecord,
    limited_remaining: Option<u64>,
    paused_remaining: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ResourceRecord {
    resource: ResourceId,
    permits: u32,
    fences: Vec<u64>,
    block: Option<BlockRecord>,
    pause: Option<PauseRecord>,
    global: CellRecordData,
    #[serde(default)]
    labels: Labels,
    /// Kept in the binary form only: the JSON view writes none.
    #[serde(default)]
    secret: Option<Secret>,
    #[serde(default)]
    limits: Limits,
    /// Time since registration.
    #[serde(default)]
    age: u64,
    #[serde(default)]
    usage: UsageRecord,
    #[serde(default)]
    limited_remaining: Option<u64>,
    #[serde(default)]
    retired: Option<RetireReason>,
    /// The quota groups it belongs to.
    #[serde(default)]
    groups: Vec<GroupName>,
}

/// What a resource used of its limits, times as ages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct UsageRecord {
    /// The minute window, oldest first: (age, grants, tokens).
    window: Vec<(u64, u32, u64)>,
    /// The day window, oldest first: (age, grants, tokens).
    #[serde(default)]
    day: Vec<(u64, u32, u64)>,
    last_grant_age: Option<u64>,
    uses: u64,
}

/// A window's entries as (age, grants, tokens), oldest first. Entries are
/// dropped lazily: one that left the window is not written.
fn window_out<const SPAN: u64>(w: &Buckets<SPAN>, now: u64) -> Vec<(u64, u32, u64)> {
    let entries = w.entries().map(|e| (now.saturating_sub(e.at), e.grants, e.tokens));
    entries.filter(|&(age, _, _)| age < SPAN).collect()
}

fn usage_out(u: &Usage, now: u64) -> UsageRecord {
    UsageRecord {
        window: window_out(&u.minute, now),
        day: window_out(&u.day, now),
        last_grant_age: u.last_grant.map(|t| now.saturating_sub(t)),
        uses: u.uses,
    }
}

/// The fields of a usage record, named for a resource's, a cell's or a group's.
struct UsageFields {
    window: &'static str,
    day: &'static str,
    uses: &'static str,
}

const RESOURCE_USAGE: UsageFields =
    UsageFields { window: "resource.usage.window", day: "resource.usage.day", uses: "resource.usage.uses" };
const CELL_USAGE: UsageFields =
    UsageFields { window: "cell.usage.window", day: "cell.usage.day", uses: "cell.usage.uses" };
const GROUP_USAGE: UsageFields =
    UsageFields { window: "group.usage.window", day: "group.usage.day", uses: "group.usage.uses" };

/// A window from its record. Times before the restoring clock's origin
/// become its origin: later, so a restored window holds its grants at least
/// as long as it should.
fn window_in<const SPAN: u64>(
    entries: Vec<(u64, u32, u64)>,
    now: u64,
    field: &'static str,
) -> Result<Buckets<SPAN>, SnapshotError> {
    if entries.len() > MAX_WINDOW_ENTRIES {
        return Err(invalid(field, "must hold at most 1026 entries"));
    }
    let mut last_age = u64::MAX;
    for &(age, grants, _) in &entries {
        if grants == 0 || age > last_age || age >= SPAN {
            return Err(invalid(field, "must list grants of the window's span, oldest first"));
        }
        last_age = age;
    }
    let entries = entries.into_iter().map(|(age, grants, tokens)| {
        let at = now.saturating_sub(age);
        Entry { from: at, at, grants, tokens }
    });
    Buckets::from_entries(entries).ok_or(invalid(field, "tokens overflow"))
}

fn usage_in(u: UsageRecord, now: u64, fields: &UsageFields) -> Result<Usage, SnapshotError> {
    counter(u.uses, fields.uses)?;
    Ok(Usage {
        minute: window_in(u.window, now, fields.window)?,
        day: window_in(u.day, now, fields.day)?,
        last_grant: u.last_grant_age.map(|a| now.saturating_sub(a)),
        uses: u.uses,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CellRecord {
    resource: ResourceId,
    context: Context,
    cell: CellRecordData,
    block: Option<BlockRecord>,
    /// What grants for this context used of the resource's `per_context` limits.
    #[serde(default)]
    usage: UsageRecord,
    #[serde(default)]
    limited_remaining: Option<u64>,
    /// Until the next grant its learned pace allows.
    #[serde(default)]
    paced_remaining: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LeaseRecord {
    id: u64,
    resource: ResourceId,
    context: Context,
    permit: u32,
    token: u64,
    kind: LeaseKind,
    ttl: u64,
    /// Tokens it holds against its resource's `tpm`.
    #[serde(default)]
    cost: u64,
    #[serde(default)]
    counted_age: Option<u64>,
}

impl SnapshotData {
    /// Whether live leases were captured (the binary header's flag says so too).
    pub(super) fn has_leases(&self) -> bool {
        self.leases.is_some()
    }

    pub(super) fn capture(pool: &Pool, now: u64, with_leases: bool) -> SnapshotData {
        let mut resources: Vec<ResourceRecord> = pool
            .registry
            .iter()
            .map(|(slot, r)| ResourceRecord {
                resource: r.id.clone(),
                permits: r.permits.count() as u32,
                fences: r.permits.fences().to_vec(),
                block: block_out(&r.block, now),
                pause: pause_out(r.pause, now),
                global: cell_out(&r.global, now),
                labels: r.labels.clone(),
                secret: r.secret.clone(),
                limits: r.limits,
                age: now.saturating_sub(r.born),
                usage: usage_out(&r.usage, now),
                limited_remaining: r.limited.map(|l| l.saturating_sub(now)),
                retired: r.retired,
                groups: pool.group_names(slot),
            })
            .collect();
        resources.sort_by(|a, b| a.resource.cmp(&b.resource));
        let mut groups: Vec<GroupRecord> = pool
            .quota
            .iter()
            .filter(|(_, g)| g.limits.limiting())
            .map(|(_, g)| GroupRecord {
                name: g.name.clone(),
                limits: g.limits,
                usage: usage_out(&g.usage, now),
                limited_remaining: g.limited.map(|l| l.saturating_sub(now)),
                paused_remaining: g.paused.map(|p| p.saturating_sub(now)),
            })
            .collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        let mut cells: Vec<CellRecord> = pool
            .cells
            .iter()
            .map(|(&(slot, ctx), cc)| CellRecord {
                resource: pool.registry.res(slot).id.clone(),
                context: pool.contexts.name(ctx).clone(),
                cell: cell_out(&cc.cell, now),
                block: block_out(&cc.block, now),
                usage: usage_out(&cc.usage, now),
                limited_remaining: cc.limited.map(|l| l.saturating_sub(now)),
                paced_remaining: cc.paced.filter(|&p| p > now).map(|p| p - now),
            })
            .collect();
        cells.sort_by(|a, b| (&a.resource, &a.context).cmp(&(&b.resource, &b.context)));
        let leases = with_leases.then(|| {
            let mut l: Vec<LeaseRecord> = pool
                .leases
                .live
                .values()
                .map(|e| LeaseRecord {
                    id: e.lease.id,
                    resource: e.lease.resource.clone(),
                    context: e.lease.context.clone(),
                    permit: e.lease.permit,
                    token: e.lease.token,
                    kind: e.lease.kind,
                    ttl: e.lease.ttl,
                    cost: e.cost,
                    counted_age: e.counted_at.map(|t| now.saturating_sub(t)),
                })
                .collect();
            l.sort_by_key(|l| l.id);
            l
        });
        SnapshotData {
            policy: pool.policy.clone(),
            rng: pool.rng.clone(),
            next_lease_id: pool.leases.next_id,
            rate_tokens: pool.bucket.as_ref().map(|b| b.tokens),
            resources,
            cells,
            retired_fences: pool.registry.retired().map(|(k, v)| (k.clone(), v.clone())).collect(),
            leases,
            groups,
        }
    }

    /// Drops every resource's secret: for the JSON view, which people and
    /// tools read.
    pub(super) fn forget_secrets(&mut self) {
        for r in &mut self.resources {
            r.secret = None;
        }
    }

    /// The pool this data describes, its registrations numbered from `first_serial`.
    pub(super) fn build(self, now: u64, first_serial: u64) -> Result<Pool, SnapshotError> {
        self.policy.validate().map_err(|e| match e {
            Error::InvalidInput { field, rule } => invalid(field, rule),
            _ => SnapshotError::Malformed,
        })?;
        let id_err = |_| invalid("resource", "kind and value must be valid resource ids");
        let mut pool = Pool::empty(self.policy.clone(), self.rng, now);
        pool.registry = Registry::starting_at(first_serial);
        pool.leases.next_id = counter(self.next_lease_id, "next_lease_id")?.max(1);
        if let Some(max) = self.policy.max_resources {
            if self.resources.len() > max as usize {
                return Err(invalid("resources", "must not outnumber policy.max_resources"));
            }
        }
        if let Some(max) = self.policy.max_cells {
            if self.cells.len() > max as usize {
                return Err(invalid("cells", "must not outnumber policy.max_cells"));
            }
        }
        if let (Some(limit), Some(tokens)) = (self.policy.rate_limit, self.rate_tokens) {
            if !(tokens.is_finite() && tokens <= limit.burst as f64) {
                return Err(invalid("rate_tokens", "must be finite and at most the burst"));
            }
            pool.bucket = Some(Bucket { tokens, last: now });
        }
        if self.groups.len() > MAX_LIMITED_GROUPS {
            return Err(invalid("groups", "must hold at most 10000 groups"));
        }
        for g in self.groups {
            g.name.revalidate().map_err(|_| invalid("group.name", "must be a valid group name"))?;
            g.limits.validate().map_err(|_| invalid("group.limits", "must be valid group limits"))?;
            if !g.limits.limiting() {
                return Err(invalid("group.limits", "must limit something"));
            }
            if pool.quota.find(g.name.as_str()).is_some() {
                return Err(invalid("group", "listed twice"));
            }
            let slot = pool.quota.intern(&g.name);
            let group = pool.quota.group_mut(slot);
            group.limits = g.limits;
            group.usage = usage_in(g.usage, now, &GROUP_USAGE)?;
            group.limited = g.limited_remaining.map(|rem| now.saturating_add(rem).max(now + 1));
            group.paused = g.paused_remaining.map(|rem| now.saturating_add(rem).max(now + 1));
        }
        for r in self.resources {
            r.resource.revalidate().map_err(id_err)?;
            if !(1..=MAX_PERMITS).contains(&r.permits) {
                return Err(invalid("resource.permits", "must be in 1..=1024"));
            }
            if r.fences.len() < r.permits as usize {
                return Err(invalid("resource.fences", "one counter per permit at least"));
            }
            counters(&r.fences, "resource.fences")?;
            if pool.registry.find(&r.resource).is_some() {
                return Err(invalid("resource", "listed twice"));
            }
            let block = block_in(r.block, now)?;
            let pause = pause_in(r.pause, now, FailureKind::QuotaExhausted)?;
            let global = cell_in(r.global, now, &self.policy)?;
            r.labels.check().map_err(|_| invalid("resource.labels", "must be valid labels"))?;
            if let Some(secret) = &r.secret {
                secret.check().map_err(|_| invalid("resource.secret", "must be 1..=4096 bytes"))?;
            }
            let slot = pool.registry.restore(r.resource, Permits::new(r.permits, r.fences));
            let restored = pool.registry.res_mut(slot);
            restored.block = block;
            restored.pause = pause;
            restored.global = global;
            restored.labels = r.labels;
            restored.secret = r.secret;
            r.limits.validate().map_err(|_| invalid("resource.limits", "must be valid limits"))?;
            restored.limits = r.limits;
            restored.born = now.saturating_sub(r.age);
            restored.usage = usage_in(r.usage, now, &RESOURCE_USAGE)?;
            restored.limited = r.limited_remaining.map(|rem| now.saturating_add(rem).max(now + 1));
            restored.retired = r.retired;
            for g in &r.groups {
                g.revalidate().map_err(|_| invalid("resource.groups", "must be valid group names"))?;
            }
            quota::check_names(&r.groups)
                .map_err(|_| invalid("resource.groups", "must name at most 8 groups, each once"))?;
            pool.join_groups(slot, &r.groups);
        }
        for c in self.cells {
            c.context.revalidate().map_err(|_| invalid("cell.context", "must be a valid context"))?;
            let slot = pool.registry.find(&c.resource).ok_or(invalid("cell.resource", "must be registered"))?;
            let ctx = pool.contexts.intern(&c.context);
            let mut cell = ContextCell::new(cell_in(c.cell, now, &self.policy)?, block_in(c.block, now)?);
            cell.usage = usage_in(c.usage, now, &CELL_USAGE)?;
            cell.limited = c.limited_remaining.map(|rem| now.saturating_add(rem).max(now + 1));
            cell.paced = c.paced_remaining.map(|rem| now.saturating_add(rem).max(now + 1));
            if cell.paced > cell.limited {
                return Err(invalid("cell.paced_remaining", "must not be later than limited_remaining"));
            }
            if pool.cells.insert((slot, ctx), cell).is_some() {
                return Err(invalid("cell", "listed twice"));
            }
            pool.registry.res_mut(slot).contexts.push(ctx);
        }
        for (id, fences) in self.retired_fences {
            id.revalidate().map_err(id_err)?;
            if pool.registry.find(&id).is_some() {
                return Err(invalid("retired_fences", "must not name a registered resource"));
            }
            counters(&fences, "retired_fences")?;
            pool.registry.retire(id, fences);
        }
        for l in self.leases.unwrap_or_default() {
            let slot = pool.registry.find(&l.resource).ok_or(invalid("lease.resource", "must be registered"))?;
            l.context.revalidate().map_err(|_| invalid("lease.context", "must be a valid context"))?;
            if l.ttl == 0 {
                return Err(invalid("lease.ttl", "must be > 0"));
            }
            if l.id == 0 || l.id >= pool.leases.next_id || pool.leases.live.contains_key(&l.id) {
                return Err(invalid("lease.id", "must be unique and below next_lease_id"));
            }
            let r = pool.registry.res_mut(slot);
            let p = l.permit as usize;
            if p >= r.permits.count() || r.permits.holder(p).is_some() {
                return Err(invalid("lease.permit", "must be a free permit of the resource"));
            }
            if l.token == 0 || l.token > r.permits.fences()[p] {
                return Err(invalid("lease.token", "must be minted by the permit's fence counter"));
            }
            r.permits.hold(p, l.id);
            let lease = Lease {
                id: l.id,
                resource: l.resource,
                context: l.context,
                permit: l.permit,
                token: l.token,
                kind: l.kind,
                granted_at: now,
                expires_at: now.saturating_add(l.ttl),
                ttl: l.ttl,
            };
            let ctx = pool.contexts.id(&lease.context);
            if let Some(cc) = ctx.and_then(|c| pool.cells.get_mut(&(slot, c))) {
                match lease.kind {
                    LeaseKind::Trial => cc.trial = Some(lease.id),
                    LeaseKind::Probe => cc.probe = Some(lease.id),
                    LeaseKind::Client | LeaseKind::FailOpen => {}
                }
            }
            pool.timers.arm(lease.expires_at, Timer::Lease(lease.id));
            let counted_at = l.counted_age.map(|a| now.saturating_sub(a));
            pool.leases.live.insert(lease.id, LeaseEntry { lease, slot, ctx, cost: l.cost, counted_at });
        }
        pool.arm_timers();
        pool.restore_groups();
        Ok(pool)
    }
}
