//! Baselines that exist only in the simulator: what a service does without
//! repute. None of them but LiteLLM's router sees the context a request is
//! for, as a plain load balancer or a crawler's session pool would not;
//! LiteLLM's deployments are (key, model) pairs, so it does.

use repute_core::{Outcome, SECOND};

use super::rng::Rng;
use super::scenario::{Answer, Wire, CONTEXTS, RESOURCES};
use super::strategy::{Chooser, Grant, View};

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

/// Crawlee `SessionPool` defaults (`packages/core/src/session_pool/`).
const MAX_POOL_SIZE: usize = 1000;
const MAX_ERROR_SCORE: f64 = 3.0;
const ERROR_SCORE_DECREMENT: f64 = 0.5;
const MAX_USAGE_COUNT: u32 = 50;
const MAX_SESSION_AGE: u64 = 3000 * SECOND;
/// `BLOCKED_STATUS_CODES`: a response with one of these retires its session.
const BLOCKED_STATUS_CODES: [u16; 3] = [401, 403, 429];

/// One Crawlee `Session`, bound at creation to the proxy (or key) it was given.
#[derive(Debug, Clone)]
struct Session {
    id: u64,
    resource: usize,
    error_score: f64,
    usage: u32,
    expires_at: u64,
    retired: bool,
}

impl Session {
    /// `isUsable()`: not retired, not blocked (error score below the max), not expired, not used up.
    fn usable(&self, now: u64) -> bool {
        !self.retired && self.error_score < MAX_ERROR_SCORE && now < self.expires_at && self.usage < MAX_USAGE_COUNT
    }

    /// `markGood()`.
    fn mark_good(&mut self, now: u64) {
        self.usage += 1;
        if self.error_score > 0.0 {
            self.error_score -= ERROR_SCORE_DECREMENT;
        }
        self.retire_unless_usable(now);
    }

    /// `markBad()`.
    fn mark_bad(&mut self, now: u64) {
        self.error_score += 1.0;
        self.usage += 1;
        self.retire_unless_usable(now);
    }

    /// `retire()`, what a blocked status code does.
    fn retire(&mut self) {
        if !self.retired {
            self.error_score += MAX_ERROR_SCORE;
            self.usage += 1;
            self.retired = true;
        }
    }

    /// `maybeSelfRetire()`.
    fn retire_unless_usable(&mut self, now: u64) {
        if !self.usable(now) {
            self.retire();
        }
    }
}

/// Crawlee's `SessionPool` with its defaults, as a crawler uses it: until
/// the pool holds 1000 sessions each request gets a new one; then a random
/// session, and if that one is not usable, the retired sessions are removed
/// and a new one is created. A new session takes the next proxy of the
/// rotation (`ProxyConfiguration.newUrl`), so a retired proxy comes back as
/// a fresh session in its turn. A good response marks the session good
/// (error score −0.5), a failure marks it bad (+1; retired at 3), and a
/// 401/403/429 retires it at once. The simulator's one lease per resource
/// means a session whose proxy is busy waits: the random pick is among the
/// sessions on free proxies, and the rotation skips busy proxies.
#[derive(Debug)]
pub struct CrawleeSessions {
    sessions: Vec<Session>,
    next_id: u64,
    next_proxy: usize,
    /// The session each busy resource is serving.
    in_use: [Option<u64>; RESOURCES],
    rng: Rng,
}

impl CrawleeSessions {
    pub fn new(seed: u64) -> CrawleeSessions {
        CrawleeSessions {
            sessions: Vec::new(),
            next_id: 0,
            next_proxy: 0,
            in_use: [None; RESOURCES],
            rng: Rng::stream(seed, 201),
        }
    }

    /// `createSession()` on the next free proxy of the rotation.
    fn create(&mut self, now: u64, view: &View) -> Option<usize> {
        let resource = (0..RESOURCES).map(|i| (self.next_proxy + i) % RESOURCES).find(|&r| view.free[r])?;
        self.next_proxy = (resource + 1) % RESOURCES;
        let id = self.next_id;
        self.next_id += 1;
        self.sessions.push(Session {
            id,
            resource,
            error_score: 0.0,
            usage: 0,
            expires_at: now + MAX_SESSION_AGE,
            retired: false,
        });
        Some(self.sessions.len() - 1)
    }

    /// `getSession()`.
    fn session(&mut self, now: u64, view: &View) -> Option<usize> {
        if self.sessions.len() < MAX_POOL_SIZE {
            return self.create(now, view);
        }
        let on_free: Vec<usize> = (0..self.sessions.len()).filter(|&i| view.free[self.sessions[i].resource]).collect();
        if !on_free.is_empty() {
            let i = on_free[self.rng.below(on_free.len())];
            if self.sessions[i].usable(now) {
                return Some(i);
            }
            self.sessions.retain(|s| s.usable(now));
        }
        self.create(now, view)
    }
}

