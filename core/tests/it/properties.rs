//! Invariants over random command sequences (proptest).

use std::collections::HashMap;

use crate::common::*;
use proptest::prelude::*;
use repute_core::{
    CellState, Error, FailureKind, Lease, LeaseKind, Outcome, Policy, Pool, Recovery, ResourceId, Strategy as Pick,
    MAX_SCORE, MIN_SCORE,
};

const RESOURCES: [&str; 5] = ["r0", "r1", "r2", "r3", "r4"];
const CONTEXTS: [&str; 3] = ["c0", "c1", "c2"];

#[derive(Debug, Clone)]
enum Cmd {
    Register(usize, u32),
    Unregister(usize, bool),
    Acquire(usize),
    Probe(usize, usize),
    Renew(usize),
    Release(usize),
    Report(usize, usize, Option<FailureKind>, Option<u64>),
    Block(usize, Option<usize>, Option<u64>),
    Unblock(usize, Option<usize>),
    Advance(u64),
    Snapshot,
}

fn kind() -> impl Strategy<Value = Option<FailureKind>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(FailureKind::Blocked)),
        1 => Just(Some(FailureKind::TlsHandshake)),
        1 => Just(Some(FailureKind::ConnectionReset)),
        1 => Just(Some(FailureKind::Timeout)),
        1 => Just(Some(FailureKind::Slow)),
        1 => Just(Some(FailureKind::RateLimited)),
        1 => Just(Some(FailureKind::QuotaExhausted)),
        1 => Just(Some(FailureKind::AuthFailed)),
    ]
}

fn recovery() -> impl Strategy<Value = Recovery> {
    prop_oneof![Just(Recovery::Traffic), Just(Recovery::Probe), Just(Recovery::Classic)]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let r = 0..RESOURCES.len();
    let c = 0..CONTEXTS.len();
    prop_oneof![
        3 => (r.clone(), 1u32..4).prop_map(|(r, p)| Cmd::Register(r, p)),
        1 => (r.clone(), any::<bool>()).prop_map(|(r, f)| Cmd::Unregister(r, f)),
        8 => c.clone().prop_map(Cmd::Acquire),
        2 => (r.clone(), c.clone()).prop_map(|(r, c)| Cmd::Probe(r, c)),
        3 => (0usize..8).prop_map(Cmd::Renew),
        4 => (0usize..8).prop_map(Cmd::Release),
        10 => (r.clone(), c.clone(), kind(), proptest::option::of(0u64..900 * S))
            .prop_map(|(r, c, k, wait)| Cmd::Report(r, c, k, wait)),
        1 => (r.clone(), proptest::option::of(c.clone()), proptest::option::of(1u64..7200))
            .prop_map(|(r, c, d)| Cmd::Block(r, c, d.map(|d| d * S))),
        1 => (r, proptest::option::of(c)).prop_map(|(r, c)| Cmd::Unblock(r, c)),
        4 => prop_oneof![0u64..5 * S, 0u64..600 * S, 0u64..8 * 3600 * S].prop_map(Cmd::Advance),
        1 => Just(Cmd::Snapshot),
    ]
}

fn strategy() -> impl Strategy<Value = Pick> {
    prop_oneof![Just(Pick::Classic), Just(Pick::Thompson), Just(Pick::First)]
}

/// Runs commands, checking every invariant after each one.
struct Checker {
    pool: Pool,
    now: u64,
    held: Vec<Lease>,
    max_token: HashMap<(ResourceId, u32), u64>,
}

