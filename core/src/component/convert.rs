//! Conversions between the WIT types wit-bindgen generates and the core's:
//! `*_in` for what the host passes in (validated as the pool's own
//! constructors validate), `*_out` for what goes back.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::wit;
use crate::snapshot::SnapshotError;
use crate::{
    Block, CellState, CellView, Claim, Command, Context, ContextLimits, CoolingRule, Error, Event, EventKind,
    FailureKind, GrantAnswer, GroupClaim, GroupLimits, GroupName, GroupView, LabelFilter, Labels, Lease, LeaseKind,
    Limits, Outcome, Policy, Pool, Proposal, RateLimit, Recovery, Registration, RejectReason, ResourceId, ResourceKey,
    ResourceView, RetireReason, Secret, Selector, Stats, Strategy,
};

pub(super) fn id_in(r: &wit::ResourceId) -> Result<ResourceId, wit::Error> {
    ResourceId::new(r.kind.as_str(), r.value.as_str()).map_err(err_out)
}

pub(super) fn ctx_in(c: &str) -> Result<Context, wit::Error> {
    Context::new(c).map_err(err_out)
}

fn kind_in(k: wit::FailureKind) -> FailureKind {
    match k {
        wit::FailureKind::ConnectionReset => FailureKind::ConnectionReset,
        wit::FailureKind::TlsHandshake => FailureKind::TlsHandshake,
        wit::FailureKind::Timeout => FailureKind::Timeout,
        wit::FailureKind::Blocked => FailureKind::Blocked,
        wit::FailureKind::Slow => FailureKind::Slow,
        wit::FailureKind::RateLimited => FailureKind::RateLimited,
        wit::FailureKind::QuotaExhausted => FailureKind::QuotaExhausted,
        wit::FailureKind::AuthFailed => FailureKind::AuthFailed,
    }
}

pub(super) fn outcome_in(o: wit::Outcome) -> Result<Outcome, wit::Error> {
    match o {
        wit::Outcome::Success(latency) => Outcome::success(latency),
        wit::Outcome::Failure(f) => match f.retry_after {
            Some(wait) => Outcome::failure_retry_after(kind_in(f.kind), f.latency_ms, wait),
            None => Outcome::failure(kind_in(f.kind), f.latency_ms),
        },
    }
    .map_err(err_out)
}

pub(super) fn registration_in(r: &wit::Registration) -> Result<Registration, wit::Error> {
    let labels = Labels::new(r.labels.iter().map(|l| (l.name.clone(), l.value.clone()))).map_err(err_out)?;
    let secret = r.secret.as_ref().map(|s| Secret::new(s.as_str())).transpose().map_err(err_out)?;
    let groups = r.groups.iter().map(|g| group_name_in(g)).collect::<Result<Vec<_>, _>>()?;
    Ok(Registration { permits: r.permits, limits: limits_in(r.limits), labels, secret, groups })
}

pub(super) fn group_name_in(name: &str) -> Result<GroupName, wit::Error> {
    GroupName::new(name).map_err(err_out)
}

pub(super) fn group_limits_in(l: wit::GroupLimits) -> GroupLimits {
    GroupLimits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        concurrency: l.concurrency,
        shared_quota: l.shared_quota,
    }
}

fn group_limits_out(l: GroupLimits) -> wit::GroupLimits {
    wit::GroupLimits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        concurrency: l.concurrency,
        shared_quota: l.shared_quota,
    }
}

fn window_out(w: crate::Window) -> wit::UsageWindow {
    wit::UsageWindow { grants: w.grants, tokens: w.tokens }
}

pub(super) fn group_view_out(g: GroupView) -> wit::GroupView {
    wit::GroupView {
        name: g.name.as_str().into(),
        limits: group_limits_out(g.limits),
        members: g.members,
        leased: g.leased,
        window: window_out(g.window),
        day: window_out(g.day),
        limited_until: g.limited_until,
    }
}

