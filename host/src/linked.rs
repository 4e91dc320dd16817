//! The core linked directly, without the component: the same operations and
//! the same providers, for one purpose — checking the component against it
//! (the differential test) and measuring what the boundary costs (the
//! benchmark). Products use [`crate::Pool`].

use std::sync::{Arc, Mutex};

use repute_core::journal::{self, Checkpoint, Journal, JournalError};
use repute_core::{
    Authority, CellView, Claim, Command, Context, Event, GrantAnswer, Lease, Outcome, RateLimit, Registration,
    ResourceId, ResourceView, Secret, Selector, Stats,
};

use crate::error::{Error, Result, StoreError};
use crate::pool::PoolOps;
use crate::providers::{Clock, Fencing, Permit, Providers, Storage};
use crate::{ShardLimits, TenantConfig};

/// The tenant's fencing provider as the core's authority, as the component's
/// `fencing` import is.
struct ProviderAuthority {
    fencing: Box<dyn Fencing>,
    clock: Arc<dyn Clock>,
    fault: Arc<Mutex<Option<StoreError>>>,
}

impl std::fmt::Debug for ProviderAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAuthority").finish_non_exhaustive()
    }
}

fn permit(resource: &ResourceId, index: u32) -> Permit<'_> {
    Permit { kind: resource.kind(), value: resource.value(), index }
}

impl ProviderAuthority {
    fn fail(&self, e: StoreError) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

impl Authority for ProviderAuthority {
    fn grant(&mut self, resource: &ResourceId, index: u32, ttl: u64, last: u64, claim: Option<&Claim>) -> GrantAnswer {
        let now = self.clock.now();
        self.fencing.grant(permit(resource, index), ttl, last, now, claim).unwrap_or_else(|e| {
            self.fail(e);
            GrantAnswer::Held
        })
    }

    fn reconcile(
        &mut self,
        resource: &ResourceId,
        context: Option<&Context>,
        index: u32,
        token: u64,
        reserved: u64,
        used: u64,
    ) {
        let context = context.map(Context::as_str);
        if let Err(e) = self.fencing.reconcile(permit(resource, index), context, token, reserved, used) {
            self.fail(e);
        }
    }

    fn extend(&mut self, resource: &ResourceId, index: u32, token: u64, ttl: u64) -> bool {
        let now = self.clock.now();
        self.fencing.extend(permit(resource, index), token, ttl, now).unwrap_or_else(|e| {
            self.fail(e);
            false
        })
    }

    fn revoke(&mut self, resource: &ResourceId, index: u32, token: u64) {
        if let Err(e) = self.fencing.revoke(permit(resource, index), token) {
            self.fail(e);
        }
    }

    fn admit(&mut self, limit: &RateLimit) -> Option<u64> {
        self.fencing.admit(limit).unwrap_or_else(|e| {
            self.fail(e);
            Some(0)
        })
    }
}

/// The tenant's storage provider and clock as the core journal's storage,
/// as the component's `storage` and `clock` imports are.
struct ProviderStorage {
    storage: Box<dyn Storage>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ProviderStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderStorage").finish_non_exhaustive()
    }
}

impl journal::Storage for ProviderStorage {
    type Entry = Command;
    type Error = StoreError;

    fn now(&mut self) -> u64 {
        self.clock.now()
    }

    fn load(&mut self) -> std::result::Result<Option<Checkpoint>, StoreError> {
        let checkpoint = self.storage.load()?;
        Ok(checkpoint.map(|c| Checkpoint { bytes: c.bytes, version: c.version, log_seq: c.log_seq }))
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> std::result::Result<u64, StoreError> {
        self.storage.save(bytes, expected_version, log_seq)
    }

    fn append(&mut self, command: Command) -> std::result::Result<u64, StoreError> {
        self.storage.append(&command)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> std::result::Result<Vec<(u64, Option<Command>)>, StoreError> {
        let page = self.storage.read_log(after, limit)?;
        Ok(page.into_iter().map(|e| (e.seq, Some(e.command))).collect())
    }
}

/// A tenant's pool running natively. Behaves exactly like [`crate::Pool`]
/// (that is what the differential test checks), minus the sandbox.
pub struct LinkedPool {
    journal: Journal<ProviderStorage>,
    fault: Arc<Mutex<Option<StoreError>>>,
}

impl std::fmt::Debug for LinkedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkedPool").field("pool", self.journal.pool()).finish_non_exhaustive()
    }
}

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

