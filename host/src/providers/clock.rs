//! Time sources. The core has no clock of its own: every operation reads
//! exactly one of these through the `clock` import.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Monotonic nanoseconds. Implementations must never go backwards.
pub trait Clock: Send + Sync {
    fn now(&self) -> u64;

    /// False for a clock that moves only when told to: whoever waits for
    /// one of its readings must look again often instead of sleeping until then.
    fn follows_real_time(&self) -> bool {
        true
    }
}

/// The process's monotonic clock (`Instant`), counted from when it was made.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        SystemClock { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to, for tests and simulations. Clones
/// share one reading, so a test can hold a handle while the pool reads it.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start: u64) -> Self {
        ManualClock { now: Arc::new(AtomicU64::new(start)) }
    }

    /// Moves the clock forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::SeqCst);
    }

    /// Sets the reading; a value below the current one is ignored, because
    /// a monotonic clock never goes back.
    pub fn set(&self, now: u64) {
        self.now.fetch_max(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn follows_real_time(&self) -> bool {
        false
    }
}
