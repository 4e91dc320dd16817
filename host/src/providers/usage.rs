//! Usage limits as a lease authority counts them: the grants of one
//! resource in the last minute, across every pool the authority serves, and
//! the rule a claim is judged by. The in-process authorities (memory, and
//! SQLite under its table) run this code; PostgreSQL and Redis run the same
//! rule in the store, in the statement or script of the grant.
//!
//! For a grant claiming `{limits, cost}` at `now` of a permit that is free:
//! `max_uses` spent answers `Limited(None)`; else the grant waits for the
//! earliest `t >= now` at which `min_interval` has passed since the newest
//! grant, the window holds fewer than `rpm` grants and `cost` more tokens
//! fit under `tpm` (grants leave the window `WINDOW` after they were made),
//! answering `Limited(Some(t - now))` while `t > now`. A cost over `tpm`
//! can never fit: that grant is refused as `Held`, for this acquire only,
//! since any smaller cost may still be granted. A grant that passes is
//! recorded in the same step.

use std::collections::VecDeque;

use repute_core::{Claim, GrantAnswer, Limits, WINDOW};

/// One grant in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub at: u64,
    /// Tokens it counts against `tpm`: its cost, or what it reconciled to.
    pub cost: u64,
    pub permit: u32,
    pub token: u64,
}

/// What one resource has used of its limits at the authority.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Grants of the last `WINDOW`, oldest first: only those an `rpm` or
    /// `tpm` counts, so a resource limited by `min_interval` or `max_uses`
    /// alone keeps none.
    pub window: VecDeque<Grant>,
    /// The sum of the window's costs.
    pub tokens: u64,
    /// When the newest grant was made.
    pub last: Option<u64>,
    /// Grants ever.
    pub uses: u64,
}

/// Whether a grant under `limits` joins the window.
pub(crate) fn windowed(limits: &Limits) -> bool {
    limits.rpm.is_some() || limits.tpm.is_some()
}

impl Usage {
    /// Drops the grants that left the window by `now`; returns how many.
    pub fn prune(&mut self, now: u64) -> usize {
        let mut dropped = 0;
        while let Some(g) = self.window.front().copied() {
            if g.at.saturating_add(WINDOW) > now {
                break;
            }
            self.window.pop_front();
            self.tokens -= g.cost;
            dropped += 1;
        }
        dropped
    }

    /// The answer to `claim` at `now` (pruned first) when it is refused;
    /// `None` when it may be granted.
    pub fn judge(&self, claim: &Claim, now: u64) -> Option<GrantAnswer> {
        let limits = &claim.limits;
        if limits.max_uses.is_some_and(|m| self.uses >= m) {
            return Some(GrantAnswer::Limited(None));
        }
        let mut at = now;
        if let (Some(gap), Some(last)) = (limits.min_interval, self.last) {
            at = at.max(last.saturating_add(gap));
        }
        if let Some(rpm) = limits.rpm {
            let n = self.window.len();
            if n >= rpm as usize {
                // The grant that must leave for one more to fit.
                at = at.max(self.window[n - rpm as usize].at.saturating_add(WINDOW));
            }
        }
        if let Some(tpm) = limits.tpm {
            if claim.cost > tpm {
                return Some(GrantAnswer::Held);
            }
            let over = (self.tokens + claim.cost).saturating_sub(tpm);
            if over > 0 {
                at = at.max(self.freed_at(over));
            }
        }
        (at > now).then(|| GrantAnswer::Limited(Some(at - now)))
    }

    /// When the oldest grants holding `needed` tokens have left the window.
    fn freed_at(&self, needed: u64) -> u64 {
        let mut freed = 0;
        for g in &self.window {
            freed += g.cost;
            if freed >= needed {
                return g.at.saturating_add(WINDOW);
            }
        }
        // Not reached: a cost that fits `tpm` never needs more than the
        // window's tokens to leave.
        self.window.back().map_or(0, |g| g.at.saturating_add(WINDOW))
    }

