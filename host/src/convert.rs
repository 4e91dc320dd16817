//! Conversions between the WIT types wasmtime generates and the core's own
//! types, which are what the host API hands out. Values coming out of the
//! component are re-validated on the way in: a component that returned an
//! invalid id would be a broken component, reported as such.

use repute_core::{
    Block, CellState, CellView, Claim, Command, Context, ContextLimits, Event, EventKind, FailureKind, GrantAnswer,
    GroupClaim, GroupLimits, GroupName, GroupView, Labels, Lease, LeaseKind, Limits, Outcome, Policy, Recovery,
    Refusal, Registration, RejectReason, ResourceId, ResourceView, RetireReason, Secret, Selector, Stats, Strategy,
};

use crate::bindings::repute::pool::types as wit;
use crate::error::{Error, SnapshotError, StoreError};

pub(crate) fn broken(what: &str, e: repute_core::Error) -> Error {
    Error::Trap { message: format!("component returned an invalid {what}: {e}") }
}

pub(crate) fn id_in(r: &wit::ResourceId) -> Result<ResourceId, Error> {
    ResourceId::new(r.kind.as_str(), r.value.as_str()).map_err(|e| broken("resource id", e))
}

pub(crate) fn ctx_in(c: &str) -> Result<Context, Error> {
    Context::new(c).map_err(|e| broken("context", e))
}

pub(crate) fn id_out(kind: &str, value: &str) -> wit::ResourceId {
    wit::ResourceId { kind: kind.to_owned(), value: value.to_owned() }
}

