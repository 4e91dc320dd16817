//! Registration: resource slots and their serials, the id lookup and
//! retired fence counters (`Registry`), and the pool operations that
//! register, remove and give resources their cells.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use hashbrown::HashMap;

use crate::cell::{Cell, Pause};
use crate::chunks::Chunks;
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::id::{Context, ResourceId};
use crate::index::{ContextSlot, GroupKey};
use crate::key::ResourceKey;
use crate::labels::Labels;
use crate::limits::{Limits, RetireReason};
use crate::permits::{self, Permits};
use crate::quota::{self, GroupName};
use crate::secret::Secret;
use crate::usage::Usage;

use super::blocklist::reason_bytes;
use super::leases::End;
use super::{Block, Pool, MAX_PERMITS};

/// How a resource is registered: its permits, limits, labels and secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Concurrent leases, 1..=1024.
    pub permits: u32,
    pub limits: Limits,
    pub labels: Labels,
    pub secret: Option<Secret>,
    /// The quota groups it belongs to (at most `MAX_GROUPS`, each once).
    pub groups: Vec<GroupName>,
}

impl Registration {
    /// `permits` permits, no limits, no labels, no secret, no groups.
    pub fn new(permits: u32) -> Registration {
        Registration { permits, limits: Limits::default(), labels: Labels::default(), secret: None, groups: Vec::new() }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub id: ResourceId,
    pub labels: Labels,
    pub secret: Option<Secret>,
    pub limits: Limits,
    pub usage: Usage,
    /// When it was registered (for `limits.max_age`).
    pub born: u64,
    /// Over a usage limit: not selectable before this.
    pub limited: Option<u64>,
    pub retired: Option<RetireReason>,
    /// Names this registration to hosts (see `ResourceKey`).
    pub serial: u64,
    /// Holders and last tokens; counters never shrink, so re-grown permits continue their sequence.
    pub permits: Permits,
    pub block: Option<Block>,
    /// A running `quota_exhausted` pause: not selectable anywhere until it ends.
    pub pause: Option<Pause>,
    pub global: Cell,
    pub contexts: Vec<u32>,
    /// The quota groups it belongs to, by group slot.
    pub groups: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct ContextCell {
    pub cell: Cell,
    pub block: Option<Block>,
    pub trial: Option<u64>,
    pub probe: Option<u64>,
    pub indexed: ContextSlot,
    /// What grants for this context used of the resource's `per_context` limits.
    pub usage: Usage,
    /// Over a `per_context` limit, or paced by the cell's learned rate,
    /// until then: not selectable in this context.
    pub limited: Option<u64>,
    /// The next grant its learned rate allows (see `crate::pace`).
    pub paced: Option<u64>,
    /// When it was last granted as an early trial (see `Pool::early_trial`);
    /// kept in no snapshot, so a restore allows one more.
    pub early: Option<u64>,
}

impl ContextCell {
    pub fn new(cell: Cell, block: Option<Block>) -> Self {
        ContextCell {
            cell,
            block,
            trial: None,
            probe: None,
            indexed: ContextSlot::default(),
            usage: Usage::default(),
            limited: None,
            paced: None,
            early: None,
        }
    }
}

/// Resources per chunk of the slots (150-190 KiB each).
const SLOT_CHUNK: usize = 256;

/// The registered resources by slot. A slot's index names the resource to
/// the index, the cells and the timers, so slots are reused only after
/// `remove`; the serial tells registrations of one slot apart (see
/// `ResourceKey`). Fence counters outlive a registration: an unregistered
/// id keeps its counters here until it is registered again.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    slots: Chunks<Option<Resource>, SLOT_CHUNK>,
    free: Vec<u32>,
    by_id: HashMap<ResourceId, u32>,
    /// The serial the next registration gets; never reused while this pool lives.
    next_serial: u64,
    retired_fences: BTreeMap<ResourceId, Vec<u64>>,
}

impl Registry {
    /// An empty registry whose first registration gets serial `first_serial`.
    pub fn starting_at(first_serial: u64) -> Self {
        Registry { next_serial: first_serial, ..Registry::default() }
    }

