//! Judges usage limits (a resource's `rpm`, `tpm`; a quota group's `rpm`
//! over all its members) from what the clients observed: in no 60 s window
//! did a resource (a group) get more than its limit, and over the run's
//! windows it got most of it.
//!
//! **Whose clock.** The authority judges a window on the store's own clock,
//! inside the atomic step that grants (PostgreSQL's and Redis's time), and
//! the store, the servers and this harness run on one machine, so that
//! clock is the machine's realtime clock. Every worker reads it just before
//! it sends an acquire and just after the grant arrives (`Grant::sent_at`,
//! `granted_at`): the store dated the grant between the two readings,
//! whichever server asked it, however long the round trip, and whatever a
//! fault did in between (provided nothing steps the clock during a run).
//! The harness's monotonic clock would not do: it is not the clock the
//! store reads, and NTP may slew the two apart by up to 30 ms a window, far
//! more than a round trip. Neither would the lease's expiry as a server
//! reports it (that server's own clock), nor the store's records of its
//! grants, which are the implementation under test (and are pruned once
//! they leave the window).
//!
//! **Sound both ways.** A grant is placed in a window only when its whole
//! interval, widened by `RESOLUTION`, lies inside it. So a window counted
//! over its limit surely was over it at the store (a correct authority is
//! never reported as over-admitting), and the least a window is counted to
//! hold is at most what it held (utilisation is never overstated). Grants the
//! store made whose answer never reached a worker (the reply lost to a
//! killed server or a cut connection) are not counted at all: they can only
//! lower the figures, never raise them.
//!
//! **Utilisation is the mean over windows.** Every window lying inside the
//! run is judged, and the figure checked is the mean of what a key surely
//! got in them, over its limit; the least of them is reported beside it.
//! Under demand above the limit a key's limit is spent in a burst as soon
//! as its window frees it, so the grants of one minute follow those of the
//! one before; a fault that holds a burst back by a second (a store
//! restarting) moves every grant behind it, and the window that ends in
//! the delay and starts after most of the previous burst holds a fraction
//! of the limit, however well the authority counts. The least window
//! measures when a fault struck; the mean counts the delay once for each
//! grant it held back, for as long as it was held.
//!
//! Tokens: a grant counts at the authority the cost it reserved until its
//! use is reconciled, then the tokens used, which the workers keep at most
//! the cost. Any window's last grant was admitted with every earlier one in
//! the window counted at least at its final use, so the final uses of a
//! window's grants never exceed `tpm` at a correct authority, whether or
//! not each reconcile got through.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::workload::{Grant, Records};

/// The span `rpm` and `tpm` count over: the contract's, not the harness's choice.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How coarsely a store may date a grant: Redis's `TIME` and PostgreSQL's
/// clock are finer, and a host that rounds them to milliseconds still lies
/// within this of the moment it read the clock.
pub const RESOLUTION: Duration = Duration::from_millis(1);
/// The share of its limit every key must get in the run's windows on
/// average while demand exceeds it. The faults cost grants: the store's
/// restart above all, after which nothing is granted for a lease TTL (a
/// new store generation waits out the leases it may have lost), which
/// delays a minute's burst; runs measured 89.8–97.6% with it.
pub const MIN_UTILISATION: f64 = 0.85;

/// A resource's limit the workload pushes against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Grants per 60 s.
    Rpm(u32),
    /// Tokens (each grant's use) per 60 s.
    Tpm(u64),
    /// Grants per 60 s of every key together: a quota group's.
    GroupRpm(u32),
}

impl Limit {
    fn value(self) -> u64 {
        match self {
            Limit::Rpm(n) | Limit::GroupRpm(n) => u64::from(n),
            Limit::Tpm(n) => n,
        }
    }

    fn weight(self, g: &Grant) -> u64 {
        match self {
            Limit::Rpm(_) | Limit::GroupRpm(_) => 1,
            Limit::Tpm(_) => g.used,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Limit::Rpm(_) | Limit::GroupRpm(_) => "grants",
            Limit::Tpm(_) => "tokens",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Rpm(n) => write!(f, "rpm {n}"),
            Limit::Tpm(n) => write!(f, "tpm {n}"),
            Limit::GroupRpm(n) => write!(f, "group rpm {n}"),
        }
    }
}

