//! The component and the natively linked core, driven by the same random
//! command sequences on the same clock readings, must agree on every result,
//! every event and every snapshot byte.

use std::sync::Arc;

use proptest::prelude::*;
use repute_host::native::NativePool;
use repute_host::{
    FailureKind, ManualClock, Outcome, Policy, Pool, PoolOps, Providers, RateLimit, Stats, Strategy as Pick,
    TenantConfig, SECOND,
};

const KINDS: [&str; 2] = ["proxy", "key"];
const VALUES: [&str; 3] = ["a", "b", "c"];
const CONTEXTS: [&str; 3] = ["x.com", "y.com", "z.com"];

#[derive(Debug, Clone)]
enum Cmd {
    Advance(u64),
    Register(usize, u32),
    Unregister(usize, bool),
    Acquire(usize),
    AcquireForProbe(usize, usize),
    /// Renew the n-th lease seen so far; `true` presents a stale token.
    Renew(usize, bool),
    Release(usize, bool),
    Report(usize, usize, Option<FailureKind>, f64),
    Block(usize, Option<usize>, Option<u64>, Option<&'static str>),
    Unblock(usize, Option<usize>),
    Inspect(usize),
    SnapshotRestore(bool),
    Checkpoint(bool),
    BadInput(usize),
}

fn resource() -> impl Strategy<Value = usize> {
    0..KINDS.len() * VALUES.len()
}

fn kind_strategy() -> impl Strategy<Value = Option<FailureKind>> {
    prop_oneof![
        3 => Just(None),
        1 => proptest::sample::select(FailureKind::ALL.to_vec()).prop_map(Some),
    ]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        4 => proptest::sample::select(vec![0, 1_000_000, SECOND, 10 * SECOND, 31 * SECOND, 400 * SECOND, 4000 * SECOND])
            .prop_map(Cmd::Advance),
        3 => (resource(), 1u32..4).prop_map(|(r, p)| Cmd::Register(r, p)),
        1 => (resource(), any::<bool>()).prop_map(|(r, f)| Cmd::Unregister(r, f)),
        5 => (0..CONTEXTS.len()).prop_map(Cmd::Acquire),
        1 => (resource(), 0..CONTEXTS.len()).prop_map(|(r, c)| Cmd::AcquireForProbe(r, c)),
        2 => (0usize..16, any::<bool>()).prop_map(|(i, s)| Cmd::Renew(i, s)),
        3 => (0usize..16, any::<bool>()).prop_map(|(i, s)| Cmd::Release(i, s)),
        6 => (resource(), 0..CONTEXTS.len(), kind_strategy(), 0.0f64..5000.0)
            .prop_map(|(r, c, k, l)| Cmd::Report(r, c, k, l)),
        1 => (
            resource(),
            proptest::option::of(0..CONTEXTS.len()),
            proptest::option::of(proptest::sample::select(vec![SECOND, 60 * SECOND])),
            proptest::option::of(Just("manual")),
        )
            .prop_map(|(r, c, d, why)| Cmd::Block(r, c, d, why)),
        1 => (resource(), proptest::option::of(0..CONTEXTS.len())).prop_map(|(r, c)| Cmd::Unblock(r, c)),
        2 => (0usize..6).prop_map(Cmd::Inspect),
        1 => any::<bool>().prop_map(Cmd::SnapshotRestore),
        1 => any::<bool>().prop_map(Cmd::Checkpoint),
        1 => (0usize..4).prop_map(Cmd::BadInput),
    ]
}

fn policy() -> impl Strategy<Value = (Policy, u64)> {
    (
        proptest::sample::select(vec![Pick::Classic, Pick::Thompson, Pick::First]),
        any::<u64>(),
        proptest::option::of(Just(RateLimit { rate: 2.0, burst: 3 })),
        proptest::option::of(2u32..5),
    )
        .prop_map(|(strategy, seed, rate_limit, max_resources)| {
            let policy = Policy { strategy, rate_limit, max_resources, ..Policy::default() };
            (policy, seed)
        })
}

fn res(i: usize) -> (&'static str, &'static str) {
    (KINDS[i / VALUES.len()], VALUES[i % VALUES.len()])
}

