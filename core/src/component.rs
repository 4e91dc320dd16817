//! The WebAssembly component face of the core: the wit-bindgen glue between
//! `wit/pool.wit` and [`Pool`]. It converts types and nothing else; every
//! decision stays in the pool. Built only for `wasm32` with the `component`
//! feature, without std, so the component imports no WASI interface at all.
#![allow(unsafe_code)]

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use crate::snapshot::SnapshotError;
use crate::{
    Authority, Block, CellState, CellView, Command, Context, CoolingRule, Error, Event, EventKind, FailureKind, Lease,
    LeaseKind, Outcome, Policy, Pool, Proposal, RateLimit, Recovery, RejectReason, ResourceId, ResourceKey,
    ResourceView, Settled, Stats, Strategy,
};

wit_bindgen::generate!({
    path: "../wit",
    world: "repute",
});

use exports::repute::pool::api::{Guest, GuestPool, Options, Pool as PoolHandle};
use repute::pool::types as wit;
use repute::pool::{clock, events, fencing, storage};

// Without std nothing links wasi-libc, yet compiled code still calls
// `memcmp` & co. Only those string routines are taken from it; they import nothing.
#[link(name = "c", kind = "static")]
unsafe extern "C" {}

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

struct Component;

export!(Component);

impl Guest for Component {
    type Pool = GuestState;
}

/// The pool plus what `checkpoint` and the log need to know about storage.
struct GuestState {
    pool: RefCell<Pool>,
    /// Checkpoint version last loaded or saved; the next save expects it.
    version: Cell<u64>,
    /// Highest log entry folded into the pool.
    log_seq: Cell<u64>,
    log: bool,
}

/// The `fencing` import as the core's lease authority.
#[derive(Debug)]
struct ImportedAuthority;

impl Authority for ImportedAuthority {
    fn grant(&mut self, resource: &ResourceId, permit: u32, ttl: u64, last: u64) -> Option<u64> {
        fencing::grant(&id_out(resource), permit, ttl, last)
    }

    fn extend(&mut self, resource: &ResourceId, permit: u32, token: u64, ttl: u64) -> bool {
        fencing::extend(&id_out(resource), permit, token, ttl)
    }

    fn revoke(&mut self, resource: &ResourceId, permit: u32, token: u64) {
        fencing::revoke(&id_out(resource), permit, token)
    }

    fn admit(&mut self, limit: &RateLimit) -> Option<u64> {
        fencing::admit(wit::RateLimit { rate: limit.rate, burst: limit.burst })
    }
}

impl GuestState {
    fn new(pool: Pool, log: bool, options: Options) -> Self {
        let mut pool = pool;
        if !options.own_authority {
            pool.set_authority(Box::new(ImportedAuthority));
        }
        pool.set_record_events(options.events);
        pool.raise_lease_ids(options.lease_id_floor);
        GuestState { pool: RefCell::new(pool), version: Cell::new(0), log_seq: Cell::new(0), log }
    }

    /// Runs one operation at the clock's now and emits the events it caused.
    fn op<T>(&self, f: impl FnOnce(&mut Pool, u64) -> T) -> T {
        let now = clock::now();
        let mut pool = self.pool.borrow_mut();
        let out = f(&mut pool, now);
        emit_pending(&mut pool);
        out
    }

    /// Folds the log entries after `log_seq` and before `until` (all of
    /// them when `None`) into the pool; returns how many.
    fn fold(&self, until: Option<u64>) -> Result<u32, wit::Error> {
        const PAGE: u32 = 1024;
        let mut folded = 0;
        loop {
            if until.is_some_and(|u| self.log_seq.get() + 1 >= u) {
                return Ok(folded);
            }
            let page = storage::read_log(self.log_seq.get(), PAGE).map_err(wit::Error::Storage)?;
            for logged in &page {
                if until.is_some_and(|u| logged.seq >= u) {
                    return Ok(folded);
                }
                // A refusal here repeats the refusal the writer saw when the
                // entry was made (see `logged`), so it is skipped, not fatal.
                if let Ok(command) = command_in(&logged.entry) {
                    let _ = self.op(|p, now| p.apply(&command, now));
                }
                self.log_seq.set(logged.seq);
                folded += 1;
            }
            if page.len() < PAGE as usize {
                return Ok(folded);
            }
        }
    }

