//! LiteLLM's router cooldowns.

use repute_core::{Outcome, SECOND};

use crate::simulate::rng::Rng;
use crate::simulate::scenario::{Answer, Wire, CONTEXTS, RESOURCES};
use crate::simulate::strategy::{Chooser, Grant, View};

/// LiteLLM router defaults (`litellm/constants.py`, `router_utils/cooldown_handlers.py`).
const COOLDOWN_TIME: u64 = 5 * SECOND;
const FAILURE_THRESHOLD_PERCENT: f64 = 0.5;
const FAILURE_THRESHOLD_MINIMUM_REQUESTS: u32 = 5;
/// The per-deployment success and failure counters live 60 s after their last increment.
const COUNTER_TTL: u64 = 60 * SECOND;

/// An in-memory counter with a TTL that every increment renews.
#[derive(Debug, Clone, Copy, Default)]
struct Counter {
    count: u32,
    expires_at: u64,
}

impl Counter {
    fn get(self, now: u64) -> u32 {
        if now < self.expires_at {
            self.count
        } else {
            0
        }
    }

    fn increment(&mut self, now: u64) {
        self.count = self.get(now) + 1;
        self.expires_at = now + COUNTER_TTL;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Deployment {
    successes: Counter,
    fails: Counter,
    cooldown_until: u64,
}

/// LiteLLM's router with its defaults: `simple-shuffle` (uniformly random
/// among the deployments of the model group that are not cooling), and the
/// default ("v2") cooldown rule on each failure: a 429 cools the deployment
/// at once, so does a status that is not retried (401, 404); otherwise it
/// cools when more than half of its requests "this minute" failed, once
/// there were at least 5. A cooldown lasts the response's Retry-After if it
/// had one, else `cooldown_time` (5 s), and replaces any running one. A
/// 403 or another 4xx and a dropped connection (`APIConnectionError`) never
/// cool; a 200 is a success whatever the caller thought of it. Deployments
/// are (resource, context) pairs, as a `model_list` entry per key and model.
#[derive(Debug)]
pub struct LitellmCooldown {
    deployments: Vec<Deployment>,
    rng: Rng,
}

impl LitellmCooldown {
    pub fn new(seed: u64) -> LitellmCooldown {
        LitellmCooldown { deployments: vec![Deployment::default(); RESOURCES * CONTEXTS], rng: Rng::stream(seed, 202) }
    }
}

/// The status LiteLLM's cooldown logic sees for a failure, `None` where
/// `_is_cooldown_required` skips it: a dropped connection
/// (`APIConnectionError`) and any 4xx but 401, 402, 404, 408 and 429. A
/// client timeout is LiteLLM's `Timeout`, a 408.
fn cooldown_status(wire: Wire) -> Option<u16> {
    match wire {
        Wire::Reset => None,
        Wire::Timeout => Some(408),
        Wire::Status(s) if (400..500).contains(&s) => matches!(s, 401 | 402 | 404 | 408 | 429).then_some(s),
        Wire::Status(s) => Some(s),
    }
}

/// `litellm.should_retry`: 408, 409, 429 and 5xx are retried.
fn should_retry(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

impl Chooser for LitellmCooldown {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant> {
        let healthy: Vec<usize> = (0..RESOURCES)
            .filter(|&r| view.free[r] && self.deployments[r * CONTEXTS + site].cooldown_until <= now)
            .collect();
        (!healthy.is_empty()).then(|| Grant { resource: healthy[self.rng.below(healthy.len())], lease: None })
    }

    fn complete(&mut self, grant: Grant, site: usize, answer: Answer, now: u64) {
        let d = &mut self.deployments[grant.resource * CONTEXTS + site];
        if matches!(answer.wire, Wire::Status(s) if s < 400) {
            d.successes.increment(now);
            return;
        }
        d.fails.increment(now);
        let Some(status) = cooldown_status(answer.wire) else { return };
        let (fails, total) = (d.fails.get(now), d.fails.get(now) + d.successes.get(now));
        let mostly_failing =
            fails as f64 / total as f64 > FAILURE_THRESHOLD_PERCENT && total >= FAILURE_THRESHOLD_MINIMUM_REQUESTS;
        if status == 429 || mostly_failing || !should_retry(status) {
            let retry_after = match answer.outcome {
                Outcome::Failure { retry_after: Some(wait), .. } => wait,
                _ => COOLDOWN_TIME,
            };
            d.cooldown_until = now + retry_after;
        }
    }
}

#[cfg(test)]
mod tests {
    use repute_core::FailureKind;

    use super::super::tests::{grant, status, FAIL, OK};
    use super::*;
    use crate::simulate::scenario::{Kind, Windows, World};

    #[test]
    fn litellm_cools_a_429_for_its_retry_after_and_a_401_for_cooldown_time() {
        let mut l = LitellmCooldown::new(1);
        let cooldown = |l: &LitellmCooldown, r: usize, site: usize| l.deployments[r * CONTEXTS + site].cooldown_until;
        l.complete(grant(0), 1, status(429, FailureKind::RateLimited, Some(12 * SECOND)), 100 * SECOND);
        assert_eq!(cooldown(&l, 0, 1), 112 * SECOND);
        assert_eq!(cooldown(&l, 0, 0), 0, "a deployment is one key for one model");
        l.complete(grant(1), 0, status(401, FailureKind::AuthFailed, None), 100 * SECOND);
        assert_eq!(cooldown(&l, 1, 0), 105 * SECOND);
        // A 403 and a dropped connection never cool, however many.
        for _ in 0..10 {
            l.complete(grant(2), 0, status(403, FailureKind::Blocked, None), 100 * SECOND);
            l.complete(grant(3), 0, Answer { wire: Wire::Reset, ..FAIL }, 100 * SECOND);
        }
        assert_eq!((cooldown(&l, 2, 0), cooldown(&l, 3, 0)), (0, 0));
    }

    #[test]
    fn litellm_cools_when_most_requests_this_minute_failed_once_there_were_five() {
        let mut l = LitellmCooldown::new(1);
        let until = |l: &LitellmCooldown| l.deployments[0].cooldown_until;
        // 2 successes, then timeouts: the 4th request is 2 of 4 failed, the 5th 3 of 5.
        l.complete(grant(0), 0, OK, 0);
        l.complete(grant(0), 0, OK, 0);
        l.complete(grant(0), 0, FAIL, SECOND);
        l.complete(grant(0), 0, FAIL, SECOND);
        assert_eq!(until(&l), 0);
        l.complete(grant(0), 0, FAIL, 2 * SECOND);
        assert_eq!(until(&l), 7 * SECOND);
        // The counters expire 60 s after their last increment: a lone failure later does not cool.
        l.complete(grant(0), 0, FAIL, 63 * SECOND);
        assert_eq!(until(&l), 7 * SECOND);
        // Cooling deployments are not chosen; when every free one is cooling, nothing is.
        let world = World::new(Kind::Steady, 1, SECOND);
        let mut free = [false; RESOURCES];
        free[0] = true;
        let windows = Windows::new();
        let view = View { free: &free, world: &world, windows: &windows };
        assert!(l.acquire(0, 6 * SECOND, &view).is_none());
        assert_eq!(l.acquire(0, 7 * SECOND, &view).unwrap().resource, 0);
    }
}