fn labels_out(labels: &Labels) -> Vec<wit::Label> {
    labels.iter().map(|(name, value)| wit::Label { name: name.into(), value: value.into() }).collect()
}

/// A selector as the core takes it; the pool validates it.
pub(super) fn selector_in(s: wit::Selector) -> Selector {
    Selector {
        kind: s.kind,
        labels: s.labels.into_iter().map(|f| LabelFilter { name: f.name, values: f.values }).collect(),
        exclude: s.exclude,
        prefer: s.prefer,
        affinity: s.affinity,
        cost: s.cost,
    }
}

fn opt_ctx_in(c: &Option<String>) -> Result<Option<Context>, wit::Error> {
    c.as_deref().map(ctx_in).transpose()
}

/// A log entry as a command, validated like the call that made it.
pub(super) fn command_in(e: &wit::LogEntry) -> Result<Command, wit::Error> {
    Ok(match e {
        wit::LogEntry::Report(r) => Command::Report {
            resource: id_in(&r.resource)?,
            context: ctx_in(&r.context)?,
            outcome: outcome_in(r.outcome)?,
        },
        wit::LogEntry::Register(r) => {
            let Registration { permits, limits, labels, secret, groups } = registration_in(&r.registration)?;
            Command::Register { resource: id_in(&r.resource)?, permits, limits, labels, secret, groups }
        }
        wit::LogEntry::Unregister(r) => Command::Unregister { resource: id_in(&r.resource)?, force: r.force },
        wit::LogEntry::Block(b) => Command::Block {
            resource: id_in(&b.resource)?,
            context: opt_ctx_in(&b.context)?,
            duration: b.duration,
            reason: b.reason.clone(),
        },
        wit::LogEntry::Unblock(u) => {
            Command::Unblock { resource: id_in(&u.resource)?, context: opt_ctx_in(&u.context)? }
        }
        wit::LogEntry::SetGroup(g) => {
            Command::SetGroup { name: group_name_in(&g.name)?, limits: group_limits_in(g.limits) }
        }
    })
}

pub(super) fn strategy_in(s: wit::Strategy) -> Strategy {
    match s {
        wit::Strategy::Classic => Strategy::Classic,
        wit::Strategy::Thompson => Strategy::Thompson,
        wit::Strategy::First => Strategy::First,
    }
}

pub(super) fn policy_in(p: wit::Policy) -> Policy {
    Policy {
        strategy: strategy_in(p.strategy),
        window: p.window,
        cool_after: p.cool_after,
        recover_after: p.recover_after,
        max_exponent: p.max_exponent,
        exploration_floor: p.exploration_floor,
        lease_ttl: p.lease_ttl,
        probe_ttl: p.probe_ttl,
        decay: p.decay,
        max_resources: p.max_resources,
        max_cells: p.max_cells,
        rate_limit: p.rate_limit.map(|r| RateLimit { rate: r.rate, burst: r.burst }),
        recovery: match p.recovery {
            wit::Recovery::Traffic => Recovery::Traffic,
            wit::Recovery::Probe => Recovery::Probe,
            wit::Recovery::Classic => Recovery::Classic,
        },
        fail_open: p.fail_open,
        rules: p
            .rules
            .into_iter()
            .map(|r| {
                (kind_in(r.kind), CoolingRule { base: r.base, cool_after: r.cool_after, max_exponent: r.max_exponent })
            })
            .collect(),
    }
}

pub(super) fn id_out(r: &ResourceId) -> wit::ResourceId {
    wit::ResourceId { kind: r.kind().into(), value: r.value().into() }
}