    /// Runs a change: with `log`, appended to the durable log first (after
    /// folding what other writers appended before it), so an acknowledged
    /// change is durable. A change the pool then refuses is refused again,
    /// identically, whenever the log is folded.
    fn logged<T>(
        &self,
        entry: impl FnOnce() -> wit::LogEntry,
        f: impl FnOnce(&mut Pool, u64) -> Result<T, Error>,
    ) -> Result<T, wit::Error> {
        if !self.log {
            return self.op(f).map_err(err_out);
        }
        let seq = storage::append(&entry()).map_err(wit::Error::Storage)?;
        self.fold(Some(seq))?;
        let out = self.op(f);
        self.log_seq.set(seq);
        out.map_err(err_out)
    }
}

impl GuestPool for GuestState {
    fn create(policy: wit::Policy, seed: u64, options: Options) -> Result<PoolHandle, wit::Error> {
        let pool = Pool::new(policy_in(policy), seed).map_err(err_out)?;
        Ok(PoolHandle::new(GuestState::new(pool, false, options)))
    }

    fn open(policy: wit::Policy, seed: u64, log: bool, options: Options) -> Result<PoolHandle, wit::Error> {
        let policy = policy_in(policy);
        policy.validate().map_err(err_out)?;
        let checkpoint = storage::load().map_err(wit::Error::Storage)?;
        let pool = match &checkpoint {
            Some(c) => Pool::from_snapshot(&c.bytes, clock::now()).map_err(err_out)?,
            None => Pool::new(policy, seed).map_err(err_out)?,
        };
        let state = GuestState::new(pool, log, options);
        if let Some(c) = checkpoint {
            state.version.set(c.version);
            state.log_seq.set(c.log_seq);
        }
        state.fold(None)?;
        Ok(PoolHandle::new(state))
    }

    fn sync(&self) -> Result<u32, wit::Error> {
        self.fold(None)
    }

    fn register(&self, resource: wit::ResourceId, permits: u32) -> Result<bool, wit::Error> {
        let id = id_in(&resource)?;
        #[cfg(feature = "trap-test")]
        trap_test(id.kind());
        let entry = || wit::LogEntry::Register(wit::LoggedRegister { resource, permits });
        self.logged(entry, |p, now| p.register(id, permits, now))
    }

    fn unregister(&self, resource: wit::ResourceId, force: bool) -> Result<(), wit::Error> {
        let id = id_in(&resource)?;
        let entry = || wit::LogEntry::Unregister(wit::LoggedUnregister { resource, force });
        self.logged(entry, |p, now| p.unregister(&id, force, now))
    }

    fn acquire(&self, context: String) -> Result<wit::Grant, wit::Error> {
        let known = self.pool.borrow().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        self.op(|p, now| p.acquire(&context, now).map(|l| grant_out(p, &l))).map_err(err_out)
    }

    fn propose(&self, context: String, in_flight: Vec<wit::RefusedPermit>) -> Result<wit::Proposal, wit::Error> {
        let known = self.pool.borrow().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        let in_flight = permits_in(in_flight);
        self.op(|p, now| p.propose(&context, now, &in_flight).map(proposal_out)).map_err(err_out)
    }

    fn settle(
        &self,
        context: String,
        proposal: wit::Proposal,
        answer: Option<u64>,
        in_flight: Vec<wit::RefusedPermit>,
    ) -> Result<wit::Settled, wit::Error> {
        let known = self.pool.borrow().known_context(&context);
        let context = known.map_or_else(|| ctx_in(&context), Ok)?;
        let mut pool = self.pool.borrow_mut();
        let settled = pool.settle(&context, proposal_in(proposal), answer, &permits_in(in_flight)).map_err(err_out)?;
        let settled = match settled {
            Settled::Granted(l) => wit::Settled::Granted(grant_out(&pool, &l)),
            Settled::Next(p) => wit::Settled::Next(proposal_out(p)),
        };
        emit_pending(&mut pool);
        Ok(settled)
    }

