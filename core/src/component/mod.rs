//! The WebAssembly component face of the core: the wit-bindgen glue between
//! `wit/pool.wit` and [`Pool`]. It converts types and nothing else; every
//! decision stays in the pool, and the log protocol in [`Journal`]. Built
//! only for `wasm32` with the `component` feature, without std, so the
//! component imports no WASI interface at all. `abi` holds the exports and
//! what the ABI needs of a no-std build, `convert` the type conversions.
#![allow(unsafe_code)]

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::journal::{Checkpoint, Journal, JournalError, Storage};
use crate::{Authority, Command, Context, GrantAnswer, GrantRequest, Pool, RateLimit, ResourceId};

mod abi;
mod convert;
#[cfg(feature = "guest-bench")]
mod guest_bench;

#[cfg(not(feature = "guest-bench"))]
wit_bindgen::generate!({
    path: "../wit",
    world: "repute",
});
#[cfg(feature = "guest-bench")]
wit_bindgen::generate!({
    path: "../wit",
    world: "repute-testing",
});

use convert::{answer_in, claim_out, command_in, err_out, id_out};
use exports::repute::pool::api::Options;
use repute::pool::types as wit;
use repute::pool::{clock, fencing, storage};

struct Component;

export!(Component);

/// One pool behind its journal over the storage import.
struct GuestState {
    journal: RefCell<Journal<ImportedStorage>>,
}

/// The `fencing` import as the core's lease authority.
#[derive(Debug)]
struct ImportedAuthority;

impl Authority for ImportedAuthority {
    fn grant(&mut self, resource: &ResourceId, permit: u32, grant: GrantRequest<'_>) -> GrantAnswer {
        let claim = grant.claim.map(claim_out);
        answer_in(fencing::grant(&id_out(resource), permit, grant.ttl, grant.last, claim.as_ref(), grant.view))
    }

    fn reconcile(
        &mut self,
        resource: &ResourceId,
        context: Option<&Context>,
        permit: u32,
        token: u64,
        reserved: u64,
        used: u64,
    ) {
        fencing::reconcile(&id_out(resource), context.map(Context::as_str), permit, token, reserved, used)
    }

    fn extend(&mut self, resource: &ResourceId, permit: u32, token: u64, ttl: u64) -> bool {
        fencing::extend(&id_out(resource), permit, token, ttl)
    }

    fn revoke(&mut self, resource: &ResourceId, permit: u32, token: u64) {
        fencing::revoke(&id_out(resource), permit, token)
    }

    fn live(&mut self, resource: &ResourceId, first: u32, permits: u32) -> u32 {
        fencing::live(&id_out(resource), first, permits)
    }

    fn admit(&mut self, limit: &RateLimit) -> Option<u64> {
        fencing::admit(wit::RateLimit { rate: limit.rate, burst: limit.burst })
    }
}

/// The `storage` and `clock` imports as the journal's storage.
#[derive(Debug)]
struct ImportedStorage;

impl Storage for ImportedStorage {
    type Entry = wit::LogEntry;
    type Error = wit::StorageError;

    fn now(&mut self) -> u64 {
        clock::now()
    }

    fn load(&mut self) -> Result<Option<Checkpoint>, wit::StorageError> {
        let checkpoint = storage::load()?;
        Ok(checkpoint.map(|c| Checkpoint { bytes: c.bytes, version: c.version, log_seq: c.log_seq }))
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, wit::StorageError> {
        storage::save(bytes, expected_version, log_seq)
    }

    fn append(&mut self, entry: wit::LogEntry) -> Result<u64, wit::StorageError> {
        storage::append(&entry)
    }

    /// An entry that does not convert was refused by the writer's own
    /// conversion when it was made, so it reads as no command.
    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<(u64, Option<Command>)>, wit::StorageError> {
        let page = storage::read_log(after, limit)?;
        Ok(page.iter().map(|l| (l.seq, command_in(&l.entry).ok())).collect())
    }
}

impl GuestState {
    fn new(journal: Journal<ImportedStorage>) -> Self {
        GuestState { journal: RefCell::new(journal) }
    }

    /// Runs one operation at the clock's now.
    fn op<T>(&self, f: impl FnOnce(&mut Pool, u64) -> T) -> T {
        self.journal.borrow_mut().run(f)
    }

    /// Runs a change through the journal (see `Journal::logged`).
    fn logged(&self, entry: impl FnOnce() -> wit::LogEntry, command: &Command) -> Result<bool, wit::Error> {
        self.journal.borrow_mut().logged(entry, command).map_err(journal_err)
    }

    /// Runs a change whose entry is what the caller sent, read as its command.
    fn logged_entry(&self, entry: wit::LogEntry) -> Result<bool, wit::Error> {
        let command = command_in(&entry)?;
        self.logged(|| entry, &command)
    }
}

/// Readies a pool as the host's options ask.
fn prepare(pool: &mut Pool, options: &Options) {
    if !options.own_authority {
        pool.set_authority(Box::new(ImportedAuthority));
    }
    pool.set_event_limit(options.max_events as usize);
    pool.raise_lease_ids(options.lease_id_floor);
}

fn journal_err(e: JournalError<wit::StorageError>) -> wit::Error {
    match e {
        JournalError::Storage(e) => wit::Error::Storage(e),
        JournalError::Pool(e) => err_out(e),
    }
}