impl Checker {
    fn grant(&mut self, lease: Lease, context: usize) {
        let key = (lease.resource.clone(), lease.permit);
        let prev = self.max_token.get(&key).copied().unwrap_or(0);
        assert!(lease.token > prev, "token {} after {} on {:?}", lease.token, prev, key);
        self.max_token.insert(key, lease.token);
        let views = self.pool.resources();
        let res = views.iter().find(|v| v.resource == lease.resource).unwrap();
        assert!(res.block.is_none(), "granted a resource blocked everywhere");
        let cells = self.pool.cells(&lease.resource, self.now).unwrap();
        let cell = cells.iter().find(|c| c.context.as_ref().map(|c| c.as_str()) == Some(CONTEXTS[context]));
        if let Some(cell) = cell {
            assert!(cell.block.is_none(), "granted a resource blocked in its context");
            let cooling_running = cell.cooling_until.is_some_and(|u| u > self.now);
            let recovery = self.pool.policy().recovery;
            match lease.kind {
                LeaseKind::Client => {
                    assert!(cell.state != CellState::Cooling, "client lease inside a cooldown: {cell:?}")
                }
                LeaseKind::Trial => {
                    assert!(!cooling_running && cell.cause.is_some_and(|c| recovery.half_open(c)), "{cell:?}");
                    let trials = self
                        .pool
                        .leases()
                        .iter()
                        .filter(|l| {
                            l.kind == LeaseKind::Trial && l.resource == lease.resource && l.context == lease.context
                        })
                        .count();
                    assert_eq!(trials, 1, "more than one half-open trial");
                }
                LeaseKind::Probe => assert!(!cooling_running && cell.cause.is_some_and(|c| recovery.probes(c))),
                LeaseKind::FailOpen => assert!(self.pool.policy().fail_open, "fail-open lease without the policy"),
            }
        } else {
            let fail_open = self.pool.policy().fail_open;
            assert!(lease.kind == LeaseKind::Client || (fail_open && lease.kind == LeaseKind::FailOpen));
        }
        self.held.push(lease);
    }

    fn step(&mut self, cmd: &Cmd) {
        let now = self.now;
        match *cmd {
            Cmd::Register(r, p) => {
                let _ = self.pool.register(rid(RESOURCES[r]), p, now);
            }
            Cmd::Unregister(r, force) => {
                let _ = self.pool.unregister(&rid(RESOURCES[r]), force, now);
            }
            Cmd::Acquire(c) => match self.pool.acquire(&ctx(CONTEXTS[c]), now) {
                Ok(l) => self.grant(l, c),
                // A ban's early trial only ever brings the retry sooner
                // than what a refusal expects.
                Err(Error::NoResourceAvailable(r)) => match (r.retry_after, r.expected_after) {
                    (Some(retry), Some(expected)) => assert!(retry <= expected, "{r:?}"),
                    (None, None) => {}
                    _ => panic!("a retry without an expected end or the reverse: {r:?}"),
                },
                Err(_) => {}
            },
            Cmd::Probe(r, c) => {
                if let Ok(l) = self.pool.acquire_for_probe(&rid(RESOURCES[r]), &ctx(CONTEXTS[c]), now) {
                    self.grant(l, c);
                }
            }
            Cmd::Renew(i) => {
                if let Some(l) = self.held.get(i % self.held.len().max(1)).cloned() {
                    match self.pool.renew(l.id, l.token, now) {
                        Ok(r) => assert_eq!(r.expires_at, now + l.ttl),
                        Err(e) => assert!(matches!(e, Error::UnknownLease | Error::LeaseExpired | Error::Blocked)),
                    }
                }
            }
            Cmd::Release(i) => {
                if !self.held.is_empty() {
                    let l = self.held.remove(i % self.held.len());
                    let _ = self.pool.release(l.id, l.token, now);
                }
            }
            Cmd::Report(r, c, k, wait) => {
                let id = rid(RESOURCES[r]);
                let before = self.pool.cells(&id, now).ok();
                let outcome = match (k, wait) {
                    (None, _) => Outcome::success(5.0).unwrap(),
                    (Some(k), Some(wait)) if k.takes_retry_after() => {
                        Outcome::failure_retry_after(k, 5.0, wait).unwrap()
                    }
                    (Some(k), _) => Outcome::failure(k, 5.0).unwrap(),
                };
                if self.pool.report(&id, &ctx(CONTEXTS[c]), outcome, now).is_ok() {
                    let before = before.unwrap();
                    let after = self.pool.cells(&id, now).unwrap();
                    // Every report but a provider's wait is an observation,
                    // a failure a context's outage explains included.
                    let counted = u64::from(!k.is_some_and(FailureKind::takes_retry_after));
                    assert_eq!(after[0].observations, before[0].observations + counted, "{outcome:?}");
                    let pick = |cells: &[repute_core::CellView]| {
                        cells
                            .iter()
                            .find(|x| x.context.as_ref().map(|c| c.as_str()) == Some(CONTEXTS[c]))
                            .map(|x| x.score)
                    };
                    for (b, a) in
                        [(Some(before[0].score), Some(after[0].score)), (pick(&before).or(Some(0)), pick(&after))]
                    {
                        let (b, a) = (b.unwrap(), a.unwrap());
                        if k.is_none() {
                            assert!(a >= b, "success lowered {b} -> {a}");
                        } else {
                            assert!(a <= b, "failure raised {b} -> {a}");
                        }
                    }
                }
            }
            Cmd::Block(r, c, d) => {
                let c = c.map(|c| ctx(CONTEXTS[c]));
                let _ = self.pool.block(&rid(RESOURCES[r]), c.as_ref(), d, None, now);
            }
            Cmd::Unblock(r, c) => {
                let c = c.map(|c| ctx(CONTEXTS[c]));
                let _ = self.pool.unblock(&rid(RESOURCES[r]), c.as_ref(), now);
            }
            Cmd::Advance(dt) => self.now += dt,
            Cmd::Snapshot => {
                let bytes = self.pool.snapshot(now, true);
                let mut restored = Pool::from_snapshot(&bytes, now).unwrap();
                assert_eq!(restored.snapshot(now, true), bytes, "snapshot -> restore -> snapshot differs");
                let json = self.pool.snapshot_json(now, true);
                let mut from_json = Pool::new(Policy::default(), 0).unwrap();
                from_json.restore_json(&json, now).unwrap();
                assert_eq!(from_json.snapshot(now, true), bytes, "JSON round trip differs");
            }
        }
        self.check_global();
    }

