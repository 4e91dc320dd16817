//! The changes a durable or shared log carries. A pool that logs appends
//! each command before applying it; a process that opens the tenant, or
//! serves it beside others, folds the same commands in log order, so every
//! copy of the pool agrees on registrations, blocks and reputation.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

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

impl Pool {
    /// Applies one command at `now`: the same call the pool's own method
    /// makes. `Ok(true)` when a register, unblock or group's limits changed something (the
    /// other commands always change state when they succeed).
    pub fn apply(&mut self, command: &Command, now: u64) -> Result<bool> {
        match command {
            Command::Report { resource, context, outcome } => {
                self.report(resource, context, *outcome, now).map(|()| true)
            }
            Command::Register { resource, permits, limits, labels, secret, groups } => {
                let registration = Registration {
                    permits: *permits,
                    limits: *limits,
                    labels: labels.clone(),
                    secret: secret.clone(),
                    groups: groups.clone(),
                };
                self.register_with(resource.clone(), registration, now)
            }
            Command::Unregister { resource, force } => self.unregister(resource, *force, now).map(|()| true),
            Command::Block { resource, context, duration, reason } => {
                self.block(resource, context.as_ref(), *duration, reason.clone(), now).map(|()| true)
            }
            Command::Unblock { resource, context } => self.unblock(resource, context.as_ref(), now),
            Command::SetGroup { name, limits } => self.set_group(name.clone(), *limits, now),
        }
    }
}
