//! Plain JavaScript objects for what the pool reports: leases, cells,
//! resources, quota groups, stats. Instants are ms on the pool's clock (`pool.now()`);
//! beside each a `*UnixMs` field gives its Unix time in ms (as
//! `Date.now()`), mapped when the view was made (see `repute_host::Wall`).

use std::collections::BTreeMap;

use napi_derive::napi;
use repute_host::{
    Block, CellView, Context, GroupLimits, GroupView, Lease, LeaseKind, Limits, ResourceId, ResourceView, Stats, Wall,
    Window,
};

use crate::units::ns_to_ms;

/// A lease as the JavaScript `Lease` class is built from. `id` and `token`
/// are `u64` and so arrive as BigInt, exactly.
#[napi(object, object_from_js = false)]
pub struct LeaseData {
    pub id: u64,
    pub token: u64,
    pub kind: String,
    pub value: String,
    pub context: String,
    pub permit: u32,
    /// `client`, `trial` (a half-open trial) or `probe`.
    pub lease_kind: &'static str,
    pub granted_at_ms: f64,
    pub granted_at_unix_ms: f64,
    pub expires_at_ms: f64,
    pub expires_at_unix_ms: f64,
    pub ttl_ms: f64,
    /// When the holder must stop trusting the lease (I7): the clock reading
    /// taken before the grant or renewal was sent, plus the TTL, minus the
    /// margin. Absent for leases that were listed, not granted, here.
    pub deadline_ms: Option<f64>,
}

