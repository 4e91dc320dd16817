//! The benchmark workload: a warmed pool and its acquire+release loop,
//! defined once so that the native benchmarks and the component's
//! `guest-bench` export run the same code, and their ratio is the price
//! of compiling the core to WebAssembly alone, with no boundary crossed.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::{
    Context, FailureKind, GroupLimits, GroupName, Labels, Outcome, Policy, Pool, Registration, ResourceId, Strategy,
};

/// Contexts the workload spreads its traffic over.
pub const CONTEXTS: usize = 10;
/// Regions a labelled pool spreads its resources over.
pub const REGIONS: usize = 10;
/// One resource in this many of a labelled pool is an `api-key`.
pub const KEY_EVERY: usize = 1000;
/// Acquire+release pairs between two drains of the pool's events.
pub const DRAIN_EVERY: u64 = 1024;
/// Quota groups a grouped [`Workload::quota`] spreads its resources over.
pub const GROUPS: usize = 10;

/// The value of resource `i`.
pub fn value(i: usize) -> String {
    format!("10.0.{}.{}:8080", i / 256, i % 256)
}

/// The name of context `i` (`i < CONTEXTS`).
pub fn context(i: usize) -> String {
    format!("site-{i}.example")
}

/// The history every warmed pool of `n` resources has seen: three outcomes
/// per resource, as (resource, context) indices, spread over the contexts,
/// a fifth of them `slow` failures.
pub fn history(n: usize) -> impl Iterator<Item = (usize, usize, Outcome)> {
    (0..n).flat_map(|i| {
        (0..3).map(move |j| {
            let outcome = match (i + j) % 5 {
                0 => Outcome::failure(FailureKind::Slow, 80.0),
                _ => Outcome::success(40.0),
            };
            (i, (i * 7 + j * 3) % CONTEXTS, outcome.expect("a valid outcome"))
        })
    })
}

/// A pool of `n` single-permit resources that has seen [`history`].
/// `labelled`: every resource has a `region` label and one in `KEY_EVERY`
/// is an `api-key`.
pub fn warmed(n: usize, strategy: Strategy, labelled: bool) -> (Pool, Vec<ResourceId>, Vec<Context>) {
    let mut pool = Pool::new(Policy { strategy, ..Policy::default() }, 1).expect("the default policy is valid");
    let kind = |i: usize| if labelled && i % KEY_EVERY == 0 { "api-key" } else { "proxy" };
    let ids: Vec<ResourceId> = (0..n).map(|i| ResourceId::new(kind(i), value(i)).expect("a valid id")).collect();
    let ctxs: Vec<Context> = (0..CONTEXTS).map(|i| Context::new(context(i)).expect("a valid context")).collect();
    for (i, id) in ids.iter().enumerate() {
        let labels = match labelled {
            true => Labels::new([("region".to_string(), format!("r{}", i % REGIONS))]).expect("a valid label"),
            false => Labels::default(),
        };
        pool.register_with(id.clone(), Registration { labels, ..Registration::new(1) }, 0)
            .expect("room for the resource");
    }
    for (i, c, outcome) in history(n) {
        pool.report(&ids[i], &ctxs[c], outcome, 0).expect("a registered resource");
    }
    pool.drain_events();
    (pool, ids, ctxs)
}

/// The acquire+release loop over a warmed, unlabelled pool.
#[derive(Debug)]
pub struct Workload {
    pool: Pool,
    contexts: Vec<Context>,
    done: u64,
    /// The clock's advance per pair; 0: every pair at the same instant.
    step: u64,
}

impl Workload {
    pub fn new(resources: usize, strategy: Strategy) -> Workload {
        let (pool, _, contexts) = warmed(resources, strategy, false);
        Workload { pool, contexts, done: 0, step: 0 }
    }

    /// The quota comparison: the warmed pool with each resource in one of
    /// [`GROUPS`] quota groups with an rpm, a tpm and a concurrency, or (not
    /// `grouped`) in none. Its pairs are a millisecond apart, so the groups'
    /// windows turn over as in use: 6,000 grants a minute per group, under
    /// its rpm, so no group is ever gated and both sides choose alike.
    pub fn quota(resources: usize, strategy: Strategy, grouped: bool) -> Workload {
        let (mut pool, ids, contexts) = warmed(resources, strategy, false);
        if grouped {
            let limits = GroupLimits {
                rpm: Some(100_000),
                tpm: Some(1 << 40),
                concurrency: Some(1_000),
                ..GroupLimits::default()
            };
            for (i, id) in ids.iter().enumerate() {
                let name = GroupName::new(format!("project:p{}", i % GROUPS)).expect("a valid group name");
                pool.set_group(name.clone(), limits, 0).expect("valid group limits");
                let registration = Registration { groups: alloc::vec![name], ..Registration::new(1) };
                pool.register_with(id.clone(), registration, 0).expect("a registered resource");
            }
        }
        Workload { pool, contexts, done: 0, step: 1_000_000 }
    }

    /// Runs `count` pairs, each an acquire in the next context and the
    /// release of its lease, draining events every `DRAIN_EVERY` pairs.
    /// Returns a checksum of the resources chosen and their fencing tokens
    /// (FNV-1a), so no work can be elided and two runs can be compared.
    pub fn pairs(&mut self, count: u64) -> u64 {
        let mut sum = 0xcbf2_9ce4_8422_2325u64;
        let mut mix = |bytes: &[u8]| {
            for b in bytes {
                sum = (sum ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for _ in 0..count {
            self.done += 1;
            let now = 1 + self.done * self.step;
            let context = &self.contexts[(self.done % CONTEXTS as u64) as usize];
            let lease = self.pool.acquire(context, now).expect("a free single-permit resource, its groups not gated");
            self.pool.release(lease.id, lease.token, now).expect("the lease just granted");
            mix(lease.resource.value().as_bytes());
            mix(&lease.token.to_le_bytes());
            if self.done % DRAIN_EVERY == 0 {
                self.pool.drain_events();
            }
        }
        sum
    }
}
