//! Baselines that exist only in the simulator: what a service does without
//! repute. None of them but LiteLLM's router sees the context a request is
//! for, as a plain load balancer or a crawler's session pool would not;
//! LiteLLM's deployments are (key, model) pairs, so it does.

mod crawlee;
mod envoy;
mod litellm;

use repute_core::Outcome;

use super::rng::Rng;
use super::scenario::{Answer, Wire, RESOURCES};
use super::strategy::{Chooser, Grant, View};

pub use crawlee::CrawleeSessions;
pub use envoy::Envoy;
pub use litellm::LitellmCooldown;

/// Uniformly random among the free proxies.
#[derive(Debug)]
pub struct Random(Rng);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(Rng::stream(seed, 200))
    }
}

impl Chooser for Random {
    fn acquire(&mut self, _site: usize, _now: u64, view: &View) -> Option<Grant> {
        let free: Vec<usize> = (0..RESOURCES).filter(|&r| view.free[r]).collect();
        (!free.is_empty()).then(|| Grant { resource: free[self.0.below(free.len())], lease: None })
    }

    fn complete(&mut self, _grant: Grant, _site: usize, _answer: Answer, _now: u64) {}
}

/// The next free proxy after the last one handed out, wrapping around.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl RoundRobin {
    /// The first proxy at or after the cursor that `ok` accepts; advances the cursor past it.
    fn next_where(&mut self, ok: impl Fn(usize) -> bool) -> Option<usize> {
        let r = (0..RESOURCES).map(|i| (self.next + i) % RESOURCES).find(|&r| ok(r))?;
        self.next = (r + 1) % RESOURCES;
        Some(r)
    }
}

impl Chooser for RoundRobin {
    fn acquire(&mut self, _site: usize, _now: u64, view: &View) -> Option<Grant> {
        self.next_where(|r| view.free[r]).map(|resource| Grant { resource, lease: None })
    }

    fn complete(&mut self, _grant: Grant, _site: usize, _answer: Answer, _now: u64) {}
}

/// The round-robin a careful user writes around API keys: a key that
/// answered 429 is skipped until its Retry-After has passed, a key that
/// answered 401 is dropped for good.
#[derive(Debug, Default)]
pub struct RetryAfterRoundRobin {
    rr: RoundRobin,
    wait_until: [u64; RESOURCES],
    revoked: [bool; RESOURCES],
}

impl Chooser for RetryAfterRoundRobin {
    fn acquire(&mut self, _site: usize, now: u64, view: &View) -> Option<Grant> {
        let (wait_until, revoked) = (&self.wait_until, &self.revoked);
        let resource = self.rr.next_where(|r| view.free[r] && !revoked[r] && wait_until[r] <= now)?;
        Some(Grant { resource, lease: None })
    }

    fn complete(&mut self, grant: Grant, _site: usize, answer: Answer, now: u64) {
        match (answer.wire, answer.outcome) {
            (Wire::Status(429), Outcome::Failure { retry_after: Some(wait), .. }) => {
                let until = &mut self.wait_until[grant.resource];
                *until = (*until).max(now + wait);
            }
            (Wire::Status(401), _) => self.revoked[grant.resource] = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use repute_core::{FailureKind, SECOND};

    use super::*;
    use crate::simulate::scenario::{Kind, Windows, World};

    pub(super) const FAIL: Answer = Answer {
        outcome: Outcome::Failure { kind: FailureKind::Timeout, latency_ms: 1.0, retry_after: None },
        wire: Wire::Timeout,
    };
    pub(super) const OK: Answer = Answer { outcome: Outcome::Success { latency_ms: 1.0 }, wire: Wire::Status(200) };

    pub(super) fn status(code: u16, kind: FailureKind, retry_after: Option<u64>) -> Answer {
        Answer { outcome: Outcome::Failure { kind, latency_ms: 1.0, retry_after }, wire: Wire::Status(code) }
    }

    pub(super) fn grant(resource: usize) -> Grant {
        Grant { resource, lease: None }
    }

    #[test]
    fn round_robin_skips_busy_proxies_and_wraps() {
        let world = World::new(Kind::Steady, 1, SECOND);
        let mut free = [true; RESOURCES];
        free[1] = false;
        let windows = Windows::new();
        let view = View { free: &free, world: &world, windows: &windows };
        let mut rr = RoundRobin::default();
        let picks: Vec<usize> = (0..3).map(|_| rr.acquire(0, 0, &view).unwrap().resource).collect();
        assert_eq!(picks, vec![0, 2, 3]);
        rr.next = RESOURCES - 1;
        assert_eq!(rr.acquire(0, 0, &view).unwrap().resource, RESOURCES - 1);
        assert_eq!(rr.acquire(0, 0, &view).unwrap().resource, 0);
    }

    #[test]
    fn retry_after_round_robin_waits_out_a_429_and_drops_a_401() {
        let world = World::new(Kind::ApiKeys, 1, SECOND);
        let free = [true; RESOURCES];
        let windows = Windows::new();
        let view = View { free: &free, world: &world, windows: &windows };
        let mut rr = RetryAfterRoundRobin::default();
        rr.complete(grant(0), 0, status(429, FailureKind::RateLimited, Some(7 * SECOND)), 10 * SECOND);
        rr.complete(grant(1), 0, status(401, FailureKind::AuthFailed, None), 10 * SECOND);
        assert_eq!(rr.acquire(0, 17 * SECOND - 1, &view).unwrap().resource, 2);
        rr.rr.next = 0;
        assert_eq!(rr.acquire(0, 17 * SECOND, &view).unwrap().resource, 0);
        rr.rr.next = 1;
        assert_eq!(rr.acquire(0, u64::MAX, &view).unwrap().resource, 2);
    }
}
