//! The capabilities a shard's component imports, answered from the
//! running call's tenant: its clock, lease authority and storage.

use super::state::ShardState;
use crate::bindings::repute::pool::types as wit;
use crate::bindings::repute::pool::{clock, fencing, storage, types};
use crate::convert::{self, store_err_out};
use crate::error::StoreError;
use crate::providers::Permit;
use crate::two_phase::Revoke;

impl types::Host for ShardState {}

impl clock::Host for ShardState {
    fn now(&mut self) -> u64 {
        ShardState::now(self)
    }
}

impl fencing::Host for ShardState {
    /// An unreachable authority answers `held`: the pool refuses, and the
    /// caller sees the store error.
    fn grant(
        &mut self,
        resource: wit::ResourceId,
        permit: u32,
        ttl: u64,
        last: u64,
        claim: Option<wit::Claim>,
        view: u64,
    ) -> wit::GrantAnswer {
        let now = self.now();
        let ctx = self.cur();
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        let claim = claim.map(convert::claim_in);
        match ctx.providers.fencing.grant(permit, ttl, last, now, claim.as_ref(), view) {
            Ok(answer) => convert::answer_out(answer),
            Err(e) => {
                ctx.fault = Some(e);
                wit::GrantAnswer::Held
            }
        }
    }

    fn reconcile(
        &mut self,
        resource: wit::ResourceId,
        context: Option<String>,
        permit: u32,
        token: u64,
        reserved: u64,
        used: u64,
    ) {
        let ctx = self.cur();
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        if let Err(e) = ctx.providers.fencing.reconcile(permit, context.as_deref(), token, reserved, used) {
            ctx.fault = Some(e);
        }
    }

    fn extend(&mut self, resource: wit::ResourceId, permit: u32, token: u64, ttl: u64) -> bool {
        let now = self.now();
        let ctx = self.cur();
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        ctx.providers.fencing.extend(permit, token, ttl, now).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            false
        })
    }

    fn revoke(&mut self, resource: wit::ResourceId, permit: u32, token: u64) {
        let ctx = self.cur();
        if let Some(deferred) = ctx.deferred.as_mut() {
            match convert::id_in(&resource) {
                Ok(resource) => deferred.push(Revoke { resource, permit, token }),
                Err(_) => ctx.fault = Some(StoreError::Unavailable("the component revoked a malformed id".into())),
            }
            return;
        }
        let permit = Permit { kind: &resource.kind, value: &resource.value, index: permit };
        if let Err(e) = ctx.providers.fencing.revoke(permit, token) {
            ctx.fault = Some(e);
        }
    }

    /// An unreachable authority counts every permit held: the change is
    /// refused, and the caller sees the store error.
    fn live(&mut self, resource: wit::ResourceId, first: u32, permits: u32) -> u32 {
        let now = self.now();
        let ctx = self.cur();
        ctx.providers.fencing.live(&resource.kind, &resource.value, first, permits, now).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            permits.saturating_sub(first)
        })
    }

    /// An unreachable authority refuses, like a grant it cannot make; the
    /// caller sees the store error.
    fn admit(&mut self, limit: wit::RateLimit) -> Option<u64> {
        let ctx = self.cur();
        let limit = repute_core::RateLimit { rate: limit.rate, burst: limit.burst };
        ctx.providers.fencing.admit(&limit).unwrap_or_else(|e| {
            ctx.fault = Some(e);
            Some(0)
        })
    }
}

impl storage::Host for ShardState {
    fn load(&mut self) -> Result<Option<wit::Checkpoint>, wit::StorageError> {
        let ctx = self.cur();
        let checkpoint = ctx.providers.storage.load().map_err(store_err_out)?;
        Ok(checkpoint.map(|c| wit::Checkpoint {
            epoch: c.epoch,
            version: c.version,
            log_seq: c.log_seq,
            bytes: c.bytes,
        }))
    }

    fn save(&mut self, bytes: Vec<u8>, expected_version: u64, log_seq: u64) -> Result<u64, wit::StorageError> {
        let ctx = self.cur();
        let version = ctx.providers.storage.save(&bytes, expected_version, log_seq).map_err(store_err_out)?;
        ctx.last_good = Some(bytes);
        Ok(version)
    }

    fn append(&mut self, entry: wit::LogEntry) -> Result<u64, wit::StorageError> {
        let command =
            convert::log_entry_in(entry).map_err(|e| store_err_out(StoreError::Unavailable(e.to_string())))?;
        self.cur().providers.storage.append(&command).map_err(store_err_out)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<wit::Logged>, wit::StorageError> {
        let entries = self.cur().providers.storage.read_log(after, limit).map_err(store_err_out)?;
        Ok(entries.into_iter().map(|e| wit::Logged { seq: e.seq, entry: convert::log_entry_out(&e.command) }).collect())
    }
}
