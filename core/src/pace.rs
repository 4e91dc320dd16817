//! A rate a cell has learned it can take, from the rate limits it met.
//!
//! Where no limit is registered, the provider's 429s are the only evidence of
//! what a (resource, context) takes, and a pool that only waits out each
//! Retry-After sends its next burst into the next slice. A cell that has met
//! a rate limit paces its grants instead: one every `1 / rate` seconds.
//!
//! The rate is measured, not guessed: a rate limit ends a period that began
//! when the last pause ended (or at the cell's first answer), and the
//! answers that got through in it, over the period up to the end of the
//! provider's wait, are what the provider let through. Providers count in
//! fixed slices and answer Retry-After up to the slice's end (the
//! quantized limits of OpenAI's and most sites' documentation), so that
//! share is the slice's budget. Answers are placed in a period by when
//! their request was sent (`now - latency`), so requests in flight across
//! the limit neither count twice nor end a second period. The learned rate
//! is a tenth under the measured one, and never under half the rate before
//! it (a period the pool underused says little about the ceiling).
//!
//! It then creeps back up, a tenth of itself per minute without a limit met,
//! and is forgotten when it has doubled: an additive increase after a
//! multiplicative decrease (Jacobson's congestion avoidance, as TCP and
//! AIMD rate limiters do it), slow because each probe of the ceiling costs
//! an answer of 429 that a site may count toward a ban.

use serde::{Deserialize, Serialize};

use crate::policy::SECOND;

/// Share of the measured rate the cell is paced at.
const MARGIN: f64 = 0.9;
/// Floor of a new rate as a share of the one before.
const DECREASE: f64 = 0.5;
/// Growth of a learned rate per minute without a limit met.
const GROWTH_PER_MINUTE: f64 = 0.1;
/// A rate grown to this multiple of what was learned is forgotten.
const FORGET_AT: f64 = 2.0;
const MINUTE: u64 = 60 * SECOND;

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Pace {
    /// Grants per second learned at `learned_at`; none until a limit is met.
    pub rate: Option<f64>,
    pub learned_at: u64,
    /// Start of the period being counted; none before the first answer.
    pub since: Option<u64>,
    /// Answers the provider let through, sent in the period.
    pub passed: u32,
    /// A limit was met: the end of the provider's wait, which ends the period.
    pub cut: Option<u64>,
    /// Answers let through that were sent at or after `cut`: the next period's.
    pub after_cut: u32,
    /// The period the rate was learned from, while answers sent in it may
    /// still come back.
    pub last: Option<Period>,
}

/// A counted period: its start and end, what got through and the rate
/// before it (the floor of what it teaches).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Period {
    pub since: u64,
    pub cut: u64,
    pub passed: u32,
    pub before: f64,
}

impl Period {
    fn rate(&self) -> f64 {
        let seconds = (self.cut.saturating_sub(self.since).max(1)) as f64 / SECOND as f64;
        // At least the one request a period lets through, even when none did.
        let measured = f64::from(self.passed.max(1)) / seconds;
        (MARGIN * measured).max(DECREASE * self.before)
    }
}

impl Pace {
    /// An answer that got past the provider's limit, sent at `sent`.
    pub fn passed(&mut self, sent: u64, now: u64) {
        self.settle(now);
        let since = *self.since.get_or_insert(sent);
        match (self.cut, self.last.as_mut()) {
            (Some(cut), _) if sent >= cut => self.after_cut = self.after_cut.saturating_add(1),
            _ if sent >= since => self.passed = self.passed.saturating_add(1),
            // Sent in the period the rate was learned from, answered late
            // (a slow exit answers after the slice has ended): it teaches
            // that period's rate after the fact.
            (_, Some(last)) if sent >= last.since => {
                last.passed = last.passed.saturating_add(1);
                if self.learned_at == last.cut {
                    self.rate = Some(last.rate());
                }
            }
            _ => {}
        }
    }

    /// A rate limit met by a request sent at `sent`, with a wait until `until`.
    pub fn limited(&mut self, sent: u64, until: u64, now: u64) {
        self.settle(now);
        let since = *self.since.get_or_insert(sent);
        // Sent before this period began, or while a cut is pending: the same
        // burst the last limit already answered.
        if sent < since || self.cut.is_some() {
            return;
        }
        self.cut = Some(until.max(now));
        self.settle(now);
    }

    /// Ends a period whose cut has come: learns its rate.
    fn settle(&mut self, now: u64) {
        let (Some(cut), Some(since)) = (self.cut, self.since) else { return };
        if now < cut {
            return;
        }
        let before = self.rate_at(now).unwrap_or(0.0);
        let period = Period { since, cut, passed: self.passed, before };
        self.rate = Some(period.rate());
        self.last = Some(period);
        self.learned_at = cut;
        self.since = Some(cut);
        self.passed = self.after_cut;
        self.after_cut = 0;
        self.cut = None;
    }

