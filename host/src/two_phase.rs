//! Acquire and release for a host whose lease authority answers later: an
//! event loop that must not wait on the network inside a call (Node's main
//! thread). The pool proposes a permit, the caller asks the authority
//! itself and settles the answer; a release ends the lease in the pool and
//! hands back the revoke for the caller to send. The one-call `acquire` and
//! `release` are the same steps with the authority asked in between.

use repute_core::{Claim, Lease, ResourceId};

use crate::bindings::repute::pool::types as wit;
use crate::convert;

/// An acquire waiting for the authority's answer on one permit. Dropping
/// it costs nothing: the pool holds nothing until `settle`.
#[derive(Debug, Clone)]
pub struct Proposal {
    pub(crate) inner: wit::Proposal,
    pub(crate) resource: ResourceId,
}

impl Proposal {
    /// The resource whose permit to ask for.
    pub fn resource(&self) -> &ResourceId {
        &self.resource
    }

    pub fn permit(&self) -> u32 {
        self.inner.permit
    }

    /// The TTL to grant, in ns.
    pub fn ttl(&self) -> u64 {
        self.inner.ttl
    }

    /// The highest token the pool has seen for the permit: the authority's
    /// must be greater.
    pub fn last(&self) -> u64 {
        self.inner.last
    }

    /// What the grant counts against the resource's limits: the authority
    /// judges and counts it with the grant. None when nothing is counted.
    pub fn claim(&self) -> Option<Claim> {
        self.inner.claim.clone().map(convert::claim_in)
    }

    /// The log position the pool had folded: the grant's view.
    pub fn view(&self) -> u64 {
        self.inner.view
    }
}

/// The permits of a caller's proposals that wait for an answer: a pool
/// proposes none of them again, so acquires in flight together do not
/// contend for one permit at the authority.
#[derive(Debug, Clone, Default)]
pub struct InFlight(pub(crate) Vec<wit::RefusedPermit>);

impl InFlight {
    pub fn add(&mut self, p: &Proposal) {
        self.0.push(wit::RefusedPermit { resource: p.inner.resource, permit: p.inner.permit });
    }

    /// Forgets one proposal added before.
    pub fn remove(&mut self, p: &Proposal) {
        let (key, permit) = (p.inner.resource, p.inner.permit);
        let same = |r: &wit::RefusedPermit| {
            r.resource.slot == key.slot && r.resource.serial == key.serial && r.permit == permit
        };
        if let Some(at) = self.0.iter().position(same) {
            self.0.swap_remove(at);
        }
    }
}

/// Where an answer to a proposal led.
#[derive(Debug, Clone)]
pub enum Step {
    Granted(Lease),
    /// Refused: ask the authority about this permit next. Boxed: a
    /// proposal with its claim outweighs a lease several times.
    Next(Box<Proposal>),
}

/// A lease the pool has ended whose permit the authority still holds: the
/// caller sends the revoke, and the release is complete once it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoke {
    pub resource: ResourceId,
    pub permit: u32,
    pub token: u64,
}