fn kind_out(k: FailureKind) -> wit::FailureKind {
    match k {
        FailureKind::ConnectionReset => wit::FailureKind::ConnectionReset,
        FailureKind::TlsHandshake => wit::FailureKind::TlsHandshake,
        FailureKind::Timeout => wit::FailureKind::Timeout,
        FailureKind::Blocked => wit::FailureKind::Blocked,
        FailureKind::Slow => wit::FailureKind::Slow,
        FailureKind::RateLimited => wit::FailureKind::RateLimited,
        FailureKind::QuotaExhausted => wit::FailureKind::QuotaExhausted,
        FailureKind::AuthFailed => wit::FailureKind::AuthFailed,
    }
}

fn invalid_out(field: &str, rule: &str) -> wit::InvalidInput {
    wit::InvalidInput { field: field.to_string(), rule: rule.to_string() }
}

pub(super) fn err_out(e: Error) -> wit::Error {
    match e {
        Error::InvalidInput { field, rule } => wit::Error::InvalidInput(invalid_out(field, rule)),
        Error::UnknownResource => wit::Error::UnknownResource,
        Error::UnknownLease => wit::Error::UnknownLease,
        Error::StaleLease => wit::Error::StaleLease,
        Error::LeaseExpired => wit::Error::LeaseExpired,
        Error::Blocked => wit::Error::Blocked,
        Error::NoResourceAvailable(r) => wit::Error::NoResourceAvailable(wit::Refusal {
            registered: r.registered,
            blocked: r.blocked,
            rate_limited: r.rate_limited,
            cooling: r.cooling,
            leased: r.leased,
            limited: r.limited,
            retry_after: r.retry_after,
            expected_after: r.expected_after,
            settled: r.settled,
        }),
        Error::Leased { live } => wit::Error::Leased(live),
        Error::BudgetExhausted { budget, limit } => {
            wit::Error::BudgetExhausted(wit::Budget { name: budget.to_string(), limit })
        }
        Error::RateLimited { retry_after } => wit::Error::RateLimited(retry_after),
        Error::Snapshot(s) => wit::Error::Snapshot(match s {
            SnapshotError::Truncated => wit::SnapshotError::Truncated,
            SnapshotError::Foreign => wit::SnapshotError::Foreign,
            SnapshotError::UnsupportedVersion { found, supported } => {
                wit::SnapshotError::UnsupportedVersion(wit::VersionMismatch { found, supported })
            }
            SnapshotError::Checksum => wit::SnapshotError::Checksum,
            SnapshotError::Malformed => wit::SnapshotError::Malformed,
            SnapshotError::Invalid { field, rule } => wit::SnapshotError::Invalid(invalid_out(field, rule)),
        }),
    }
}

fn lease_kind_out(k: LeaseKind) -> wit::LeaseKind {
    match k {
        LeaseKind::Client => wit::LeaseKind::Client,
        LeaseKind::Trial => wit::LeaseKind::Trial,
        LeaseKind::Probe => wit::LeaseKind::Probe,
        LeaseKind::FailOpen => wit::LeaseKind::FailOpen,
    }
}

pub(super) fn lease_out(l: Lease) -> wit::Lease {
    wit::Lease {
        id: l.id,
        resource: id_out(&l.resource),
        context: l.context.as_str().into(),
        permit: l.permit,
        token: l.token,
        kind: lease_kind_out(l.kind),
        granted_at: l.granted_at,
        expires_at: l.expires_at,
        ttl: l.ttl,
    }
}

fn key_out(k: ResourceKey) -> wit::ResourceKey {
    wit::ResourceKey { slot: k.slot, serial: k.serial }
}

pub(super) fn key_in(k: wit::ResourceKey) -> ResourceKey {
    ResourceKey { slot: k.slot, serial: k.serial }
}

pub(super) fn proposal_out(p: Proposal) -> wit::Proposal {
    wit::Proposal {
        resource: key_out(p.resource),
        permit: p.permit,
        last: p.last,
        ttl: p.ttl,
        at: p.at,
        refused: p.refused.into_iter().map(|(k, permit)| wit::RefusedPermit { resource: key_out(k), permit }).collect(),
        fail_open: p.fail_open,
        claim: p.claim.as_ref().map(claim_out),
        view: p.view,
    }
}