    fn check_global(&mut self) {
        let now = self.now;
        let leases = self.pool.leases();
        let mut permits = std::collections::HashSet::new();
        for l in &leases {
            assert!(permits.insert((l.resource.clone(), l.permit)), "two live leases on {:?}/{}", l.resource, l.permit);
            assert!(l.expires_at > self.pool.stats().now, "expired lease still live");
        }
        let due = self.pool.due_for_probe(now);
        for v in self.pool.resources() {
            for cell in self.pool.cells(&v.resource, now).unwrap() {
                assert!((MIN_SCORE..=MAX_SCORE).contains(&cell.score));
                assert!(!(cell.half_open && cell.due_for_probe), "half-open and probe-due overlap: {cell:?}");
                if let Some(c) = &cell.context {
                    assert_eq!(cell.due_for_probe, due.contains(&(v.resource.clone(), c.clone())));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_random_commands(
        strat in strategy(),
        recovery in recovery(),
        fail_open in any::<bool>(),
        seed in any::<u64>(),
        cmds in proptest::collection::vec(cmd(), 1..120),
    ) {
        let pool = Pool::new(Policy { strategy: strat, recovery, fail_open, ..Policy::default() }, seed).unwrap();
        let mut checker = Checker { pool, now: 0, held: Vec::new(), max_token: HashMap::new() };
        for c in &cmds {
            checker.step(c);
        }
    }

    #[test]
    fn same_seed_and_commands_give_the_same_event_log(
        strat in strategy(),
        recovery in recovery(),
        fail_open in any::<bool>(),
        seed in any::<u64>(),
        cmds in proptest::collection::vec(cmd(), 1..120),
    ) {
        let run = || {
            let policy = Policy { strategy: strat, recovery, fail_open, ..Policy::default() };
            let pool = Pool::new(policy, seed).unwrap();
            let mut checker = Checker { pool, now: 0, held: Vec::new(), max_token: HashMap::new() };
            for c in &cmds {
                checker.step(c);
            }
            let now = checker.now;
            (checker.pool.drain_events(), checker.pool.snapshot(now, true))
        };
        let (a, b) = (run(), run());
        prop_assert_eq!(a, b);
    }
}
