//! Registration: resource slots and their serials, the id lookup, retired
//! fence counters, and the interned contexts with their cells.

use alloc::vec::Vec;

use crate::cell::{Cell, Pause};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::id::{Context, ResourceId};
use crate::index::ContextSlot;
use crate::key::ResourceKey;
use crate::permits::Permits;

use super::leases::End;
use super::{Block, Pool, MAX_PERMITS};

#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub id: ResourceId,
    /// Names this registration to hosts (see `ResourceKey`).
    pub serial: u64,
    /// Holders and last tokens; counters never shrink, so re-grown permits continue their sequence.
    pub permits: Permits,
    pub block: Option<Block>,
    /// A running `quota_exhausted` pause: not selectable anywhere until it ends.
    pub pause: Option<Pause>,
    pub global: Cell,
    pub contexts: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct ContextCell {
    pub cell: Cell,
    pub block: Option<Block>,
    pub trial: Option<u64>,
    pub probe: Option<u64>,
    pub indexed: ContextSlot,
}

impl ContextCell {
    pub fn new(cell: Cell, block: Option<Block>) -> Self {
        ContextCell { cell, block, trial: None, probe: None, indexed: ContextSlot::default() }
    }
}

impl Pool {
    pub(super) fn slot_of(&self, id: &ResourceId) -> Result<u32> {
        self.by_id.get(id).copied().ok_or(Error::UnknownResource)
    }

    pub(crate) fn res(&self, slot: u32) -> &Resource {
        self.resources[slot as usize].as_ref().expect("slot in use")
    }

    pub(super) fn res_mut(&mut self, slot: u32) -> &mut Resource {
        self.resources[slot as usize].as_mut().expect("slot in use")
    }

    pub(crate) fn take_serial(&mut self) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        serial
    }

    /// The context of this name if the pool has seen it, shared rather than built anew.
    pub fn known_context(&self, name: &str) -> Option<Context> {
        self.context_ids.get(name).map(|&c| self.contexts[c as usize].clone())
    }

    /// The key of the resource a live lease holds.
    pub fn lease_key(&self, lease: u64) -> Option<ResourceKey> {
        let slot = self.leases.live.get(&lease)?.slot;
        Some(ResourceKey { slot, serial: self.res(slot).serial })
    }

    /// The resource `key` names, while that registration lasts.
    pub fn resource_at(&self, key: ResourceKey) -> Option<&ResourceId> {
        match self.resources.get(key.slot as usize) {
            Some(Some(r)) if r.serial == key.serial => Some(&r.id),
            _ => None,
        }
    }

    /// Registers a resource with `permits` concurrent leases. Registering an
    /// existing resource again changes its permits (returns whether anything changed);
    /// lowering them is refused while a removed permit is leased.
    pub fn register(&mut self, id: ResourceId, permits: u32, now: u64) -> Result<bool> {
        if !(1..=MAX_PERMITS).contains(&permits) {
            return Err(Error::invalid("permits", "must be in 1..=1024"));
        }
        self.advance(now);
        if let Some(&slot) = self.by_id.get(&id) {
            let r = self.res(slot);
            let current = r.permits.count() as u32;
            if permits == current {
                return Ok(false);
            }
            let live = r.permits.held_from(permits as usize).count() as u32;
            if live > 0 {
                return Err(Error::Leased { live });
            }
            self.res_mut(slot).permits.resize(permits);
            self.reindex(slot);
            self.emit(self.now, EventKind::Registered { resource: id, permits });
            return Ok(true);
        }
        if let Some(max) = self.policy.max_resources {
            if self.by_id.len() as u32 >= max {
                return Err(Error::BudgetExhausted { budget: "max_resources", limit: max as u64 });
            }
        }
        let fences = self.retired_fences.remove(&id).unwrap_or_default();
        let resource = Resource {
            id: id.clone(),
            serial: self.take_serial(),
            permits: Permits::new(permits, fences),
            block: None,
            pause: None,
            global: Cell::new(),
            contexts: Vec::new(),
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.resources[s as usize] = Some(resource);
                s
            }
            None => {
                self.resources.push(Some(resource));
                (self.resources.len() - 1) as u32
            }
        };
        self.by_id.insert(id.clone(), slot);
        self.reindex(slot);
        self.emit(self.now, EventKind::Registered { resource: id, permits });
        Ok(true)
    }

    /// Removes a resource and its cells. Refused while leased unless `force`,
    /// which revokes the leases; fence counters are kept, so a re-registered
    /// resource continues its token sequence and old holders stay fenced out.
    pub fn unregister(&mut self, id: &ResourceId, force: bool, now: u64) -> Result<()> {
        self.advance(now);
        let slot = self.slot_of(id)?;
        let live: Vec<u64> = self.res(slot).permits.held_from(0).collect();
        if !live.is_empty() && !force {
            return Err(Error::Leased { live: live.len() as u32 });
        }
        for lease in live {
            let l = &self.leases.live[&lease].lease;
            self.authority.revoke(&l.resource, l.permit, l.token);
            self.end_lease(lease, End::Revoked, self.now);
        }
        let r = self.resources[slot as usize].take().expect("slot in use");
        for ctx in &r.contexts {
            if let Some(mut cc) = self.cells.remove(&(slot, *ctx)) {
                self.index.set_context(slot, *ctx, None, &mut cc.indexed);
            }
            self.probe_due.remove(&(slot, *ctx));
        }
        self.index.set_global(slot, None);
        self.by_id.remove(&r.id);
        self.retired_fences.insert(r.id.clone(), r.permits.into_fences());
        self.free_slots.push(slot);
        self.emit(self.now, EventKind::Unregistered { resource: r.id });
        Ok(())
    }

    pub(super) fn intern(&mut self, context: &Context) -> u32 {
        if let Some(&c) = self.context_ids.get(context) {
            return c;
        }
        let c = self.contexts.len() as u32;
        self.contexts.push(context.clone());
        self.context_ids.insert(context.clone(), c);
        c
    }

    /// The cell of a resource in a context, created (within the cell budget) if new.
    pub(super) fn cell_for(&mut self, slot: u32, context: &Context) -> Result<u32> {
        if let Some(&c) = self.context_ids.get(context) {
            if self.cells.contains_key(&(slot, c)) {
                return Ok(c);
            }
        }
        if let Some(max) = self.policy.max_cells {
            if self.cells.len() as u32 >= max {
                return Err(Error::BudgetExhausted { budget: "max_cells", limit: max as u64 });
            }
        }
        let c = self.intern(context);
        self.cells.insert((slot, c), ContextCell::new(Cell::new(), None));
        self.res_mut(slot).contexts.push(c);
        Ok(c)
    }
}
