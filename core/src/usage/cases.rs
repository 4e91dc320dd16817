//! The usage rule's table of cases: what every form of the rule must
//! answer. The rule is written in Rust once (`judge`, which the pool and the
//! host's in-process authorities run) and again where a store's atomic step
//! needs it (PostgreSQL's SQL, Redis's Lua); the core's tests run this
//! table against `judge` and the host's against each authority, so a form
//! that drifts fails here rather than in production.
//!
//! A case is one scope's grants under one set of limits, asked in turn:
//! each step asks for a grant of `cost` at `at` (ns from the case's start)
//! and says what the rule answers; a grant admitted is made and counted.
//! An `rpm`'s spacing is the caller's (`Limits::paced`), so the limits here
//! are judged as written.

use super::Verdict::{self, Admitted, Oversized, Spent, Until};
use crate::limits::{ContextLimits, Limits, DAY};
use crate::time::SECOND;

/// One step of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A grant of `cost` tokens asked at `at`, and the rule's answer.
    Ask { at: u64, cost: u64, expect: Verdict },
    /// The `grant`th grant the case made (from 0) used `used` tokens, not
    /// its cost.
    Reconcile { grant: usize, used: u64 },
}

/// A scope's grants under `limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub name: &'static str,
    pub limits: Limits,
    pub steps: &'static [Step],
}

const S: u64 = SECOND;

const NONE: Limits = Limits {
    rpm: None,
    tpm: None,
    rpd: None,
    tpd: None,
    min_interval: None,
    max_uses: None,
    max_age: None,
    per_context: ContextLimits { rpm: None, tpm: None, min_interval: None },
};

const fn ask(at: u64, cost: u64, expect: Verdict) -> Step {
    Step::Ask { at, cost, expect }
}

/// Every case, each named for what it shows.
pub const CASES: &[Case] = &[
    Case {
        name: "rpm admits n a minute and says when the oldest leaves",
        limits: Limits { rpm: Some(3), ..NONE },
        steps: &[
            ask(0, 1, Admitted),
            ask(10 * S, 1, Admitted),
            ask(20 * S, 1, Admitted),
            ask(30 * S, 1, Until(60 * S)),
            ask(60 * S, 1, Admitted),
            ask(61 * S, 1, Until(70 * S)),
        ],
    },
    Case {
        name: "rpm admits until full, then again once the oldest left",
        limits: Limits { rpm: Some(3), ..NONE },
        steps: &[
            ask(0, 1, Admitted),
            ask(20 * S, 1, Admitted),
            ask(40 * S, 1, Admitted),
            ask(50 * S, 1, Until(60 * S)),
            ask(60 * S, 1, Admitted),
        ],
    },
    Case {
        name: "tpm counts costs reconciled to use",
        limits: Limits { tpm: Some(100), ..NONE },
        steps: &[
            ask(0, 60, Admitted),
            ask(S, 60, Until(60 * S)),
            Step::Reconcile { grant: 0, used: 20 },
            ask(S, 60, Admitted),
            ask(S, 101, Oversized),
        ],
    },
    Case {
        name: "tpm waits for the tokens a cost needs, and a cost over it never fits",
        limits: Limits { tpm: Some(100), ..NONE },
        steps: &[
            ask(0, 60, Admitted),
            ask(S, 50, Until(60 * S)),
            Step::Reconcile { grant: 0, used: 20 },
            ask(S, 50, Admitted),
            ask(S, 101, Oversized),
        ],
    },
    Case {
        name: "tpm frees the oldest grants first, as many as the cost needs",
        limits: Limits { tpm: Some(30), ..NONE },
        steps: &[
            ask(0, 10, Admitted),
            ask(30 * S, 10, Admitted),
            ask(30 * S, 10, Admitted),
            ask(60 * S, 30, Until(90 * S)),
            ask(60 * S, 10, Admitted),
            ask(60 * S, 1, Until(90 * S)),
        ],
    },
    Case {
        name: "min_interval spaces grants and spent max_uses refuse for good",
        limits: Limits { min_interval: Some(5 * S), max_uses: Some(2), ..NONE },
        steps: &[ask(0, 1, Admitted), ask(S, 1, Until(5 * S)), ask(5 * S, 1, Admitted), ask(100 * S, 1, Spent)],
    },
    Case {
        name: "the later of min_interval and rpm",
        limits: Limits { rpm: Some(2), min_interval: Some(40 * S), ..NONE },
        steps: &[
            ask(0, 1, Admitted),
            ask(40 * S, 1, Admitted),
            ask(50 * S, 1, Until(80 * S)),
            ask(80 * S, 1, Admitted),
        ],
    },
    Case {
        name: "the later of rpm and tpm",
        limits: Limits { rpm: Some(2), tpm: Some(100), ..NONE },
        steps: &[
            ask(0, 50, Admitted),
            ask(10 * S, 60, Until(60 * S)),
            ask(20 * S, 10, Admitted),
            ask(30 * S, 1, Until(60 * S)),
            ask(65 * S, 95, Until(80 * S)),
            ask(80 * S, 95, Admitted),
        ],
    },
    Case {
        name: "spent max_uses before a cost over tpm, a cost over tpm before a wait",
        limits: Limits { tpm: Some(10), min_interval: Some(10 * S), max_uses: Some(2), ..NONE },
        steps: &[
            ask(0, 5, Admitted),
            ask(S, 11, Oversized),
            ask(S, 5, Until(10 * S)),
            ask(10 * S, 5, Admitted),
            ask(11 * S, 11, Spent),
        ],
    },
    Case {
        name: "rpd admits n a rolling day and says when the oldest leaves",
        limits: Limits { rpd: Some(2), ..NONE },
        steps: &[
            ask(0, 1, Admitted),
            ask(3600 * S, 1, Admitted),
            ask(7200 * S, 1, Until(DAY)),
            ask(DAY, 1, Admitted),
            ask(DAY + S, 1, Until(DAY + 3600 * S)),
        ],
    },
    Case {
        name: "tpd counts costs reconciled to use in the day's bucket of the grant",
        limits: Limits { tpd: Some(100), ..NONE },
        steps: &[
            ask(0, 60, Admitted),
            ask(S, 60, Until(DAY)),
            Step::Reconcile { grant: 0, used: 20 },
            ask(S, 60, Admitted),
            ask(2 * S, 30, Until(DAY + S)),
            ask(2 * S, 101, Oversized),
        ],
    },
];
