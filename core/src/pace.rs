//! A rate a cell has learned it can take, from the rate limits it met.
//!
//! Where no limit is registered, the provider's 429s are the only evidence of
//! what a (resource, context) takes, and a pool that only waits out each
//! Retry-After sends its next burst into the next slice. A cell that has met
//! a rate limit paces its grants instead: one every `1 / rate` seconds.
//!
//! The rate is measured, not guessed. A limit met by a request sent at `t`
//! with a wait `w` ends a window that closes at `t + w` and opens at the
//! first answer since the last window, or at `t - w` if that is later:
//! providers count in fixed slices and answer Retry-After up to the slice's
//! end (the quantized limits of OpenAI's documentation and of most sites),
//! so a burst that begins a slice and meets its limit spans the slice, and
//! a limit met early in a slice has `w` close to the slice's length, so
//! that `t - w` bounds how much of a stretch the cell underused the window
//! takes in. A paced cell meets its limit late in a slice, with a short `w`,
//! after the answers that filled the slice: when nothing that got through
//! was sent in `[t - w, t + w)`, or more got through per second from the
//! first answer since the last window (a whole-second Retry-After makes
//! `w` longer than what is left of a short slice, and the window then holds
//! one answer), the window opens at that answer instead. The answers that
//! got through, sent in the window, over its length, are what the provider
//! let through; a window that holds more answers than the cell remembers is
//! measured over the span of the ones it does. Answers are placed by when
//! their request was sent (`now - latency`), so requests in flight across
//! the limit neither count twice nor end a second window, and a slow exit's
//! late answer raises the rate of the window it was sent in. The learned
//! rate is a tenth under the measured one.
//!
//! It then creeps back up, a tenth of itself per minute without a limit met,
//! and is forgotten when it has doubled: a multiplicative decrease to what
//! was measured, then a slow additive increase (Jacobson's congestion
//! avoidance, as TCP and AIMD rate limiters do it), slow because each probe
//! of the ceiling costs an answer of 429 that a site may count toward a ban.

use serde::{Deserialize, Serialize};

use crate::time::SECOND;

/// Share of the measured rate the cell is paced at.
const MARGIN: f64 = 0.9;
/// Growth of a learned rate per minute without a limit met.
const GROWTH_PER_MINUTE: f64 = 0.1;
/// A rate grown to this multiple of what was learned is forgotten.
const FORGET_AT: f64 = 2.0;
const MINUTE: u64 = 60 * SECOND;
/// Send times of answers that got through a cell remembers.
pub(crate) const RECENT: usize = 8;

/// A window a limit ended: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Window {
    pub start: u64,
    pub end: u64,
    /// Where the window opens when nothing that got through was sent in
    /// `[start, end)`: the first answer since the last window (`start`
    /// when none was in when the limit was met).
    pub reach: u64,
}

impl Window {
    /// A window read back from a snapshot. The format keeps no `reach`, so
    /// a window restored with nothing in it measures as it did before there
    /// was one; a pool's persisted state stays readable.
    pub fn restored(start: u64, end: u64) -> Self {
        Window { start, end, reach: start }
    }

