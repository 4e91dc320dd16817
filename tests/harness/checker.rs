//! Judges a run from what its clients observed. Every comparison is on the
//! harness's one monotonic clock, and every interval is the conservative one
//! (a holder's use starts when the grant arrives and ends when it sends the
//! release or reaches its local deadline), so a correct cluster can never be
//! reported as violating an invariant, whatever the network delays.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::http::Client;
use crate::workload::{Counts, Grant, Records};

/// How many example violations a report keeps, for the failure message.
const EXAMPLES: usize = 5;

#[derive(Debug)]
pub struct Report {
    pub name: String,
    pub grants: usize,
    /// I1: a grant whose use interval overlaps an earlier grant's on the same permit.
    pub overlaps: usize,
    /// I2: a token granted again on the same permit.
    pub duplicate_tokens: usize,
    /// I2: a token below one granted on the same permit before this request was sent.
    pub token_regressions: usize,
    pub counts: Counts,
    /// Reports repute holds for the tenant (`reports_held`); `None` when not measured.
    pub reports_held: Option<u64>,
    /// Leases a restarted server listed as live although their release had
    /// been acknowledged before the kill (`check_restarts`); `None` when not measured.
    pub resurrected_releases: Option<usize>,
    /// Per fault: the longest time without a grant from the fault on.
    pub failover: Vec<(String, Duration)>,
    pub elapsed: Duration,
    pub examples: Vec<String>,
}

impl Report {
    pub fn new(name: &str, records: &Records, reports_held: Option<u64>) -> Report {
        let mut report = Report {
            name: name.to_owned(),
            grants: records.grants.len(),
            overlaps: 0,
            duplicate_tokens: 0,
            token_regressions: 0,
            counts: records.counts,
            reports_held,
            resurrected_releases: None,
            failover: Vec::new(),
            elapsed: records.span.map_or(Duration::ZERO, |(start, end)| end - start),
            examples: Vec::new(),
        };
        let mut by_permit: HashMap<(&str, u32), Vec<&Grant>> = HashMap::new();
        for g in &records.grants {
            by_permit.entry((&g.resource, g.permit)).or_default().push(g);
        }
        for grants in by_permit.values_mut() {
            report.check_permit(grants);
        }
        let mut times: Vec<Instant> = records.grants.iter().map(|g| g.granted).collect();
        times.sort_unstable();
        // Each fault's gap ends where the next fault begins: that one's own.
        let ends = records.faults.iter().skip(1).map(|f| Some(f.at)).chain([None]);
        report.failover = records
            .faults
            .iter()
            .zip(ends)
            .map(|(f, until)| (f.name.clone(), longest_gap(&times, f.at, until)))
            .collect();
        report
    }

    fn check_permit(&mut self, grants: &mut [&Grant]) {
        grants.sort_by_key(|g| g.granted);
        let mut latest: Option<&Grant> = None;
        for g in grants.iter() {
            if g.held_until() <= g.granted {
                continue; // arrived past its deadline: the holder never used it
            }
            if let Some(l) = latest.filter(|l| g.granted < l.held_until()) {
                self.overlaps += 1;
                self.example(format!("overlap on {}#{}: {} and {}", g.resource, g.permit, describe(l), describe(g)));
            }
            if latest.is_none_or(|l| g.held_until() > l.held_until()) {
                latest = Some(g);
            }
        }

        // Grants are sorted by arrival; walk them by request time and compare
        // each with every grant that had arrived before it was requested.
        let mut by_sent: Vec<&Grant> = grants.to_vec();
        by_sent.sort_by_key(|g| g.sent);
        let mut arrived = grants.iter().peekable();
        let mut highest: Option<&Grant> = None;
        for g in by_sent {
            while let Some(a) = arrived.next_if(|a| a.granted < g.sent) {
                if highest.is_none_or(|h| a.token > h.token) {
                    highest = Some(a);
                }
            }
            if let Some(h) = highest.filter(|h| g.token < h.token) {
                self.token_regressions += 1;
                self.example(format!(
                    "token went down on {}#{}: {} then {}",
                    g.resource,
                    g.permit,
                    describe(h),
                    describe(g)
                ));
            }
        }

        let mut tokens: Vec<&Grant> = grants.to_vec();
        tokens.sort_by_key(|g| g.token);
        for pair in tokens.windows(2) {
            if pair[0].token == pair[1].token {
                self.duplicate_tokens += 1;
                self.example(format!(
                    "token granted twice on {}#{}: {} and {}",
                    pair[0].resource,
                    pair[0].permit,
                    describe(pair[0]),
                    describe(pair[1])
                ));
            }
        }
    }