/// What one resource got.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyUsage {
    /// `kind/value`.
    pub resource: String,
    pub grants: usize,
    /// Tokens its grants used (its grants, under an `rpm` limit).
    pub used: u64,
    /// The most it surely got in one window (grants or tokens).
    pub peak: u64,
    /// The least it surely got in a window that lies inside the run.
    pub least: u64,
    /// What it surely got in a window inside the run, on average over them.
    pub mean: f64,
}

#[derive(Debug)]
pub struct LimitReport {
    pub name: String,
    pub limit: Limit,
    pub keys: Vec<KeyUsage>,
    /// The run's length on the realtime clock.
    pub elapsed: Duration,
    /// Acquires refused (409) while the workers pressed on.
    pub acquires_refused: u64,
    pub reconciles_failed: u64,
}

/// Nanoseconds since the epoch on the realtime clock.
fn ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH).expect("the clock is past 1970").as_nanos() as i128
}

impl LimitReport {
    /// Judges the grants of `keys` (every resource the workload could get,
    /// each with `limit`, or all of them together under a group's) over the
    /// whole run.
    pub fn new(name: &str, limit: Limit, keys: &[String], records: &Records) -> LimitReport {
        let (start, end) = records.wall_span.expect("a finished run has a span");
        assert!(end.duration_since(start).unwrap_or_default() > WINDOW, "{name}: the run is shorter than one window");
        let grouped = matches!(limit, Limit::GroupRpm(_));
        let mut by_key: BTreeMap<&str, Vec<&Grant>> = match grouped {
            true => BTreeMap::from([("the group", Vec::new())]),
            false => keys.iter().map(|k| (k.as_str(), Vec::new())).collect(),
        };
        for g in &records.grants {
            assert!(keys.contains(&g.resource), "{name}: a grant of {}", g.resource);
            let key = if grouped { "the group" } else { g.resource.as_str() };
            by_key.get_mut(key).expect("every key listed").push(g);
        }
        let keys = by_key
            .into_iter()
            .map(|(resource, grants)| KeyUsage {
                resource: resource.to_owned(),
                grants: grants.len(),
                used: grants.iter().map(|g| limit.weight(g)).sum(),
                peak: peak(limit, &grants),
                least: least(limit, &grants, ns(start), ns(end)),
                mean: mean(limit, &grants, ns(start), ns(end)),
            })
            .collect();
        LimitReport {
            name: name.to_owned(),
            limit,
            keys,
            elapsed: end.duration_since(start).unwrap_or_default(),
            acquires_refused: records.counts.acquires_refused,
            reconciles_failed: records.counts.reconciles_failed,
        }
    }

    /// Grants (or tokens) granted past the limit: in each key's fullest
    /// window, what it held beyond the limit.
    pub fn over_admitted(&self) -> u64 {
        self.keys.iter().map(|k| k.peak.saturating_sub(self.limit.value())).sum()
    }

    /// The share of its limit a key surely got in the run's windows, on average.
    pub fn utilisation(&self, key: &KeyUsage) -> f64 {
        key.mean / self.limit.value() as f64
    }

    /// The share of its limit a key surely got in its emptiest window.
    pub fn least_utilisation(&self, key: &KeyUsage) -> f64 {
        key.least as f64 / self.limit.value() as f64
    }

    pub fn grants(&self) -> usize {
        self.keys.iter().map(|k| k.grants).sum()
    }

    /// No window over the limit; every key at `MIN_UTILISATION` or more of
    /// it on average over the windows (the workload keeps demand above the
    /// limit).
    pub fn assert_holds(&self) {
        assert_eq!(self.over_admitted(), 0, "{}: over-admitted\n{self}", self.name);
        for k in &self.keys {
            assert!(
                self.utilisation(k) >= MIN_UTILISATION,
                "{}: {} got {:.1} {} in a window on average, under {MIN_UTILISATION} of its {}\n{self}",
                self.name,
                k.resource,
                k.mean,
                self.limit.unit(),
                self.limit
            );
        }
    }
}