impl LinkedPool {
    /// Opens a tenant as `Pool::open` does: fresh, or from storage when durable.
    pub fn open(config: TenantConfig, providers: Providers) -> Result<LinkedPool> {
        let Providers { clock, fencing, storage } = providers;
        let fault = Arc::new(Mutex::new(None));
        let own_authority = fencing.in_process();
        let authority = ProviderAuthority { fencing, clock: clock.clone(), fault: fault.clone() };
        let prepare = |pool: &mut repute_core::Pool, storage: &mut ProviderStorage| {
            if !own_authority {
                pool.set_authority(Box::new(authority));
            }
            pool.raise_lease_ids(storage.storage.lease_id_floor());
            pool.set_event_limit(ShardLimits::default().max_pending_events);
        };
        let mut storage = ProviderStorage { storage, clock };
        let mut journal = if config.durable {
            Journal::open(config.policy, config.seed, true, storage, prepare).map_err(|e| match e {
                JournalError::Storage(e) => Error::from(e),
                JournalError::Pool(e) => e.into(),
            })?
        } else {
            let mut pool = repute_core::Pool::new(config.policy, config.seed)?;
            prepare(&mut pool, &mut storage);
            Journal::unlogged(pool, storage)
        };
        journal.pool_mut().drain_events();
        Ok(LinkedPool { journal, fault })
    }

    /// Runs a change through the journal, logged first when durable.
    fn logged<T>(
        &mut self,
        command: impl FnOnce() -> Command,
        f: impl FnOnce(&mut repute_core::Pool, u64) -> repute_core::Result<T>,
    ) -> Result<T> {
        let r = match self.journal.logged(command, f) {
            Err(JournalError::Storage(e)) => return Err(e.into()),
            Err(JournalError::Pool(e)) => Err(e),
            Ok(v) => Ok(v),
        };
        self.done(r)
    }

    /// Runs one operation at the clock's now; its result mapped by `done`.
    fn run<T>(&mut self, f: impl FnOnce(&mut repute_core::Pool, u64) -> repute_core::Result<T>) -> Result<T> {
        let r = self.journal.run(f);
        self.done(r)
    }

    /// At most `limit` events wait for `drain_events` (0: none is built), as
    /// `ShardLimits::max_pending_events` for a component pool.
    pub fn set_event_limit(&mut self, limit: usize) {
        self.journal.pool_mut().set_event_limit(limit);
    }

    /// Maps a core result, a provider failure during the call first.
    fn done<T>(&mut self, r: repute_core::Result<T>) -> Result<T> {
        let fault = self.fault.lock().unwrap_or_else(|p| p.into_inner()).take();
        match (r, fault) {
            (Ok(v), _) => Ok(v),
            (Err(_), Some(fault)) => Err(Error::Store(fault)),
            (Err(e), None) => Err(e.into()),
        }
    }
}

impl PoolOps for LinkedPool {
    fn register_with(&mut self, kind: &str, value: &str, registration: &Registration) -> Result<bool> {
        let id = id(kind, value)?;
        let command = Command::Register {
            resource: id.clone(),
            permits: registration.permits,
            limits: registration.limits,
            labels: registration.labels.clone(),
            secret: registration.secret.clone(),
        };
        self.logged(|| command, |p, now| p.register_with(id, registration.clone(), now))
    }

    fn unregister(&mut self, kind: &str, value: &str, force: bool) -> Result<()> {
        let id = id(kind, value)?;
        let resource = id.clone();
        self.logged(|| Command::Unregister { resource, force }, |p, now| p.unregister(&id, force, now))
    }

    fn acquire_with(&mut self, context: &str, selector: &Selector) -> Result<Lease> {
        let context = ctx(context)?;
        self.run(|p, now| p.acquire_with(&context, selector, now))
    }

    fn secret(&mut self, kind: &str, value: &str) -> Result<Option<Secret>> {
        let id = id(kind, value)?;
        Ok(self.journal.pool().secret_of(&id)?.cloned())
    }