    /// Counts the releases that came back: leases a server listed right
    /// after a restart whose release had been acknowledged before the
    /// process was killed. Tokens never repeat on a permit, so resource,
    /// permit and token name one lease, whatever ids a restart reuses.
    pub fn check_restarts(&mut self, records: &Records, restarts: &[Restart]) {
        let mut resurrected = 0;
        for restart in restarts {
            for g in &records.grants {
                let acknowledged = g.release_acknowledged.is_some_and(|at| at < restart.killed);
                if acknowledged && restart.live.contains(&(g.resource.clone(), g.permit, g.token)) {
                    resurrected += 1;
                    self.example(format!("released before the kill, live after it: {}", describe(g)));
                }
            }
        }
        self.resurrected_releases = Some(resurrected);
    }

    fn example(&mut self, text: String) {
        if self.examples.len() < EXAMPLES {
            self.examples.push(text);
        }
    }

    /// Every way one permit was held twice at once (I1, I2).
    pub fn double_grants(&self) -> usize {
        self.overlaps + self.duplicate_tokens + self.token_regressions
    }

    /// Acknowledged reports repute no longer holds (I4).
    pub fn lost_reports(&self) -> Option<u64> {
        self.reports_held.map(|held| self.counts.reports_acknowledged.saturating_sub(held))
    }

    /// Reports held beyond all that were sent: some report was folded twice.
    pub fn phantom_reports(&self) -> Option<u64> {
        let sent = self.counts.reports_acknowledged + self.counts.reports_unacknowledged;
        self.reports_held.map(|held| held.saturating_sub(sent))
    }

