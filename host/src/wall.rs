//! Wall-clock readings of pool-clock instants, for people reading views and
//! events. The pool runs on a monotonic clock (I6: expiry is never judged by
//! wall time); a view shows the Unix time beside each instant, mapped by one
//! (pool clock, system time) pair read together when the view is converted.
//! So a wall reading is only as good as the system clock at conversion, and
//! two views converted at different times may differ by a clock step; the
//! monotonic instant stays the one to compute with.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::providers::Clock;

/// One (pool clock, Unix time) pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wall {
    /// The pool clock's reading, ns.
    mono: u64,
    /// Unix time at that reading, ns (signed: a clock set before 1970).
    unix: i128,
}

impl Wall {
    /// Reads `clock` and the system time together.
    pub fn now(clock: &dyn Clock) -> Wall {
        let unix = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        Wall { mono: clock.now(), unix }
    }

    /// A pair given explicitly (tests, or a caller with its own readings).
    pub fn at(mono: u64, unix_ns: i128) -> Wall {
        Wall { mono, unix: unix_ns }
    }

    /// The Unix time of pool-clock instant `t`, ns.
    pub fn unix_ns(&self, t: u64) -> i128 {
        self.unix + (i128::from(t) - i128::from(self.mono))
    }

    /// The Unix time of `t` in float seconds (Python's `time.time()` unit).
    pub fn unix_secs(&self, t: u64) -> f64 {
        self.unix_ns(t) as f64 / 1e9
    }

    /// The Unix time of `t` in float ms (JavaScript's `Date.now()` unit).
    pub fn unix_ms(&self, t: u64) -> f64 {
        self.unix_ns(t) as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ManualClock;

    #[test]
    fn instants_map_by_their_distance_from_the_pair() {
        let wall = Wall::at(5_000_000_000, 1_700_000_000_000_000_000);
        assert_eq!(wall.unix_secs(5_000_000_000), 1_700_000_000.0);
        assert_eq!(wall.unix_ms(6_500_000_000), 1_700_000_001_500.0);
        assert_eq!(wall.unix_ns(0), 1_699_999_995_000_000_000);
    }

    #[test]
    fn now_pairs_the_pool_clock_with_the_system_time() {
        let clock = ManualClock::new(42_000_000_000);
        // In ns: float seconds from two conversions can round apart.
        let unix_ns = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
        let before = unix_ns();
        let wall = Wall::now(&clock);
        let after = unix_ns();
        let now = wall.unix_ns(42_000_000_000);
        assert!(before <= now && now <= after, "{before} <= {now} <= {after}");
        assert_eq!(wall.unix_ns(43_000_000_000) - now, 1_000_000_000);
    }
}
