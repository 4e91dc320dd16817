//! Each pool operation of the core linked into the host: what the component
//! does on the other side of the boundary, on the same providers. The
//! operations table (`crate::ops`) forwards `PoolOps` here by name.

use repute_core::{
    CellView, Command, Context, Event, GroupLimits, GroupName, GroupView, Lease, Outcome, Registration, ResourceId,
    ResourceView, Secret, Selector, Stats,
};

use super::LinkedPool;
use crate::error::{Error, Result};
use crate::providers::{authority_groups, authority_windows};

fn id(kind: &str, value: &str) -> Result<ResourceId> {
    Ok(ResourceId::new(kind, value)?)
}

fn ctx(name: &str) -> Result<Context> {
    Ok(Context::new(name)?)
}

/// The same latency rule the component applies on the way in.
fn checked(outcome: &Outcome) -> Result<Outcome> {
    Ok(match *outcome {
        Outcome::Success { latency_ms } => Outcome::success(latency_ms)?,
        Outcome::Failure { kind, latency_ms, retry_after: None } => Outcome::failure(kind, latency_ms)?,
        Outcome::Failure { kind, latency_ms, retry_after: Some(wait) } => {
            Outcome::failure_retry_after(kind, latency_ms, wait)?
        }
    })
}

pub(crate) fn register_with(
    pool: &mut LinkedPool,
    kind: &str,
    value: &str,
    registration: &Registration,
) -> Result<bool> {
    let command = Command::Register {
        resource: id(kind, value)?,
        permits: registration.permits,
        limits: registration.limits,
        labels: registration.labels.clone(),
        secret: registration.secret.clone(),
        groups: registration.groups.clone(),
    };
    pool.logged(command)
}

pub(crate) fn unregister(pool: &mut LinkedPool, kind: &str, value: &str, force: bool) -> Result<()> {
    pool.logged(Command::Unregister { resource: id(kind, value)?, force }).map(drop)
}

pub(crate) fn acquire_with(pool: &mut LinkedPool, context: &str, selector: &Selector) -> Result<Lease> {
    let context = ctx(context)?;
    pool.run(|p, now| p.acquire_with(&context, selector, now))
}

pub(crate) fn acquire_with_secret(
    pool: &mut LinkedPool,
    context: &str,
    selector: &Selector,
) -> Result<(Lease, Option<Secret>)> {
    let lease = acquire_with(pool, context, selector)?;
    let secret = pool.journal.pool().lease_secret(lease.id).cloned();
    Ok((lease, secret))
}

pub(crate) fn secret(pool: &mut LinkedPool, kind: &str, value: &str) -> Result<Option<Secret>> {
    let id = id(kind, value)?;
    Ok(pool.journal.pool().secret_of(&id)?.cloned())
}

pub(crate) fn acquire_for_probe(pool: &mut LinkedPool, kind: &str, value: &str, context: &str) -> Result<Lease> {
    let (id, context) = (id(kind, value)?, ctx(context)?);
    pool.run(|p, now| p.acquire_for_probe(&id, &context, now))
}

pub(crate) fn renew(pool: &mut LinkedPool, id: u64, token: u64) -> Result<Lease> {
    pool.run(|p, now| p.renew(id, token, now))
}

pub(crate) fn release(pool: &mut LinkedPool, id: u64, token: u64) -> Result<()> {
    pool.run(|p, now| p.release(id, token, now))
}

/// As the component's: the lease names the resource and context.
pub(crate) fn report_and_release(pool: &mut LinkedPool, id: u64, token: u64, outcome: &Outcome) -> Result<()> {
    let outcome = checked(outcome)?;
    let (resource, context) =
        pool.run(|p, now| p.held(id, token, now).map(|l| (l.resource.clone(), l.context.clone())))?;
    pool.logged(Command::Report { resource, context, outcome })?;
    release(pool, id, token)
}

/// As the component's: a store that failed to take it is the error.
pub(crate) fn reconcile(pool: &mut LinkedPool, id: u64, token: u64, used: u64) -> Result<()> {
    let r = pool.journal.run(|p, now| p.reconcile(id, token, used, now));
    let fault = pool.fault.lock().unwrap_or_else(|p| p.into_inner()).take();
    match fault {
        Some(fault) => Err(Error::Store(fault)),
        None => r.map_err(Error::from),
    }
}

