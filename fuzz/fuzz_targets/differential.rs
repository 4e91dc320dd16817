//! The component against the native core: the input decodes (with
//! `arbitrary`) into a tenant config and a sequence of the differential
//! test's commands, run on a `repute_host::Pool` (the WebAssembly
//! component in wasmtime) and a `LinkedPool` on clocks read alike. Oracle:
//! no panic or trap, and the same result for every command, the same
//! events after every command and the same final snapshots, byte for byte.

#![no_main]

#[path = "../../host/tests/it/differential/commands.rs"]
mod commands;

use arbitrary::{Result, Unstructured};
use commands::{Cmd, CONTEXTS, GROUP_NAMES, GROUP_SETS, KINDS, LABEL_SETS, LIMIT_SETS, SELECTORS, VALUES};
use libfuzzer_sys::fuzz_target;
use repute_host::{FailureKind, Policy, RateLimit, Recovery, Strategy, TenantConfig, SECOND};

/// Commands per input: enough for cooldowns to end and leases to expire,
/// few enough that an input stays fast.
const MAX_COMMANDS: usize = 96;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(config) = config(&mut u) else { return };
    let mut cmds = Vec::new();
    while cmds.len() < MAX_COMMANDS && !u.is_empty() {
        match cmd(&mut u) {
            Ok(c) => cmds.push(c),
            Err(_) => break,
        }
    }
    if let Some(disagreement) = commands::differ(config, &cmds) {
        panic!("component and native core disagree: {disagreement}");
    }
});

fn config(u: &mut Unstructured) -> Result<TenantConfig> {
    let policy = Policy {
        strategy: *u.choose(&[Strategy::Classic, Strategy::Thompson, Strategy::First])?,
        recovery: *u.choose(&[Recovery::Traffic, Recovery::Probe, Recovery::Classic])?,
        fail_open: u.arbitrary()?,
        rate_limit: u.ratio(1, 4)?.then_some(RateLimit { rate: 2.0, burst: 3 }),
        max_resources: if u.ratio(1, 4)? { Some(u.int_in_range(2..=4)?) } else { None },
        max_cells: if u.ratio(1, 8)? { Some(u.int_in_range(1..=6)?) } else { None },
        ..Policy::default()
    };
    Ok(TenantConfig { policy, seed: u.arbitrary()?, durable: u.arbitrary()? })
}

fn resource(u: &mut Unstructured) -> Result<usize> {
    u.choose_index(KINDS.len() * VALUES.len())
}

fn context(u: &mut Unstructured) -> Result<usize> {
    u.choose_index(CONTEXTS.len())
}

fn maybe<T>(u: &mut Unstructured, f: impl FnOnce(&mut Unstructured) -> Result<T>) -> Result<Option<T>> {
    if u.arbitrary()? {
        f(u).map(Some)
    } else {
        Ok(None)
    }
}

/// Latencies mostly in the range clients report, sometimes one the pool
/// must refuse (negative, not finite) or one far out of range.
fn latency(u: &mut Unstructured) -> Result<f64> {
    Ok(match u.int_in_range(0..=15)? {
        0 => *u.choose(&[f64::NAN, f64::INFINITY, -1.0, -0.0, 1e300, f64::MIN_POSITIVE])?,
        _ => f64::from(u.int_in_range(0..=5_000_000u32)?) / 1000.0,
    })
}

/// One command, weighted as the proptest strategy weighs them.
fn cmd(u: &mut Unstructured) -> Result<Cmd> {
    let advances = [0, 1_000_000, SECOND, 10 * SECOND, 31 * SECOND, 400 * SECOND, 4000 * SECOND];
    Ok(match u.int_in_range(0..=47)? {
        0..=3 => Cmd::Advance(*u.choose(&advances)?),
        4..=6 => Cmd::Register(resource(u)?, u.int_in_range(1..=3)?),
        7 => Cmd::Unregister(resource(u)?, u.arbitrary()?),
        8..=12 => Cmd::Acquire(context(u)?),
        13 => Cmd::AcquireForProbe(resource(u)?, context(u)?),
        14..=15 => Cmd::Renew(u.int_in_range(0..=15)?, u.arbitrary()?),
        16..=18 => Cmd::Release(u.int_in_range(0..=15)?, u.arbitrary()?),
        19..=24 => {
            let (r, c) = (resource(u)?, context(u)?);
            let kind = if u.ratio(1, 4)? { Some(*u.choose(&FailureKind::ALL)?) } else { None };
            Cmd::Report(r, c, kind, latency(u)?)
        }
        25 => Cmd::Block(
            resource(u)?,
            maybe(u, context)?,
            maybe(u, |u| u.choose(&[SECOND, 60 * SECOND]).copied())?,
            maybe(u, |_| Ok("manual"))?,
        ),
        26 => Cmd::Unblock(resource(u)?, maybe(u, context)?),
        27..=28 => Cmd::Inspect(u.int_in_range(0..=6)?),
        29 => Cmd::SnapshotRestore(u.arbitrary()?),
        30 => Cmd::Checkpoint(u.arbitrary()?),
        31..=32 => Cmd::BadInput(u.int_in_range(0..=3)?),
        33..=34 => {
            let (r, permits) = (resource(u)?, u.int_in_range(1..=3)?);
            Cmd::RegisterWith(r, permits, u.choose_index(LABEL_SETS.len())?, u.arbitrary()?)
        }
        35..=36 => {
            let (r, permits) = (resource(u)?, u.int_in_range(1..=3)?);
            Cmd::RegisterLimited(r, permits, u.choose_index(LIMIT_SETS.len())?)
        }
        37 => Cmd::Reconcile(u.int_in_range(0..=15)?, u.int_in_range(0..=200)?),
        38..=39 => {
            let (r, permits) = (resource(u)?, u.int_in_range(1..=3)?);
            Cmd::RegisterGrouped(r, permits, u.choose_index(GROUP_SETS.len())?)
        }
        40..=41 => Cmd::SetGroup(u.choose_index(GROUP_NAMES.len())?, u.int_in_range(0..=5)?),
        42..=43 => {
            let kind = if u.ratio(1, 4)? { Some(*u.choose(&FailureKind::ALL)?) } else { None };
            Cmd::ReportAndRelease(u.int_in_range(0..=15)?, u.arbitrary()?, kind, latency(u)?)
        }
        _ => Cmd::AcquireWith(context(u)?, u.choose_index(SELECTORS)?),
    })
}
