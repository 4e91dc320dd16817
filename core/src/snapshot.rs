//! The snapshot codec: a versioned, checksummed binary form of the whole pool
//! state (and a JSON view of the same data for people and tools).
//!
//! Binary layout, little endian:
//!
//! ```text
//! magic "RPUTSNAP" | version u16 | flags u16 | body length u32 | crc32(body) u32 | body (postcard)
//! ```
//!
//! Times are stored relative to the snapshot instant because each process has
//! its own monotonic clock; restore re-bases them on the restoring caller's
//! `now`. Leases, when included, store their TTL only: a restored lease gets its
//! full TTL from the restore instant, never a shortened remainder.
//!
//! Decoding builds a complete new pool before anything is replaced, so a
//! refused snapshot leaves the pool exactly as it was.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::{Deserialize, Serialize};

use crate::cell::{Cell, Pause, Phase, MAX_SCORE, MIN_SCORE};
use crate::error::{Error, Result};
use crate::id::{Context, ResourceId};
use crate::lease::{Lease, LeaseEntry, LeaseKind};
use crate::outcome::{FailureKind, Outcome, MAX_RETRY_AFTER};
use crate::permits::{self, Permits};
use crate::policy::{Policy, RateLimit};
use crate::pool::{Block, ContextCell, Pool, Resource, Timer, MAX_PERMITS, MAX_REASON_BYTES};
use crate::ratelimit::Bucket;
use crate::rng::Rng;

pub const MAGIC: [u8; 8] = *b"RPUTSNAP";
/// The format this build writes and the only one it reads.
pub const VERSION: u16 = 2;
const HEADER: usize = 8 + 2 + 2 + 4 + 4;
const FLAG_LEASES: u16 = 1;
/// Every flag this build knows; a snapshot with any other bit set was
/// written by something this build does not understand, so it is refused.
const KNOWN_FLAGS: u16 = FLAG_LEASES;
/// Largest lease id, fence counter or observation count a snapshot may
/// carry. Each only ever grows by one per operation, so a value past half the
/// range was not written by a pool; accepting it would let the counter wrap
/// to ids and tokens already handed out.
pub const MAX_COUNTER: u64 = u64::MAX / 2;

/// Why a snapshot was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// Shorter than its header or its declared body.
    Truncated,
    /// Not a repute snapshot (wrong magic).
    Foreign,
    /// Written by a newer (or unknown) format version.
    UnsupportedVersion { found: u16, supported: u16 },
    /// The body does not match its checksum.
    Checksum,
    /// The body or JSON does not decode.
    Malformed,
    /// Decoded, but a value breaks a rule of the pool.
    Invalid { field: &'static str, rule: &'static str },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Truncated => f.write_str("truncated"),
            SnapshotError::Foreign => f.write_str("not a repute snapshot"),
            SnapshotError::UnsupportedVersion { found, supported } => {
                write!(f, "format version {found} is not supported (this build reads format {supported})")
            }
            SnapshotError::Checksum => f.write_str("checksum mismatch"),
            SnapshotError::Malformed => f.write_str("body does not decode"),
            SnapshotError::Invalid { field, rule } => write!(f, "invalid {field}: {rule}"),
        }
    }
}

fn invalid(field: &'static str, rule: &'static str) -> SnapshotError {
    SnapshotError::Invalid { field, rule }
}

const COUNTER_RULE: &str = "must be at most u64::MAX / 2 (a counter this high could wrap)";

fn counter(value: u64, field: &'static str) -> Result<u64, SnapshotError> {
    if value > MAX_COUNTER {
        return Err(invalid(field, COUNTER_RULE));
    }
    Ok(value)
}

fn counters(values: &[u64], field: &'static str) -> Result<(), SnapshotError> {
    values.iter().try_for_each(|&v| counter(v, field).map(drop))
}

