//! How a strategy meets the simulator: the pool's own strategies through the
//! real `repute_core::Pool` API (acquire, report, release, probes), and the
//! oracle, which reads the hidden truth instead of learning.

use std::collections::HashMap;

use repute_core::{
    Authority, Context, ContextLimits, GroupLimits, GroupName, Lease, Limits, Policy, Pool, Registration, ResourceId,
};

use super::scenario::{Answer, Kind, Windows, World, PROJECT_RPM, RESOURCES, RPM_LIMIT};

/// What a strategy may look at when choosing: which resources have a free
/// permit (the simulator tracks leases for the baselines) and, for the oracle
/// only, the truth and the provider's rpm log.
#[derive(Debug)]
pub struct View<'a> {
    pub free: &'a [bool],
    pub world: &'a World,
    pub windows: &'a Windows,
}

/// One granted use of a proxy, with the pool lease when a pool granted it.
#[derive(Debug, Clone)]
pub struct Grant {
    pub resource: usize,
    pub lease: Option<Lease>,
}

/// A way of choosing resources. `acquire` returns one that is free in `view`;
/// `complete` is the report + release once the use is over.
pub trait Chooser {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant>;
    fn complete(&mut self, grant: Grant, site: usize, answer: Answer, now: u64);
    /// Probe leases a real deployment would run now, each with its site.
    fn probes(&mut self, _now: u64) -> Vec<(Grant, usize)> {
        Vec::new()
    }
}

/// A `repute_core::Pool` used exactly as a service would use it: acquire,
/// report what the client saw, release; and, when `prober` is set, the
/// probe loop a deployment writes (`due_for_probe` → `acquire_for_probe`).
#[derive(Debug)]
pub struct PoolChooser {
    pool: Pool,
    ids: Vec<ResourceId>,
    index: HashMap<ResourceId, usize>,
    sites: Vec<Context>,
    prober: bool,
}

impl PoolChooser {
    pub fn new(policy: Policy, kind: Kind, seed: u64, prober: bool) -> PoolChooser {
        let mut pool = Pool::new(policy, seed).expect("simulated policies are valid");
        let (noun, ..) = kind.nouns();
        let ids: Vec<ResourceId> =
            (0..RESOURCES).map(|r| ResourceId::new(noun, kind.resource_name(r)).expect("valid id")).collect();
        // The keys go in with the provider's published rpm, as a user
        // registers them: per key and model (the context), as the
        // provider counts it; or, where it counts per project, each key
        // in its project's group and the project's rpm on the group.
        let per_model = ContextLimits { rpm: Some(RPM_LIMIT as u32), ..ContextLimits::default() };
        let limits = match kind {
            Kind::ApiKeys => Limits { per_context: per_model, ..Limits::default() },
            _ => Limits::default(),
        };
        let project_rpm = GroupLimits { rpm: Some(PROJECT_RPM as u32), ..GroupLimits::default() };
        for (r, id) in ids.iter().enumerate() {
            let mut registration = Registration { limits, ..Registration::new(1) };
            if kind == Kind::Projects {
                let project = GroupName::new(Kind::project(r)).expect("valid group name");
                pool.set_group(project.clone(), project_rpm, 0).expect("valid group limits");
                registration.groups = vec![project];
            }
            pool.register_with(id.clone(), registration, 0).expect("fresh pool accepts a resource");
        }
        let index = ids.iter().cloned().enumerate().map(|(i, id)| (id, i)).collect();
        let sites = kind.contexts().iter().map(|s| Context::new(*s).expect("valid context")).collect();
        pool.drain_events();
        PoolChooser { pool, ids, index, sites, prober }
    }

    /// Asks `authority` for every grant instead of the pool's own counters.
    pub fn set_authority(&mut self, authority: Box<dyn Authority>) {
        self.pool.set_authority(authority);
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

    fn complete(&mut self, grant: Grant, site: usize, answer: Answer, now: u64) {
        let lease = grant.lease.expect("a pool grant carries its lease");
        self.pool
            .report(&self.ids[grant.resource], &self.sites[site], answer.outcome, now)
            .expect("report on a known resource");
        self.pool.release(lease.id, lease.token, now).expect("uses end well within the lease TTL");
        self.pool.drain_events();
    }

    fn probes(&mut self, now: u64) -> Vec<(Grant, usize)> {
        let mut out = Vec::new();
        if !self.prober {
            return out;
        }
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

/// Knows the truth: takes the free resource with the highest true success
/// probability for the context at that instant, passing over keys whose rpm
/// window (or project's) is full and proxies a site's slice or ban would
/// refuse; with none left, the request goes unserved. The bound every strategy is measured against.
#[derive(Debug, Default)]
pub struct Oracle;

impl Chooser for Oracle {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant> {
        let room = |r: usize| view.windows.has_room(r, site, now) && view.windows.site_admits(r, site, now);
        // A request no window has room for waits rather than meet a 429.
        (0..RESOURCES)
            .filter(|&r| view.free[r] && room(r))
            .map(|r| (view.world.p(r, site, now), r))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, resource)| Grant { resource, lease: None })
    }

    fn complete(&mut self, _grant: Grant, _site: usize, _answer: Answer, _now: u64) {}
}
