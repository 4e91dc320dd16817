//! The command set of the differential test, shared by the proptest in
//! `differential.rs` and the cargo-fuzz target of the same name under
//! `fuzz/`: each decodes its input into these commands, and [`differ`] runs
//! them on the component and on the native core.

use std::sync::Arc;

use repute_host::linked::LinkedPool;
use repute_host::{
    ContextLimits, FailureKind, GroupLimits, GroupName, LabelFilter, Labels, Limits, ManualClock, Outcome, Pool,
    PoolOps, Providers, Registration, Secret, Selector, Stats, TenantConfig, SECOND,
};

pub const KINDS: [&str; 2] = ["proxy", "key"];
pub const VALUES: [&str; 3] = ["a", "b", "c"];
pub const CONTEXTS: [&str; 3] = ["x.com", "y.com", "z.com"];
/// The labels a registration may carry, by index.
pub const LABEL_SETS: [&[(&str, &str)]; 3] = [&[], &[("region", "eu")], &[("region", "us"), ("tier", "paid")]];
/// How many selectors [`selector`] knows; the last one is refused.
pub const SELECTORS: usize = 10;
/// The usage limits a registration may carry, by index.
const NO_CONTEXT_LIMITS: ContextLimits = ContextLimits { rpm: None, tpm: None, min_interval: None };

pub const LIMIT_SETS: [Limits; 6] = [
    Limits {
        rpm: None,
        tpm: None,
        rpd: None,
        tpd: None,
        min_interval: None,
        max_uses: None,
        max_age: None,
        per_context: NO_CONTEXT_LIMITS,
    },
    Limits {
        rpm: Some(2),
        tpm: None,
        rpd: None,
        tpd: None,
        min_interval: None,
        max_uses: None,
        max_age: None,
        per_context: NO_CONTEXT_LIMITS,
    },
    Limits {
        rpm: None,
        tpm: Some(100),
        rpd: None,
        tpd: None,
        min_interval: None,
        max_uses: Some(5),
        max_age: None,
        per_context: NO_CONTEXT_LIMITS,
    },
    Limits {
        rpm: None,
        tpm: None,
        rpd: None,
        tpd: None,
        min_interval: Some(10 * SECOND),
        max_uses: None,
        max_age: Some(400 * SECOND),
        per_context: NO_CONTEXT_LIMITS,
    },
    Limits {
        rpm: None,
        tpm: None,
        rpd: None,
        tpd: None,
        min_interval: None,
        max_uses: None,
        max_age: None,
        per_context: ContextLimits { rpm: Some(1), tpm: None, min_interval: None },
    },
    Limits {
        rpm: Some(3),
        tpm: None,
        rpd: None,
        tpd: None,
        min_interval: None,
        max_uses: None,
        max_age: None,
        per_context: ContextLimits { rpm: None, tpm: Some(50), min_interval: Some(5 * SECOND) },
    },
];

/// The quota groups a registration may name, by index.
pub const GROUP_SETS: [&[&str]; 4] = [&[], &["project:a"], &["project:a", "account:x"], &["project:b"]];
/// Group names `SetGroup` sets limits on, by index.
pub const GROUP_NAMES: [&str; 3] = ["project:a", "project:b", "account:x"];

/// The limits `SetGroup` may set, by index: none (removing them), each
/// kind alone, together, and one the core refuses.
pub fn group_limits(i: usize) -> GroupLimits {
    let none = GroupLimits::default();
    match i % 6 {
        0 => none,
        1 => GroupLimits { rpm: Some(2), ..none },
        2 => GroupLimits { concurrency: Some(1), ..none },
        3 => GroupLimits { tpm: Some(100), rpd: Some(5), ..none },
        4 => GroupLimits { shared_quota: true, tpd: Some(500), ..none },
        _ => GroupLimits { rpm: Some(0), ..none },
    }
}

