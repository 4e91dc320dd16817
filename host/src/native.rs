//! The core linked directly, without the component: the same operations and
//! the same providers, for one purpose — checking the component against it
//! (the differential test) and measuring what the boundary costs (the
//! benchmark). Products use [`crate::Pool`].

use std::sync::{Arc, Mutex};

use repute_core::{
    Authority, CellView, Command, Context, Event, Lease, Outcome, RateLimit, ResourceId, ResourceView, Stats,
};

use crate::error::{Error, Result, StoreError};
use crate::pool::PoolOps;
use crate::providers::{Clock, Fencing, Permit, Providers, Storage};
use crate::TenantConfig;

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
    fn grant(&mut self, resource: &ResourceId, index: u32, ttl: u64, last: u64) -> Option<u64> {
        let now = self.clock.now();
        self.fencing.grant(permit(resource, index), ttl, last, now).unwrap_or_else(|e| {
            self.fail(e);
            None
        })
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

/// A tenant's pool running natively. Behaves exactly like [`crate::Pool`]
/// (that is what the differential test checks), minus the sandbox.
pub struct NativePool {
    pool: repute_core::Pool,
    clock: Arc<dyn Clock>,
    storage: Box<dyn Storage>,
    fault: Arc<Mutex<Option<StoreError>>>,
    version: u64,
    log_seq: u64,
    log: bool,
}

impl std::fmt::Debug for NativePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativePool").field("pool", &self.pool).finish_non_exhaustive()
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

impl NativePool {
    /// Opens a tenant as `Pool::open` does: fresh, or from storage when durable.
    pub fn open(config: TenantConfig, providers: Providers) -> Result<NativePool> {
        let Providers { clock, fencing, mut storage } = providers;
        let fault = Arc::new(Mutex::new(None));
        let (pool, version, log_seq) = if config.durable {
            config.policy.validate()?;
            match storage.load()? {
                Some(c) => (repute_core::Pool::from_snapshot(&c.bytes, clock.now())?, c.version, c.log_seq),
                None => (repute_core::Pool::new(config.policy, config.seed)?, 0, 0),
            }
        } else {
            (repute_core::Pool::new(config.policy, config.seed)?, 0, 0)
        };
        let own_authority = fencing.in_process();
        let lease_id_floor = storage.lease_id_floor();
        let authority = ProviderAuthority { fencing, clock: clock.clone(), fault: fault.clone() };
        let mut native = NativePool { pool, clock, storage, fault, version, log_seq, log: config.durable };
        if !own_authority {
            native.pool.set_authority(Box::new(authority));
        }
        native.pool.raise_lease_ids(lease_id_floor);
        if config.durable {
            native.fold(None)?;
        }
        native.pool.drain_events();
        Ok(native)
    }

    /// Folds the log entries after `log_seq` and before `until`, as the component does.
    fn fold(&mut self, until: Option<u64>) -> Result<u32> {
        const PAGE: u32 = 1024;
        let mut folded = 0;
        loop {
            if until.is_some_and(|u| self.log_seq + 1 >= u) {
                return Ok(folded);
            }
            let page = self.storage.read_log(self.log_seq, PAGE)?;
            for entry in &page {
                if until.is_some_and(|u| entry.seq >= u) {
                    return Ok(folded);
                }
                let now = self.clock.now();
                // Refused now exactly as it was refused when made.
                let _ = self.pool.apply(&entry.command, now);
                self.log_seq = entry.seq;
                folded += 1;
            }
            if page.len() < PAGE as usize {
                return Ok(folded);
            }
        }
    }

    /// Runs a change, logged first when durable (see the component's `logged`).
    fn logged<T>(
        &mut self,
        command: impl FnOnce() -> Command,
        f: impl FnOnce(&mut repute_core::Pool, u64) -> repute_core::Result<T>,
    ) -> Result<T> {
        if !self.log {
            let r = f(&mut self.pool, self.clock.now());
            return self.done(r);
        }
        let seq = self.storage.append(&command())?;
        self.fold(Some(seq))?;
        let r = f(&mut self.pool, self.clock.now());
        self.log_seq = seq;
        self.done(r)
    }

    /// Events on or off, as `Limits::max_pending_events` of 0 turns them off
    /// for a component pool.
    pub fn set_record_events(&mut self, on: bool) {
        self.pool.set_record_events(on);
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

    fn now(&self) -> u64 {
        self.clock.now()
    }
}

impl PoolOps for NativePool {
    fn register(&mut self, kind: &str, value: &str, permits: u32) -> Result<bool> {
        let id = id(kind, value)?;
        let resource = id.clone();
        self.logged(|| Command::Register { resource, permits }, |p, now| p.register(id, permits, now))
    }

    fn unregister(&mut self, kind: &str, value: &str, force: bool) -> Result<()> {
        let id = id(kind, value)?;
        let resource = id.clone();
        self.logged(|| Command::Unregister { resource, force }, |p, now| p.unregister(&id, force, now))
    }

    fn acquire(&mut self, context: &str) -> Result<Lease> {
        let context = ctx(context)?;
        let r = self.pool.acquire(&context, self.now());
        self.done(r)
    }

    fn acquire_for_probe(&mut self, kind: &str, value: &str, context: &str) -> Result<Lease> {
        let (id, context) = (id(kind, value)?, ctx(context)?);
        let r = self.pool.acquire_for_probe(&id, &context, self.now());
        self.done(r)
    }

    fn renew(&mut self, id: u64, token: u64) -> Result<Lease> {
        let r = self.pool.renew(id, token, self.now());
        self.done(r)
    }

    fn release(&mut self, id: u64, token: u64) -> Result<()> {
        let r = self.pool.release(id, token, self.now());
        self.done(r)
    }

    fn lease(&mut self, id: u64) -> Result<Option<Lease>> {
        Ok(self.pool.lease(id, self.now()))
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
        Ok(self.pool.due_for_probe(self.now()))
    }

    fn cells(&mut self, kind: &str, value: &str) -> Result<Vec<CellView>> {
        let id = id(kind, value)?;
        let r = self.pool.cells(&id, self.now());
        self.done(r)
    }

    fn resources(&mut self) -> Result<Vec<ResourceView>> {
        self.pool.advance(self.now());
        Ok(self.pool.resources())
    }

    fn leases(&mut self) -> Result<Vec<Lease>> {
        self.pool.advance(self.now());
        Ok(self.pool.leases())
    }

    fn stats(&mut self) -> Result<Stats> {
        self.pool.advance(self.now());
        Ok(self.pool.stats())
    }

    fn snapshot(&mut self, with_leases: bool) -> Result<Vec<u8>> {
        Ok(self.pool.snapshot(self.now(), with_leases))
    }

    fn snapshot_json(&mut self, with_leases: bool) -> Result<String> {
        Ok(self.pool.snapshot_json(self.now(), with_leases))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let r = self.pool.restore(bytes, self.now());
        self.done(r)
    }

    fn restore_json(&mut self, json: &str) -> Result<()> {
        let r = self.pool.restore_json(json, self.now());
        self.done(r)
    }

    fn checkpoint(&mut self, with_leases: bool) -> Result<u64> {
        let bytes = self.pool.snapshot(self.now(), with_leases);
        self.version = self.storage.save(&bytes, self.version, self.log_seq)?;
        Ok(self.version)
    }

    fn sync(&mut self) -> Result<u32> {
        self.fold(None)
    }

    fn drain_events(&mut self) -> Result<Vec<Event>> {
        Ok(self.pool.drain_events())
    }
}