    // The lookups are called from every other pool module on every
    // operation; without `#[inline]` `slot_of` was compiled out of line.
    #[inline]
    pub fn find(&self, id: &ResourceId) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    #[inline]
    pub fn slot_of(&self, id: &ResourceId) -> Result<u32> {
        self.find(id).ok_or(Error::UnknownResource)
    }

    /// Resources registered.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The resource in `slot`, if the slot is in use.
    #[inline]
    pub fn get(&self, slot: u32) -> Option<&Resource> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    #[inline]
    pub fn res(&self, slot: u32) -> &Resource {
        self.slots[slot as usize].as_ref().expect("slot in use")
    }

    #[inline]
    pub fn res_mut(&mut self, slot: u32) -> &mut Resource {
        self.slots[slot as usize].as_mut().expect("slot in use")
    }

    /// Slots ever used, in use or free: every slot is below this.
    pub fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The resources with their slots, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Resource)> {
        self.slots.iter().enumerate().filter_map(|(slot, r)| r.as_ref().map(|r| (slot as u32, r)))
    }

    /// The serial the next registration gets.
    pub fn next_serial(&self) -> u64 {
        self.next_serial
    }

    fn take_serial(&mut self) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        serial
    }

    /// Registers `id` (not registered) with `permits` fresh permits, which
    /// continue the fence counters it had when last unregistered.
    pub fn insert(&mut self, id: ResourceId, permits: u32) -> u32 {
        let fences = self.retired_fences.remove(&id).unwrap_or_default();
        self.place(id, Permits::new(permits, fences))
    }

    /// Registers `id` (not registered, no fences retired) with permits as a
    /// snapshot has them.
    pub fn restore(&mut self, id: ResourceId, permits: Permits) -> u32 {
        debug_assert!(!self.retired_fences.contains_key(&id), "restored before the retired fences");
        self.place(id, permits)
    }

    fn place(&mut self, id: ResourceId, permits: Permits) -> u32 {
        let resource = Resource {
            id: id.clone(),
            labels: Labels::default(),
            secret: None,
            limits: Limits::default(),
            usage: Usage::default(),
            born: 0,
            limited: None,
            retired: None,
            serial: self.take_serial(),
            permits,
            block: None,
            pause: None,
            global: Cell::new(),
            contexts: Vec::new(),
            groups: Vec::new(),
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(resource);
                s
            }
            None => {
                self.slots.push(Some(resource));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_id.insert(id, slot);
        slot
    }

    /// Frees `slot`, keeping its fence counters for a later registration of
    /// the same id; returns the id and the contexts it had cells in.
    pub fn remove(&mut self, slot: u32) -> (ResourceId, Vec<u32>) {
        let r = self.slots[slot as usize].take().expect("slot in use");
        self.by_id.remove(&r.id);
        self.retired_fences.insert(r.id.clone(), r.permits.into_fences());
        self.free.push(slot);
        (r.id, r.contexts)
    }

    /// Keeps a snapshot's fence counters of `id` (not registered).
    pub fn retire(&mut self, id: ResourceId, fences: Vec<u64>) {
        debug_assert!(!self.by_id.contains_key(&id), "retired fences of a registered resource");
        self.retired_fences.insert(id, fences);
    }

    /// The fence counters of every id this registry knows, registered or retired.
    pub fn fences(&self) -> impl Iterator<Item = (&ResourceId, &[u64])> {
        let retired = self.retired_fences.iter().map(|(id, f)| (id, &f[..]));
        retired.chain(self.iter().map(|(_, r)| (&r.id, r.permits.fences())))
    }

    /// Raises `id`'s fence counters, registered or retired, to at least `fences`.
    pub fn raise_fences(&mut self, id: &ResourceId, fences: &[u64]) {
        match self.by_id.get(id) {
            Some(&slot) => self.res_mut(slot).permits.raise(fences),
            None => permits::raise(self.retired_fences.entry(id.clone()).or_default(), fences),
        }
    }

    /// Retired fence counters, by id.
    pub fn retired(&self) -> impl Iterator<Item = (&ResourceId, &Vec<u64>)> {
        self.retired_fences.iter()
    }

    /// Heap bytes of the registry (see `Pool::footprint`).
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{btree, table, vec};
        let resources: usize = self
            .iter()
            .map(|(_, r)| {
                r.id.heap_bytes()
                    + r.labels.heap_bytes()
                    + r.secret.as_ref().map_or(0, Secret::heap_bytes)
                    + r.usage.heap_bytes()
                    + r.permits.heap_bytes()
                    + reason_bytes(&r.block)
                    + r.global.heap_bytes()
                    + vec::<u32>(r.contexts.capacity())
                    + vec::<u32>(r.groups.capacity())
            })
            .sum();
        let retired: usize = self.retired_fences.iter().map(|(id, f)| id.heap_bytes() + vec::<u64>(f.capacity())).sum();
        self.slots.heap_bytes()
            + resources
            + vec::<u32>(self.free.capacity())
            + table::<(ResourceId, u32)>(self.by_id.capacity())
            + btree::<(ResourceId, Vec<u64>)>(self.retired_fences.len())
            + retired
    }
}