pub(super) fn permits_in(permits: Vec<wit::RefusedPermit>) -> Vec<(ResourceKey, u32)> {
    permits.into_iter().map(|r| (key_in(r.resource), r.permit)).collect()
}

pub(super) fn proposal_in(p: wit::Proposal) -> Proposal {
    Proposal {
        resource: key_in(p.resource),
        permit: p.permit,
        last: p.last,
        ttl: p.ttl,
        at: p.at,
        refused: permits_in(p.refused),
        fail_open: p.fail_open,
        // The claim is what the host asks the authority; the core keeps nothing of it.
        claim: p.claim.map(|c| Claim {
            limits: limits_in(c.limits),
            cost: c.cost,
            context: c.context.and_then(|name| Context::new(name).ok()),
            groups: c
                .groups
                .into_iter()
                .filter_map(|g| {
                    let name = GroupName::new(g.name).ok()?;
                    Some(GroupClaim { name, limits: limits_in(g.limits), concurrency: g.concurrency })
                })
                .collect(),
        }),
        view: p.view,
    }
}

pub(super) fn limits_in(l: wit::Limits) -> Limits {
    let c = l.per_context;
    Limits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        min_interval: l.min_interval,
        max_uses: l.max_uses,
        max_age: l.max_age,
        per_context: ContextLimits { rpm: c.rpm, tpm: c.tpm, min_interval: c.min_interval },
    }
}

pub(super) fn limits_out(l: Limits) -> wit::Limits {
    let c = l.per_context;
    wit::Limits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        min_interval: l.min_interval,
        max_uses: l.max_uses,
        max_age: l.max_age,
        per_context: wit::ContextLimits { rpm: c.rpm, tpm: c.tpm, min_interval: c.min_interval },
    }
}

pub(super) fn claim_out(c: &Claim) -> wit::Claim {
    wit::Claim {
        limits: limits_out(c.limits),
        cost: c.cost,
        context: c.context.as_ref().map(|c| String::from(c.as_str())),
        groups: c
            .groups
            .iter()
            .map(|g| wit::GroupClaim {
                name: g.name.as_str().into(),
                limits: limits_out(g.limits),
                concurrency: g.concurrency,
            })
            .collect(),
    }
}

pub(super) fn answer_in(a: wit::GrantAnswer) -> GrantAnswer {
    match a {
        wit::GrantAnswer::Granted(token) => GrantAnswer::Granted(token),
        wit::GrantAnswer::Held => GrantAnswer::Held,
        wit::GrantAnswer::Limited(wait) => GrantAnswer::Limited(wait),
        wit::GrantAnswer::ContextLimited(wait) => GrantAnswer::ContextLimited(wait),
        wit::GrantAnswer::GroupLimited((index, wait)) => GrantAnswer::GroupLimited(index, wait),
        wit::GrantAnswer::Stale => GrantAnswer::Stale,
    }
}

fn retire_out(r: RetireReason) -> wit::RetireReason {
    match r {
        RetireReason::MaxUses => wit::RetireReason::MaxUses,
        RetireReason::MaxAge => wit::RetireReason::MaxAge,
    }
}

/// A lease the pool has just granted or renewed, so it is live and has a key.
pub(super) fn grant_out(p: &Pool, l: &Lease) -> wit::Grant {
    let key = p.lease_key(l.id).expect("a lease just granted or renewed is live");
    wit::Grant {
        id: l.id,
        resource: key_out(key),
        permit: l.permit,
        token: l.token,
        kind: lease_kind_out(l.kind),
        granted_at: l.granted_at,
        expires_at: l.expires_at,
        ttl: l.ttl,
    }
}

fn block_out(b: Option<Block>) -> Option<wit::Block> {
    b.map(|b| wit::Block { until: b.until, reason: b.reason })
}

