//! A context's outage: transient failures that its live resources share.
//!
//! A site that is failing (overloaded, restarting) fails requests through
//! every exit at once, and each exit's cell would read its share of those
//! failures as its own: the best exits cool together, and worse ones carry
//! the traffic until the cooldowns end. A failure says something about a
//! resource only if the resource did worse than the others at the same
//! time. So each context keeps its latest answers, each with the failure
//! probability its resource's record gave it, and a transient failure is
//! the context's, held against no cell (it counts as an observation only),
//! when in the last `WINDOW` the other resources that got answers through:
//! - failed, at least `WITNESSES` of them and at least half of them, and
//! - failed more often than their records make plausible: the chance of as
//!   many failures, Poisson with the predicted number as mean, is under
//!   `IMPROBABLE`.
//!
//! Only a resource that got an answer through is a witness, so exits that
//! died together (a subnet) never excuse each other: a dead exit succeeds
//! at nothing. Several exits going bad at once through every site are not
//! excused either while the others still work: fewer than half fail. The
//! answers are kept in no snapshot: after a restore, until a context has
//! some again, a failure is the resource's.

use alloc::vec::Vec;

use crate::time::SECOND;

/// Answers a context remembers.
const KEPT: usize = 32;
/// How far back the answers that judge a failure reach.
const WINDOW: u64 = 30 * SECOND;
/// Other live resources that must have failed.
const WITNESSES: usize = 3;
/// How unlikely, by their records, the witnesses' failures must be.
const IMPROBABLE: f64 = 0.01;

/// One answer in a context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Answer {
    pub slot: u32,
    pub at: u64,
    /// A transient failure; else a success.
    pub failed: bool,
    /// The failure probability the resource's record gave it.
    pub expected: f32,
}

/// The latest answers of each context, by context number.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outages {
    contexts: Vec<Recent>,
}

impl Outages {
    /// Remembers `answer` in context `ctx`; whether it is a transient
    /// failure that the context's outage explains.
    pub fn heard(&mut self, ctx: u32, answer: Answer) -> bool {
        let i = ctx as usize;
        if self.contexts.len() <= i {
            self.contexts.resize_with(i + 1, Recent::default);
        }
        let recent = &mut self.contexts[i];
        let excused = answer.failed && recent.outage(answer.slot, answer.at);
        recent.record(answer);
        excused
    }

    /// Heap bytes (see `Pool::footprint`).
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::vec;
        vec::<Recent>(self.contexts.capacity())
            + self.contexts.iter().map(|r| vec::<Answer>(r.answers.capacity())).sum::<usize>()
    }
}

/// The latest answers of one context, the oldest overwritten first.
#[derive(Debug, Clone, Default)]
struct Recent {
    answers: Vec<Answer>,
    next: usize,
}

impl Recent {
    fn record(&mut self, answer: Answer) {
        if self.answers.len() < KEPT {
            self.answers.push(answer);
        } else {
            self.answers[self.next] = answer;
        }
        self.next = (self.next + 1) % KEPT;
    }

    /// Whether a transient failure of `slot` at `now` is the context's.
    fn outage(&self, slot: u32, now: u64) -> bool {
        let others = || self.answers.iter().filter(move |a| a.slot != slot && a.at.saturating_add(WINDOW) > now);
        let mut live: Vec<u32> = others().filter(|a| !a.failed).map(|a| a.slot).collect();
        live.sort_unstable();
        live.dedup();
        let witnessed = || others().filter(|a| live.binary_search(&a.slot).is_ok());
        let mut failing: Vec<u32> = witnessed().filter(|a| a.failed).map(|a| a.slot).collect();
        failing.sort_unstable();
        failing.dedup();
        if failing.len() < WITNESSES || 2 * failing.len() < live.len() {
            return false;
        }
        let failed = witnessed().filter(|a| a.failed).count() as u32;
        let expected: f64 = witnessed().map(|a| f64::from(a.expected)).sum();
        poisson_tail(expected, failed) < IMPROBABLE
    }
}