impl Pool {
    /// The key of the resource a live lease holds.
    pub fn lease_key(&self, lease: u64) -> Option<ResourceKey> {
        let slot = self.leases.live.get(&lease)?.slot;
        Some(ResourceKey { slot, serial: self.registry.res(slot).serial })
    }

    /// The secret of the resource a live lease holds: an acquire hands it
    /// out with the grant, so the holder need not ask by the resource's id.
    pub fn lease_secret(&self, lease: u64) -> Option<&Secret> {
        let slot = self.leases.live.get(&lease)?.slot;
        self.registry.res(slot).secret.as_ref()
    }

    /// The resource `key` names, while that registration lasts.
    pub fn resource_at(&self, key: ResourceKey) -> Option<&ResourceId> {
        match self.registry.get(key.slot) {
            Some(r) if r.serial == key.serial => Some(&r.id),
            _ => None,
        }
    }

    /// Registers a resource with `permits` concurrent leases, no labels and
    /// no secret (see `register_with`).
    pub fn register(&mut self, id: ResourceId, permits: u32, now: u64) -> Result<bool> {
        self.register_with(id, Registration::new(permits), now)
    }

    /// Registers a resource. Registering an existing resource again replaces
    /// its permits, labels, secret and groups (returns whether anything
    /// changed); lowering the permits is refused while a removed permit is
    /// leased, changing the groups while any permit is (`check_register`).
    pub fn register_with(&mut self, id: ResourceId, registration: Registration, now: u64) -> Result<bool> {
        self.advance(now);
        if !self.check_register(&id, &registration)? {
            return Ok(false);
        }
        self.apply_register(id, registration)
    }

    /// Whether a registration may be logged, decided before it is: refused
    /// when invalid, or when it would take away a permit someone holds (a
    /// lower count takes the permits above it; new groups take every one,
    /// as a lease counts in the groups it was granted under), held here or,
    /// by the authority's count, by any process. `Ok(false)`: it changes
    /// nothing.
    pub(crate) fn check_register(&mut self, id: &ResourceId, registration: &Registration) -> Result<bool> {
        validate_registration(registration)?;
        let Some(slot) = self.registry.find(id) else {
            return Ok(true);
        };
        let r = self.registry.res(slot);
        let regroup = registration.groups != self.group_names(slot);
        if registration.permits == r.permits.count() as u32
            && registration.limits == r.limits
            && registration.labels == r.labels
            && registration.secret == r.secret
            && !regroup
        {
            return Ok(false);
        }
        self.check_free(slot, if regroup { 0 } else { registration.permits })?;
        Ok(true)
    }