/// Whether `g` was surely dated by the store within `[from, to)` (ns).
fn surely_within(g: &Grant, from: i128, to: i128) -> bool {
    let slack = RESOLUTION.as_nanos() as i128;
    ns(g.sent_at) - slack >= from && ns(g.granted_at) + slack < to
}

fn sum(limit: Limit, grants: &[&Grant], from: i128) -> u64 {
    let to = from + WINDOW.as_nanos() as i128;
    grants.iter().filter(|g| surely_within(g, from, to)).map(|g| limit.weight(g)).sum()
}

/// The most grants (tokens) surely within one window. A set of grants that
/// surely lies in some window surely lies in the one that starts with the
/// earliest of them, so those windows are the only ones to try.
fn peak(limit: Limit, grants: &[&Grant]) -> u64 {
    let slack = RESOLUTION.as_nanos() as i128;
    grants.iter().map(|g| sum(limit, grants, ns(g.sent_at) - slack)).max().unwrap_or(0)
}

/// The least grants (tokens) surely within a window inside `[start, end)`.
/// A window loses a grant as its start passes the grant's, so the least is
/// found just after some grant's start, or at either end of the range.
fn least(limit: Limit, grants: &[&Grant], start: i128, end: i128) -> u64 {
    let slack = RESOLUTION.as_nanos() as i128;
    let last = end - WINDOW.as_nanos() as i128;
    let starts = grants.iter().map(|g| ns(g.sent_at) - slack + 1).filter(|s| (start..=last).contains(s));
    [start, last].into_iter().chain(starts).map(|from| sum(limit, grants, from)).min().expect("two windows at least")
}

/// What grants (tokens) surely within a window inside `[start, end)` come
/// to on average over those windows: a grant counts in the windows that
/// start from `WINDOW` before its interval ends to where it begins.
fn mean(limit: Limit, grants: &[&Grant], start: i128, end: i128) -> f64 {
    let slack = RESOLUTION.as_nanos() as i128;
    let window = WINDOW.as_nanos() as i128;
    let last = end - window;
    let total: f64 = grants
        .iter()
        .map(|g| {
            let starts = (ns(g.sent_at) - slack).min(last) - (ns(g.granted_at) + slack - window).max(start);
            starts.max(0) as f64 * limit.weight(g) as f64
        })
        .sum();
    total / (last - start) as f64
}