    /// Whether an answer sent at `sent` is one this window may count.
    fn holds(&self, sent: u64) -> bool {
        self.start.min(self.reach) <= sent && sent < self.end
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Pace {
    /// Grants per second learned at `learned.end`; none until a limit is met.
    pub rate: Option<f64>,
    /// The window the rate was learned from.
    pub learned: Option<Window>,
    /// A limit was met: the window it ends, learned from when it ends.
    pub pending: Option<Window>,
    /// Send times of the latest answers that got through, in no order.
    pub recent: [u64; RECENT],
    pub recent_len: u8,
}

impl Pace {
    /// An answer that got past the provider's limit, sent at `sent`.
    pub fn passed(&mut self, sent: u64, now: u64) {
        self.settle(now);
        let len = usize::from(self.recent_len);
        if len < RECENT {
            self.recent[len] = sent;
            self.recent_len += 1;
        } else {
            let oldest = (0..RECENT).min_by_key(|&i| self.recent[i]).expect("RECENT > 0");
            if self.recent[oldest] >= sent {
                return;
            }
            self.recent[oldest] = sent;
        }
        // Sent in the window the rate was learned from, answered late (a
        // slow exit answers after the slice has ended): it teaches that
        // window's rate after the fact.
        if let (Some(w), Some(_)) = (self.learned, self.rate) {
            if w.holds(sent) {
                self.rate = Some(self.measure(w));
            }
        }
    }

    /// A rate limit met by a request sent at `sent`, with a wait until `until`.
    pub fn limited(&mut self, sent: u64, until: u64, now: u64) {
        self.settle(now);
        let end = until.max(now);
        // Sent before the last window ended, or while one is pending: the
        // same burst the last limit already answered.
        if self.pending.is_some() || self.learned.is_some_and(|w| sent < w.end) {
            return;
        }
        let wait = end.saturating_sub(sent);
        // The window reaches back as far as the wait reaches forward, but
        // not past the first answer since the last window: the burst that
        // met this limit may have begun the slice.
        let after = self.learned.map_or(0, |w| w.end);
        let first = self.recent[..usize::from(self.recent_len)].iter().copied().filter(|&t| t >= after).min();
        let start = sent.saturating_sub(wait).max(first.unwrap_or(0).min(sent));
        self.pending = Some(Window { start, end, reach: first.map_or(start, |f| f.min(start)) });
        self.settle(now);
    }

    /// Learns the rate of a pending window once it has ended.
    fn settle(&mut self, now: u64) {
        let Some(w) = self.pending.filter(|w| now >= w.end) else { return };
        self.rate = Some(self.measure(w));
        self.learned = Some(w);
        self.pending = None;
    }

    /// What got through in `w`, per second, a tenth under.
    fn measure(&self, w: Window) -> f64 {
        let sent = &self.recent[..usize::from(self.recent_len)];
        // A limit met late in its slice (a paced cell's is) has a short
        // wait, and most of the answers that filled the slice were sent
        // before `start`: with none in `[start, end)` the window opens at
        // `reach`, and with some, at `reach` if more got through per second
        // from there. Measured again as late answers sent in it come in: a
        // slow exit's answers may still be in flight when the limit is met.
        let reach = self.measure_from(w.reach.min(w.start), w.end);
        if sent.iter().any(|&t| w.start <= t && t < w.end) {
            self.measure_from(w.start, w.end).max(reach)
        } else {
            reach
        }
    }

    /// What got through from `from` to `end`, per second, a tenth under.
    fn measure_from(&self, from: u64, end: u64) -> f64 {
        let sent = &self.recent[..usize::from(self.recent_len)];
        let inside: &mut [u64; RECENT] = &mut [0; RECENT];
        let mut n = 0;
        for &t in sent {
            if from <= t && t < end {
                inside[n] = t;
                n += 1;
            }
        }
        // More got through than the cell remembers: measure over the span
        // of those it does.
        let start = if n == RECENT { inside.iter().copied().min().unwrap_or(from) } else { from };
        let seconds = (end.saturating_sub(start).max(1)) as f64 / SECOND as f64;
        // At least the one request a window lets through, even when none did.
        MARGIN * (n.max(1) as f64) / seconds
    }

    /// The rate the cell takes at `now`: the learned one, grown since.
    pub fn rate_at(&self, now: u64) -> Option<f64> {
        let rate = self.rate?;
        let since = self.learned.map_or(now, |w| w.end);
        let minutes = now.saturating_sub(since) as f64 / MINUTE as f64;
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
    const MS: u64 = SECOND / 1000;

    /// A slice of 2 requests per second from 10 s: two sent at 10 s and
    /// 10.1 s get through, a third at 10.2 s is told to wait for the
    /// slice's end, 11 s; the window is [10 s, 11 s).
    fn burst(pace: &mut Pace) {
        pace.passed(10 * S, 10 * S + 50 * MS);
        pace.passed(10 * S + 100 * MS, 10 * S + 150 * MS);
        pace.limited(10 * S + 200 * MS, 11 * S, 10 * S + 250 * MS);
        pace.limited(10 * S + 200 * MS, 11 * S, 10 * S + 260 * MS);
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
        assert_eq!(pace.rate, None, "learned when the wait ends");
        // 2 answers in 1 s.
        assert_eq!(pace.interval(11 * S), Some(555_555_556));
        assert_eq!(pace.learned, Some(Window { start: 10 * S, end: 11 * S, reach: 10 * S }));
    }

    #[test]
    fn requests_in_flight_across_the_limit_end_one_window_only() {
        let mut pace = Pace::default();
        burst(&mut pace);
        pace.interval(11 * S);
        let (rate, learned) = (pace.rate, pace.learned);
        // Sent before the wait ended, answered after it: the same burst.
        pace.limited(10 * S + 500 * MS, 11 * S, 11 * S + 100 * MS);
        assert_eq!((pace.pending, pace.rate, pace.learned), (None, rate, learned));
    }

    #[test]
    fn an_answer_sent_in_the_learned_window_and_answered_late_raises_its_rate() {
        let mut pace = Pace::default();
        burst(&mut pace);
        pace.interval(11 * S);
        // A request sent at 10.15 s through a slow exit, answered at 12 s.
        pace.passed(10 * S + 150 * MS, 12 * S);
        assert_eq!(pace.rate, Some(0.9 * 3.0));
        // One sent after the window teaches it nothing.
        pace.passed(11 * S + MS, 12 * S);
        assert_eq!(pace.rate, Some(0.9 * 3.0));
    }

    #[test]
    fn a_window_longer_than_the_cell_remembers_is_measured_over_what_it_does() {
        let mut pace = Pace::default();
        // 12 answers 100 ms apart from 20 s, then a limit with a wait of 10 s.
        for i in 0..12 {
            pace.passed(20 * S + i * 100 * MS, 20 * S + i * 100 * MS + MS);
        }
        pace.limited(21200 * MS, 31200 * MS, 21201 * MS);
        pace.interval(31200 * MS);
        // The 8 latest were sent from 20.4 s on: 8 in 10.8 s.
        assert_eq!(pace.rate, Some(0.9 * 8.0 / 10.8));
    }

    #[test]
    fn a_window_reaches_back_no_further_than_its_wait() {
        let mut pace = Pace::default();
        // One answer at 1 s, the next at 58 s, a limit at 59 s until 60 s:
        // [58 s, 60 s), not the minute the cell was barely used.
        pace.passed(S, S + MS);
        pace.passed(58 * S, 58 * S + MS);
        pace.limited(59 * S, 60 * S, 59 * S + MS);
        pace.interval(60 * S);
        assert_eq!(pace.learned, Some(Window { start: 58 * S, end: 60 * S, reach: S }));
        assert_eq!(pace.rate, Some(0.9 * 1.0 / 2.0));
        // The next window opens at the first answer after this one closed.
        pace.passed(61 * S, 61 * S + MS);
        pace.passed(61 * S + 500 * MS, 61 * S + 501 * MS);
        pace.limited(62 * S, 63 * S, 62 * S + MS);
        pace.interval(63 * S);
        assert_eq!(pace.learned, Some(Window { start: 61 * S, end: 63 * S, reach: 61 * S }));
    }

    #[test]
    fn a_limit_met_late_in_its_slice_opens_at_the_first_answer_since_the_last_window() {
        let mut pace = Pace::default();
        // One per 10 s: a paced cell's answer sent at 21 s got through; one
        // sent at 29.3 s is told to wait 0.7 s, for the slice's end at 30 s.
        pace.passed(21 * S, 21 * S + 100 * MS);
        pace.limited(29300 * MS, 30 * S, 29400 * MS);
        pace.interval(30 * S);
        // [21 s, 30 s), not [28.6 s, 30 s) with nothing in it: one per 9 s,
        // not one per 1.4 s.
        assert_eq!(pace.learned, Some(Window { start: 28600 * MS, end: 30 * S, reach: 21 * S }));
        assert_eq!(pace.rate, Some(0.9 * 1.0 / 9.0));
    }

    #[test]
    fn a_late_limit_with_few_answers_in_its_window_reaches_back_when_more_got_through_from_there() {
        let mut pace = Pace::default();
        // Four per 5 s slice: a paced cell's answers sent at 35, 36.1, 37.2
        // and 38.5 s got through; one sent at 39.4 s is told to wait a whole
        // second (the slice ends at 40 s), so [38.4 s, 40.4 s) holds one
        // answer: one per 2 s, where four got through in 5.4 s.
        for ms in [35_000, 36_100, 37_200, 38_500] {
            pace.passed(ms * MS, ms * MS + 50 * MS);
        }
        pace.limited(39_400 * MS, 40_400 * MS, 39_450 * MS);
        pace.interval(40_400 * MS);
        assert_eq!(pace.learned, Some(Window { start: 38_400 * MS, end: 40_400 * MS, reach: 35 * S }));
        assert_eq!(pace.rate, Some(0.9 * 4.0 / 5.4));
    }

    #[test]
    fn answers_in_flight_when_a_late_limit_was_met_count_when_they_come_in() {
        let mut pace = Pace::default();
        pace.passed(21 * S, 21 * S + 100 * MS);
        pace.limited(29300 * MS, 30 * S, 29400 * MS);
        pace.interval(30 * S);
        // A slow exit's answer to a request sent at 25 s comes in at 31 s:
        // two got through in [21 s, 30 s).
        pace.passed(25 * S, 31 * S);
        assert_eq!(pace.rate, Some(0.9 * 2.0 / 9.0));
        // One sent after the window teaches it nothing.
        pace.passed(30 * S + MS, 31 * S);
        assert_eq!(pace.rate, Some(0.9 * 2.0 / 9.0));
    }

    #[test]
    fn a_late_limit_with_no_answer_in_since_the_last_window_keeps_its_short_window() {
        let mut pace = Pace::default();
        burst(&mut pace);
        pace.interval(11 * S);
        // Nothing that got through since 11 s is in when a limit is met at
        // 19.5 s until 20 s: [19 s, 20 s), and an answer sent before it,
        // coming in late, is not counted.
        pace.limited(19500 * MS, 20 * S, 19600 * MS);
        pace.interval(20 * S);
        assert_eq!(pace.learned, Some(Window { start: 19 * S, end: 20 * S, reach: 19 * S }));
        pace.passed(15 * S, 21 * S);
        assert_eq!(pace.rate, Some(0.9));
    }

    #[test]
    fn a_window_nothing_got_through_learns_one_per_window() {
        let mut pace = Pace::default();
        pace.limited(10 * S, 14 * S, 10 * S + S / 10);
        // [6 s, 14 s): one per 8 s.
        assert_eq!(pace.interval(14 * S), Some(libm::ceil(S as f64 / (0.9 / 8.0)) as u64));
    }

    #[test]
    fn a_learned_rate_grows_back_and_is_forgotten() {
        let mut pace = Pace::default();
        burst(&mut pace);
        pace.interval(11 * S);
        let rate = 0.9 * 2.0;
        assert_eq!(pace.rate_at(11 * S), Some(rate));
        assert_eq!(pace.rate_at(11 * S + 5 * MINUTE), Some(rate * 1.5));
        assert_eq!(pace.rate_at(11 * S + 10 * MINUTE), None);
        assert_eq!(pace.interval(11 * S + 10 * MINUTE), None);
    }
}