pub(crate) fn lease(pool: &mut LinkedPool, id: u64) -> Result<Option<Lease>> {
    Ok(pool.journal.run(|p, now| p.lease(id, now)))
}

pub(crate) fn report(pool: &mut LinkedPool, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()> {
    let (resource, context) = (id(kind, value)?, ctx(context)?);
    pool.logged(Command::Report { resource, context, outcome: checked(outcome)? }).map(drop)
}

pub(crate) fn block(
    pool: &mut LinkedPool,
    kind: &str,
    value: &str,
    context: Option<&str>,
    duration: Option<u64>,
    reason: Option<&str>,
) -> Result<()> {
    let resource = id(kind, value)?;
    let context = context.map(ctx).transpose()?;
    pool.logged(Command::Block { resource, context, duration, reason: reason.map(str::to_owned) }).map(drop)
}

pub(crate) fn unblock(pool: &mut LinkedPool, kind: &str, value: &str, context: Option<&str>) -> Result<bool> {
    let resource = id(kind, value)?;
    pool.logged(Command::Unblock { resource, context: context.map(ctx).transpose()? })
}

pub(crate) fn due_for_probe(pool: &mut LinkedPool) -> Result<Vec<(ResourceId, Context)>> {
    Ok(pool.journal.run(|p, now| p.due_for_probe(now)))
}

pub(crate) fn cells(pool: &mut LinkedPool, kind: &str, value: &str) -> Result<Vec<CellView>> {
    let id = id(kind, value)?;
    pool.run(|p, now| p.cells(&id, now))
}

/// As the component's: the limits are checked before they are logged.
pub(crate) fn set_group(pool: &mut LinkedPool, name: &str, limits: &GroupLimits) -> Result<bool> {
    pool.logged(Command::SetGroup { name: GroupName::new(name)?, limits: *limits })
}

pub(crate) fn groups(pool: &mut LinkedPool) -> Result<Vec<GroupView>> {
    let mut views = pool.journal.run(|p, now| p.groups(now));
    let mut fencing = pool.fencing.lock().unwrap_or_else(|p| p.into_inner());
    authority_groups(&mut **fencing, pool.clock.now(), &mut views)?;
    Ok(views)
}

pub(crate) fn resources(pool: &mut LinkedPool) -> Result<Vec<ResourceView>> {
    let mut views = pool.journal.run(|p, now| {
        p.advance(now);
        p.resources()
    });
    let mut fencing = pool.fencing.lock().unwrap_or_else(|p| p.into_inner());
    authority_windows(&mut **fencing, pool.clock.now(), &mut views)?;
    Ok(views)
}

pub(crate) fn leases(pool: &mut LinkedPool) -> Result<Vec<Lease>> {
    Ok(pool.journal.run(|p, now| {
        p.advance(now);
        p.leases()
    }))
}

pub(crate) fn stats(pool: &mut LinkedPool) -> Result<Stats> {
    Ok(pool.journal.run(|p, now| {
        p.advance(now);
        p.stats()
    }))
}

pub(crate) fn snapshot(pool: &mut LinkedPool, with_leases: bool) -> Result<Vec<u8>> {
    Ok(pool.journal.run(|p, now| p.snapshot(now, with_leases)))
}

pub(crate) fn snapshot_json(pool: &mut LinkedPool, with_leases: bool) -> Result<String> {
    Ok(pool.journal.run(|p, now| p.snapshot_json(now, with_leases)))
}

pub(crate) fn restore(pool: &mut LinkedPool, bytes: &[u8]) -> Result<()> {
    pool.run(|p, now| p.restore(bytes, now))
}

pub(crate) fn restore_json(pool: &mut LinkedPool, json: &str) -> Result<()> {
    pool.run(|p, now| p.restore_json(json, now))
}

pub(crate) fn checkpoint(pool: &mut LinkedPool, with_leases: bool) -> Result<u64> {
    Ok(pool.journal.checkpoint(with_leases)?)
}

pub(crate) fn sync(pool: &mut LinkedPool) -> Result<u32> {
    Ok(pool.journal.sync()?)
}

pub(crate) fn drain_events(pool: &mut LinkedPool) -> Result<Vec<Event>> {
    Ok(pool.journal.pool_mut().drain_events())
}