/// The serialized state. Field order is part of the binary format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SnapshotData {
    policy: Policy,
    rng: Rng,
    next_lease_id: u64,
    rate_tokens: Option<f64>,
    resources: Vec<ResourceRecord>,
    cells: Vec<CellRecord>,
    retired_fences: Vec<(ResourceId, Vec<u64>)>,
    leases: Option<Vec<LeaseRecord>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ResourceRecord {
    resource: ResourceId,
    permits: u32,
    fences: Vec<u64>,
    block: Option<BlockRecord>,
    pause: Option<PauseRecord>,
    global: CellRecordData,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CellRecord {
    resource: ResourceId,
    context: Context,
    cell: CellRecordData,
    block: Option<BlockRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BlockRecord {
    remaining: Option<u64>,
    reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WindowEntry {
    failure: Option<FailureKind>,
    latency_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PauseRecord {
    remaining: u64,
    cause: FailureKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum PhaseRecord {
    Healthy,
    Cooling { remaining: u64, cause: FailureKind },
    Recovering,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CellRecordData {
    score: i32,
    window: Vec<WindowEntry>,
    consecutive_failures: u32,
    consecutive_successes: u32,
    phase: PhaseRecord,
    successes: f64,
    failures: f64,
    latency_ms: f64,
    observations: u64,
    pause: Option<PauseRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LeaseRecord {
    id: u64,
    resource: ResourceId,
    context: Context,
    permit: u32,
    token: u64,
    kind: LeaseKind,
    ttl: u64,
}

fn block_out(b: &Option<Block>, now: u64) -> Option<BlockRecord> {
    b.as_ref().map(|b| BlockRecord { remaining: b.until.map(|u| u.saturating_sub(now)), reason: b.reason.clone() })
}

fn block_in(b: Option<BlockRecord>, now: u64) -> Result<Option<Block>, SnapshotError> {
    let Some(b) = b else { return Ok(None) };
    if b.remaining == Some(0) {
        return Ok(None);
    }
    if let Some(r) = &b.reason {
        if r.len() > MAX_REASON_BYTES || r.chars().any(char::is_control) {
            return Err(invalid("block.reason", "at most 1024 bytes, no control characters"));
        }
    }
    Ok(Some(Block { until: b.remaining.map(|r| now.saturating_add(r)), reason: b.reason }))
}

fn pause_out(p: Option<Pause>, now: u64) -> Option<PauseRecord> {
    p.map(|p| PauseRecord { remaining: p.until.saturating_sub(now), cause: p.cause })
}

/// A pause of `cause` (the one kind that pauses this layer); an ended one is dropped.
fn pause_in(p: Option<PauseRecord>, now: u64, cause: FailureKind) -> Result<Option<Pause>, SnapshotError> {
    let Some(p) = p else { return Ok(None) };
    if p.cause != cause {
        return Err(invalid("pause.cause", "must be rate_limited for a cell, quota_exhausted for a resource"));
    }
    if p.remaining > MAX_RETRY_AFTER {
        return Err(invalid("pause.remaining", "must be at most 30 days"));
    }
    Ok((p.remaining > 0).then(|| Pause { until: now.saturating_add(p.remaining), cause }))
}

fn cell_out(c: &Cell, now: u64) -> CellRecordData {
    CellRecordData {
        score: c.score,
        window: c
            .window
            .iter()
            .map(|o| WindowEntry {
                failure: match o {
                    Outcome::Success { .. } => None,
                    Outcome::Failure { kind, .. } => Some(*kind),
                },
                latency_ms: o.latency_ms(),
            })
            .collect(),
        consecutive_failures: c.consecutive_failures,
        consecutive_successes: c.consecutive_successes,
        phase: match c.phase {
            Phase::Healthy => PhaseRecord::Healthy,
            Phase::Cooling { until, cause } => PhaseRecord::Cooling { remaining: until.saturating_sub(now), cause },
            Phase::Recovering => PhaseRecord::Recovering,
        },
        successes: c.successes,
        failures: c.failures,
        latency_ms: c.latency_ms,
        observations: c.observations,
        pause: pause_out(c.pause, now),
    }
}

fn finite_nonneg(x: f64, field: &'static str) -> Result<f64, SnapshotError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(invalid(field, "must be finite and >= 0"))
    }
}

fn cell_in(d: CellRecordData, now: u64, policy: &Policy) -> Result<Cell, SnapshotError> {
    if !(MIN_SCORE..=MAX_SCORE).contains(&d.score) {
        return Err(invalid("cell.score", "must be in -100..=100"));
    }
    if d.window.len() > policy.window as usize {
        return Err(invalid("cell.window", "must not be longer than policy.window"));
    }
    let mut window = VecDeque::with_capacity(d.window.len());
    for w in d.window {
        let latency_ms = finite_nonneg(w.latency_ms, "cell.window.latency")?;
        window.push_back(match w.failure {
            None => Outcome::Success { latency_ms },
            Some(kind) => Outcome::Failure { kind, latency_ms, retry_after: None },
        });
    }
    if let PhaseRecord::Cooling { cause, .. } = d.phase {
        if !cause.is_strike() {
            return Err(invalid("cell.phase.cause", "only a strike failure kind cools a cell"));
        }
    }
    Ok(Cell {
        score: d.score,
        window,
        consecutive_failures: d.consecutive_failures,
        consecutive_successes: d.consecutive_successes,
        phase: match d.phase {
            PhaseRecord::Healthy => Phase::Healthy,
            PhaseRecord::Cooling { remaining, cause } => Phase::Cooling { until: now.saturating_add(remaining), cause },
            PhaseRecord::Recovering => Phase::Recovering,
        },
        successes: finite_nonneg(d.successes, "cell.successes")?,
        failures: finite_nonneg(d.failures, "cell.failures")?,
        latency_ms: finite_nonneg(d.latency_ms, "cell.latency")?,
        observations: counter(d.observations, "cell.observations")?,
        pause: pause_in(d.pause, now, FailureKind::RateLimited)?,
    })
}

impl SnapshotData {
    fn capture(pool: &Pool, now: u64, with_leases: bool) -> SnapshotData {
        let mut resources: Vec<ResourceRecord> = pool
            .resources
            .iter()
            .flatten()
            .map(|r| ResourceRecord {
                resource: r.id.clone(),
                permits: r.permits.count() as u32,
                fences: r.permits.fences().to_vec(),
                block: block_out(&r.block, now),
                pause: pause_out(r.pause, now),
                global: cell_out(&r.global, now),
            })
            .collect();
        resources.sort_by(|a, b| a.resource.cmp(&b.resource));
        let mut cells: Vec<CellRecord> = pool
            .cells
            .iter()
            .map(|(&(slot, ctx), cc)| CellRecord {
                resource: pool.res(slot).id.clone(),
                context: pool.contexts[ctx as usize].clone(),
                cell: cell_out(&cc.cell, now),
                block: block_out(&cc.block, now),
            })
            .collect();
        cells.sort_by(|a, b| (&a.resource, &a.context).cmp(&(&b.resource, &b.context)));
        let leases = with_leases.then(|| {
            let mut l: Vec<LeaseRecord> = pool
                .leases
                .live
                .values()
                .map(|e| LeaseRecord {
                    id: e.lease.id,
                    resource: e.lease.resource.clone(),
                    context: e.lease.context.clone(),
                    permit: e.lease.permit,
                    token: e.lease.token,
                    kind: e.lease.kind,
                    ttl: e.lease.ttl,
                })
                .collect();
            l.sort_by_key(|l| l.id);
            l
        });
        SnapshotData {
            policy: pool.policy.clone(),
            rng: pool.rng.clone(),
            next_lease_id: pool.leases.next_id,
            rate_tokens: pool.bucket.as_ref().map(|b| b.tokens),
            resources,
            cells,
            retired_fences: pool.retired_fences.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            leases,
        }
    }

    /// The pool this data describes, its registrations numbered from `first_serial`.
    fn build(self, now: u64, first_serial: u64) -> Result<Pool, SnapshotError> {
        self.policy.validate().map_err(|e| match e {
            Error::InvalidInput { field, rule } => invalid(field, rule),
            _ => SnapshotError::Malformed,
        })?;
        let id_err = |_| invalid("resource", "kind and value must be valid resource ids");
        let mut pool = Pool::empty(self.policy.clone(), self.rng, now);
        pool.next_serial = first_serial;
        pool.leases.next_id = counter(self.next_lease_id, "next_lease_id")?.max(1);
        if let Some(max) = self.policy.max_resources {
            if self.resources.len() > max as usize {
                return Err(invalid("resources", "must not outnumber policy.max_resources"));
            }
        }
        if let Some(max) = self.policy.max_cells {
            if self.cells.len() > max as usize {
                return Err(invalid("cells", "must not outnumber policy.max_cells"));
            }
        }
        if let (Some(limit), Some(tokens)) = (self.policy.rate_limit, self.rate_tokens) {
            if !(tokens.is_finite() && tokens <= limit.burst as f64) {
                return Err(invalid("rate_tokens", "must be finite and at most the burst"));
            }
            pool.bucket = Some(Bucket { tokens, last: now });
        }
        for r in self.resources {
            r.resource.revalidate().map_err(id_err)?;
            if !(1..=MAX_PERMITS).contains(&r.permits) {
                return Err(invalid("resource.permits", "must be in 1..=1024"));
            }
            if r.fences.len() < r.permits as usize {
                return Err(invalid("resource.fences", "one counter per permit at least"));
            }
            counters(&r.fences, "resource.fences")?;
            if pool.by_id.contains_key(&r.resource) {
                return Err(invalid("resource", "listed twice"));
            }
            let slot = pool.resources.len() as u32;
            pool.by_id.insert(r.resource.clone(), slot);
            let serial = pool.take_serial();
            pool.resources.push(Some(Resource {
                id: r.resource,
                serial,
                permits: Permits::new(r.permits, r.fences),
                block: block_in(r.block, now)?,
                pause: pause_in(r.pause, now, FailureKind::QuotaExhausted)?,
                global: cell_in(r.global, now, &self.policy)?,
                contexts: Vec::new(),
            }));
        }
        for c in self.cells {
            c.context.revalidate().map_err(|_| invalid("cell.context", "must be a valid context"))?;
            let slot = *pool.by_id.get(&c.resource).ok_or(invalid("cell.resource", "must be registered"))?;
            let ctx = match pool.context_ids.get(&c.context) {
                Some(&x) => x,
                None => {
                    pool.contexts.push(c.context.clone());
                    let x = (pool.contexts.len() - 1) as u32;
                    pool.context_ids.insert(c.context, x);
                    x
                }
            };
            let cell = ContextCell::new(cell_in(c.cell, now, &self.policy)?, block_in(c.block, now)?);
            if pool.cells.insert((slot, ctx), cell).is_some() {
                return Err(invalid("cell", "listed twice"));
            }
            pool.resources[slot as usize].as_mut().expect("just added").contexts.push(ctx);
        }
        for (id, fences) in self.retired_fences {
            id.revalidate().map_err(id_err)?;
            if pool.by_id.contains_key(&id) {
                return Err(invalid("retired_fences", "must not name a registered resource"));
            }
            counters(&fences, "retired_fences")?;
            pool.retired_fences.insert(id, fences);
        }
        for l in self.leases.unwrap_or_default() {
            let slot = *pool.by_id.get(&l.resource).ok_or(invalid("lease.resource", "must be registered"))?;
            l.context.revalidate().map_err(|_| invalid("lease.context", "must be a valid context"))?;
            if l.ttl == 0 {
                return Err(invalid("lease.ttl", "must be > 0"));
            }
            if l.id == 0 || l.id >= pool.leases.next_id || pool.leases.live.contains_key(&l.id) {
                return Err(invalid("lease.id", "must be unique and below next_lease_id"));
            }
            let r = pool.resources[slot as usize].as_mut().expect("registered");
            let p = l.permit as usize;
            if p >= r.permits.count() || r.permits.holder(p).is_some() {
                return Err(invalid("lease.permit", "must be a free permit of the resource"));
            }
            if l.token == 0 || l.token > r.permits.fences()[p] {
                return Err(invalid("lease.token", "must be minted by the permit's fence counter"));
            }
            r.permits.hold(p, l.id);
            let lease = Lease {
                id: l.id,
                resource: l.resource,
                context: l.context,
                permit: l.permit,
                token: l.token,
                kind: l.kind,
                granted_at: now,
                expires_at: now.saturating_add(l.ttl),
                ttl: l.ttl,
            };
            if let Some(cc) = pool.context_ids.get(&lease.context).and_then(|c| pool.cells.get_mut(&(slot, *c))) {
                match lease.kind {
                    LeaseKind::Trial => cc.trial = Some(lease.id),
                    LeaseKind::Probe => cc.probe = Some(lease.id),
                    LeaseKind::Client | LeaseKind::FailOpen => {}
                }
            }
            pool.timers.arm(lease.expires_at, Timer::Lease(lease.id));
            pool.leases.live.insert(lease.id, LeaseEntry { lease, slot });
        }
        pool.arm_timers();
        Ok(pool)
    }
}

impl Pool {
    /// Timers and probe set derived from restored state.
    fn arm_timers(&mut self) {
        let now = self.now;
        for (slot, r) in self.resources.iter().enumerate() {
            let Some(r) = r else { continue };
            if let Some(until) = r.block.as_ref().and_then(|b| b.until) {
                self.timers.arm(until, Timer::Block(slot as u32, None));
            }
            if let Some(p) = r.pause {
                self.timers.arm(p.until, Timer::Pause(slot as u32, None));
            }
        }
        for (&(slot, ctx), cc) in &self.cells {
            if let Some(until) = cc.block.as_ref().and_then(|b| b.until) {
                self.timers.arm(until, Timer::Block(slot, Some(ctx)));
            }
            if let Some(p) = cc.cell.pause {
                self.timers.arm(p.until, Timer::Pause(slot, Some(ctx)));
            }
            if let Phase::Cooling { until, cause } = cc.cell.phase {
                if until > now {
                    self.timers.arm(until, Timer::Cooldown(slot, ctx));
                } else if self.policy.recovery.probes(cause) && cc.probe.is_none() {
                    self.probe_due.insert((slot, ctx));
                }
            }
        }
        for slot in 0..self.resources.len() as u32 {
            self.reindex(slot);
        }
    }

    /// The binary snapshot at `now`; `with_leases` also stores live leases.
    pub fn snapshot(&mut self, now: u64, with_leases: bool) -> Vec<u8> {
        self.advance(now);
        encode(&SnapshotData::capture(self, self.now, with_leases))
    }

    /// The same state as pretty JSON, for inspection and hand edits.
    pub fn snapshot_json(&mut self, now: u64, with_leases: bool) -> String {
        self.advance(now);
        to_json(&SnapshotData::capture(self, self.now, with_leases))
    }

    /// A new pool from a binary snapshot, its times re-based on `now`.
    pub fn from_snapshot(bytes: &[u8], now: u64) -> Result<Pool> {
        Ok(decode(bytes)?.build(now, 0)?)
    }

    /// Replaces this pool's state with a snapshot's. Fence counters and lease
    /// ids never go backwards: each keeps the larger of the two pools' values,
    /// so restoring an older snapshot cannot re-issue a token.
    pub fn restore(&mut self, bytes: &[u8], now: u64) -> Result<()> {
        let data = decode(bytes)?;
        self.replace_with(data, now)
    }

    /// `restore` from the JSON form.
    pub fn restore_json(&mut self, json: &str, now: u64) -> Result<()> {
        let data = from_json(json)?;
        self.replace_with(data, now)
    }

    fn replace_with(&mut self, data: SnapshotData, now: u64) -> Result<()> {
        self.advance(now);
        // Serials continue, so no key handed out before names a resource after.
        let mut next = data.build(self.now, self.next_serial)?;
        next.leases.raise_ids(self.leases.next_id);
        let mut old: BTreeMap<&ResourceId, &[u64]> = self.retired_fences.iter().map(|(k, v)| (k, &v[..])).collect();
        for r in self.resources.iter().flatten() {
            old.insert(&r.id, r.permits.fences());
        }
        for (id, fences) in old {
            match next.by_id.get(id) {
                Some(&slot) => next.resources[slot as usize].as_mut().expect("registered").permits.raise(fences),
                None => permits::raise(next.retired_fences.entry(id.clone()).or_default(), fences),
            }
        }
        core::mem::swap(&mut next.authority, &mut self.authority);
        next.events = core::mem::take(&mut self.events);
        next.record_events = self.record_events;
        next.leases.take_ended(&mut self.leases);
        *self = next;
        Ok(())
    }
}

fn encode(data: &SnapshotData) -> Vec<u8> {
    let body = postcard::to_allocvec(data).expect("snapshot data serializes");
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let flags = if data.leases.is_some() { FLAG_LEASES } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode(bytes: &[u8]) -> Result<SnapshotData, SnapshotError> {
    if bytes.len() < 8 {
        return Err(if MAGIC.starts_with(bytes) { SnapshotError::Truncated } else { SnapshotError::Foreign });
    }
    if bytes[..8] != MAGIC {
        return Err(SnapshotError::Foreign);
    }
    if bytes.len() < HEADER {
        return Err(SnapshotError::Truncated);
    }
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let version = u16_at(8);
    // Format 1 lacked pauses and the recovery rules: it is refused, not guessed at.
    if version != VERSION {
        return Err(SnapshotError::UnsupportedVersion { found: version, supported: VERSION });
    }
    let len = u32_at(12) as usize;
    let body = &bytes[HEADER..];
    if body.len() < len {
        return Err(SnapshotError::Truncated);
    }
    if body.len() > len {
        return Err(SnapshotError::Malformed);
    }
    if crc32fast::hash(body) != u32_at(16) {
        return Err(SnapshotError::Checksum);
    }
    let flags = u16_at(10);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(invalid("flags", "unknown flag bits are set"));
    }
    let (data, rest): (SnapshotData, _) = postcard::take_from_bytes(body).map_err(|_| SnapshotError::Malformed)?;
    if !rest.is_empty() {
        return Err(invalid("body", "must end where its data ends (trailing bytes)"));
    }
    if data.leases.is_some() != (flags & FLAG_LEASES != 0) {
        return Err(SnapshotError::Malformed);
    }
    Ok(data)
}

fn to_json(data: &SnapshotData) -> String {
    #[derive(Serialize)]
    struct Versioned<'a> {
        format: u16,
        #[serde(flatten)]
        data: &'a SnapshotData,
    }
    serde_json::to_string_pretty(&Versioned { format: VERSION, data }).expect("snapshot data serializes")
}

fn from_json(json: &str) -> Result<SnapshotData, SnapshotError> {
    #[derive(Deserialize)]
    struct Format {
        format: u16,
    }
    let f: Format = serde_json::from_str(json).map_err(|_| SnapshotError::Malformed)?;
    if f.format != VERSION {
        return Err(SnapshotError::UnsupportedVersion { found: f.format, supported: VERSION });
    }
    #[derive(Deserialize)]
    struct Versioned {
        #[allow(dead_code)]
        format: u16,
        #[serde(flatten)]
        data: SnapshotData,
    }
    let v: Versioned = serde_json::from_str(json).map_err(|_| SnapshotError::Malformed)?;
    Ok(v.data)
}

/// Binary snapshot to its JSON view, without building a pool.
pub fn binary_to_json(bytes: &[u8]) -> Result<String, SnapshotError> {
    decode(bytes).map(|d| to_json(&d))
}

/// JSON view back to a binary snapshot; validated by building it first.
pub fn json_to_binary(json: &str) -> Result<Vec<u8>, SnapshotError> {
    let data = from_json(json)?;
    data.clone().build(0, 0)?;
    Ok(encode(&data))
}

/// Limits an operator sets over whatever a snapshot's own policy says.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Caps {
    pub max_resources: Option<u32>,
    pub max_cells: Option<u32>,
    pub rate_limit: Option<RateLimit>,
}

fn tighter(snapshot: Option<u32>, cap: Option<u32>) -> Option<u32> {
    match (snapshot, cap) {
        (Some(s), Some(c)) => Some(s.min(c)),
        (s, c) => s.or(c),
    }
}

impl Caps {
    /// Each budget becomes the tighter of the snapshot's and the cap, so a
    /// tenant cannot lift an operator's limit by importing a policy without it.
    fn apply(&self, data: &mut SnapshotData) {
        let p = &mut data.policy;
        p.max_resources = tighter(p.max_resources, self.max_resources);
        p.max_cells = tighter(p.max_cells, self.max_cells);
        p.rate_limit = match (p.rate_limit, self.rate_limit) {
            (Some(s), Some(c)) => Some(RateLimit { rate: s.rate.min(c.rate), burst: s.burst.min(c.burst) }),
            (s, c) => s.or(c),
        };
        if let (Some(limit), Some(tokens)) = (p.rate_limit, data.rate_tokens.as_mut()) {
            *tokens = tokens.min(limit.burst as f64);
        }
    }
}

/// A binary snapshot (`bytes`) or its JSON view (`json`) as a binary
/// snapshot whose policy is held to `caps`; validated by building it, so a
/// snapshot holding more than the caps allow is refused.
pub fn capped(input: CappedInput<'_>, caps: &Caps) -> Result<Vec<u8>, SnapshotError> {
    let mut data = match input {
        CappedInput::Binary(bytes) => decode(bytes)?,
        CappedInput::Json(json) => from_json(json)?,
    };
    caps.apply(&mut data);
    data.clone().build(0, 0)?;
    Ok(encode(&data))
}

/// The two forms `capped` reads.
#[derive(Debug, Clone, Copy)]
pub enum CappedInput<'a> {
    Binary(&'a [u8]),
    Json(&'a str),
}

/// Most bytes the JSON view of a snapshot (the larger of the two forms)
/// takes per byte of the pool's footprint: at most 2.6 measured, on pools
/// of the longest names made of characters JSON escapes, full outcome
/// windows, long block reasons and leases in long contexts (the footprint
/// test keeps it so).
pub const JSON_PER_FOOTPRINT_BYTE: u64 = 3;

/// Bounds on the JSON view's size, measured the same way: a pool's fixed
/// part, one resource with one permit (longest names, a block with the
/// longest reason, a pause, an empty outcome window), one cell (longest
/// context, a block with the longest reason, an empty window), and each
/// outcome a window holds.
pub const JSON_BASE_BYTES: u64 = 1024;
pub const JSON_RESOURCE_BYTES: u64 = 3700;
pub const JSON_CELL_BYTES: u64 = 4200;
pub const JSON_OUTCOME_BYTES: u64 = 100;

/// Largest JSON snapshot of a pool of at most `resources` one-permit
/// resources and `cells` cells whose windows hold `window` outcomes: what
/// a server's body limit must take for a tenant to re-import its export.
pub fn json_bound(resources: u32, cells: u32, window: u32) -> u64 {
    let window = u64::from(window) * JSON_OUTCOME_BYTES;
    JSON_BASE_BYTES
        + u64::from(resources) * (JSON_RESOURCE_BYTES + window)
        + u64::from(cells) * (JSON_CELL_BYTES + window)
}