    /// The rate the cell takes at `now`: the learned one, grown since.
    pub fn rate_at(&self, now: u64) -> Option<f64> {
        let rate = self.rate?;
        let minutes = now.saturating_sub(self.learned_at) as f64 / MINUTE as f64;
        let grown = 1.0 + GROWTH_PER_MINUTE * minutes;
        (grown < FORGET_AT).then_some(rate * grown)
    }

    /// Time from one grant to the next, while a rate is learned.
    pub fn interval(&mut self, now: u64) -> Option<u64> {
        self.settle(now);
        let rate = self.rate_at(now)?;
        Some(libm::ceil(SECOND as f64 / rate) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = SECOND;

    /// A slice of 2 requests per second, answered in 100 ms: a burst of 4
    /// at 0 lets 2 through and is told to wait for the slice's end.
    fn burst(pace: &mut Pace) {
        pace.passed(0, S / 10);
        pace.passed(0, S / 10);
        pace.limited(0, S, S / 10);
        pace.limited(0, S, S / 10);
    }

    #[test]
    fn no_rate_before_a_limit_is_met() {
        let mut pace = Pace::default();
        for i in 0..100 {
            pace.passed(i * S / 10, i * S / 10 + S / 10);
        }
        assert_eq!(pace.interval(20 * S), None);
    }

    #[test]
    fn a_slice_budget_is_learned_when_the_wait_ends() {
        let mut pace = Pace::default();
        burst(&mut pace);
        // The period runs to the end of the wait: unknown until then.
        assert_eq!(pace.rate, None);
        assert_eq!(pace.interval(S), Some(555_555_556));
        assert_eq!(pace.rate, Some(1.8));
        assert_eq!(pace.since, Some(S));
        assert_eq!(pace.passed, 0);
    }

    #[test]
    fn requests_in_flight_across_the_limit_end_one_period_only() {
        let mut pace = Pace::default();
        burst(&mut pace);
        // Sent before the wait ended, answered after it: the old period's.
        pace.limited(S / 2, S, S + S / 10);
        assert_eq!(pace.rate, Some(1.8));
        assert_eq!(pace.cut, None);
        // Sent after: the next period's.
        pace.passed(S + S / 5, S + S / 2);
        assert_eq!(pace.passed, 1);
    }

    #[test]
    fn an_answer_sent_in_the_learned_period_and_answered_late_raises_its_rate() {
        let mut pace = Pace::default();
        burst(&mut pace);
        assert_eq!(pace.interval(S), Some(555_555_556));
        // A third request of the burst, through a slow exit, answered at 2 s.
        pace.passed(S / 2, 2 * S);
        assert_eq!(pace.rate, Some(0.9 * 3.0));
        assert_eq!(pace.passed, 0, "not the current period's");
    }

    #[test]
    fn answers_sent_after_the_cut_count_for_the_next_period() {
        let mut pace = Pace::default();
        pace.passed(0, S / 10);
        pace.limited(0, 5 * S, S / 10);
        pace.passed(5 * S, 5 * S + S / 10);
        pace.passed(5 * S, 5 * S + S / 10);
        assert_eq!(pace.passed, 2);
        assert_eq!(pace.rate, Some(0.9 * 0.2));
    }

    #[test]
    fn a_period_nothing_got_through_learns_one_per_period() {
        let mut pace = Pace::default();
        pace.limited(0, 4 * S, S / 10);
        assert_eq!(pace.interval(4 * S), Some(libm::ceil(S as f64 / 0.225) as u64));
    }

    #[test]
    fn a_new_rate_is_at_least_half_the_last() {
        let mut pace = Pace::default();
        burst(&mut pace);
        assert_eq!(pace.interval(S), Some(555_555_556));
        // An underused period: one answer in 10 s, then a limit.
        pace.passed(2 * S, 2 * S + S / 10);
        pace.limited(10 * S, 11 * S, 10 * S + S / 10);
        let before = pace.rate_at(11 * S).expect("learned");
        assert!(before > 1.8);
        assert_eq!(pace.interval(11 * S), Some(libm::ceil(S as f64 / (0.5 * before)) as u64));
    }

    #[test]
    fn a_learned_rate_grows_back_and_is_forgotten() {
        let mut pace = Pace::default();
        burst(&mut pace);
        assert_eq!(pace.rate_at(S), None, "learned when the wait ends");
        assert_eq!(pace.interval(S), Some(555_555_556));
        assert_eq!(pace.rate_at(S + 5 * MINUTE), Some(1.8 * 1.5));
        assert_eq!(pace.rate_at(S + 10 * MINUTE), None);
        assert_eq!(pace.interval(S + 10 * MINUTE), None);
    }
}