pub(crate) fn kind_in(k: wit::FailureKind) -> FailureKind {
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

/// Outcomes cross unvalidated: the core checks the latency, so a NaN is
/// refused by the same rule in the component and in a core linked into the host.
pub(crate) fn outcome_out(o: &Outcome) -> wit::Outcome {
    match *o {
        Outcome::Success { latency_ms } => wit::Outcome::Success(latency_ms),
        Outcome::Failure { kind, latency_ms, retry_after } => {
            wit::Outcome::Failure(wit::Failure { kind: kind_out(kind), latency_ms, retry_after })
        }
    }
}

pub(crate) fn outcome_in(o: &wit::Outcome) -> Outcome {
    match *o {
        wit::Outcome::Success(latency_ms) => Outcome::Success { latency_ms },
        wit::Outcome::Failure(f) => {
            Outcome::Failure { kind: kind_in(f.kind), latency_ms: f.latency_ms, retry_after: f.retry_after }
        }
    }
}

fn labels_out(labels: &Labels) -> Vec<wit::Label> {
    labels.iter().map(|(name, value)| wit::Label { name: name.to_owned(), value: value.to_owned() }).collect()
}

fn labels_in(labels: Vec<wit::Label>) -> Result<Labels, Error> {
    Labels::new(labels.into_iter().map(|l| (l.name, l.value))).map_err(|e| broken("labels", e))
}

/// A secret out of the component. The error names the rule it broke, never
/// the value.
pub(crate) fn secret_in(secret: Option<String>) -> Result<Option<Secret>, Error> {
    secret.map(Secret::new).transpose().map_err(|e| broken("secret", e))
}

/// Limits cross unvalidated, both ways: the core checks them on the way in,
/// so bad ones are refused by the same rule in the component and in a core
/// linked into the host.
pub(crate) fn limits_out(l: &Limits) -> wit::Limits {
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

pub(crate) fn limits_in(l: wit::Limits) -> Limits {
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

/// A claim out of the component. Its context is one the core accepted on
/// acquire, so it is valid; were it not, the claim would count nothing per
/// context rather than fail the grant.
/// Its groups' names, likewise, are the resource's, which the core checked
/// at registration.
pub(crate) fn claim_in(c: wit::Claim) -> Claim {
    let groups = c.groups.into_iter().filter_map(|g| {
        Some(GroupClaim { name: GroupName::new(g.name).ok()?, limits: limits_in(g.limits), concurrency: g.concurrency })
    });
    Claim {
        limits: limits_in(c.limits),
        cost: c.cost,
        context: c.context.and_then(|name| Context::new(name).ok()),
        groups: groups.collect(),
    }
}

/// Group limits cross unvalidated both ways, as limits do.
pub(crate) fn group_limits_out(l: &GroupLimits) -> wit::GroupLimits {
    wit::GroupLimits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        concurrency: l.concurrency,
        shared_quota: l.shared_quota,
    }
}

pub(crate) fn group_limits_in(l: wit::GroupLimits) -> GroupLimits {
    GroupLimits {
        rpm: l.rpm,
        tpm: l.tpm,
        rpd: l.rpd,
        tpd: l.tpd,
        concurrency: l.concurrency,
        shared_quota: l.shared_quota,
    }
}

fn group_name_in(name: String) -> Result<GroupName, Error> {
    GroupName::new(name).map_err(|e| broken("group name", e))
}

fn groups_in(names: Vec<String>) -> Result<Vec<GroupName>, Error> {
    names.into_iter().map(group_name_in).collect()
}

fn groups_out(names: &[GroupName]) -> Vec<String> {
    names.iter().map(|g| g.as_str().to_owned()).collect()
}

fn window_in(w: wit::UsageWindow) -> repute_core::Window {
    repute_core::Window { grants: w.grants, tokens: w.tokens }
}

pub(crate) fn group_view_in(g: wit::GroupView) -> Result<GroupView, Error> {
    Ok(GroupView {
        name: group_name_in(g.name)?,
        limits: group_limits_in(g.limits),
        members: g.members,
        leased: g.leased,
        window: window_in(g.window),
        day: window_in(g.day),
        limited_until: g.limited_until,
    })
}

pub(crate) fn answer_out(a: GrantAnswer) -> wit::GrantAnswer {
    match a {
        GrantAnswer::Granted(token) => wit::GrantAnswer::Granted(token),
        GrantAnswer::Held => wit::GrantAnswer::Held,
        GrantAnswer::Limited(wait) => wit::GrantAnswer::Limited(wait),
        GrantAnswer::ContextLimited(wait) => wit::GrantAnswer::ContextLimited(wait),
        GrantAnswer::GroupLimited(index, wait) => wit::GrantAnswer::GroupLimited((index, wait)),
        GrantAnswer::Stale => wit::GrantAnswer::Stale,
    }
}

fn retire_in(r: wit::RetireReason) -> RetireReason {
    match r {
        wit::RetireReason::MaxUses => RetireReason::MaxUses,
        wit::RetireReason::MaxAge => RetireReason::MaxAge,
    }
}

fn registration_parts_out(
    permits: u32,
    limits: &Limits,
    labels: &Labels,
    secret: Option<&Secret>,
    groups: &[GroupName],
) -> wit::Registration {
    wit::Registration {
        permits,
        limits: limits_out(limits),
        labels: labels_out(labels),
        secret: secret.map(|s| s.expose().to_owned()),
        groups: groups_out(groups),
    }
}

pub(crate) fn registration_out(r: &Registration) -> wit::Registration {
    registration_parts_out(r.permits, &r.limits, &r.labels, r.secret.as_ref(), &r.groups)
}

/// A selector crosses as it is: the core validates it, so a bad one is
/// refused by the same rule in the component and in a core linked into the
/// host. The default selector allocates nothing.
pub(crate) fn selector_out(s: &Selector) -> wit::Selector {
    wit::Selector {
        kind: s.kind.clone(),
        labels: s.labels.iter().map(|f| wit::LabelFilter { name: f.name.clone(), values: f.values.clone() }).collect(),
        exclude: s.exclude.clone(),
        prefer: s.prefer.clone(),
        affinity: s.affinity.clone(),
        cost: s.cost,
    }
}

/// A log entry the component appends, as the command storage keeps.
pub(crate) fn log_entry_in(e: wit::LogEntry) -> Result<Command, Error> {
    Ok(match e {
        wit::LogEntry::Report(r) => Command::Report {
            resource: id_in(&r.resource)?,
            context: ctx_in(&r.context)?,
            outcome: outcome_in(&r.outcome),
        },
        wit::LogEntry::Register(r) => {
            let wit::Registration { permits, limits, labels, secret, groups } = r.registration;
            Command::Register {
                resource: id_in(&r.resource)?,
                permits,
                limits: limits_in(limits),
                labels: labels_in(labels)?,
                secret: secret_in(secret)?,
                groups: groups_in(groups)?,
            }
        }
        wit::LogEntry::Unregister(r) => Command::Unregister { resource: id_in(&r.resource)?, force: r.force },
        wit::LogEntry::Block(b) => Command::Block {
            resource: id_in(&b.resource)?,
            context: opt_ctx_in(b.context)?,
            duration: b.duration,
            reason: b.reason,
        },
        wit::LogEntry::Unblock(u) => {
            Command::Unblock { resource: id_in(&u.resource)?, context: opt_ctx_in(u.context)? }
        }
        wit::LogEntry::SetGroup(g) => {
            Command::SetGroup { name: group_name_in(g.name)?, limits: group_limits_in(g.limits) }
        }
    })
}

/// A stored command as the component folds it (and validates it again).
pub(crate) fn log_entry_out(c: &Command) -> wit::LogEntry {
    let id = |r: &ResourceId| id_out(r.kind(), r.value());
    let ctx = |c: &Option<Context>| c.as_ref().map(|c| c.as_str().to_owned());
    match c {
        Command::Report { resource, context, outcome } => wit::LogEntry::Report(wit::LoggedReport {
            resource: id(resource),
            context: context.as_str().to_owned(),
            outcome: outcome_out(outcome),
        }),
        Command::Register { resource, permits, limits, labels, secret, groups } => {
            wit::LogEntry::Register(wit::LoggedRegister {
                resource: id(resource),
                registration: registration_parts_out(*permits, limits, labels, secret.as_ref(), groups),
            })
        }
        Command::Unregister { resource, force } => {
            wit::LogEntry::Unregister(wit::LoggedUnregister { resource: id(resource), force: *force })
        }
        Command::Block { resource, context, duration, reason } => wit::LogEntry::Block(wit::LoggedBlock {
            resource: id(resource),
            context: ctx(context),
            duration: *duration,
            reason: reason.clone(),
        }),
        Command::Unblock { resource, context } => {
            wit::LogEntry::Unblock(wit::LoggedUnblock { resource: id(resource), context: ctx(context) })
        }
        Command::SetGroup { name, limits } => wit::LogEntry::SetGroup(wit::LoggedGroup {
            name: name.as_str().to_owned(),
            limits: group_limits_out(limits),
        }),
    }
}

pub(crate) fn strategy_out(s: Strategy) -> wit::Strategy {
    match s {
        Strategy::Classic => wit::Strategy::Classic,
        Strategy::Thompson => wit::Strategy::Thompson,
        Strategy::First => wit::Strategy::First,
    }
}

pub(crate) fn policy_out(p: &Policy) -> wit::Policy {
    wit::Policy {
        strategy: strategy_out(p.strategy),
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
        rate_limit: p.rate_limit.map(|r| wit::RateLimit { rate: r.rate, burst: r.burst }),
        recovery: match p.recovery {
            Recovery::Traffic => wit::Recovery::Traffic,
            Recovery::Probe => wit::Recovery::Probe,
            Recovery::Classic => wit::Recovery::Classic,
        },
        fail_open: p.fail_open,
        rules: p
            .rules
            .iter()
            .map(|(kind, r)| wit::CoolingRule {
                kind: kind_out(*kind),
                base: r.base,
                cool_after: r.cool_after,
                max_exponent: r.max_exponent,
            })
            .collect(),
    }
}

fn lease_kind_in(k: wit::LeaseKind) -> LeaseKind {
    match k {
        wit::LeaseKind::Client => LeaseKind::Client,
        wit::LeaseKind::Trial => LeaseKind::Trial,
        wit::LeaseKind::Probe => LeaseKind::Probe,
        wit::LeaseKind::FailOpen => LeaseKind::FailOpen,
    }
}

pub(crate) fn lease_in(l: wit::Lease) -> Result<Lease, Error> {
    Ok(Lease {
        id: l.id,
        resource: id_in(&l.resource)?,
        context: ctx_in(&l.context)?,
        permit: l.permit,
        token: l.token,
        kind: lease_kind_in(l.kind),
        granted_at: l.granted_at,
        expires_at: l.expires_at,
        ttl: l.ttl,
    })
}

/// A grant with the resource and context the host already holds.
pub(crate) fn grant_in(g: wit::Grant, resource: ResourceId, context: Context) -> Lease {
    Lease {
        id: g.id,
        resource,
        context,
        permit: g.permit,
        token: g.token,
        kind: lease_kind_in(g.kind),
        granted_at: g.granted_at,
        expires_at: g.expires_at,
        ttl: g.ttl,
    }
}

fn block_in(b: Option<wit::Block>) -> Option<Block> {
    b.map(|b| Block { until: b.until, reason: b.reason })
}

fn opt_ctx_in(c: Option<String>) -> Result<Option<Context>, Error> {
    c.as_deref().map(ctx_in).transpose()
}

pub(crate) fn cell_in(c: wit::CellView) -> Result<CellView, Error> {
    Ok(CellView {
        context: opt_ctx_in(c.context)?,
        state: match c.state {
            wit::CellState::Healthy => CellState::Healthy,
            wit::CellState::Cooling => CellState::Cooling,
            wit::CellState::Recovering => CellState::Recovering,
            wit::CellState::Blocklisted => CellState::Blocklisted,
        },
        score: c.score,
        effective_score: c.effective_score,
        consecutive_failures: c.consecutive_failures,
        consecutive_successes: c.consecutive_successes,
        cooling_until: c.cooling_until,
        cause: c.cause.map(kind_in),
        half_open: c.half_open,
        due_for_probe: c.due_for_probe,
        success_rate: c.success_rate,
        latency_ms: c.latency_ms,
        observations: c.observations,
        block: block_in(c.block),
    })
}

pub(crate) fn resource_view_in(r: wit::ResourceView) -> Result<ResourceView, Error> {
    Ok(ResourceView {
        resource: id_in(&r.resource)?,
        permits: r.permits,
        labels: labels_in(r.labels)?,
        limits: limits_in(r.limits),
        uses: r.uses,
        retired: r.retired.map(retire_in),
        leased: r.leased,
        score: r.score,
        contexts: r.contexts,
        block: block_in(r.block),
        window: window_in(r.window),
        day: window_in(r.day),
        groups: groups_in(r.groups)?,
    })
}

pub(crate) fn stats_in(s: wit::Stats) -> Stats {
    Stats {
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

pub(crate) fn probe_in(p: wit::ProbeTarget) -> Result<(ResourceId, Context), Error> {
    Ok((id_in(&p.resource)?, ctx_in(&p.context)?))
}

pub(crate) fn event_in(e: wit::Event) -> Result<Event, Error> {
    let kind = match e.kind {
        wit::EventKind::Registered(r) => EventKind::Registered { resource: id_in(&r.resource)?, permits: r.permits },
        wit::EventKind::Unregistered(r) => EventKind::Unregistered { resource: id_in(&r)? },
        wit::EventKind::Cooled(c) => EventKind::Cooled {
            resource: id_in(&c.resource)?,
            context: opt_ctx_in(c.context)?,
            until: c.until,
            cause: kind_in(c.cause),
        },
        wit::EventKind::Recovered(r) => {
            EventKind::Recovered { resource: id_in(&r.resource)?, context: ctx_in(&r.context)? }
        }
        wit::EventKind::Blocklisted(b) => EventKind::Blocklisted {
            resource: id_in(&b.resource)?,
            context: opt_ctx_in(b.context)?,
            until: b.until,
            reason: b.reason,
        },
        wit::EventKind::Unblocked(u) => {
            EventKind::Unblocked { resource: id_in(&u.resource)?, context: opt_ctx_in(u.context)? }
        }
        wit::EventKind::Leased(l) => EventKind::Leased { lease: lease_in(l)? },
        wit::EventKind::Renewed(l) => EventKind::Renewed { lease: lease_in(l)? },
        wit::EventKind::Released(l) => EventKind::Released { lease: lease_in(l)? },
        wit::EventKind::LeaseExpired(l) => EventKind::LeaseExpired { lease: lease_in(l)? },
        wit::EventKind::Revoked(l) => EventKind::Revoked { lease: lease_in(l)? },
        wit::EventKind::Rejected(r) => EventKind::Rejected {
            context: ctx_in(&r.context)?,
            reason: match r.reason {
                wit::RejectReason::NoCandidates => RejectReason::NoCandidates,
                wit::RejectReason::RateLimited => RejectReason::RateLimited,
            },
        },
        wit::EventKind::Retired(r) => EventKind::Retired { resource: id_in(&r.resource)?, reason: retire_in(r.reason) },
    };
    Ok(Event { at: e.at, kind })
}

pub(crate) fn store_err_out(e: StoreError) -> wit::StorageError {
    match e {
        StoreError::Conflict { expected, found } => {
            wit::StorageError::Conflict(wit::VersionConflict { expected, found })
        }
        StoreError::StaleEpoch { mine, stored } => wit::StorageError::StaleEpoch(wit::EpochConflict { mine, stored }),
        StoreError::Unavailable(m) => wit::StorageError::Unavailable(m),
        recovering @ StoreError::Recovering { .. } => wit::StorageError::Unavailable(recovering.to_string()),
    }
}

fn store_err_in(e: wit::StorageError) -> StoreError {
    match e {
        wit::StorageError::Conflict(c) => StoreError::Conflict { expected: c.expected, found: c.found },
        wit::StorageError::StaleEpoch(c) => StoreError::StaleEpoch { mine: c.mine, stored: c.stored },
        wit::StorageError::Unavailable(m) => StoreError::Unavailable(m),
    }
}

pub(crate) fn err_in(e: wit::Error) -> Error {
    match e {
        wit::Error::InvalidInput(i) => Error::InvalidInput { field: i.field, rule: i.rule },
        wit::Error::UnknownResource => Error::UnknownResource,
        wit::Error::UnknownLease => Error::UnknownLease,
        wit::Error::StaleLease => Error::StaleLease,
        wit::Error::LeaseExpired => Error::LeaseExpired,
        wit::Error::Blocked => Error::Blocked,
        wit::Error::NoResourceAvailable(r) => Error::NoResourceAvailable(Refusal {
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
        wit::Error::Leased(live) => Error::Leased { live },
        wit::Error::BudgetExhausted(b) => Error::BudgetExhausted { budget: b.name, limit: b.limit },
        wit::Error::RateLimited(retry_after) => Error::RateLimited { retry_after },
        wit::Error::Snapshot(s) => Error::Snapshot(match s {
            wit::SnapshotError::Truncated => SnapshotError::Truncated,
            wit::SnapshotError::Foreign => SnapshotError::Foreign,
            wit::SnapshotError::UnsupportedVersion(v) => {
                SnapshotError::UnsupportedVersion { found: v.found, supported: v.supported }
            }
            wit::SnapshotError::Checksum => SnapshotError::Checksum,
            wit::SnapshotError::Malformed => SnapshotError::Malformed,
            wit::SnapshotError::Invalid(i) => SnapshotError::Invalid { field: i.field, rule: i.rule },
        }),
        wit::Error::Storage(s) => Error::Store(store_err_in(s)),
    }
}