    /// Counts the grant of `token` on `permit` that `claim` made at `now`.
    pub fn record(&mut self, claim: &Claim, permit: u32, token: u64, now: u64) {
        self.uses += 1;
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        if windowed(&claim.limits) {
            self.tokens += claim.cost;
            self.window.push_back(Grant { at: now, cost: claim.cost, permit, token });
        }
    }

    /// The grant of `token` on `permit` used `used` tokens; false if it is
    /// no longer in the window.
    pub fn reconcile(&mut self, permit: u32, token: u64, used: u64) -> bool {
        let Some(g) = self.window.iter_mut().rev().find(|g| g.permit == permit && g.token == token) else {
            return false;
        };
        self.tokens = self.tokens - g.cost + used;
        g.cost = used;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    fn claim(limits: Limits, cost: u64) -> Claim {
        Claim { limits, cost }
    }

    /// Judges and, when admitted, records a grant; returns the answer.
    fn ask(u: &mut Usage, c: &Claim, now: u64) -> GrantAnswer {
        u.prune(now);
        match u.judge(c, now) {
            Some(refused) => refused,
            None => {
                let token = u.uses + 1;
                u.record(c, 0, token, now);
                GrantAnswer::Granted(token)
            }
        }
    }

    #[test]
    fn rpm_admits_n_a_minute_and_says_when_the_oldest_leaves() {
        let c = claim(Limits { rpm: Some(3), ..Limits::default() }, 1);
        let mut u = Usage::default();
        for (i, t) in [0, 10, 20].into_iter().enumerate() {
            assert_eq!(ask(&mut u, &c, t * SECOND), GrantAnswer::Granted(i as u64 + 1));
        }
        assert_eq!(ask(&mut u, &c, 30 * SECOND), GrantAnswer::Limited(Some(30 * SECOND)));
        assert_eq!(ask(&mut u, &c, 60 * SECOND), GrantAnswer::Granted(4));
        assert_eq!(ask(&mut u, &c, 61 * SECOND), GrantAnswer::Limited(Some(9 * SECOND)));
        assert_eq!(u.window.len(), 3, "the first grant left the window");
    }

    #[test]
    fn tpm_counts_costs_reconciled_to_use() {
        let c = claim(Limits { tpm: Some(100), ..Limits::default() }, 60);
        let mut u = Usage::default();
        assert_eq!(ask(&mut u, &c, 0), GrantAnswer::Granted(1));
        assert_eq!(ask(&mut u, &c, SECOND), GrantAnswer::Limited(Some(59 * SECOND)));
        assert!(u.reconcile(0, 1, 20));
        assert_eq!(u.tokens, 20);
        assert_eq!(ask(&mut u, &c, SECOND), GrantAnswer::Granted(2));
        assert_eq!(u.judge(&claim(c.limits, 101), SECOND), Some(GrantAnswer::Held), "never fits: this acquire only");
        u.prune(WINDOW + SECOND);
        assert_eq!((u.window.len(), u.tokens), (0, 0));
        assert!(!u.reconcile(0, 1, 5), "a grant that left the window is not reconciled");
    }

    #[test]
    fn min_interval_and_max_uses_keep_no_window() {
        let c = claim(Limits { min_interval: Some(5 * SECOND), max_uses: Some(2), ..Limits::default() }, 1);
        let mut u = Usage::default();
        assert_eq!(ask(&mut u, &c, 0), GrantAnswer::Granted(1));
        assert_eq!(ask(&mut u, &c, SECOND), GrantAnswer::Limited(Some(4 * SECOND)));
        assert_eq!(ask(&mut u, &c, 5 * SECOND), GrantAnswer::Granted(2));
        assert_eq!(ask(&mut u, &c, 100 * SECOND), GrantAnswer::Limited(None));
        assert!(u.window.is_empty());
        assert_eq!((u.uses, u.last), (2, Some(5 * SECOND)));
    }
}
