//! The core linked directly, without the component: the same operations and
//! the same providers, for one purpose — checking the component against it
//! (the differential test) and measuring what the boundary costs (the
//! benchmark). Products use [`crate::Pool`].

use std::sync::{Arc, Mutex};

use repute_core::journal::{self, Checkpoint, Journal, JournalError};
use repute_core::Command;

use crate::config::{ShardLimits, TenantConfig};
use crate::error::{Error, Result, StoreError};
use crate::provider_authority::{ProviderAuthority, SharedFencing};
use crate::providers::{Clock, Providers, Storage};

pub(crate) mod ops;

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
    fencing: SharedFencing,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for LinkedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkedPool").field("pool", self.journal.pool()).finish_non_exhaustive()
    }
}

impl LinkedPool {
    /// Opens a tenant as `Pool::open` does: fresh, or from storage when durable.
    pub fn open(config: TenantConfig, providers: Providers) -> Result<LinkedPool> {
        let Providers { clock, fencing, storage } = providers;
        let own_authority = fencing.in_process();
        let fencing = Arc::new(Mutex::new(fencing));
        let authority = ProviderAuthority::new(fencing.clone(), clock.clone());
        let fault = authority.fault();
        let prepare = |pool: &mut repute_core::Pool, storage: &mut ProviderStorage| {
            if !own_authority {
                pool.set_authority(Box::new(authority));
            }
            pool.raise_lease_ids(storage.storage.lease_id_floor());
            pool.set_event_limit(ShardLimits::default().max_pending_events);
        };
        let mut storage = ProviderStorage { storage, clock: clock.clone() };
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
        Ok(LinkedPool { journal, fault, fencing, clock })
    }

    /// Runs a change through the journal, logged first when durable.
    fn logged(&mut self, command: Command) -> Result<bool> {
        let entry = command.clone();
        let r = match self.journal.logged(|| entry, &command) {
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
