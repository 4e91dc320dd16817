//! The component's exports and what the canonical ABI needs of a build
//! without std: the C string routines, the allocator, `cabi_realloc` and
//! the panic handler.

use alloc::string::String;
use alloc::vec::Vec;

use super::convert::{
    answer_in, cell_out, ctx_in, err_out, event_out, grant_out, group_view_out, id_in, id_out, key_in, lease_out,
    outcome_in, permits_in, policy_in, proposal_in, proposal_out, registration_in, resource_view_out, selector_in,
    stats_out,
};
use super::exports::repute::pool::api::{Guest, GuestPool, Options, Pool as PoolHandle};
use super::{journal_err, prepare, wit, Component, GuestState, ImportedStorage};
use crate::{Command, Journal, Lease, Pool, Registration, Settled};

// Without std nothing links wasi-libc, yet compiled code still calls
// `memcpy` & co. Only those string routines are taken from it; they import
// nothing. `memcmp` and `bcmp` are defined below instead, word-wise.
#[link(name = "c", kind = "static")]
unsafe extern "C" {}

/// The C `memcmp`, eight bytes at a time (`crate::compare`).
///
/// # Safety
/// `a` and `b` are readable for `n` bytes (any pointer when `n` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    // SAFETY: the caller's contract, above.
    let (a, b) = unsafe { (core::slice::from_raw_parts(a, n), core::slice::from_raw_parts(b, n)) };
    crate::compare::compare(a, b) as i32
}

/// The C `bcmp`: zero when equal, as `memcmp`.
///
/// # Safety
/// As `memcmp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcmp(a, b, n) }
}

#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// The canonical ABI's allocator export, through the global allocator.
/// wit-bindgen leaves it to wasi-libc's malloc on wasip2; this build has no
/// libc allocator, so it is defined here.
///
/// # Safety
/// Called only by the component runtime, with a pointer and size this
/// function returned earlier (or null and 0) and a valid power-of-two alignment.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(old: *mut u8, old_len: usize, align: usize, new_len: usize) -> *mut u8 {
    use alloc::alloc::{alloc, realloc, Layout};
    if new_len == 0 {
        return align as *mut u8;
    }
    // SAFETY: the runtime passes a power-of-two `align` and, when `old_len`
    // is non-zero, a block allocated here with that size and alignment.
    let ptr = unsafe {
        if old_len == 0 {
            alloc(Layout::from_size_align_unchecked(new_len, align))
        } else {
            realloc(old, Layout::from_size_align_unchecked(old_len, align), new_len)
        }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    ptr
}

/// A panic in the core is a bug: trap, so the host rebuilds the shard from its
/// last good state instead of trusting a half-updated pool.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

impl Guest for Component {
    type Pool = GuestState;
}

impl GuestPool for GuestState {
    fn create(policy: wit::Policy, seed: u64, options: Options) -> Result<PoolHandle, wit::Error> {
        let mut pool = Pool::new(policy_in(policy), seed).map_err(err_out)?;
        prepare(&mut pool, &options);
        Ok(PoolHandle::new(GuestState::new(Journal::unlogged(pool, ImportedStorage))))
    }

    fn open(policy: wit::Policy, seed: u64, log: bool, options: Options) -> Result<PoolHandle, wit::Error> {
        let journal = Journal::open(policy_in(policy), seed, log, ImportedStorage, |p, _| prepare(p, &options))
            .map_err(journal_err)?;
        Ok(PoolHandle::new(GuestState::new(journal)))
    }

    fn sync(&self) -> Result<u32, wit::Error> {
        self.journal.borrow_mut().sync().map_err(wit::Error::Storage)
    }

    fn register(&self, resource: wit::ResourceId, registration: wit::Registration) -> Result<bool, wit::Error> {
        let id = id_in(&resource)?;
        #[cfg(feature = "trap-test")]
        trap_test(id.kind());
        let Registration { permits, limits, labels, secret, groups } = registration_in(&registration)?;
        let command = Command::Register { resource: id, permits, limits, labels, secret, groups };
        self.logged(|| wit::LogEntry::Register(wit::LoggedRegister { resource, registration }), &command)
    }

    fn unregister(&self, resource: wit::ResourceId, force: bool) -> Result<(), wit::Error> {
        let command = Command::Unregister { resource: id_in(&resource)?, force };
        self.logged(|| wit::LogEntry::Unregister(wit::LoggedUnregister { resource, force }), &command).map(drop)
    }

    fn acquire(&self, context: String, selector: wit::Selector) -> Result<wit::Grant, wit::Error> {
        self.granting(context, selector, grant_out)
    }

