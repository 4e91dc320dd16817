//! The pool operations of a shard, one component call each, with their
//! arguments and results converted between the host's types and the WIT's.

use repute_core::{GrantAnswer, GroupLimits, GroupView, Outcome, Registration, Secret, Selector};

use super::Shard;
use crate::bindings::repute::pool::types as wit;
use crate::convert;
use crate::error::{Error, Result};
use crate::names::Names;
use crate::providers::{authority_groups, authority_windows, Permit};
use crate::two_phase::{Proposal, Revoke, Step};

/// One component call for tenant `t`: its handle, the call, the result mapped.
macro_rules! op {
    ($self:ident, $t:ident, |$store:ident, $pool:ident, $h:ident| $body:expr) => {{
        let $h = $self.handle($t)?;
        let r = $self.call($t, |$store, $pool| $body)?;
        $self.finish($t, r)
    }};
}

impl Shard {
    pub(crate) fn register_with(
        &mut self,
        t: usize,
        kind: &str,
        value: &str,
        registration: &Registration,
    ) -> Result<bool> {
        let id = convert::id_out(kind, value);
        let registration = convert::registration_out(registration);
        op!(self, t, |s, p, h| p.call_register(s, h, &id, &registration))
    }

    pub(crate) fn unregister(&mut self, t: usize, kind: &str, value: &str, force: bool) -> Result<()> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_unregister(s, h, &id, force))
    }

    pub(crate) fn acquire_with(&mut self, t: usize, context: &str, selector: &Selector) -> Result<repute_core::Lease> {
        let selector = convert::selector_out(selector);
        let grant = op!(self, t, |s, p, h| p.call_acquire(s, h, context, &selector))?;
        let context = self.context(t, context)?;
        self.lease_from(t, grant, context)
    }

    pub(crate) fn acquire_with_secret(
        &mut self,
        t: usize,
        context: &str,
        selector: &Selector,
    ) -> Result<(repute_core::Lease, Option<Secret>)> {
        let selector = convert::selector_out(selector);
        let (grant, secret) = op!(self, t, |s, p, h| p.call_acquire_with_secret(s, h, context, &selector))?;
        let context = self.context(t, context)?;
        Ok((self.lease_from(t, grant, context)?, convert::secret_in(secret)?))
    }

    pub(crate) fn propose(
        &mut self,
        t: usize,
        context: &str,
        selector: &Selector,
        in_flight: &[wit::RefusedPermit],
    ) -> Result<Proposal> {
        let selector = convert::selector_out(selector);
        let inner = op!(self, t, |s, p, h| p.call_propose(s, h, context, &selector, in_flight))?;
        let resource = self.resource_of(t, inner.resource)?;
        Ok(Proposal { inner, resource })
    }

    pub(crate) fn settle(
        &mut self,
        t: usize,
        context: &str,
        selector: &Selector,
        proposal: &Proposal,
        answer: GrantAnswer,
        in_flight: &[wit::RefusedPermit],
    ) -> Result<Step> {
        let selector = convert::selector_out(selector);
        let answer = convert::answer_out(answer);
        match op!(self, t, |s, p, h| p.call_settle(s, h, context, &selector, &proposal.inner, answer, in_flight))? {
            wit::Settled::Granted(grant) => {
                let context = self.context(t, context)?;
                Ok(Step::Granted(self.lease_from(t, grant, context)?))
            }
            wit::Settled::Next(inner) => {
                let resource = self.resource_of(t, inner.resource)?;
                Ok(Step::Next(Box::new(Proposal { inner, resource })))
            }
        }
    }

    pub(crate) fn acquire_for_probe(
        &mut self,
        t: usize,
        kind: &str,
        value: &str,
        context: &str,
    ) -> Result<repute_core::Lease> {
        let id = convert::id_out(kind, value);
        let grant = op!(self, t, |s, p, h| p.call_acquire_for_probe(s, h, &id, context))?;
        let context = self.context(t, context)?;
        self.lease_from(t, grant, context)
    }

    pub(crate) fn renew(&mut self, t: usize, id: u64, token: u64) -> Result<repute_core::Lease> {
        let renewal = op!(self, t, |s, p, h| p.call_renew(s, h, id, token))?;
        let context = self.context(t, &renewal.context)?;
        self.lease_from(t, renewal.grant, context)
    }

    /// A granted lease with its resource id filled in from the tenant's
    /// cache, asking the component on a miss.
    fn lease_from(&mut self, t: usize, grant: wit::Grant, context: repute_core::Context) -> Result<repute_core::Lease> {
        let resource = self.resource_of(t, grant.resource)?;
        Ok(convert::grant_in(grant, resource, context))
    }

    fn resource_of(&mut self, t: usize, key: wit::ResourceKey) -> Result<repute_core::ResourceId> {
        if let Some(id) = self.names(t).and_then(|n| n.get(key)) {
            return Ok(id.clone());
        }
        let h = self.handle(t)?;
        let id = self
            .call(t, |s, p| p.call_resource_of(s, h, key))?
            .ok_or_else(|| Error::Trap { message: "component returned a lease on an unknown resource key".into() })?;
        let id = convert::id_in(&id)?;
        if let Some(n) = self.names(t) {
            n.insert(key, id.clone());
        }
        Ok(id)
    }

    pub(crate) fn release(&mut self, t: usize, id: u64, token: u64) -> Result<()> {
        op!(self, t, |s, p, h| p.call_release(s, h, id, token))
    }

    pub(crate) fn report_and_release(&mut self, t: usize, id: u64, token: u64, outcome: &Outcome) -> Result<()> {
        let outcome = convert::outcome_out(outcome);
        op!(self, t, |s, p, h| p.call_report_and_release(s, h, id, token, outcome))
    }

    /// The pool counts `used` whatever the authority answered; a store
    /// that failed to take it is the error, and keeps counting the reserved
    /// tokens until the grant leaves its window.
    pub(crate) fn reconcile(&mut self, t: usize, id: u64, token: u64, used: u64) -> Result<()> {
        let h = self.handle(t)?;
        let r = self.call(t, |s, p| p.call_reconcile(s, h, id, token, used))?;
        match self.ctx(t)?.fault.take() {
            Some(fault) => Err(Error::Store(fault)),
            None => self.finish(t, r),
        }
    }

    /// `release`, with the revoke handed back instead of sent (none when
    /// the pool is its own authority).
    pub(crate) fn release_deferred(&mut self, t: usize, id: u64, token: u64) -> Result<Option<Revoke>> {
        self.ctx(t)?.deferred = Some(Vec::new());
        let released = (|| op!(self, t, |s, p, h| p.call_release(s, h, id, token)))();
        let mut revokes = self.ctx(t).ok().and_then(|c| c.deferred.take()).unwrap_or_default();
        released.map(|()| revokes.pop())
    }

    /// Revokes `token` on a permit at the tenant's authority, outside the
    /// pool: for a lease the pool already counts as ended whose grant the
    /// authority may still hold. The revoke is conditional on the token, so
    /// a newer holder is never touched.
    pub(crate) fn revoke(&mut self, t: usize, revoke: &Revoke) -> Result<()> {
        let fencing = &mut self.ctx(t)?.providers.fencing;
        if fencing.in_process() {
            // The pool is its own authority: what it ended is free already.
            return Ok(());
        }
        let permit = Permit { kind: revoke.resource.kind(), value: revoke.resource.value(), index: revoke.permit };
        Ok(fencing.revoke(permit, revoke.token)?)
    }

    pub(crate) fn lease(&mut self, t: usize, id: u64) -> Result<Option<repute_core::Lease>> {
        let lease = op!(self, t, |s, p, h| p.call_get_lease(s, h, id).map(Ok))?;
        lease.map(convert::lease_in).transpose()
    }

    /// The secret of a resource, from the component: the host keeps no copy.
    pub(crate) fn secret(&mut self, t: usize, kind: &str, value: &str) -> Result<Option<Secret>> {
        let id = convert::id_out(kind, value);
        let secret = op!(self, t, |s, p, h| p.call_secret_of(s, h, &id))?;
        convert::secret_in(secret)
    }

    pub(crate) fn report(&mut self, t: usize, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()> {
        let id = convert::id_out(kind, value);
        let outcome = convert::outcome_out(outcome);
        op!(self, t, |s, p, h| p.call_report(s, h, &id, context, outcome))
    }

    pub(crate) fn block(
        &mut self,
        t: usize,
        kind: &str,
        value: &str,
        context: Option<&str>,
        duration: Option<u64>,
        reason: Option<&str>,
    ) -> Result<()> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_block(s, h, &id, context, duration, reason))
    }

    pub(crate) fn unblock(&mut self, t: usize, kind: &str, value: &str, context: Option<&str>) -> Result<bool> {
        let id = convert::id_out(kind, value);
        op!(self, t, |s, p, h| p.call_unblock(s, h, &id, context))
    }

    pub(crate) fn due_for_probe(&mut self, t: usize) -> Result<Vec<(repute_core::ResourceId, repute_core::Context)>> {
        let due = op!(self, t, |s, p, h| p.call_due_for_probe(s, h).map(Ok))?;
        due.into_iter().map(convert::probe_in).collect()
    }

    pub(crate) fn cells(&mut self, t: usize, kind: &str, value: &str) -> Result<Vec<repute_core::CellView>> {
        let id = convert::id_out(kind, value);
        let cells = op!(self, t, |s, p, h| p.call_cells(s, h, &id))?;
        cells.into_iter().map(convert::cell_in).collect()
    }

    pub(crate) fn set_group(&mut self, t: usize, name: &str, limits: &GroupLimits) -> Result<bool> {
        let limits = convert::group_limits_out(limits);
        op!(self, t, |s, p, h| p.call_set_group(s, h, name, limits))
    }

    pub(crate) fn groups(&mut self, t: usize) -> Result<Vec<GroupView>> {
        let views = op!(self, t, |s, p, h| p.call_groups(s, h).map(Ok))?;
        let mut views: Vec<GroupView> = views.into_iter().map(convert::group_view_in).collect::<Result<_>>()?;
        let providers = &mut self.ctx(t)?.providers;
        authority_groups(&mut *providers.fencing, providers.clock.now(), &mut views)?;
        Ok(views)
    }

    pub(crate) fn resources(&mut self, t: usize) -> Result<Vec<repute_core::ResourceView>> {
        let views = op!(self, t, |s, p, h| p.call_resources(s, h).map(Ok))?;
        let mut views: Vec<_> = views.into_iter().map(convert::resource_view_in).collect::<Result<_>>()?;
        let providers = &mut self.ctx(t)?.providers;
        authority_windows(&mut *providers.fencing, providers.clock.now(), &mut views)?;
        Ok(views)
    }

    pub(crate) fn leases(&mut self, t: usize) -> Result<Vec<repute_core::Lease>> {
        let leases = op!(self, t, |s, p, h| p.call_leases(s, h).map(Ok))?;
        leases.into_iter().map(convert::lease_in).collect()
    }

    pub(crate) fn stats(&mut self, t: usize) -> Result<repute_core::Stats> {
        op!(self, t, |s, p, h| p.call_stats(s, h).map(Ok)).map(convert::stats_in)
    }

    pub(crate) fn snapshot(&mut self, t: usize, with_leases: bool) -> Result<Vec<u8>> {
        let bytes = op!(self, t, |s, p, h| p.call_snapshot(s, h, with_leases).map(Ok))?;
        if with_leases {
            self.remember_good(t, &bytes)?;
        }
        Ok(bytes)
    }

    pub(crate) fn snapshot_json(&mut self, t: usize, with_leases: bool) -> Result<String> {
        op!(self, t, |s, p, h| p.call_snapshot_json(s, h, with_leases).map(Ok))
    }

    pub(crate) fn restore(&mut self, t: usize, bytes: &[u8]) -> Result<()> {
        op!(self, t, |s, p, h| p.call_restore(s, h, bytes))?;
        self.forget_names(t);
        Ok(())
    }

    pub(crate) fn restore_json(&mut self, t: usize, json: &str) -> Result<()> {
        op!(self, t, |s, p, h| p.call_restore_json(s, h, json))?;
        self.forget_names(t);
        Ok(())
    }

    /// A context the component accepted (or produced), shared through the tenant's cache.
    fn context(&mut self, t: usize, name: &str) -> Result<repute_core::Context> {
        match self.names(t) {
            Some(names) => names.context(name).map_err(|e| convert::broken("context", e)),
            None => convert::ctx_in(name),
        }
    }

    fn names(&mut self, t: usize) -> Option<&mut Names> {
        self.slots.get_mut(t).and_then(Option::as_mut).map(|s| &mut s.names)
    }

    /// After a restore every key handed out before names nothing: free them.
    fn forget_names(&mut self, t: usize) {
        if let Some(names) = self.names(t) {
            names.clear();
        }
    }

    pub(crate) fn checkpoint(&mut self, t: usize, with_leases: bool) -> Result<u64> {
        op!(self, t, |s, p, h| p.call_checkpoint(s, h, with_leases))
    }

    pub(crate) fn sync(&mut self, t: usize) -> Result<u32> {
        op!(self, t, |s, p, h| p.call_sync(s, h))
    }
}
