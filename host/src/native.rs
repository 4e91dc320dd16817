//! The core linked directly, without the component: the same operations and
//! the same providers, for one purpose — checking the component against it
//! (the differential test) and measuring what the boundary costs (the
//! benchmark). Products use [`crate::Pool`].

use std::sync::{Arc, Mutex};

use repute_core::{Authority, CellView, Context, Event, Lease, Outcome, ResourceId, ResourceView, Stats};

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
}

/// A tenant's pool running natively. Behaves exactly like [`crate::Pool`]
/// (that is what the differential test checks), minus the sandbox.
pub struct NativePool {
    pool: repute_core::Pool,
    clock: Arc<dyn Clock>,
    storage: Box<dyn Storage>,
    fault: Arc<Mutex<Option<StoreError>>>,
    version: u64,
    report_seq: u64,
    log_reports: bool,
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
        Outcome::Failure { kind, latency_ms } => Outcome::failure(kind, latency_ms)?,
    })
}

impl NativePool {
    /// Opens a tenant as `Pool::open` does: fresh, or from storage when durable.
    pub fn open(config: TenantConfig, providers: Providers) -> Result<NativePool> {
        let Providers { clock, fencing, mut storage } = providers;
        let fault = Arc::new(Mutex::new(None));
        let (pool, version, report_seq) = if config.durable {
            config.policy.validate()?;
            match storage.load()? {
                Some(c) => (repute_core::Pool::from_snapshot(&c.bytes, clock.now())?, c.version, c.report_seq),
                None => (repute_core::Pool::new(config.policy, config.seed)?, 0, 0),
            }
        } else {
            (repute_core::Pool::new(config.policy, config.seed)?, 0, 0)
        };
        let authority = ProviderAuthority { fencing, clock: clock.clone(), fault: fault.clone() };
        let mut native = NativePool { pool, clock, storage, fault, version, report_seq, log_reports: config.durable };
        native.pool.set_authority(Box::new(authority));
        if config.durable {
            native.replay()?;
        }
        native.pool.drain_events();
        Ok(native)
    }

    fn replay(&mut self) -> Result<()> {
        const PAGE: u32 = 1024;
        loop {
            let page = self.storage.read_reports(self.report_seq, PAGE)?;
            for entry in &page {
                let (id, context) = (id(&entry.kind, &entry.value)?, ctx(&entry.context)?);
                let outcome = checked(&entry.outcome)?;
                let now = self.clock.now();
                // Refused now exactly as it was refused when made.
                let _ = self.pool.report(&id, &context, outcome, now);
                self.report_seq = entry.seq;
            }
            if page.len() < PAGE as usize {
                return Ok(());
            }
        }
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
        let r = self.pool.register(id, permits, self.now());
        self.done(r)
    }

    fn unregister(&mut self, kind: &str, value: &str, force: bool) -> Result<()> {
        let id = id(kind, value)?;
        let r = self.pool.unregister(&id, force, self.now());
        self.done(r)
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
        if self.log_reports {
            self.report_seq = self.storage.append_report(kind, value, context.as_str(), &outcome)?;
        }
        let r = self.pool.report(&id, &context, outcome, self.now());
        self.done(r)
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
        let r = self.pool.block(&id, context.as_ref(), duration, reason.map(str::to_owned), self.now());
        self.done(r)
    }

    fn unblock(&mut self, kind: &str, value: &str, context: Option<&str>) -> Result<bool> {
        let id = id(kind, value)?;
        let context = context.map(ctx).transpose()?;
        let r = self.pool.unblock(&id, context.as_ref(), self.now());
        self.done(r)
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
        self.version = self.storage.save(&bytes, self.version, self.report_seq)?;
        Ok(self.version)
    }

    fn drain_events(&mut self) -> Result<Vec<Event>> {
        Ok(self.pool.drain_events())
    }
}
