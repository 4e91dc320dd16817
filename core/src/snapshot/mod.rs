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

use alloc::string::String;
use alloc::vec::Vec;

use crate::cell::Phase;
use crate::error::Result;
pub use crate::error::SnapshotError;
use crate::pool::{Pool, Timer};

mod binary;
mod caps;
mod cell;
mod data;
mod json;

use binary::{decode, encode};
pub use caps::{capped, CappedInput, Caps};
use data::SnapshotData;
use json::{from_json, to_json};
pub use json::{
    json_bound, JSON_BASE_BYTES, JSON_CELL_BYTES, JSON_OUTCOME_BYTES, JSON_PER_FOOTPRINT_BYTE, JSON_RESOURCE_BYTES,
};

pub const MAGIC: [u8; 8] = *b"RPUTSNAP";
/// The format this build writes and the only one it reads.
pub const VERSION: u16 = 5;
/// Largest lease id, fence counter or observation count a snapshot may
/// carry. Each only ever grows by one per operation, so a value past half the
/// range was not written by a pool; accepting it would let the counter wrap
/// to ids and tokens already handed out.
pub const MAX_COUNTER: u64 = u64::MAX / 2;

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

impl Pool {
    /// Timers and probe set derived from restored state.
    fn arm_timers(&mut self) {
        let now = self.now;
        for (slot, r) in self.registry.iter() {
            if let Some(until) = r.block.as_ref().and_then(|b| b.until) {
                self.timers.arm(until, Timer::Block(slot, None));
            }
            if let Some(p) = r.pause {
                self.timers.arm(p.until, Timer::Pause(slot, None));
            }
            if let Some(at) = r.limited {
                self.timers.arm(at, Timer::Limit(slot));
            }
            if let (Some(age), None) = (r.limits.max_age, r.retired) {
                self.timers.arm(r.born.saturating_add(age), Timer::Retire(slot));
            }
        }
        for (&(slot, ctx), cc) in self.cells.iter() {
            if let Some(until) = cc.block.as_ref().and_then(|b| b.until) {
                self.timers.arm(until, Timer::Block(slot, Some(ctx)));
            }
            if let Some(p) = cc.cell.pause {
                self.timers.arm(p.until, Timer::Pause(slot, Some(ctx)));
            }
            if let Some(at) = cc.limited {
                self.timers.arm(at, Timer::ContextLimit(slot, ctx));
            }
            if let Phase::Cooling { until, cause } = cc.cell.phase {
                if until > now {
                    self.timers.arm(until, Timer::Cooldown(slot, ctx));
                } else if self.policy.recovery.probes(cause) && cc.probe.is_none() {
                    self.probe_due.insert((slot, ctx));
                }
            }
        }
        // A restored registry has no free slots.
        for slot in 0..self.registry.slot_count() {
            self.enter(slot);
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
        let mut next = data.build(self.now, self.registry.next_serial())?;
        next.leases.raise_ids(self.leases.next_id);
        for (id, fences) in self.registry.fences() {
            next.registry.raise_fences(id, fences);
        }
        core::mem::swap(&mut next.authority, &mut self.authority);
        next.events = core::mem::take(&mut self.events);
        next.leases.take_ended(&mut self.leases);
        *self = next;
        Ok(())
    }
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
