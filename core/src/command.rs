//! The changes a durable or shared log carries. A pool that logs appends
//! each command before applying it; a process that opens the tenant, or
//! serves it beside others, folds the same commands in log order, so every
//! copy of the pool agrees on registrations, blocks and reputation.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::pool::check_block;
use crate::{Context, GroupLimits, GroupName, Labels, Limits, Outcome, Pool, Registration, ResourceId, Result, Secret};

/// One logged change to a pool.
///
/// A block keeps its duration, not its end: each process's clock has its own
/// origin, so the end is taken from the clock of the process that folds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    Report {
        resource: ResourceId,
        context: Context,
        outcome: Outcome,
    },
    /// Labels and secret are absent from entries logged before resources had them.
    Register {
        resource: ResourceId,
        permits: u32,
        #[serde(default, skip_serializing_if = "Limits::is_none")]
        limits: Limits,
        #[serde(default, skip_serializing_if = "Labels::is_empty")]
        labels: Labels,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret: Option<Secret>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        groups: Vec<GroupName>,
    },
    Unregister {
        resource: ResourceId,
        force: bool,
    },
    Block {
        resource: ResourceId,
        context: Option<Context>,
        duration: Option<u64>,
        reason: Option<String>,
    },
    Unblock {
        resource: ResourceId,
        context: Option<Context>,
    },
    /// The limits a quota group's members share (the default: none).
    SetGroup {
        name: GroupName,
        limits: GroupLimits,
    },
}

impl Command {
    /// Whether deciding it reads what other writers logged since this pool
    /// last folded: a change to a registration is checked against the
    /// newest one (a report, block or group change is not).
    pub fn reads_registration(&self) -> bool {
        matches!(self, Command::Register { .. } | Command::Unregister { .. })
    }

    /// Whether it changes what a grant is judged against: a resource's
    /// permits, limits or groups, or a group's limits. A store several
    /// processes share refuses a grant judged on a log position before
    /// the last such entry (`GrantAnswer::Stale`).
    pub fn changes_grants(&self) -> bool {
        matches!(self, Command::Register { .. } | Command::Unregister { .. } | Command::SetGroup { .. })
    }
}

impl Pool {
    /// Decides, before it is logged, whether a change may be: refused when
    /// invalid, about a resource this pool does not know, or when it would
    /// take away a permit someone holds, here or anywhere the authority
    /// knows of (`check_register`, `check_unregister`). `Ok(false)`: it would change nothing, and need
    /// not be logged.
    pub fn check(&mut self, command: &Command, now: u64) -> Result<bool> {
        self.advance(now);
        match command {
            Command::Register { resource, permits, limits, labels, secret, groups } => {
                self.check_register(resource, &registration(*permits, limits, labels, secret, groups))
            }
            Command::Unregister { resource, force } => self.check_unregister(resource, *force).map(|()| true),
            Command::Report { resource, outcome, .. } => {
                outcome.revalidate()?;
                self.registry.slot_of(resource).map(|_| true)
            }
            Command::Block { resource, duration, reason, .. } => {
                check_block(*duration, reason.as_deref())?;
                self.registry.slot_of(resource).map(|_| true)
            }
            Command::Unblock { resource, .. } => self.registry.slot_of(resource).map(|_| true),
            Command::SetGroup { limits, .. } => limits.validate().map(|()| true),
        }
    }

    /// Applies one logged command at `now`, as every process that folds the
    /// log does: what it reads is what every process derives from the log,
    /// so it changes every copy of the pool alike or none (see `check` for
    /// what was decided before it was logged). `Ok(true)` when a register,
    /// unblock or group's limits changed something (the other commands
    /// always change state when they succeed).
    pub fn apply(&mut self, command: &Command, now: u64) -> Result<bool> {
        match command {
            Command::Report { resource, context, outcome } => {
                self.report(resource, context, *outcome, now).map(|()| true)
            }
            Command::Register { resource, permits, limits, labels, secret, groups } => {
                self.advance(now);
                self.apply_register(resource.clone(), registration(*permits, limits, labels, secret, groups))
            }
            Command::Unregister { resource, .. } => {
                self.advance(now);
                self.apply_unregister(resource).map(|()| true)
            }
            Command::Block { resource, context, duration, reason } => {
                self.block(resource, context.as_ref(), *duration, reason.clone(), now).map(|()| true)
            }
            Command::Unblock { resource, context } => self.unblock(resource, context.as_ref(), now),
            Command::SetGroup { name, limits } => self.set_group(name.clone(), *limits, now),
        }
    }
}

/// The registration a `Register` entry carries.
fn registration(
    permits: u32,
    limits: &Limits,
    labels: &Labels,
    secret: &Option<Secret>,
    groups: &[GroupName],
) -> Registration {
    Registration { permits, limits: *limits, labels: labels.clone(), secret: secret.clone(), groups: groups.to_vec() }
}
