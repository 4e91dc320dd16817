//! A fencing provider as the core's lease authority, for a core linked
//! natively rather than run as the component (whose authority is its
//! `fencing` import).

use std::sync::{Arc, Mutex};

use repute_core::{Authority, Context, GrantAnswer, GrantRequest, RateLimit, ResourceId};

use crate::error::StoreError;
use crate::providers::{Clock, Fencing, Permit};

/// The tenant's fencing provider as the core's authority, as the component's
/// `fencing` import is, for a core linked natively: the differential test's
/// and benchmark's linked pool, and the partitions of a tenant in `repute
/// simulate`, which share one.
pub struct ProviderAuthority {
    fencing: SharedFencing,
    clock: Arc<dyn Clock>,
    fault: Arc<Mutex<Option<StoreError>>>,
}

impl std::fmt::Debug for ProviderAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAuthority").finish_non_exhaustive()
    }
}

/// The authority, shared with the pool's views, which read its windows.
pub type SharedFencing = Arc<Mutex<Box<dyn Fencing>>>;

fn permit(resource: &ResourceId, index: u32) -> Permit<'_> {
    Permit { kind: resource.kind(), value: resource.value(), index }
}

impl ProviderAuthority {
    /// `fencing` on `clock`'s time. A provider's failure answers as the
    /// permit being held (a grant) or lost (an extension).
    pub fn new(fencing: SharedFencing, clock: Arc<dyn Clock>) -> Self {
        ProviderAuthority { fencing, clock, fault: Arc::new(Mutex::new(None)) }
    }

    /// Where the provider's last failure is kept: the core sees only its
    /// answer, so a caller that reports the store's error takes it from here.
    pub fn fault(&self) -> Arc<Mutex<Option<StoreError>>> {
        self.fault.clone()
    }

    fn fencing(&self) -> std::sync::MutexGuard<'_, Box<dyn Fencing>> {
        self.fencing.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, e: StoreError) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

impl Authority for ProviderAuthority {
    fn grant(&mut self, resource: &ResourceId, index: u32, grant: GrantRequest<'_>) -> GrantAnswer {
        let now = self.clock.now();
        let GrantRequest { ttl, last, claim, view } = grant;
        self.fencing().grant(permit(resource, index), ttl, last, now, claim, view).unwrap_or_else(|e| {
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
        if let Err(e) = self.fencing().reconcile(permit(resource, index), context, token, reserved, used) {
            self.fail(e);
        }
    }

    fn extend(&mut self, resource: &ResourceId, index: u32, token: u64, ttl: u64) -> bool {
        let now = self.clock.now();
        self.fencing().extend(permit(resource, index), token, ttl, now).unwrap_or_else(|e| {
            self.fail(e);
            false
        })
    }

    fn revoke(&mut self, resource: &ResourceId, index: u32, token: u64) {
        if let Err(e) = self.fencing().revoke(permit(resource, index), token) {
            self.fail(e);
        }
    }

    /// An unreachable authority counts every permit held: the change is
    /// refused, and the caller sees the store error.
    fn live(&mut self, resource: &ResourceId, first: u32, permits: u32) -> u32 {
        let now = self.clock.now();
        self.fencing().live(resource.kind(), resource.value(), first, permits, now).unwrap_or_else(|e| {
            self.fail(e);
            permits.saturating_sub(first)
        })
    }

    fn admit(&mut self, limit: &RateLimit) -> Option<u64> {
        self.fencing().admit(limit).unwrap_or_else(|e| {
            self.fail(e);
            Some(0)
        })
    }
}