    pub fn throughput(&self) -> f64 {
        self.grants as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Asserts only that no permit was held twice (I1, I2): what a cluster
    /// must keep even on a store that fails over asynchronously and so
    /// loses acknowledged writes, where `assert_correct`'s I4 cannot hold.
    pub fn assert_exclusive(&self) {
        assert_eq!(self.double_grants(), 0, "{}: double grants\n{self}", self.name);
    }

    /// Asserts the invariants a correct cluster keeps under any fault.
    pub fn assert_correct(&self) {
        assert_eq!(self.double_grants(), 0, "{}: double grants\n{self}", self.name);
        assert_eq!(self.lost_reports(), Some(0), "{}: acknowledged reports lost\n{self}", self.name);
        assert_eq!(self.phantom_reports(), Some(0), "{}: reports folded twice\n{self}", self.name);
        if let Some(resurrected) = self.resurrected_releases {
            assert_eq!(resurrected, 0, "{}: acknowledged releases came back\n{self}", self.name);
        }
    }
}

/// What a server restarted on the same store showed: the leases it listed
/// as live right after it came up, and when its predecessor was killed.
#[derive(Debug, Clone)]
pub struct Restart {
    pub killed: Instant,
    /// `kind/value`, permit and token of each live lease.
    pub live: Vec<(String, u32, u64)>,
}

/// The live leases of the tenant `client` serves (`GET /v1/leases`),
/// waiting for a server that is still starting.
pub fn live_leases(client: &mut Client) -> Vec<(String, u32, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((_, r)) = client.send("GET", "/v1/leases", None) {
            if r.status == 200 {
                let leases = r.json();
                let leases = leases.as_array().expect("a list of leases");
                return leases
                    .iter()
                    .map(|l| {
                        let text = |name: &str| l[name].as_str().expect("lease text field").to_owned();
                        let number = |name: &str| l[name].as_u64().expect("lease number field");
                        let permit = u32::try_from(number("permit")).expect("permits fit u32");
                        (format!("{}/{}", text("kind"), text("value")), permit, number("token"))
                    })
                    .collect();
            }
        }
        assert!(Instant::now() < deadline, "no lease list from a restarted server within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Longest time without a grant from `from` on, up to `until` (the next
/// fault) when given, else up to the last grant. `times` is sorted.
fn longest_gap(times: &[Instant], from: Instant, until: Option<Instant>) -> Duration {
    let start = times.partition_point(|t| *t < from);
    let end = until.map_or(times.len(), |u| times.partition_point(|t| *t < u));
    let mut previous = from;
    let mut longest = Duration::ZERO;
    for &t in times[start..end].iter().chain(until.as_ref()) {
        longest = longest.max(t - previous);
        previous = t;
    }
    longest
}

fn describe(g: &Grant) -> String {
    format!("token {} to worker {} by {} (held {:?})", g.token, g.worker, g.server, g.held_until() - g.granted)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, name: &str, value: String| writeln!(f, "  {name:<34} {value:>14}");
        writeln!(f, "== {} ==", self.name)?;
        row(f, "grants", self.grants.to_string())?;
        row(f, "throughput (grants/s)", format!("{:.0}", self.throughput()))?;
        row(f, "elapsed", format!("{:.1?}", self.elapsed))?;
        row(f, "double grants", self.double_grants().to_string())?;
        row(f, "  overlapping holds (I1)", self.overlaps.to_string())?;
        row(f, "  duplicate tokens (I2)", self.duplicate_tokens.to_string())?;
        row(f, "  token regressions (I2)", self.token_regressions.to_string())?;
        row(f, "downstream writes refused (stale)", self.counts.downstream_refused.to_string())?;
        row(f, "leases given up before use ended", self.counts.leases_lost.to_string())?;
        row(f, "releases failed", self.counts.releases_failed.to_string())?;
        row(f, "reports acknowledged", self.counts.reports_acknowledged.to_string())?;
        row(f, "reports unacknowledged", self.counts.reports_unacknowledged.to_string())?;
        let show = |n: Option<u64>| n.map_or_else(|| "-".into(), |n| n.to_string());
        row(f, "reports held by a fresh process", show(self.reports_held))?;
        row(f, "acknowledged reports lost (I4)", show(self.lost_reports()))?;
        row(f, "reports folded twice", show(self.phantom_reports()))?;
        row(f, "releases resurrected by a restart", show(self.resurrected_releases.map(|n| n as u64)))?;
        for (fault, gap) in &self.failover {
            row(f, &format!("failover after {fault}"), format!("{gap:.2?}"))?;
        }
        for e in &self.examples {
            writeln!(f, "  e.g. {e}")?;
        }
        Ok(())
    }
}

/// Reports a fresh process finds folded into the tenant's pool: the sum of
/// the resources' global observation counts in its JSON snapshot. A fresh
/// process is asked rather than repute's tables read, because what counts is
/// what the next owner sees (checkpoint plus log, however repute prunes its
/// log). In sharded mode the process takes the tenant over only once the old
/// owner's lease lapsed, so this waits for its answer.
pub fn reports_held(client: &mut Client) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((_, r)) = client.send("GET", "/v1/snapshot?format=json", None) {
            if r.status == 200 {
                let snapshot = r.json();
                let resources = snapshot["resources"].as_array().expect("a snapshot lists its resources");
                return resources.iter().map(|r| r["global"]["observations"].as_u64().expect("observations")).sum();
            }
        }
        assert!(Instant::now() < deadline, "no snapshot from a fresh process within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A grant of `proxy/a#permit` with times in ms after `t0` and a 2 s TTL.
    fn grant(t0: Instant, permit: u32, token: u64, sent: u64, granted: u64, released: u64) -> Grant {
        Grant {
            worker: 0,
            server: "s".into(),
            resource: "proxy/a".into(),
            permit,
            token,
            sent: t0 + MS * sent as u32,
            granted: t0 + MS * granted as u32,
            released: t0 + MS * released as u32,
            release_acknowledged: Some(t0 + MS * released as u32),
            ttl: Duration::from_secs(2),
            sent_at: SystemTime::UNIX_EPOCH + MS * sent as u32,
            granted_at: SystemTime::UNIX_EPOCH + MS * granted as u32,
            cost: 1,
            used: 1,
        }
    }

    fn check(grants: Vec<Grant>) -> Report {
        Report::new("t", &Records { grants, ..Records::default() }, None)
    }

    #[test]
    fn a_release_race_is_not_an_overlap() {
        let t0 = Instant::now();
        // B's grant arrives before A hears back from its release, but after A sent it.
        let r = check(vec![grant(t0, 0, 1, 0, 1, 10), grant(t0, 0, 2, 5, 11, 20)]);
        assert_eq!(r.double_grants(), 0, "{r}");
    }

    #[test]
    fn overlapping_holds_of_one_permit_are_double_grants() {
        let t0 = Instant::now();
        let r = check(vec![grant(t0, 0, 1, 0, 1, 10), grant(t0, 0, 2, 2, 5, 20), grant(t0, 1, 1, 0, 2, 20)]);
        assert_eq!((r.overlaps, r.duplicate_tokens, r.token_regressions), (1, 0, 0), "{r}");
    }

    #[test]
    fn a_hold_ends_at_the_holders_deadline() {
        let t0 = Instant::now();
        // A never released; its deadline is 1.6 s after it asked.
        let after = check(vec![grant(t0, 0, 1, 0, 1, 5000), grant(t0, 0, 2, 1700, 1701, 1800)]);
        assert_eq!(after.double_grants(), 0, "{after}");
        let before = check(vec![grant(t0, 0, 1, 0, 1, 5000), grant(t0, 0, 2, 1500, 1501, 1800)]);
        assert_eq!(before.overlaps, 1, "{before}");
        // A grant that arrives past its deadline is never used.
        let stale = check(vec![grant(t0, 0, 1, 0, 1, 100), grant(t0, 0, 2, 20, 1900, 1900)]);
        assert_eq!(stale.double_grants(), 0, "{stale}");
    }

    #[test]
    fn tokens_must_be_unique_and_rise_once_observed() {
        let t0 = Instant::now();
        let twice = check(vec![grant(t0, 0, 3, 0, 1, 2), grant(t0, 0, 3, 10, 11, 12)]);
        assert_eq!((twice.duplicate_tokens, twice.token_regressions), (1, 0), "{twice}");
        let lower = check(vec![grant(t0, 0, 5, 0, 1, 2), grant(t0, 0, 3, 10, 11, 12)]);
        assert_eq!(lower.token_regressions, 1, "{lower}");
        // Asked before the higher token arrived: the authority may have served it first.
        let concurrent = check(vec![grant(t0, 0, 5, 0, 3, 4), grant(t0, 0, 3, 1, 2, 2)]);
        assert_eq!(concurrent.double_grants(), 0, "{concurrent}");
    }

    #[test]
    fn a_release_acknowledged_before_a_kill_must_not_be_live_after_it() {
        let t0 = Instant::now();
        let mut unacknowledged = grant(t0, 1, 4, 0, 1, 5);
        unacknowledged.release_acknowledged = None;
        let records = Records {
            grants: vec![grant(t0, 0, 1, 0, 1, 5), grant(t0, 0, 2, 6, 7, 20), unacknowledged],
            ..Records::default()
        };
        let live = |leases: &[(u32, u64)]| leases.iter().map(|&(p, t)| ("proxy/a".to_owned(), p, t)).collect();
        let mut report = Report::new("t", &records, None);
        // Killed at 10 ms: token 1 was released (at 5 ms), token 2 was not yet.
        report.check_restarts(&records, &[Restart { killed: t0 + MS * 10, live: live(&[(0, 2), (1, 4)]) }]);
        assert_eq!(report.resurrected_releases, Some(0), "{report}");
        report.check_restarts(&records, &[Restart { killed: t0 + MS * 10, live: live(&[(0, 1), (0, 2)]) }]);
        assert_eq!(report.resurrected_releases, Some(1), "{report}");
    }

    #[test]
    fn failover_is_the_longest_gap_after_the_fault() {
        let t0 = Instant::now();
        let times = [0, 10, 100, 150, 1150, 1160].map(|ms| t0 + MS * ms);
        assert_eq!(longest_gap(&times, t0 + MS * 120, None), MS * 1000);
        assert_eq!(longest_gap(&times, t0 + MS * 1155, None), MS * 5);
        // A second fault at 1155 ms: the first one's gap is its own.
        assert_eq!(longest_gap(&times, t0 + MS * 5, Some(t0 + MS * 1155)), MS * 1000);
        assert_eq!(longest_gap(&times, t0 + MS * 5, Some(t0 + MS * 90)), MS * 80);
    }
}
