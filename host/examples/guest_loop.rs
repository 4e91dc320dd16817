//! Runs the core's benchmark workload (`repute_core::workload`) a fixed
//! number of times, for instruction counts: `valgrind --tool=callgrind` is
//! repeatable where wall time on a shared machine is not. The difference
//! between a run of N pairs and a run of none is the cost of N pairs.
//!
//! Sides: `native` (the core's loop, natively), `guest` (the same loop inside
//! the component, one call for all pairs), `linked` and `pool` (one
//! acquire and one release per pair through `PoolOps`: the core linked
//! natively, and the component behind its boundary); `quota-none` and
//! `quota-group` (the core's quota comparison natively: the same keys in
//! no quota group, and each in one).
//!
//! Run: `cargo run --release -p repute-host --features testing --example guest_loop -- SIDE RESOURCES classic|thompson PAIRS`
//! (`scripts/guest-loop-counts.sh` runs it under callgrind for every case).

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;

use repute_core::workload::{context, history, value, Workload, CONTEXTS, DRAIN_EVERY};
use repute_host::linked::LinkedPool;
use repute_host::{GuestWorkload, Policy, Pool, PoolOps, Providers, Result, Strategy, SystemClock, TenantConfig};

/// `pairs` acquire+release pairs through `pool`, warmed as the workload is.
fn through(mut pool: Box<dyn PoolOps>, resources: usize, pairs: u64) -> Result<u64> {
    for i in 0..resources {
        pool.register("proxy", &value(i), 1)?;
    }
    let contexts: Vec<String> = (0..CONTEXTS).map(context).collect();
    for (i, c, outcome) in history(resources) {
        pool.report("proxy", &value(i), &contexts[c], &outcome)?;
    }
    pool.drain_events()?;
    let mut tokens = 0u64;
    for done in 1..=pairs {
        let lease = pool.acquire(&contexts[(done % CONTEXTS as u64) as usize])?;
        pool.release(lease.id, lease.token)?;
        tokens ^= lease.token;
        if done % DRAIN_EVERY == 0 {
            pool.drain_events()?;
        }
    }
    Ok(tokens)
}

fn run(side: &str, resources: u32, strategy: Strategy, pairs: u64) -> Result<u64> {
    let config = TenantConfig { policy: Policy { strategy, ..Policy::default() }, ..TenantConfig::default() };
    let providers = || Providers::memory_with_clock(Arc::new(SystemClock::new()));
    Ok(match side {
        "native" => Workload::new(resources as usize, strategy).pairs(pairs),
        "quota-none" => Workload::quota(resources as usize, strategy, false).pairs(pairs),
        "quota-group" => Workload::quota(resources as usize, strategy, true).pairs(pairs),
        "guest" => GuestWorkload::new(resources, strategy)?.pairs(pairs)?,
        "linked" => through(Box::new(LinkedPool::open(config, providers())?), resources as usize, pairs)?,
        _ => through(Box::new(Pool::open(config, providers())?), resources as usize, pairs)?,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: guest_loop native|guest|linked|pool|quota-none|quota-group RESOURCES classic|thompson PAIRS";
    let [side, resources, strategy, pairs] = args.as_slice() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let (true, Ok(resources), Ok(strategy), Ok(pairs)) = (
        ["native", "guest", "linked", "pool", "quota-none", "quota-group"].contains(&side.as_str()),
        resources.parse::<u32>(),
        Strategy::parse(strategy),
        pairs.parse::<u64>(),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    match run(side, resources, strategy, pairs) {
        Ok(sum) => {
            println!("{}", black_box(sum));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