/// Runs one command on one side, rendering the result as text so both
/// sides' results (of many types) compare in one place.
fn run(p: &mut dyn PoolOps, cmd: &Cmd, clock: &ManualClock, seen: &mut Vec<(u64, u64)>) -> String {
    let lease = |seen: &[(u64, u64)], i: usize, stale: bool| {
        let (id, token) = seen.get(i % seen.len().max(1)).copied().unwrap_or((i as u64 + 1, 1));
        (id, if stale { token.wrapping_add(7) } else { token })
    };
    match *cmd {
        Cmd::Advance(ns) => {
            clock.advance(ns);
            String::new()
        }
        Cmd::Register(r, permits) => format!("{:?}", p.register(res(r).0, res(r).1, permits)),
        Cmd::Unregister(r, force) => format!("{:?}", p.unregister(res(r).0, res(r).1, force)),
        Cmd::Acquire(c) => {
            let out = p.acquire(CONTEXTS[c]);
            if let Ok(l) = &out {
                seen.push((l.id, l.token));
            }
            format!("{out:?}")
        }
        Cmd::AcquireForProbe(r, c) => {
            let out = p.acquire_for_probe(res(r).0, res(r).1, CONTEXTS[c]);
            if let Ok(l) = &out {
                seen.push((l.id, l.token));
            }
            format!("{out:?}")
        }
        Cmd::Renew(i, stale) => {
            let (id, token) = lease(seen, i, stale);
            format!("{:?}", p.renew(id, token))
        }
        Cmd::Release(i, stale) => {
            let (id, token) = lease(seen, i, stale);
            format!("{:?} {:?}", p.release(id, token), p.lease(id))
        }
        Cmd::Report(r, c, kind, latency) => {
            let outcome = match kind {
                None => Outcome::Success { latency_ms: latency },
                // Half of the waits given, half left to the rule's base.
                Some(kind) => {
                    let retry_after = (kind.takes_retry_after() && latency > 500.0).then(|| latency as u64 * 1_000_000);
                    Outcome::Failure { kind, latency_ms: latency, retry_after }
                }
            };
            format!("{:?}", p.report(res(r).0, res(r).1, CONTEXTS[c], &outcome))
        }
        Cmd::Block(r, c, duration, reason) => {
            format!("{:?}", p.block(res(r).0, res(r).1, c.map(|c| CONTEXTS[c]), duration, reason))
        }
        Cmd::Unblock(r, c) => format!("{:?}", p.unblock(res(r).0, res(r).1, c.map(|c| CONTEXTS[c]))),
        Cmd::Inspect(which) => match which {
            0 => format!("{:?}", p.due_for_probe()),
            1 => format!("{:?}", p.cells(res(0).0, res(0).1)),
            2 => format!("{:?}", p.resources()),
            3 => format!("{:?}", p.leases()),
            // The footprint counts the target's own sizes (wasm32's pointers
            // are half as wide), so it is the one figure the two may differ in.
            4 => format!("{:?}", p.stats().map(|s| Stats { footprint: 0, ..s })),
            _ => format!("{:?}", p.snapshot_json(true)),
        },
        Cmd::SnapshotRestore(with_leases) => {
            let bytes = p.snapshot(with_leases).expect("snapshot");
            format!("{bytes:?} {:?}", p.restore(&bytes))
        }
        Cmd::Checkpoint(with_leases) => format!("{:?}", p.checkpoint(with_leases)),
        Cmd::BadInput(which) => match which {
            0 => format!("{:?}", p.register("", "v", 1)),
            1 => format!("{:?}", p.acquire("bad\ncontext")),
            2 => format!("{:?}", p.report("proxy", "a", "x.com", &Outcome::Success { latency_ms: f64::NAN })),
            _ => format!("{:?}", p.restore(b"RPUTSNAP garbage")),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn component_matches_native(
        (policy, seed) in policy(),
        durable in any::<bool>(),
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        let config = TenantConfig { policy, seed, durable };
        let (wasm_clock, native_clock) = (ManualClock::new(1_000), ManualClock::new(1_000));
        let mut wasm = Pool::open(config.clone(), Providers::memory_with_clock(Arc::new(wasm_clock.clone())))
            .expect("open component pool");
        let mut native = NativePool::open(config, Providers::memory_with_clock(Arc::new(native_clock.clone())))
            .expect("open native pool");
        let (mut wasm_seen, mut native_seen) = (Vec::new(), Vec::new());
        for (step, cmd) in cmds.iter().enumerate() {
            let a = run(&mut wasm, cmd, &wasm_clock, &mut wasm_seen);
            let b = run(&mut native, cmd, &native_clock, &mut native_seen);
            prop_assert_eq!(&a, &b, "result of step {} {:?}", step, cmd);
            prop_assert_eq!(wasm.drain_events().unwrap(), native.drain_events().unwrap(), "events of step {} {:?}", step, cmd);
        }
        prop_assert_eq!(wasm.snapshot(true).unwrap(), native.snapshot(true).unwrap());
        prop_assert_eq!(wasm.snapshot(false).unwrap(), native.snapshot(false).unwrap());
    }
}