    fn acquire_with_secret(
        &self,
        context: String,
        selector: wit::Selector,
    ) -> Result<(wit::Grant, Option<String>), wit::Error> {
        self.granting(context, selector, |p, l| (grant_out(p, l), p.lease_secret(l.id).map(|s| s.expose().into())))
    }

    fn propose(
        &self,
        context: String,
        selector: wit::Selector,
        in_flight: Vec<wit::RefusedPermit>,
    ) -> Result<wit::Proposal, wit::Error> {
        let known = self.journal.borrow().pool().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        let (selector, in_flight) = (selector_in(selector), permits_in(in_flight));
        let mut journal = self.journal.borrow_mut();
        // A proposal judged stale since: the log is folded first (a log
        // that cannot be read leaves the next answer stale again).
        if journal.pool_mut().take_stale() {
            let _ = journal.fold(None);
        }
        journal.run(|p, now| p.propose(&context, &selector, now, &in_flight).map(proposal_out)).map_err(err_out)
    }

    fn settle(
        &self,
        context: String,
        selector: wit::Selector,
        proposal: wit::Proposal,
        answer: wit::GrantAnswer,
        in_flight: Vec<wit::RefusedPermit>,
    ) -> Result<wit::Settled, wit::Error> {
        let known = self.journal.borrow().pool().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        let mut journal = self.journal.borrow_mut();
        let pool = journal.pool_mut();
        let selector = selector_in(selector);
        let (proposal, answer, in_flight) = (proposal_in(proposal), answer_in(answer), permits_in(in_flight));
        let settled = pool.settle(&context, &selector, proposal, answer, &in_flight).map_err(err_out)?;
        let settled = match settled {
            Settled::Granted(l) => wit::Settled::Granted(grant_out(pool, &l)),
            Settled::Next(p) => wit::Settled::Next(proposal_out(p)),
        };
        Ok(settled)
    }

    fn acquire_for_probe(&self, resource: wit::ResourceId, context: String) -> Result<wit::Grant, wit::Error> {
        let id = id_in(&resource)?;
        let context = ctx_in(&context)?;
        let mut journal = self.journal.borrow_mut();
        journal.granting(|p, now| p.acquire_for_probe(&id, &context, now).map(|l| grant_out(p, &l))).map_err(err_out)
    }

    fn renew(&self, id: u64, token: u64) -> Result<wit::Renewal, wit::Error> {
        self.op(|p, now| {
            p.renew(id, token, now)
                .map(|l| wit::Renewal { grant: grant_out(p, &l), context: l.context.as_str().into() })
        })
        .map_err(err_out)
    }

    fn reconcile(&self, id: u64, token: u64, used: u64) -> Result<(), wit::Error> {
        self.op(|p, now| p.reconcile(id, token, used, now)).map_err(err_out)
    }

    fn release(&self, id: u64, token: u64) -> Result<(), wit::Error> {
        self.op(|p, now| p.release(id, token, now)).map_err(err_out)
    }

    fn report_and_release(&self, id: u64, token: u64, outcome: wit::Outcome) -> Result<(), wit::Error> {
        let parsed = outcome_in(outcome)?;
        let held = self.op(|p, now| p.held(id, token, now).map(|l| (l.resource.clone(), l.context.clone())));
        let (resource, context) = held.map_err(err_out)?;
        let (logged, at) = (resource.clone(), context.clone());
        let entry = || {
            wit::LogEntry::Report(wit::LoggedReport {
                resource: id_out(&logged),
                context: String::from(at.as_str()),
                outcome,
            })
        };
        self.logged(entry, &Command::Report { resource, context, outcome: parsed })?;
        self.release(id, token)
    }

    fn get_lease(&self, id: u64) -> Option<wit::Lease> {
        self.op(|p, now| p.lease(id, now)).map(lease_out)
    }

    fn resource_of(&self, key: wit::ResourceKey) -> Option<wit::ResourceId> {
        let key = key_in(key);
        self.journal.borrow().pool().resource_at(key).map(id_out)
    }

    fn drain_events(&self) -> Vec<wit::Event> {
        self.journal.borrow_mut().pool_mut().drain_events().into_iter().map(event_out).collect()
    }

    fn dropped_events(&self) -> u64 {
        self.journal.borrow().pool().dropped_events()
    }

    fn secret_of(&self, resource: wit::ResourceId) -> Result<Option<String>, wit::Error> {
        let id = id_in(&resource)?;
        let journal = self.journal.borrow();
        let secret = journal.pool().secret_of(&id).map_err(err_out)?;
        Ok(secret.map(|s| s.expose().into()))
    }