impl LeaseData {
    pub(crate) fn new(lease: &Lease, deadline: Option<u64>, wall: &Wall) -> Self {
        LeaseData {
            id: lease.id,
            token: lease.token,
            kind: lease.resource.kind().to_owned(),
            value: lease.resource.value().to_owned(),
            context: lease.context.as_str().to_owned(),
            permit: lease.permit,
            lease_kind: match lease.kind {
                LeaseKind::Client => "client",
                LeaseKind::Trial => "trial",
                LeaseKind::Probe => "probe",
                LeaseKind::FailOpen => "fail_open",
            },
            granted_at_ms: ns_to_ms(lease.granted_at),
            granted_at_unix_ms: wall.unix_ms(lease.granted_at),
            expires_at_ms: ns_to_ms(lease.expires_at),
            expires_at_unix_ms: wall.unix_ms(lease.expires_at),
            ttl_ms: ns_to_ms(lease.ttl),
            deadline_ms: deadline.map(ns_to_ms),
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct BlockInfo {
    /// Absent for a block that lasts until it is lifted.
    pub until_ms: Option<f64>,
    pub until_unix_ms: Option<f64>,
    pub reason: Option<String>,
}

fn block(b: Option<&Block>, wall: &Wall) -> Option<BlockInfo> {
    b.map(|b| BlockInfo {
        until_ms: b.until.map(ns_to_ms),
        until_unix_ms: b.until.map(|t| wall.unix_ms(t)),
        reason: b.reason.clone(),
    })
}

#[napi(object, object_from_js = false)]
pub struct CellInfo {
    /// Absent for the global layer.
    pub context: Option<String>,
    pub state: &'static str,
    pub score: i32,
    pub effective_score: f64,
    pub consecutive_failures: u32,
    pub consecutive_successes: u32,
    pub cooling_until_ms: Option<f64>,
    pub cooling_until_unix_ms: Option<f64>,
    pub cause: Option<&'static str>,
    pub half_open: bool,
    pub due_for_probe: bool,
    pub success_rate: Option<f64>,
    pub latency_ms: f64,
    pub observations: f64,
    pub block: Option<BlockInfo>,
}

impl CellInfo {
    pub(crate) fn new(c: CellView, wall: &Wall) -> Self {
        CellInfo {
            context: c.context.map(|x| x.as_str().to_owned()),
            state: c.state.as_str(),
            score: c.score,
            effective_score: c.effective_score,
            consecutive_failures: c.consecutive_failures,
            consecutive_successes: c.consecutive_successes,
            cooling_until_ms: c.cooling_until.map(ns_to_ms),
            cooling_until_unix_ms: c.cooling_until.map(|t| wall.unix_ms(t)),
            cause: c.cause.map(|k| k.as_str()),
            half_open: c.half_open,
            due_for_probe: c.due_for_probe,
            success_rate: c.success_rate,
            latency_ms: c.latency_ms,
            observations: c.observations as f64,
            block: block(c.block.as_ref(), wall),
        }
    }
}

/// A resource's usage limits, the ones it has (as `register` takes them).
#[napi(object, object_from_js = false)]
pub struct LimitsInfo {
    pub rpm: Option<u32>,
    pub tpm: Option<f64>,
    pub rpd: Option<u32>,
    pub tpd: Option<f64>,
    pub min_interval_ms: Option<f64>,
    pub max_uses: Option<f64>,
    pub max_age_ms: Option<f64>,
    /// Each context's own limits, when it has any.
    pub per_context: Option<ContextLimitsInfo>,
}

/// A resource's limits in each one context.
#[napi(object, object_from_js = false)]
pub struct ContextLimitsInfo {
    pub rpm: Option<u32>,
    pub tpm: Option<f64>,
    pub min_interval_ms: Option<f64>,
}

impl From<Limits> for LimitsInfo {
    fn from(l: Limits) -> Self {
        let c = l.per_context;
        LimitsInfo {
            rpm: l.rpm,
            tpm: l.tpm.map(|n| n as f64),
            rpd: l.rpd,
            tpd: l.tpd.map(|n| n as f64),
            min_interval_ms: l.min_interval.map(ns_to_ms),
            max_uses: l.max_uses.map(|n| n as f64),
            max_age_ms: l.max_age.map(ns_to_ms),
            per_context: c.counted().then(|| ContextLimitsInfo {
                rpm: c.rpm,
                tpm: c.tpm.map(|n| n as f64),
                min_interval_ms: c.min_interval.map(ns_to_ms),
            }),
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct ResourceInfo {
    pub kind: String,
    pub value: String,
    pub permits: u32,
    /// By name; the resource's secret is never part of the view.
    pub labels: BTreeMap<String, String>,
    pub limits: LimitsInfo,
    /// Grants since it was registered, as its limits count them (`rpm`,
    /// `tpm`, `minIntervalMs` and `maxUses` do; without them it stays 0).
    pub uses: f64,
    /// Why its limits retired it: `max_uses` or `max_age`; absent while they have not.
    pub retired: Option<&'static str>,
    pub leased: u32,
    pub score: i32,
    pub contexts: u32,
    pub block: Option<BlockInfo>,
    /// The quota groups it belongs to, as registered.
    pub groups: Vec<String>,
}

impl ResourceInfo {
    pub(crate) fn new(r: ResourceView, wall: &Wall) -> Self {
        ResourceInfo {
            kind: r.resource.kind().to_owned(),
            value: r.resource.value().to_owned(),
            permits: r.permits,
            labels: r.labels.iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect(),
            limits: r.limits.into(),
            uses: r.uses as f64,
            retired: r.retired.map(|r| r.as_str()),
            leased: r.leased,
            score: r.score,
            contexts: r.contexts,
            block: block(r.block.as_ref(), wall),
            groups: r.groups.iter().map(|g| g.as_str().to_owned()).collect(),
        }
    }
}

/// A quota group's limits, the ones it has (as `setGroup` takes them).
#[napi(object, object_from_js = false)]
pub struct GroupLimitsInfo {
    pub rpm: Option<u32>,
    pub tpm: Option<f64>,
    pub rpd: Option<u32>,
    pub tpd: Option<f64>,
    pub concurrency: Option<u32>,
    pub shared_quota: bool,
}

impl From<GroupLimits> for GroupLimitsInfo {
    fn from(l: GroupLimits) -> Self {
        GroupLimitsInfo {
            rpm: l.rpm,
            tpm: l.tpm.map(|n| n as f64),
            rpd: l.rpd,
            tpd: l.tpd.map(|n| n as f64),
            concurrency: l.concurrency,
            shared_quota: l.shared_quota,
        }
    }
}

/// What a window holds: grants and the tokens they count.
#[napi(object, object_from_js = false)]
pub struct WindowInfo {
    pub grants: f64,
    pub tokens: f64,
}

impl From<Window> for WindowInfo {
    fn from(w: Window) -> Self {
        WindowInfo { grants: w.grants as f64, tokens: w.tokens as f64 }
    }
}

/// A quota group: resources that share limits (`setGroup`).
#[napi(object, object_from_js = false)]
pub struct GroupInfo {
    pub name: String,
    pub limits: GroupLimitsInfo,
    /// Registered members.
    pub members: u32,
    /// Live leases of its members.
    pub leased: u32,
    /// What its members' grants hold of the current 60 s window.
    pub usage: WindowInfo,
    /// What they hold of the current rolling day.
    pub day_usage: WindowInfo,
    /// No member is selected before this (a full window, or a shared
    /// quota's pause); absent when none holds them back.
    pub limited_until_ms: Option<f64>,
    pub limited_until_unix_ms: Option<f64>,
}

impl GroupInfo {
    pub(crate) fn new(g: GroupView, wall: &Wall) -> Self {
        GroupInfo {
            name: g.name.as_str().to_owned(),
            limits: g.limits.into(),
            members: g.members,
            leased: g.leased,
            usage: g.window.into(),
            day_usage: g.day.into(),
            limited_until_ms: g.limited_until.map(ns_to_ms),
            limited_until_unix_ms: g.limited_until.map(|t| wall.unix_ms(t)),
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct StatsInfo {
    pub resources: u32,
    pub cells: u32,
    pub contexts: u32,
    pub live_leases: u32,
    pub available: u32,
    pub due_for_probe: u32,
    pub now_ms: f64,
    /// Log entries folded or written that did not apply.
    pub refused_entries: i64,
}

impl From<Stats> for StatsInfo {
    fn from(s: Stats) -> Self {
        StatsInfo {
            resources: s.resources,
            cells: s.cells,
            contexts: s.contexts,
            live_leases: s.live_leases,
            available: s.available,
            due_for_probe: s.due_for_probe,
            now_ms: ns_to_ms(s.now),
            refused_entries: s.refused_entries.min(i64::MAX as u64) as i64,
        }
    }
}

/// A cell waiting for a probe.
#[napi(object, object_from_js = false)]
pub struct ProbeTarget {
    pub kind: String,
    pub value: String,
    pub context: String,
}

impl From<(ResourceId, Context)> for ProbeTarget {
    fn from((r, c): (ResourceId, Context)) -> Self {
        ProbeTarget { kind: r.kind().to_owned(), value: r.value().to_owned(), context: c.as_str().to_owned() }
    }
}