    fn acquire_for_probe(&self, resource: wit::ResourceId, context: String) -> Result<wit::Grant, wit::Error> {
        let id = id_in(&resource)?;
        let context = ctx_in(&context)?;
        self.op(|p, now| p.acquire_for_probe(&id, &context, now).map(|l| grant_out(p, &l))).map_err(err_out)
    }

    fn renew(&self, id: u64, token: u64) -> Result<wit::Renewal, wit::Error> {
        self.op(|p, now| {
            p.renew(id, token, now)
                .map(|l| wit::Renewal { grant: grant_out(p, &l), context: l.context.as_str().into() })
        })
        .map_err(err_out)
    }

    fn release(&self, id: u64, token: u64) -> Result<(), wit::Error> {
        self.op(|p, now| p.release(id, token, now)).map_err(err_out)
    }

    fn get_lease(&self, id: u64) -> Option<wit::Lease> {
        self.op(|p, now| p.lease(id, now)).map(lease_out)
    }

    fn resource_of(&self, key: wit::ResourceKey) -> Option<wit::ResourceId> {
        let key = key_in(key);
        self.pool.borrow().resource_at(key).map(id_out)
    }

    fn report(&self, resource: wit::ResourceId, context: String, outcome: wit::Outcome) -> Result<(), wit::Error> {
        let id = id_in(&resource)?;
        let ctx = ctx_in(&context)?;
        let parsed = outcome_in(outcome)?;
        let entry = || wit::LogEntry::Report(wit::LoggedReport { resource, context, outcome });
        self.logged(entry, |p, now| p.report(&id, &ctx, parsed, now))
    }

    fn block(
        &self,
        resource: wit::ResourceId,
        context: Option<String>,
        duration: Option<u64>,
        reason: Option<String>,
    ) -> Result<(), wit::Error> {
        let id = id_in(&resource)?;
        let ctx = context.as_deref().map(ctx_in).transpose()?;
        let logged_reason = reason.clone();
        let entry = || wit::LogEntry::Block(wit::LoggedBlock { resource, context, duration, reason: logged_reason });
        self.logged(entry, |p, now| p.block(&id, ctx.as_ref(), duration, reason, now))
    }