    fn report(&self, resource: wit::ResourceId, context: String, outcome: wit::Outcome) -> Result<(), wit::Error> {
        let command =
            Command::Report { resource: id_in(&resource)?, context: ctx_in(&context)?, outcome: outcome_in(outcome)? };
        self.logged(|| wit::LogEntry::Report(wit::LoggedReport { resource, context, outcome }), &command).map(drop)
    }

    fn block(
        &self,
        resource: wit::ResourceId,
        context: Option<String>,
        duration: Option<u64>,
        reason: Option<String>,
    ) -> Result<(), wit::Error> {
        let entry = wit::LogEntry::Block(wit::LoggedBlock { resource, context, duration, reason });
        self.logged_entry(entry).map(drop)
    }

    fn unblock(&self, resource: wit::ResourceId, context: Option<String>) -> Result<bool, wit::Error> {
        self.logged_entry(wit::LogEntry::Unblock(wit::LoggedUnblock { resource, context }))
    }

    fn set_group(&self, name: String, limits: wit::GroupLimits) -> Result<bool, wit::Error> {
        self.logged_entry(wit::LogEntry::SetGroup(wit::LoggedGroup { name, limits }))
    }

    fn groups(&self) -> Vec<wit::GroupView> {
        self.op(|p, now| p.groups(now)).into_iter().map(group_view_out).collect()
    }

    fn due_for_probe(&self) -> Vec<wit::ProbeTarget> {
        self.op(|p, now| p.due_for_probe(now))
            .into_iter()
            .map(|(r, c)| wit::ProbeTarget { resource: id_out(&r), context: c.as_str().into() })
            .collect()
    }

    fn cells(&self, resource: wit::ResourceId) -> Result<Vec<wit::CellView>, wit::Error> {
        let id = id_in(&resource)?;
        let cells = self.op(|p, now| p.cells(&id, now)).map_err(err_out)?;
        Ok(cells.into_iter().map(cell_out).collect())
    }

    fn resources(&self) -> Vec<wit::ResourceView> {
        self.op(|p, now| {
            p.advance(now);
            p.resources()
        })
        .into_iter()
        .map(resource_view_out)
        .collect()
    }

    fn leases(&self) -> Vec<wit::Lease> {
        self.op(|p, now| {
            p.advance(now);
            p.leases()
        })
        .into_iter()
        .map(lease_out)
        .collect()
    }

    fn stats(&self) -> wit::Stats {
        stats_out(self.op(|p, now| {
            p.advance(now);
            p.stats()
        }))
    }

    fn snapshot(&self, with_leases: bool) -> Vec<u8> {
        self.op(|p, now| p.snapshot(now, with_leases))
    }

    fn snapshot_json(&self, with_leases: bool) -> String {
        self.op(|p, now| p.snapshot_json(now, with_leases))
    }

    fn restore(&self, bytes: Vec<u8>) -> Result<(), wit::Error> {
        self.op(|p, now| p.restore(&bytes, now)).map_err(err_out)
    }

    fn restore_json(&self, json: String) -> Result<(), wit::Error> {
        self.op(|p, now| p.restore_json(&json, now)).map_err(err_out)
    }

    fn checkpoint(&self, with_leases: bool) -> Result<u64, wit::Error> {
        self.journal.borrow_mut().checkpoint(with_leases).map_err(wit::Error::Storage)
    }
}

impl GuestState {
    /// An acquire's grant, as `out` gives it from the pool and the lease.
    fn granting<T>(
        &self,
        context: String,
        selector: wit::Selector,
        out: impl Fn(&Pool, &Lease) -> T,
    ) -> Result<T, wit::Error> {
        let known = self.journal.borrow().pool().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        let selector = selector_in(selector);
        let mut journal = self.journal.borrow_mut();
        journal.granting(|p, now| p.acquire_with(&context, &selector, now).map(|l| out(p, &l))).map_err(err_out)
    }
}

/// With the `trap-test` feature, registering a resource of one of these
/// kinds misbehaves on purpose, so the host's tests can check that each kind
/// of failure is contained: `__trap__` traps, `__spin__` never returns (the
/// host's call timeout must interrupt it), `__bloat__` allocates until the
/// host's memory limit refuses to grow the heap.
#[cfg(feature = "trap-test")]
fn trap_test(kind: &str) {
    match kind {
        "__trap__" => core::arch::wasm32::unreachable(),
        "__spin__" => loop {
            core::hint::spin_loop();
        },
        "__bloat__" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(alloc::vec![1; 1 << 20]);
            }
        }
        _ => {}
    }
}