/// P(X ≥ k) for X ~ Poisson(mean): how likely `k` failures are where `mean`
/// were expected (the Poisson approximation of a sum of unlikely failures).
fn poisson_tail(mean: f64, k: u32) -> f64 {
    let mut term = libm::exp(-mean);
    let mut below = 0.0;
    for i in 0..k {
        below += term;
        term *= mean / f64::from(i + 1);
    }
    (1.0 - below).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = SECOND;

    fn answer(slot: u32, at: u64, failed: bool) -> Answer {
        Answer { slot, at, failed, expected: 0.05 }
    }

    #[test]
    fn the_poisson_tail_is_the_chance_of_at_least_k() {
        assert_eq!(poisson_tail(2.0, 0), 1.0);
        assert!((poisson_tail(2.0, 1) - (1.0 - libm::exp(-2.0))).abs() < 1e-12);
        // P(X ≥ 3 | 0.5) = 1 − e^−0.5 (1 + 0.5 + 0.125) ≈ 0.0144.
        assert!((poisson_tail(0.5, 3) - 0.014_387_677).abs() < 1e-8);
    }

    #[test]
    fn a_failure_every_live_exit_shares_is_the_contexts() {
        let mut o = Outages::default();
        // Four exits get an answer through, then three of them fail.
        for slot in 0..4 {
            assert!(!o.heard(0, answer(slot, slot as u64 * S, false)));
        }
        for slot in 0..3 {
            assert!(!o.heard(0, answer(slot, (slot as u64 + 4) * S, true)), "{slot}: too few witnesses");
        }
        // The fourth's failure: three live witnesses failed, 3 where 0.3
        // were expected (P ≈ 0.004).
        assert!(o.heard(0, answer(3, 7 * S, true)));
        // Not in another context, and not once the window has passed.
        assert!(!o.heard(1, answer(3, 7 * S, true)));
        assert!(!o.heard(0, answer(3, 40 * S, true)));
    }

    #[test]
    fn exits_that_died_together_do_not_excuse_each_other() {
        let mut o = Outages::default();
        // Three live exits answer; five dead ones fail and never get through.
        for slot in 0..3 {
            o.heard(0, answer(slot, S, false));
        }
        for slot in 10..15 {
            assert!(!o.heard(0, answer(slot, 2 * S, true)), "dead exit {slot}");
        }
    }

    #[test]
    fn failures_among_a_few_of_many_live_exits_are_their_own() {
        let mut o = Outages::default();
        // Eight live exits; three of them also fail: fewer than half.
        for slot in 0..8 {
            o.heard(0, answer(slot, S, false));
        }
        for slot in 0..3 {
            o.heard(0, answer(slot, 2 * S, true));
        }
        assert!(!o.heard(0, answer(20, 3 * S, true)));
        // Five of eight: most of them fail, far beyond their records.
        for slot in 3..5 {
            o.heard(0, answer(slot, 2 * S, true));
        }
        assert!(o.heard(0, answer(20, 3 * S, true)));
    }

    #[test]
    fn failures_the_records_predict_are_no_outage() {
        let mut o = Outages::default();
        // Three exits whose records say they fail half the time do.
        for slot in 0..3 {
            o.heard(0, Answer { slot, at: S, failed: false, expected: 0.5 });
            o.heard(0, Answer { slot, at: 2 * S, failed: true, expected: 0.5 });
        }
        assert!(!o.heard(0, answer(9, 3 * S, true)));
    }

    #[test]
    fn a_context_keeps_its_latest_answers_only() {
        let mut o = Outages::default();
        for i in 0..(KEPT as u64 * 3) {
            o.heard(0, answer((i % 5) as u32, i, i % 2 == 0));
        }
        assert_eq!(o.contexts[0].answers.len(), KEPT);
        assert!(o.contexts[0].answers.iter().all(|a| a.at >= 2 * KEPT as u64));
    }
}
