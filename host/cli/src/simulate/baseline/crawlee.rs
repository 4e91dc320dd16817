//! Crawlee's session pool.

use repute_core::SECOND;

use crate::simulate::rng::Rng;
use crate::simulate::scenario::{Answer, Wire, RESOURCES};
use crate::simulate::strategy::{Chooser, Grant, View};

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

#[cfg(test)]
mod tests {
    use repute_core::FailureKind;

    use super::super::tests::{grant, status, FAIL, OK};
    use super::*;
    use crate::simulate::scenario::{Kind, Windows, World};

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
}
