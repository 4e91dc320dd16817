//! The default pool split by context, as a tenant too big for one process
//! is served: one pool per partition, each over every resource but seeing
//! only the requests and reports of its own contexts (and so learning each
//! resource's standing across contexts from those alone), and one lease
//! authority every partition asks, so a permit one partition holds is
//! refused to the others and a group's limits count every partition's
//! grants. The authority is the host's in-memory one on the simulated
//! clock: the same judgement a shared store makes.

use std::sync::{Arc, Mutex};

use repute_core::Policy;
use repute_host::providers::{Fencing, MemoryFencing};
use repute_host::ManualClock;
use repute_host::{partition_of, ProviderAuthority, SharedFencing};

use super::strategy::{Chooser, Grant, PoolChooser, View};
use super::{Answer, Setup};

#[derive(Debug)]
pub struct PartitionedChooser {
    parts: Vec<PoolChooser>,
    /// The partition of each site, by the host's rule.
    part_of: Vec<usize>,
    /// The authority's clock, set to each step's simulated time.
    clock: ManualClock,
}

impl PartitionedChooser {
    pub fn new(policy: Policy, setup: &Setup) -> PartitionedChooser {
        let clock = ManualClock::new(0);
        let fencing: Box<dyn Fencing> = Box::new(MemoryFencing::default());
        let fencing: SharedFencing = Arc::new(Mutex::new(fencing));
        let parts = (0..setup.partitions)
            .map(|p| {
                // Each partition draws its own samples, as separate processes do.
                let seed = setup.seed.wrapping_add(u64::from(p));
                let mut part = PoolChooser::new(policy.clone(), setup.kind, seed, setup.prober);
                part.set_authority(Box::new(ProviderAuthority::new(fencing.clone(), Arc::new(clock.clone()))));
                part
            })
            .collect();
        let part_of = setup.kind.contexts().iter().map(|s| partition_of(s, setup.partitions) as usize).collect();
        PartitionedChooser { parts, part_of, clock }
    }
}

impl Chooser for PartitionedChooser {
    fn acquire(&mut self, site: usize, now: u64, view: &View) -> Option<Grant> {
        self.clock.set(now);
        self.parts[self.part_of[site]].acquire(site, now, view)
    }

    fn complete(&mut self, grant: Grant, site: usize, answer: Answer, now: u64) {
        self.clock.set(now);
        self.parts[self.part_of[site]].complete(grant, site, answer, now);
    }

    fn probes(&mut self, now: u64) -> Vec<(Grant, usize)> {
        self.clock.set(now);
        self.parts.iter_mut().flat_map(|p| p.probes(now)).collect()
    }
}