#[derive(Debug, Clone)]
pub enum Cmd {
    Advance(u64),
    Register(usize, u32),
    /// Register with a label set of [`LABEL_SETS`] and, if `true`, a secret.
    RegisterWith(usize, u32, usize, bool),
    /// Register with the limits of [`LIMIT_SETS`].
    RegisterLimited(usize, u32, usize),
    /// Register with the groups of [`GROUP_SETS`].
    RegisterGrouped(usize, u32, usize),
    /// Set the `group_limits` of that index on the group of [`GROUP_NAMES`].
    SetGroup(usize, usize),
    Unregister(usize, bool),
    Acquire(usize),
    /// Acquire in a context with the n-th of the [`selector`]s.
    AcquireWith(usize, usize),
    AcquireForProbe(usize, usize),
    /// Renew the n-th lease seen so far; `true` presents a stale token.
    Renew(usize, bool),
    Release(usize, bool),
    /// Reconcile the n-th lease seen so far to this many tokens used.
    Reconcile(usize, u64),
    Report(usize, usize, Option<FailureKind>, f64),
    /// Report on the n-th lease seen so far and release it, in one call;
    /// `true` presents a stale token.
    ReportAndRelease(usize, bool, Option<FailureKind>, f64),
    Block(usize, Option<usize>, Option<u64>, Option<&'static str>),
    Unblock(usize, Option<usize>),
    Inspect(usize),
    SnapshotRestore(bool),
    Checkpoint(bool),
    BadInput(usize),
}

pub fn res(i: usize) -> (&'static str, &'static str) {
    (KINDS[i / VALUES.len()], VALUES[i % VALUES.len()])
}

/// A success, or a failure of `kind` (half of the waits given, half left
/// to the rule's base).
fn outcome(kind: Option<FailureKind>, latency: f64) -> Outcome {
    match kind {
        None => Outcome::Success { latency_ms: latency },
        Some(kind) => {
            let retry_after =
                (kind.takes_retry_after() && latency > 500.0).then(|| (latency as u64).saturating_mul(1_000_000));
            Outcome::Failure { kind, latency_ms: latency, retry_after }
        }
    }
}

fn registration(r: usize, permits: u32, labels: usize, secret: bool) -> Registration {
    let pairs = LABEL_SETS[labels % LABEL_SETS.len()].iter().map(|(n, v)| (n.to_string(), v.to_string()));
    let secret = secret.then(|| Secret::new(format!("secret-{r}")).expect("a valid secret"));
    Registration {
        permits,
        limits: Limits::default(),
        labels: Labels::new(pairs).expect("valid labels"),
        secret,
        groups: Vec::new(),
    }
}

/// One of [`SELECTORS`] selectors over the resources and labels above:
/// every part alone, some together, and one the core refuses.
pub fn selector(i: usize) -> Selector {
    let filter = |name: &str, values: &[&str]| LabelFilter {
        name: name.to_owned(),
        values: values.iter().map(|v| v.to_string()).collect(),
    };
    let any = Selector::default();
    match i % SELECTORS {
        0 => Selector { kind: Some("proxy".into()), ..any },
        1 => Selector { labels: vec![filter("region", &["eu"])], ..any },
        2 => Selector { kind: Some("key".into()), labels: vec![filter("tier", &["paid", "free"])], ..any },
        3 => Selector { exclude: vec!["a".into()], ..any },
        4 => Selector { prefer: Some("b".into()), ..any },
        5 => Selector { affinity: Some("u1".into()), ..any },
        6 => Selector { affinity: Some("u2".into()), labels: vec![filter("region", &["eu", "us"])], ..any },
        7 => Selector { prefer: Some("c".into()), affinity: Some("u1".into()), exclude: vec!["b".into()], ..any },
        8 => Selector { cost: Some(40), ..any },
        _ => Selector { labels: vec![filter("bad name", &["x"])], ..any },
    }
}

/// Runs one command on one side, rendering the result as text so both
/// sides' results (of many types) compare in one place.
pub fn run(p: &mut dyn PoolOps, cmd: &Cmd, clock: &ManualClock, seen: &mut Vec<(u64, u64)>) -> String {
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
        Cmd::RegisterWith(r, permits, labels, secret) => {
            format!("{:?}", p.register_with(res(r).0, res(r).1, &registration(r, permits, labels, secret)))
        }
        Cmd::RegisterLimited(r, permits, limits) => {
            let registration =
                Registration { limits: LIMIT_SETS[limits % LIMIT_SETS.len()], ..Registration::new(permits) };
            format!("{:?}", p.register_with(res(r).0, res(r).1, &registration))
        }
        Cmd::RegisterGrouped(r, permits, groups) => {
            let names = GROUP_SETS[groups % GROUP_SETS.len()].iter();
            let groups = names.map(|g| GroupName::new(*g).expect("a valid group name")).collect();
            format!("{:?}", p.register_with(res(r).0, res(r).1, &Registration { groups, ..Registration::new(permits) }))
        }
        Cmd::SetGroup(g, limits) => {
            format!("{:?}", p.set_group(GROUP_NAMES[g % GROUP_NAMES.len()], &group_limits(limits)))
        }
        Cmd::Unregister(r, force) => format!("{:?}", p.unregister(res(r).0, res(r).1, force)),
        Cmd::Acquire(c) => {
            let out = p.acquire(CONTEXTS[c]);
            if let Ok(l) = &out {
                seen.push((l.id, l.token));
            }
            format!("{out:?}")
        }
        Cmd::AcquireWith(c, s) => {
            let out = p.acquire_with(CONTEXTS[c], &selector(s));
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
        Cmd::Reconcile(i, used) => {
            let (id, token) = lease(seen, i, false);
            format!("{:?}", p.reconcile(id, token, used))
        }
        Cmd::Report(r, c, kind, latency) => {
            format!("{:?}", p.report(res(r).0, res(r).1, CONTEXTS[c], &outcome(kind, latency)))
        }
        Cmd::ReportAndRelease(i, stale, kind, latency) => {
            let (id, token) = lease(seen, i, stale);
            let done = p.report_and_release(id, token, &outcome(kind, latency));
            format!("{:?} {:?} {:?}", done, p.lease(id), p.leases().map(|l| l.len()))
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
            5 => format!("{:?}", p.snapshot_json(true)),
            6 => format!("{:?}", p.groups()),
            // Debug would show only whether there is one.
            _ => format!("{:?}", p.secret(res(0).0, res(0).1).map(|s| s.map(|s| s.expose().to_owned()))),
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

/// Runs `cmds` on a component pool and a native one opened with `config`,
/// each on its own clock, and names the first disagreement: a result, the
/// events of a step, or the final snapshot with or without leases.
pub fn differ(config: TenantConfig, cmds: &[Cmd]) -> Option<String> {
    let (wasm_clock, native_clock) = (ManualClock::new(1_000), ManualClock::new(1_000));
    let mut wasm = Pool::open(config.clone(), Providers::memory_with_clock(Arc::new(wasm_clock.clone())))
        .expect("open component pool");
    let mut native = LinkedPool::open(config, Providers::memory_with_clock(Arc::new(native_clock.clone())))
        .expect("open native pool");
    let (mut wasm_seen, mut native_seen) = (Vec::new(), Vec::new());
    for (step, cmd) in cmds.iter().enumerate() {
        let a = run(&mut wasm, cmd, &wasm_clock, &mut wasm_seen);
        let b = run(&mut native, cmd, &native_clock, &mut native_seen);
        if a != b {
            return Some(format!("result of step {step} {cmd:?}: component {a} != native {b}"));
        }
        let (a, b) = (wasm.drain_events().unwrap(), native.drain_events().unwrap());
        if a != b {
            return Some(format!("events of step {step} {cmd:?}: component {a:?} != native {b:?}"));
        }
    }
    for with_leases in [true, false] {
        let (a, b) = (wasm.snapshot(with_leases).unwrap(), native.snapshot(with_leases).unwrap());
        if a != b {
            return Some(format!("snapshot (leases: {with_leases}): component {a:?} != native {b:?}"));
        }
    }
    None
}
