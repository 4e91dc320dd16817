//! How a strategy meets the simulator: the pool's own strategies through the
//! real `repute_core::Pool` API (acquire, report, release, probes), and the
//! oracle, which reads the hidden truth instead of learning.

use std::collections::HashMap;

use repute_core::{Context, Lease, Outcome, Policy, Pool, ResourceId, Strategy};

use super::scenario::{World, RESOURCES, SITES};

/// What a strategy may look at when choosing: which proxies have a free
/// permit (the simulator tracks leases for the baselines) and, for the oracle
/// only, the truth.
#[derive(Debug)]
pub struct View<'a> {
    pub free: &'a [bool],
    pub world: &'a World,
}

/// One granted use of a proxy, with the pool lease when a pool granted it.
#[derive(Debug, Clone)]
pub struct Grant {
    pub resource: usize,
    pub lease: Option<Lease>,
}

/// A way of choosing proxies. `acquire` returns a proxy that is free in `view`;
/// `complete` is the report + release once the use is over.
pub trait Chooser {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant>;
    fn complete(&mut self, grant: Grant, site: usize, outcome: Outcome, now: u64);
    /// Probe leases a real deployment would run now, each with its site.
    fn probes(&mut self, _now: u64) -> Vec<(Grant, usize)> {
        Vec::new()
    }
}

/// A `repute_core::Pool` used exactly as a service would use it.
#[derive(Debug)]
pub struct PoolChooser {
    pool: Pool,
    ids: Vec<ResourceId>,
    index: HashMap<ResourceId, usize>,
    sites: Vec<Context>,
}

impl PoolChooser {
    pub fn new(strategy: Strategy, seed: u64) -> PoolChooser {
        let mut pool = Pool::new(Policy { strategy, ..Policy::default() }, seed).expect("default policy is valid");
        let ids: Vec<ResourceId> =
            (0..RESOURCES).map(|r| ResourceId::new("proxy", format!("r{r:02}")).expect("valid id")).collect();
        for id in &ids {
            pool.register(id.clone(), 1, 0).expect("fresh pool accepts a resource");
        }
        let index = ids.iter().cloned().enumerate().map(|(i, id)| (id, i)).collect();
        let sites = SITES.iter().map(|s| Context::new(*s).expect("valid context")).collect();
        pool.drain_events();
        PoolChooser { pool, ids, index, sites }
    }
}

impl Chooser for PoolChooser {
    fn acquire(&mut self, site: usize, now: u64, _view: &View) -> Option<Grant> {
        let lease = self.pool.acquire(&self.sites[site], now).ok();
        // Events are the host's business; dropping them keeps memory flat over long runs.
        self.pool.drain_events();
        let lease = lease?;
        Some(Grant { resource: self.index[&lease.resource], lease: Some(lease) })
    }

    fn complete(&mut self, grant: Grant, site: usize, outcome: Outcome, now: u64) {
        let lease = grant.lease.expect("a pool grant carries its lease");
        self.pool
            .report(&self.ids[grant.resource], &self.sites[site], outcome, now)
            .expect("report on a known resource");
        self.pool.release(lease.id, lease.token, now).expect("uses end well within the lease TTL");
        self.pool.drain_events();
    }

    fn probes(&mut self, now: u64) -> Vec<(Grant, usize)> {
        let mut out = Vec::new();
        for (id, context) in self.pool.due_for_probe(now) {
            // A busy proxy cannot be probed now; it stays due and is tried on the next request.
            if let Ok(lease) = self.pool.acquire_for_probe(&id, &context, now) {
                let site = self.sites.iter().position(|s| *s == context).expect("simulated site");
                out.push((Grant { resource: self.index[&id], lease: Some(lease) }, site));
            }
        }
        self.pool.drain_events();
        out
    }
}

/// Knows the truth: takes the free proxy with the highest true success
/// probability for the site at that instant. The bound every strategy is measured against.
#[derive(Debug, Default)]
pub struct Oracle;

impl Chooser for Oracle {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant> {
        (0..RESOURCES)
            .filter(|&r| view.free[r])
            .map(|r| (view.world.p(r, site, now), r))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, resource)| Grant { resource, lease: None })
    }

    fn complete(&mut self, _grant: Grant, _site: usize, _outcome: Outcome, _now: u64) {}
}