    /// Refuses with `Leased` while a permit of `slot` from `from` on is
    /// held: by a lease of this pool, or at the authority, which knows the
    /// leases of every process (none but this pool's when it is its own).
    fn check_free(&mut self, slot: u32, from: u32) -> Result<()> {
        let r = self.registry.res(slot);
        let to = r.permits.count() as u32;
        if from >= to {
            return Ok(());
        }
        let live = r.permits.held_from(from as usize).count() as u32;
        if live > 0 {
            return Err(Error::Leased { live });
        }
        let id = r.id.clone();
        match self.authority.live(&id, from, to) {
            0 => Ok(()),
            live => Err(Error::Leased { live }),
        }
    }

    /// Applies a registration the log carries, in every process alike: it
    /// reads only what every process folds from the log, so it is refused
    /// (invalid, over `max_resources`) everywhere or nowhere. A lease of
    /// this pool on a permit it takes away ends (revoked): the writer found
    /// the permit free at the authority, so such a lease was granted after
    /// that check, or has already ended there.
    pub(crate) fn apply_register(&mut self, id: ResourceId, registration: Registration) -> Result<bool> {
        validate_registration(&registration)?;
        let Registration { permits, limits, labels, secret, groups } = registration;
        if let Some(slot) = self.registry.find(&id) {
            let r = self.registry.res(slot);
            let current = r.permits.count() as u32;
            let regroup = groups != self.group_names(slot);
            if permits == current && limits == r.limits && labels == r.labels && secret == r.secret && !regroup {
                return Ok(false);
            }
            let removed: Vec<u64> = r.permits.held_from(permits as usize).collect();
            self.revoke_leases(removed);
            let relabel = labels != self.registry.res(slot).labels;
            if regroup {
                self.leave_groups(slot);
                self.join_groups(slot, &groups);
            }
            let r = self.registry.res_mut(slot);
            r.permits.resize(permits);
            r.secret = secret;
            if r.limits != limits {
                r.limits = limits;
                // New limits judge the grants already counted afresh.
                r.limited = None;
                r.retired = None;
                self.arm_max_age(slot);
                self.regate(slot);
                for ctx in self.registry.res(slot).contexts.clone() {
                    self.cells.get_mut(&(slot, ctx)).expect("cell of a listed context").limited = None;
                    self.regate_cell(slot, ctx);
                }
            }
            if relabel {
                let records = self.records(slot);
                self.index.leave(slot, &records);
                self.registry.res_mut(slot).labels = labels;
                let keys = self.group_keys(slot);
                self.index.join(slot, keys, &records);
            }
            self.reindex(slot);
            self.emit(self.now, EventKind::Registered { resource: id, permits });
            return Ok(true);
        }
        if let Some(max) = self.policy.max_resources {
            if self.registry.len() as u32 >= max {
                return Err(Error::BudgetExhausted { budget: "max_resources", limit: max as u64 });
            }
        }
        let slot = self.registry.insert(id.clone(), permits);
        let r = self.registry.res_mut(slot);
        r.labels = labels;
        r.secret = secret;
        r.limits = limits;
        r.born = self.now;
        self.join_groups(slot, &groups);
        self.arm_max_age(slot);
        self.enter(slot);
        self.emit(self.now, EventKind::Registered { resource: id, permits });
        Ok(true)
    }

    /// Indexes a newly placed slot: its groups, then its entries.
    pub(crate) fn enter(&mut self, slot: u32) {
        let keys = self.group_keys(slot);
        self.index.join(slot, keys, &[]);
        self.reindex(slot);
    }

    /// The groups a resource belongs in: its kind and each label value.
    fn group_keys(&self, slot: u32) -> Vec<GroupKey> {
        let r = self.registry.res(slot);
        let labels = r.labels.iter().map(|(n, v)| GroupKey::Label(n.into(), v.into()));
        core::iter::once(GroupKey::Kind(r.id.kind().into())).chain(labels).collect()
    }

