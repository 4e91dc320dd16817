//! Envoy's outlier detection in front of a round robin.

use repute_core::SECOND;

use super::RoundRobin;
use crate::simulate::scenario::{Answer, RESOURCES};
use crate::simulate::strategy::{Chooser, Grant, View};

/// Consecutive failures that eject a host (Envoy `consecutive_5xx`).
const EJECT_AFTER: u32 = 5;
/// Ejection time per time ejected (Envoy `base_ejection_time`).
const BASE_EJECTION: u64 = 30 * SECOND;
/// Envoy's outlier-detection sweep: a healthy host's ejection multiplier drops by one per interval.
const INTERVAL: u64 = 10 * SECOND;
/// At most this share of hosts ejected at once (Envoy `max_ejection_percent`).
const MAX_EJECTED_PERCENT: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
struct Host {
    consecutive_failures: u32,
    ejected_until: u64,
    times_ejected: u32,
}

/// Envoy-style outlier detection over round-robin: 5 consecutive failures of
/// any kind, on any site, eject a host for 30 s × the times it has been
/// ejected (the multiplier decays by one per 10 s healthy); at most 10% of the
/// hosts are ejected at once. When no un-ejected host is free it routes to any
/// free host, as Envoy's panic threshold does.
#[derive(Debug, Default)]
pub struct Envoy {
    rr: RoundRobin,
    hosts: [Host; RESOURCES],
}

impl Chooser for Envoy {
    fn acquire(&mut self, _site: usize, now: u64, view: &View) -> Option<Grant> {
        let hosts = &self.hosts;
        let resource = match self.rr.next_where(|r| view.free[r] && hosts[r].ejected_until <= now) {
            Some(r) => r,
            None => self.rr.next_where(|r| view.free[r])?,
        };
        Some(Grant { resource, lease: None })
    }

    fn complete(&mut self, grant: Grant, _site: usize, answer: Answer, now: u64) {
        let ejected = self.hosts.iter().filter(|h| h.ejected_until > now).count();
        let h = &mut self.hosts[grant.resource];
        if answer.outcome.is_success() {
            h.consecutive_failures = 0;
            return;
        }
        h.consecutive_failures += 1;
        let may_eject = (ejected + 1) * 100 <= RESOURCES * MAX_EJECTED_PERCENT;
        if h.consecutive_failures >= EJECT_AFTER && h.ejected_until <= now && may_eject {
            let healthy_intervals = (now - h.ejected_until.min(now)) / INTERVAL;
            h.times_ejected = h.times_ejected.saturating_sub(healthy_intervals.min(u32::MAX as u64) as u32) + 1;
            h.ejected_until = now + BASE_EJECTION * h.times_ejected as u64;
            h.consecutive_failures = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::FAIL;
    use super::*;
    use crate::simulate::scenario::{Kind, Windows, World};

    #[test]
    fn envoy_ejects_after_five_failures_for_thirty_seconds_times_n_at_most_ten_percent() {
        let mut envoy = Envoy::default();
        let fail = |e: &mut Envoy, r: usize, n: u32, now: u64| {
            for _ in 0..n {
                e.complete(Grant { resource: r, lease: None }, 0, FAIL, now);
            }
        };
        fail(&mut envoy, 0, 4, 0);
        assert_eq!(envoy.hosts[0].ejected_until, 0);
        fail(&mut envoy, 0, 1, 0);
        assert_eq!(envoy.hosts[0].ejected_until, 30 * SECOND);
        fail(&mut envoy, 1, 5, 0);
        assert_eq!(envoy.hosts[1].ejected_until, 30 * SECOND);
        // 2 of 20 hosts ejected is the 10% cap: a third is not ejected.
        fail(&mut envoy, 2, 5, 0);
        assert_eq!(envoy.hosts[2].ejected_until, 0);
        // Ejected again right after the first ejection ends: twice as long.
        fail(&mut envoy, 0, 5, 30 * SECOND);
        assert_eq!(envoy.hosts[0].ejected_until, 90 * SECOND);
        // After 40 s healthy the multiplier has decayed to zero: 30 s again.
        fail(&mut envoy, 0, 5, 130 * SECOND + 40 * SECOND);
        assert_eq!(envoy.hosts[0].ejected_until, 200 * SECOND);
        // Ejected hosts are skipped while any other is free.
        let world = World::new(Kind::Steady, 1, SECOND);
        let free = [true; RESOURCES];
        let windows = Windows::new();
        let view = View { free: &free, world: &world, windows: &windows };
        assert_eq!(envoy.acquire(0, 199 * SECOND, &view).unwrap().resource, 1);
    }
}