    fn unblock(&self, resource: wit::ResourceId, context: Option<String>) -> Result<bool, wit::Error> {
        let id = id_in(&resource)?;
        let ctx = context.as_deref().map(ctx_in).transpose()?;
        let entry = || wit::LogEntry::Unblock(wit::LoggedUnblock { resource, context });
        self.logged(entry, |p, now| p.unblock(&id, ctx.as_ref(), now))
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
        let bytes = self.op(|p, now| p.snapshot(now, with_leases));
        let version = storage::save(&bytes, self.version.get(), self.log_seq.get()).map_err(wit::Error::Storage)?;
        self.version.set(version);
        Ok(version)
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

// ---- conversions in ----

fn id_in(r: &wit::ResourceId) -> Result<ResourceId, wit::Error> {
    ResourceId::new(r.kind.as_str(), r.value.as_str()).map_err(err_out)
}

fn ctx_in(c: &str) -> Result<Context, wit::Error> {
    Context::new(c).map_err(err_out)
}

fn kind_in(k: wit::FailureKind) -> FailureKind {
    match k {
        wit::FailureKind::ConnectionReset => FailureKind::ConnectionReset,
        wit::FailureKind::TlsHandshake => FailureKind::TlsHandshake,
        wit::FailureKind::Timeout => FailureKind::Timeout,
        wit::FailureKind::Blocked => FailureKind::Blocked,
        wit::FailureKind::Slow => FailureKind::Slow,
        wit::FailureKind::RateLimited => FailureKind::RateLimited,
        wit::FailureKind::QuotaExhausted => FailureKind::QuotaExhausted,
        wit::FailureKind::AuthFailed => FailureKind::AuthFailed,
    }
}

fn outcome_in(o: wit::Outcome) -> Result<Outcome, wit::Error> {
    match o {
        wit::Outcome::Success(latency) => Outcome::success(latency),
        wit::Outcome::Failure(f) => match f.retry_after {
            Some(wait) => Outcome::failure_retry_after(kind_in(f.kind), f.latency_ms, wait),
            None => Outcome::failure(kind_in(f.kind), f.latency_ms),
        },
    }
    .map_err(err_out)
}

fn opt_ctx_in(c: &Option<String>) -> Result<Option<Context>, wit::Error> {
    c.as_deref().map(ctx_in).transpose()
}

/// A log entry as a command, validated like the call that made it.
fn command_in(e: &wit::LogEntry) -> Result<Command, wit::Error> {
    Ok(match e {
        wit::LogEntry::Report(r) => Command::Report {
            resource: id_in(&r.resource)?,
            context: ctx_in(&r.context)?,
            outcome: outcome_in(r.outcome)?,
        },
        wit::LogEntry::Register(r) => Command::Register { resource: id_in(&r.resource)?, permits: r.permits },
        wit::LogEntry::Unregister(r) => Command::Unregister { resource: id_in(&r.resource)?, force: r.force },
        wit::LogEntry::Block(b) => Command::Block {
            resource: id_in(&b.resource)?,
            context: opt_ctx_in(&b.context)?,
            duration: b.duration,
            reason: b.reason.clone(),
        },
        wit::LogEntry::Unblock(u) => {
            Command::Unblock { resource: id_in(&u.resource)?, context: opt_ctx_in(&u.context)? }
        }
    })
}

fn policy_in(p: wit::Policy) -> Policy {
    Policy {
        strategy: match p.strategy {
            wit::Strategy::Classic => Strategy::Classic,
            wit::Strategy::Thompson => Strategy::Thompson,
            wit::Strategy::First => Strategy::First,
        },
        window: p.window,
        cool_after: p.cool_after,
        recover_after: p.recover_after,
        max_exponent: p.max_exponent,
        exploration_floor: p.exploration_floor,
        lease_ttl: p.lease_ttl,
        probe_ttl: p.probe_ttl,
        decay: p.decay,
        max_resources: p.max_resources,
        max_cells: p.max_cells,
        rate_limit: p.rate_limit.map(|r| RateLimit { rate: r.rate, burst: r.burst }),
        recovery: match p.recovery {
            wit::Recovery::Traffic => Recovery::Traffic,
            wit::Recovery::Probe => Recovery::Probe,
            wit::Recovery::Classic => Recovery::Classic,
        },
        fail_open: p.fail_open,
        rules: p
            .rules
            .into_iter()
            .map(|r| {
                (kind_in(r.kind), CoolingRule { base: r.base, cool_after: r.cool_after, max_exponent: r.max_exponent })
            })
            .collect(),
    }
}

// ---- conversions out ----

fn id_out(r: &ResourceId) -> wit::ResourceId {
    wit::ResourceId { kind: r.kind().into(), value: r.value().into() }
}

fn kind_out(k: FailureKind) -> wit::FailureKind {
    match k {
        FailureKind::ConnectionReset => wit::FailureKind::ConnectionReset,
        FailureKind::TlsHandshake => wit::FailureKind::TlsHandshake,
        FailureKind::Timeout => wit::FailureKind::Timeout,
        FailureKind::Blocked => wit::FailureKind::Blocked,
        FailureKind::Slow => wit::FailureKind::Slow,
        FailureKind::RateLimited => wit::FailureKind::RateLimited,
        FailureKind::QuotaExhausted => wit::FailureKind::QuotaExhausted,
        FailureKind::AuthFailed => wit::FailureKind::AuthFailed,
    }
}

fn invalid_out(field: &str, rule: &str) -> wit::InvalidInput {
    wit::InvalidInput { field: field.to_string(), rule: rule.to_string() }
}

fn err_out(e: Error) -> wit::Error {
    match e {
        Error::InvalidInput { field, rule } => wit::Error::InvalidInput(invalid_out(field, rule)),
        Error::UnknownResource => wit::Error::UnknownResource,
        Error::UnknownLease => wit::Error::UnknownLease,
        Error::StaleLease => wit::Error::StaleLease,
        Error::LeaseExpired => wit::Error::LeaseExpired,
        Error::Blocked => wit::Error::Blocked,
        Error::NoResourceAvailable(r) => wit::Error::NoResourceAvailable(wit::Refusal {
            registered: r.registered,
            blocked: r.blocked,
            rate_limited: r.rate_limited,
            cooling: r.cooling,
            leased: r.leased,
            retry_after: r.retry_after,
        }),
        Error::Leased { live } => wit::Error::Leased(live),
        Error::BudgetExhausted { budget, limit } => {
            wit::Error::BudgetExhausted(wit::Budget { name: budget.to_string(), limit })
        }
        Error::RateLimited { retry_after } => wit::Error::RateLimited(retry_after),
        Error::Snapshot(s) => wit::Error::Snapshot(match s {
            SnapshotError::Truncated => wit::SnapshotError::Truncated,
            SnapshotError::Foreign => wit::SnapshotError::Foreign,
            SnapshotError::UnsupportedVersion { found, supported } => {
                wit::SnapshotError::UnsupportedVersion(wit::VersionMismatch { found, supported })
            }
            SnapshotError::Checksum => wit::SnapshotError::Checksum,
            SnapshotError::Malformed => wit::SnapshotError::Malformed,
            SnapshotError::Invalid { field, rule } => wit::SnapshotError::Invalid(invalid_out(field, rule)),
        }),
    }
}

fn lease_kind_out(k: LeaseKind) -> wit::LeaseKind {
    match k {
        LeaseKind::Client => wit::LeaseKind::Client,
        LeaseKind::Trial => wit::LeaseKind::Trial,
        LeaseKind::Probe => wit::LeaseKind::Probe,
        LeaseKind::FailOpen => wit::LeaseKind::FailOpen,
    }
}

fn lease_out(l: Lease) -> wit::Lease {
    wit::Lease {
        id: l.id,
        resource: id_out(&l.resource),
        context: l.context.as_str().into(),
        permit: l.permit,
        token: l.token,
        kind: lease_kind_out(l.kind),
        granted_at: l.granted_at,
        expires_at: l.expires_at,
        ttl: l.ttl,
    }
}

/// Hands the events of the call that just ran to the host, in one batch.
fn emit_pending(pool: &mut Pool) {
    if !pool.pending_events().is_empty() {
        let batch: Vec<wit::Event> = pool.drain_events().into_iter().map(event_out).collect();
        events::emit(&batch);
    }
}

fn key_out(k: ResourceKey) -> wit::ResourceKey {
    wit::ResourceKey { slot: k.slot, serial: k.serial }
}

fn key_in(k: wit::ResourceKey) -> ResourceKey {
    ResourceKey { slot: k.slot, serial: k.serial }
}

fn proposal_out(p: Proposal) -> wit::Proposal {
    wit::Proposal {
        resource: key_out(p.resource),
        permit: p.permit,
        last: p.last,
        ttl: p.ttl,
        at: p.at,
        refused: p.refused.into_iter().map(|(k, permit)| wit::RefusedPermit { resource: key_out(k), permit }).collect(),
        fail_open: p.fail_open,
    }
}

fn permits_in(permits: Vec<wit::RefusedPermit>) -> Vec<(ResourceKey, u32)> {
    permits.into_iter().map(|r| (key_in(r.resource), r.permit)).collect()
}

fn proposal_in(p: wit::Proposal) -> Proposal {
    Proposal {
        resource: key_in(p.resource),
        permit: p.permit,
        last: p.last,
        ttl: p.ttl,
        at: p.at,
        refused: permits_in(p.refused),
        fail_open: p.fail_open,
    }
}

/// A lease the pool has just granted or renewed, so it is live and has a key.
fn grant_out(p: &Pool, l: &Lease) -> wit::Grant {
    let key = p.lease_key(l.id).expect("a lease just granted or renewed is live");
    wit::Grant {
        id: l.id,
        resource: key_out(key),
        permit: l.permit,
        token: l.token,
        kind: lease_kind_out(l.kind),
        granted_at: l.granted_at,
        expires_at: l.expires_at,
        ttl: l.ttl,
    }
}

fn block_out(b: Option<Block>) -> Option<wit::Block> {
    b.map(|b| wit::Block { until: b.until, reason: b.reason })
}

fn cell_out(c: CellView) -> wit::CellView {
    wit::CellView {
        context: c.context.map(|c| c.as_str().into()),
        state: match c.state {
            CellState::Healthy => wit::CellState::Healthy,
            CellState::Cooling => wit::CellState::Cooling,
            CellState::Recovering => wit::CellState::Recovering,
            CellState::Blocklisted => wit::CellState::Blocklisted,
        },
        score: c.score,
        effective_score: c.effective_score,
        consecutive_failures: c.consecutive_failures,
        consecutive_successes: c.consecutive_successes,
        cooling_until: c.cooling_until,
        cause: c.cause.map(kind_out),
        half_open: c.half_open,
        due_for_probe: c.due_for_probe,
        success_rate: c.success_rate,
        latency_ms: c.latency_ms,
        observations: c.observations,
        block: block_out(c.block),
    }
}

fn resource_view_out(r: ResourceView) -> wit::ResourceView {
    wit::ResourceView {
        resource: id_out(&r.resource),
        permits: r.permits,
        leased: r.leased,
        score: r.score,
        contexts: r.contexts,
        block: block_out(r.block),
    }
}

fn stats_out(s: Stats) -> wit::Stats {
    wit::Stats {
        resources: s.resources,
        cells: s.cells,
        contexts: s.contexts,
        live_leases: s.live_leases,
        available: s.available,
        due_for_probe: s.due_for_probe,
        now: s.now,
        footprint: s.footprint,
    }
}

fn event_out(e: Event) -> wit::Event {
    let kind = match e.kind {
        EventKind::Registered { resource, permits } => {
            wit::EventKind::Registered(wit::Registered { resource: id_out(&resource), permits })
        }
        EventKind::Unregistered { resource } => wit::EventKind::Unregistered(id_out(&resource)),
        EventKind::Cooled { resource, context, until, cause } => wit::EventKind::Cooled(wit::Cooled {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
            until,
            cause: kind_out(cause),
        }),
        EventKind::Recovered { resource, context } => wit::EventKind::Recovered(wit::ResourceContext {
            resource: id_out(&resource),
            context: context.as_str().into(),
        }),
        EventKind::Blocklisted { resource, context, until, reason } => wit::EventKind::Blocklisted(wit::Blocklisted {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
            until,
            reason,
        }),
        EventKind::Unblocked { resource, context } => wit::EventKind::Unblocked(wit::Unblocked {
            resource: id_out(&resource),
            context: context.map(|c| c.as_str().into()),
        }),
        EventKind::Leased { lease } => wit::EventKind::Leased(lease_out(lease)),
        EventKind::Renewed { lease } => wit::EventKind::Renewed(lease_out(lease)),
        EventKind::Released { lease } => wit::EventKind::Released(lease_out(lease)),
        EventKind::LeaseExpired { lease } => wit::EventKind::LeaseExpired(lease_out(lease)),
        EventKind::Revoked { lease } => wit::EventKind::Revoked(lease_out(lease)),
        EventKind::Rejected { context, reason } => wit::EventKind::Rejected(wit::Rejected {
            context: context.as_str().into(),
            reason: match reason {
                RejectReason::NoCandidates => wit::RejectReason::NoCandidates,
                RejectReason::RateLimited => wit::RejectReason::RateLimited,
            },
        }),
    };
    wit::Event { at: e.at, kind }
}