    /// The index records of a resource's cells, by context.
    fn records(&self, slot: u32) -> Vec<(u32, ContextSlot)> {
        let r = self.registry.res(slot);
        r.contexts.iter().map(|&c| (c, self.cells[&(slot, c)].indexed)).collect()
    }

    /// The secret a resource was registered with.
    pub fn secret_of(&self, id: &ResourceId) -> Result<Option<&Secret>> {
        Ok(self.registry.res(self.registry.slot_of(id)?).secret.as_ref())
    }

    /// Removes a resource and its cells. Refused while leased (here, or by
    /// the authority's count anywhere) unless `force`, which revokes the
    /// leases; fence counters are kept, so a re-registered resource
    /// continues its token sequence and old holders stay fenced out.
    pub fn unregister(&mut self, id: &ResourceId, force: bool, now: u64) -> Result<()> {
        self.advance(now);
        self.check_unregister(id, force)?;
        self.apply_unregister(id)
    }

    /// Whether an unregister may be logged: the resource is known, and
    /// without `force` no permit of it is held anywhere.
    pub(crate) fn check_unregister(&mut self, id: &ResourceId, force: bool) -> Result<()> {
        let slot = self.registry.slot_of(id)?;
        if force {
            return Ok(());
        }
        self.check_free(slot, 0)
    }

    /// Applies an unregister the log carries, in every process alike: this
    /// pool's leases of the resource end (revoked), whether the writer forced
    /// it or found every permit free at the authority.
    pub(crate) fn apply_unregister(&mut self, id: &ResourceId) -> Result<()> {
        let slot = self.registry.slot_of(id)?;
        let live: Vec<u64> = self.registry.res(slot).permits.held_from(0).collect();
        self.revoke_leases(live);
        self.leave_groups(slot);
        let (id, contexts) = self.registry.remove(slot);
        for ctx in contexts {
            if let Some(mut cc) = self.cells.remove(&(slot, ctx)) {
                self.index.set_context(slot, ctx, None, &mut cc.indexed);
            }
            self.probe_due.remove(&(slot, ctx));
        }
        self.index.set_global(slot, None);
        self.index.leave(slot, &[]);
        self.emit(self.now, EventKind::Unregistered { resource: id });
        Ok(())
    }

    /// Ends these leases of this pool as revoked, at the authority too.
    fn revoke_leases(&mut self, leases: Vec<u64>) {
        for lease in leases {
            let l = &self.leases.live[&lease].lease;
            self.authority.revoke(&l.resource, l.permit, l.token);
            self.end_lease(lease, End::Revoked, self.now);
        }
    }

    /// Whether the cell budget (`max_cells`) admits no new cell.
    pub(super) fn cells_full(&self) -> bool {
        self.policy.max_cells.is_some_and(|max| self.cells.len() as u32 >= max)
    }

    /// The cell of a resource in a context, created (within the cell budget)
    /// if new. Cells live beside the registry, one for each context a
    /// resource lists, and go with it in `unregister`.
    pub(super) fn cell_for(&mut self, slot: u32, context: &Context) -> Result<u32> {
        if let Some(c) = self.contexts.id(context) {
            if self.cells.contains_key(&(slot, c)) {
                return Ok(c);
            }
        }
        if let Some(max) = self.policy.max_cells.filter(|_| self.cells_full()) {
            return Err(Error::BudgetExhausted { budget: "max_cells", limit: max as u64 });
        }
        let c = self.contexts.intern(context);
        self.cells.insert((slot, c), ContextCell::new(Cell::new(), None));
        self.registry.res_mut(slot).contexts.push(c);
        Ok(c)
    }
}

/// The rules a registration keeps whatever the pool holds.
fn validate_registration(registration: &Registration) -> Result<()> {
    if !(1..=MAX_PERMITS).contains(&registration.permits) {
        return Err(Error::invalid("permits", "must be in 1..=1024"));
    }
    registration.limits.validate()?;
    quota::check_names(&registration.groups)
}