    fn acquire_for_probe(&mut self, kind: &str, value: &str, context: &str) -> Result<Lease> {
        let (id, context) = (id(kind, value)?, ctx(context)?);
        self.run(|p, now| p.acquire_for_probe(&id, &context, now))
    }

    fn renew(&mut self, id: u64, token: u64) -> Result<Lease> {
        self.run(|p, now| p.renew(id, token, now))
    }

    fn release(&mut self, id: u64, token: u64) -> Result<()> {
        self.run(|p, now| p.release(id, token, now))
    }

    /// As the component's: a store that failed to take it is the error.
    fn reconcile(&mut self, id: u64, token: u64, used: u64) -> Result<()> {
        let r = self.journal.run(|p, now| p.reconcile(id, token, used, now));
        let fault = self.fault.lock().unwrap_or_else(|p| p.into_inner()).take();
        match fault {
            Some(fault) => Err(Error::Store(fault)),
            None => r.map_err(Error::from),
        }
    }

    fn lease(&mut self, id: u64) -> Result<Option<Lease>> {
        Ok(self.journal.run(|p, now| p.lease(id, now)))
    }

    fn report(&mut self, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()> {
        let (id, context) = (id(kind, value)?, ctx(context)?);
        let outcome = checked(outcome)?;
        let command = Command::Report { resource: id.clone(), context: context.clone(), outcome };
        self.logged(|| command, |p, now| p.report(&id, &context, outcome, now))
    }

    fn block(
        &mut self,
        kind: &str,
        value: &str,
        context: Option<&str>,
        duration: Option<u64>,
        reason: Option<&str>,
    ) -> Result<()> {
        let id = id(kind, value)?;
        let context = context.map(ctx).transpose()?;
        let reason = reason.map(str::to_owned);
        let command =
            Command::Block { resource: id.clone(), context: context.clone(), duration, reason: reason.clone() };
        self.logged(|| command, |p, now| p.block(&id, context.as_ref(), duration, reason, now))
    }

    fn unblock(&mut self, kind: &str, value: &str, context: Option<&str>) -> Result<bool> {
        let id = id(kind, value)?;
        let context = context.map(ctx).transpose()?;
        let command = Command::Unblock { resource: id.clone(), context: context.clone() };
        self.logged(|| command, |p, now| p.unblock(&id, context.as_ref(), now))
    }

    fn due_for_probe(&mut self) -> Result<Vec<(ResourceId, Context)>> {
        Ok(self.journal.run(|p, now| p.due_for_probe(now)))
    }

    fn cells(&mut self, kind: &str, value: &str) -> Result<Vec<CellView>> {
        let id = id(kind, value)?;
        self.run(|p, now| p.cells(&id, now))
    }

    fn resources(&mut self) -> Result<Vec<ResourceView>> {
        Ok(self.journal.run(|p, now| {
            p.advance(now);
            p.resources()
        }))
    }

    fn leases(&mut self) -> Result<Vec<Lease>> {
        Ok(self.journal.run(|p, now| {
            p.advance(now);
            p.leases()
        }))
    }

    fn stats(&mut self) -> Result<Stats> {
        Ok(self.journal.run(|p, now| {
            p.advance(now);
            p.stats()
        }))
    }

    fn snapshot(&mut self, with_leases: bool) -> Result<Vec<u8>> {
        Ok(self.journal.run(|p, now| p.snapshot(now, with_leases)))
    }

    fn snapshot_json(&mut self, with_leases: bool) -> Result<String> {
        Ok(self.journal.run(|p, now| p.snapshot_json(now, with_leases)))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.run(|p, now| p.restore(bytes, now))
    }

    fn restore_json(&mut self, json: &str) -> Result<()> {
        self.run(|p, now| p.restore_json(json, now))
    }

    fn checkpoint(&mut self, with_leases: bool) -> Result<u64> {
        Ok(self.journal.checkpoint(with_leases)?)
    }

    fn sync(&mut self) -> Result<u32> {
        Ok(self.journal.fold(None)?)
    }

    fn drain_events(&mut self) -> Result<Vec<Event>> {
        Ok(self.journal.pool_mut().drain_events())
    }
}