impl fmt::Display for LimitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== {} ==", self.name)?;
        writeln!(
            f,
            "  {} keys at {}, {:.0?} of load: {} grants, {} acquires refused, {} reconciles failed",
            self.keys.len(),
            self.limit,
            self.elapsed,
            self.grants(),
            self.acquires_refused,
            self.reconciles_failed
        )?;
        let unit = self.limit.unit();
        writeln!(
            f,
            "  {:<12} {:>7} {:>9} {:>13} {:>15} {:>13} {:>12}",
            "key", "grants", unit, "most in 60 s", "least in 60 s", "mean in 60 s", "utilisation"
        )?;
        for k in &self.keys {
            writeln!(
                f,
                "  {:<12} {:>7} {:>9} {:>13} {:>7} ({:>4.1}%) {:>13.1} {:>11.1}%",
                k.resource,
                k.grants,
                k.used,
                k.peak,
                k.least,
                100.0 * self.least_utilisation(k),
                k.mean,
                100.0 * self.utilisation(k)
            )?;
        }
        writeln!(f, "  {unit} over the limit in any 60 s (over-admissions): {}", self.over_admitted())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A grant of `api/a` asked at `sent` and arriving at `granted` ms after `t0`.
    fn grant(t0: SystemTime, sent: u64, granted: u64, used: u64) -> Grant {
        let now = Instant::now();
        Grant {
            worker: 0,
            server: "s".into(),
            resource: "api/a".into(),
            permit: 0,
            token: 1,
            sent: now,
            granted: now,
            released: now,
            release_acknowledged: None,
            ttl: Duration::from_secs(2),
            sent_at: t0 + MS * sent as u32,
            granted_at: t0 + MS * granted as u32,
            cost: used,
            used,
        }
    }

    fn report(limit: Limit, run_ms: u32, grants: Vec<Grant>, t0: SystemTime) -> LimitReport {
        let records = Records { grants, wall_span: Some((t0, t0 + MS * run_ms)), ..Records::default() };
        LimitReport::new("t", limit, &["api/a".to_owned()], &records)
    }

    /// `n` grants, one every `every` ms from `from` on, each taking 2 ms.
    fn every(t0: SystemTime, from: u64, every: u64, n: u64) -> Vec<Grant> {
        (0..n).map(|i| grant(t0, from + i * every, from + i * every + 2, 1)).collect()
    }

    #[test]
    fn grants_a_window_apart_are_within_the_limit() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        // Three per window: at 0, 10, 20 s, then again 60 s after each.
        let mut grants = every(t0, 0, 10_000, 3);
        grants.extend(every(t0, 60_000, 10_000, 3));
        let r = report(Limit::Rpm(3), 90_000, grants, t0);
        assert_eq!((r.keys[0].peak, r.over_admitted()), (3, 0), "{r}");
    }

    #[test]
    fn one_grant_too_many_in_a_window_is_an_over_admission() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut grants = every(t0, 0, 10_000, 3);
        // 59.99 s after the first grant was asked, with 2 ms of round trip.
        grants.push(grant(t0, 59_990, 59_992, 1));
        let r = report(Limit::Rpm(3), 90_000, grants, t0);
        assert_eq!((r.keys[0].peak, r.over_admitted()), (4, 1), "{r}");
    }

    #[test]
    fn a_grant_that_may_have_been_dated_past_the_window_is_not_counted_in_it() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut grants = every(t0, 0, 10_000, 3);
        // Asked before the first grant's window ended, answered after it: the
        // store may have dated it at 60 s, when the first had left the window.
        grants.push(grant(t0, 59_999, 60_001, 1));
        let r = report(Limit::Rpm(3), 90_000, grants, t0);
        assert_eq!(r.over_admitted(), 0, "{r}");
    }

    #[test]
    fn tokens_count_what_each_grant_used() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let grants = vec![grant(t0, 0, 2, 400), grant(t0, 1_000, 1_002, 500), grant(t0, 2_000, 2_002, 200)];
        let r = report(Limit::Tpm(1_000), 70_000, grants.clone(), t0);
        assert_eq!((r.keys[0].used, r.keys[0].peak, r.over_admitted()), (1_100, 1_100, 100), "{r}");
        let r = report(Limit::Tpm(1_100), 70_000, grants, t0);
        assert_eq!(r.over_admitted(), 0, "{r}");
    }

    #[test]
    fn utilisation_is_the_mean_window_and_the_least_is_beside_it() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        // Bursts of three a minute, each 50 ms later than the window allowed.
        let grants = [0, 1_000, 2_000, 60_050, 61_050, 62_050, 120_100, 121_100, 122_100]
            .map(|at| grant(t0, at, at + 2, 1))
            .to_vec();
        let r = report(Limit::Rpm(3), 130_000, grants, t0);
        // The window from just after 0 s ends before 60.05 s: two grants. A
        // grant counts in the windows starting from 60 s before its answer
        // (widened by 1 ms) to its request (widened by 1 ms), within 0..70 s.
        let windows = [0, 999, 1_999, 59_996, 59_996, 59_996, 9_897, 8_897, 7_897];
        let mean = f64::from(windows.iter().sum::<u32>()) / 70_000.0;
        assert_eq!((r.keys[0].peak, r.keys[0].least), (3, 2), "{r}");
        assert!((r.keys[0].mean - mean).abs() < 1e-9, "{r}");
        assert!((r.utilisation(&r.keys[0]) - mean / 3.0).abs() < 1e-9 && mean / 3.0 > 0.998, "{r}");
    }
}