impl Chooser for CrawleeSessions {
    fn acquire(&mut self, _site: usize, now: u64, view: &View) -> Option<Grant> {
        let i = self.session(now, view)?;
        let s = &self.sessions[i];
        self.in_use[s.resource] = Some(s.id);
        Some(Grant { resource: s.resource, lease: None })
    }

    fn complete(&mut self, grant: Grant, _site: usize, answer: Answer, now: u64) {
        let id = self.in_use[grant.resource].take().expect("a granted resource serves a session");
        // A session removed while in flight (it expired meanwhile) has nothing left to mark.
        let Some(s) = self.sessions.iter_mut().find(|s| s.id == id) else { return };
        match answer.wire {
            Wire::Status(code) if BLOCKED_STATUS_CODES.contains(&code) => s.retire(),
            _ if answer.outcome.is_success() => s.mark_good(now),
            _ => s.mark_bad(now),
        }
    }
}

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

    use super::super::scenario::{Kind, Windows, World};
    use super::*;

    const FAIL: Answer = Answer {
        outcome: Outcome::Failure { kind: FailureKind::Timeout, latency_ms: 1.0, retry_after: None },
        wire: Wire::Timeout,
    };
    const OK: Answer = Answer { outcome: Outcome::Success { latency_ms: 1.0 }, wire: Wire::Status(200) };

    fn status(code: u16, kind: FailureKind, retry_after: Option<u64>) -> Answer {
        Answer { outcome: Outcome::Failure { kind, latency_ms: 1.0, retry_after }, wire: Wire::Status(code) }
    }

    fn grant(resource: usize) -> Grant {
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

    #[test]
    fn crawlee_sessions_score_plus_one_bad_minus_half_good_retire_at_three() {
        let fresh = |now| Session {
            id: 0,
            resource: 0,
            error_score: 0.0,
            usage: 0,
            expires_at: now + MAX_SESSION_AGE,
            retired: false,
        };
        let mut s = fresh(0);
        s.mark_bad(0);
        s.mark_bad(0);
        s.mark_good(0);
        assert_eq!((s.error_score, s.usage, s.usable(0)), (1.5, 3, true));
        s.mark_good(0);
        s.mark_good(0);
        s.mark_good(0);
        assert_eq!(s.error_score, 0.0, "a good use never takes the score below zero");
        s.mark_bad(0);
        s.mark_bad(0);
        assert!(s.usable(0));
        // The third strike makes it unusable, and Crawlee then retires it (+3 more).
        s.mark_bad(0);
        assert_eq!((s.error_score, s.retired, s.usable(0)), (6.0, true, false));
        // 50 uses, or 3000 s of age, end a session however well it did.
        let mut worn = fresh(0);
        (0..MAX_USAGE_COUNT).for_each(|_| worn.mark_good(0));
        assert!(worn.retired);
        assert!(!fresh(0).usable(MAX_SESSION_AGE));
    }

    #[test]
    fn crawlee_retires_on_401_403_429_and_replaces_sessions_by_rotation() {
        let world = World::new(Kind::Steady, 1, SECOND);
        let free = [true; RESOURCES];
        let windows = Windows::new();
        let view = View { free: &free, world: &world, windows: &windows };
        let mut c = CrawleeSessions::new(1);
        // Until the pool is full, every request gets a new session on the next proxy.
        let first: Vec<usize> = (0..3).map(|_| c.acquire(0, 0, &view).unwrap().resource).collect();
        assert_eq!(first, vec![0, 1, 2]);
        c.complete(grant(0), 0, status(403, FailureKind::Blocked, None), 0);
        c.complete(grant(1), 0, status(429, FailureKind::RateLimited, Some(SECOND)), 0);
        c.complete(grant(2), 0, FAIL, 0);
        let states: Vec<(f64, bool)> = c.sessions.iter().map(|s| (s.error_score, s.retired)).collect();
        assert_eq!(states, vec![(3.0, true), (3.0, true), (1.0, false)]);
        // A full pool hands out random usable sessions; on an unusable pick it
        // drops every unusable one and creates a session on the next proxy.
        while c.sessions.len() < MAX_POOL_SIZE {
            let g = c.acquire(0, 0, &view).unwrap();
            c.complete(g, 0, OK, 0);
        }
        c.sessions.iter_mut().filter(|s| s.resource != 5).for_each(Session::retire);
        while c.sessions.len() == MAX_POOL_SIZE {
            let g = c.acquire(0, 0, &view).unwrap();
            c.complete(g, 0, OK, 0);
        }
        let on: Vec<usize> = c.sessions.iter().map(|s| s.resource).collect();
        assert_eq!(on.len(), MAX_POOL_SIZE / RESOURCES + 1);
        assert!(on[..on.len() - 1].iter().all(|&r| r == 5));
        assert_eq!(on.last(), Some(&0), "1000 sessions so far: the rotation is back at proxy 0");
    }

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