pub(super) fn cell_out(c: CellView) -> wit::CellView {
    wit::CellView {
        context: c.context.map(|c| c.as_str().into()),
        state: match c.state {
            CellState::Healthy => wit::CellState::Healthy,
            CellState::Cooling => wit::CellState::Cooling,
            CellState::Recovering => wit::CellState::Recovering,
            CellState::Blocklisted => wit::CellState::Blocklisted,
        },
        score: c.score,
        effective_score: c.effective_score,
        consecutive_failures: c.consecutive_failures,
        consecutive_successes: c.consecutive_successes,
        cooling_until: c.cooling_until,
        cause: c.cause.map(kind_out),
        half_open: c.half_open,
        due_for_probe: c.due_for_probe,
        success_rate: c.success_rate,
        latency_ms: c.latency_ms,
        observations: c.observations,
        block: block_out(c.block),
    }
}

pub(super) fn resource_view_out(r: ResourceView) -> wit::ResourceView {
    wit::ResourceView {
        resource: id_out(&r.resource),
        permits: r.permits,
        labels: labels_out(&r.labels),
        limits: limits_out(r.limits),
        uses: r.uses,
        retired: r.retired.map(retire_out),
        leased: r.leased,
        score: r.score,
        contexts: r.contexts,
        block: block_out(r.block),
        window: window_out(r.window),
        day: window_out(r.day),
        groups: r.groups.iter().map(|g| g.as_str().into()).collect(),
    }
}

pub(super) fn stats_out(s: Stats) -> wit::Stats {
    wit::Stats {
        resources: s.resources,
        cells: s.cells,
        contexts: s.contexts,
        live_leases: s.live_leases,
        available: s.available,
        due_for_probe: s.due_for_probe,
        now: s.now,
        footprint: s.footprint,
        refused_entries: s.refused_entries,
    }
}

pub(super) fn event_out(e: Event) -> wit::Event {
    let kind = match e.kind {
        EventKind::Registered { resource, permits } => {
            wit::EventKind::Registered(wit::Registered { resource: id_out(&resource), permits })
        }
        EventKind::Unregistered { resource } => wit::EventKind::Unregistered(id_out(&resource)),
        EventKind::Cooled { resource, context, until, cause } => wit::EventKind::Cooled(wit::Cooled {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
            until,
            cause: kind_out(cause),
        }),
        EventKind::Recovered { resource, context } => wit::EventKind::Recovered(wit::ResourceContext {
            resource: id_out(&resource),
            context: context.as_str().into(),
        }),
        EventKind::Blocklisted { resource, context, until, reason } => wit::EventKind::Blocklisted(wit::Blocklisted {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
            until,
            reason,
        }),
        EventKind::Unblocked { resource, context } => wit::EventKind::Unblocked(wit::Unblocked {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
        }),
        EventKind::Leased { lease } => wit::EventKind::Leased(lease_out(lease)),
        EventKind::Renewed { lease } => wit::EventKind::Renewed(lease_out(lease)),
        EventKind::Released { lease } => wit::EventKind::Released(lease_out(lease)),
        EventKind::LeaseExpired { lease } => wit::EventKind::LeaseExpired(lease_out(lease)),
        EventKind::Revoked { lease } => wit::EventKind::Revoked(lease_out(lease)),
        EventKind::Rejected { context, reason } => wit::EventKind::Rejected(wit::Rejected {
            context: context.as_str().into(),
            reason: match reason {
                RejectReason::NoCandidates => wit::RejectReason::NoCandidates,
                RejectReason::RateLimited => wit::RejectReason::RateLimited,
            },
        }),
        EventKind::Retired { resource, reason } => {
            wit::EventKind::Retired(wit::Retired { resource: id_out(&resource), reason: retire_out(reason) })
        }
    };
    wit::Event { at: e.at, kind }
}
