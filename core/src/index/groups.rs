//! Groups: the resources of one kind, or with one label value, each with a
//! sum tree of its own, so that a filtered acquire descends only its
//! candidates and stays O(log n) however small a share of the pool they are.
//!
//! A group mirrors what the main index holds for its members: their global
//! entries and, per context, the same corrections (`ContextSlot` records,
//! applied as differences). It keeps no score histograms: a classic acquire
//! in a group shifts weights by the pool-wide minimum score, which is at most
//! the group's, so every candidate still weighs at least the floor.

use alloc::string::String;
use alloc::vec::Vec;
use core::hash::{Hash, Hasher};
use hashbrown::{Equivalent, HashMap};

use super::{tree_value, ContextSlot, GlobalEntry};
use crate::tree::{descend, Delta, SumTree};

/// Marks a free position of a group.
const FREE: u32 = u32::MAX;

/// What a group gathers: one kind, or one value of one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupKey {
    Kind(String),
    Label(String, String),
}

/// A group key borrowed from a selector, looked up without building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupRef<'a> {
    Kind(&'a str),
    Label(&'a str, &'a str),
}

impl GroupKey {
    fn as_ref(&self) -> GroupRef<'_> {
        match self {
            GroupKey::Kind(k) => GroupRef::Kind(k),
            GroupKey::Label(n, v) => GroupRef::Label(n, v),
        }
    }
}

// Both forms hash alike, so a `GroupRef` finds its `GroupKey` in the map.
impl Hash for GroupKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state);
    }
}

impl Hash for GroupRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            GroupRef::Kind(k) => {
                0u8.hash(state);
                k.hash(state);
            }
            GroupRef::Label(n, v) => {
                1u8.hash(state);
                n.hash(state);
                v.hash(state);
            }
        }
    }
}

impl Equivalent<GroupKey> for GroupRef<'_> {
    fn equivalent(&self, key: &GroupKey) -> bool {
        *self == key.as_ref()
    }
}

/// One group's tree over its members' positions.
#[derive(Debug, Clone)]
struct Group {
    key: GroupKey,
    tree: SumTree,
    shape: Vec<usize>,
    stored: Vec<Option<GlobalEntry>>,
    deltas: HashMap<u32, Delta>,
    /// The slot at each position (`FREE` once it left).
    slots: Vec<u32>,
    free: Vec<u32>,
    members: u32,
}

impl Group {
    fn new(key: GroupKey) -> Self {
        let tree = SumTree::new();
        Group {
            key,
            shape: tree.shape(),
            tree,
            stored: Vec::new(),
            deltas: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            members: 0,
        }
    }

    fn set_global(&mut self, pos: u32, entry: Option<GlobalEntry>) {
        let i = pos as usize;
        if self.tree.ensure(i) {
            self.shape = self.tree.shape();
            for d in self.deltas.values_mut() {
                d.grow(&self.shape);
            }
        }
        if self.stored.len() <= i {
            self.stored.resize(i + 1, None);
        }
        let old = core::mem::replace(&mut self.stored[i], entry);
        let ((ow, oc), (nw, nc)) = (tree_value(old), tree_value(entry));
        if (ow, oc) != (nw, nc) {
            self.tree.add(i, nw - ow, nc - oc);
        }
    }

    fn apply(&mut self, pos: u32, ctx: u32, old: &ContextSlot, new: &ContextSlot) {
        let (dw, dc) = (new.delta.0 - old.delta.0, new.delta.1 - old.delta.1);
        if (dw, dc) == (0, 0) {
            return;
        }
        let shape = &self.shape;
        let delta = self.deltas.entry(ctx).or_insert_with(|| Delta::new(shape));
        delta.add(&self.shape, pos as usize, dw, dc);
        if delta.total() == (0, 0) && matches!(delta, Delta::Sparse { blocks, .. } if blocks.is_empty()) {
            self.deltas.remove(&ctx);
        }
    }

    fn total(&self, ctx: Option<u32>, k: i64) -> i64 {
        let (mut w, mut c) = self.tree.total();
        if let Some(d) = ctx.and_then(|c| self.deltas.get(&c)) {
            let (dw, dc) = d.total();
            w += dw;
            c += dc;
        }
        w + k * c
    }

    fn pick(&self, ctx: Option<u32>, k: i64, target: i64) -> u32 {
        let delta = ctx.and_then(|c| self.deltas.get(&c));
        self.slots[descend(&self.tree, delta, k, target)]
    }

    fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        let key = match &self.key {
            GroupKey::Kind(k) => k.capacity(),
            GroupKey::Label(n, v) => n.capacity() + v.capacity(),
        };
        // The key is held twice: here and in the map of groups by key.
        2 * key
            + self.tree.heap_bytes()
            + vec::<usize>(self.shape.capacity())
            + vec::<Option<GlobalEntry>>(self.stored.capacity())
            + table::<(u32, Delta)>(self.deltas.capacity())
            + self.deltas.values().map(Delta::heap_bytes).sum::<usize>()
            + vec::<u32>(self.slots.capacity() + self.free.capacity())
    }
}

/// Every group of a pool and which groups each slot is in. A group goes
/// when its last member leaves, so groups never outnumber memberships.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    by_key: HashMap<GroupKey, u32>,
    groups: Vec<Option<Group>>,
    free: Vec<u32>,
    /// Per slot: (group, position) of each membership.
    of_slot: Vec<Vec<(u32, u32)>>,
    /// The groups that gather a kind (few; `prefer` without a kind looks in each).
    kinds: Vec<u32>,
}

impl Groups {
    pub fn find(&self, key: GroupRef<'_>) -> Option<u32> {
        self.by_key.get(&key).copied()
    }

    /// The kinds registered.
    pub fn kinds(&self) -> impl Iterator<Item = &str> + '_ {
        self.kinds.iter().map(|&g| match &self.group(g).key {
            GroupKey::Kind(k) => k.as_str(),
            GroupKey::Label(..) => unreachable!("kind groups gather kinds"),
        })
    }

    fn group(&self, g: u32) -> &Group {
        self.groups[g as usize].as_ref().expect("group in use")
    }

    fn group_mut(&mut self, g: u32) -> &mut Group {
        self.groups[g as usize].as_mut().expect("group in use")
    }

    /// Members of group `g`.
    pub fn size(&self, g: u32) -> u32 {
        self.group(g).members
    }

    /// The slots of group `g`, in position order.
    pub fn members(&self, g: u32) -> impl Iterator<Item = u32> + '_ {
        self.group(g).slots.iter().copied().filter(|&s| s != FREE)
    }

    pub fn total(&self, g: u32, ctx: Option<u32>, k: i64) -> i64 {
        self.group(g).total(ctx, k)
    }

    pub fn pick(&self, g: u32, ctx: Option<u32>, k: i64, target: i64) -> u32 {
        self.group(g).pick(ctx, k, target)
    }

    /// Mirrors a slot's new global entry into its groups.
    pub fn set_global(&mut self, slot: u32, entry: Option<GlobalEntry>) {
        let Some(of) = self.of_slot.get(slot as usize) else { return };
        for &(g, pos) in of {
            self.groups[g as usize].as_mut().expect("group in use").set_global(pos, entry);
        }
    }

    /// Mirrors a change of a slot's record in a context into its groups.
    pub fn apply(&mut self, slot: u32, ctx: u32, old: &ContextSlot, new: &ContextSlot) {
        let Some(of) = self.of_slot.get(slot as usize) else { return };
        for &(g, pos) in of {
            self.groups[g as usize].as_mut().expect("group in use").apply(pos, ctx, old, new);
        }
    }

    /// Puts `slot` (in no group yet) into the groups of `keys`, with its
    /// current global entry and context records.
    pub fn join(
        &mut self,
        slot: u32,
        keys: impl IntoIterator<Item = GroupKey>,
        global: Option<GlobalEntry>,
        records: &[(u32, ContextSlot)],
    ) {
        let i = slot as usize;
        if self.of_slot.len() <= i {
            self.of_slot.resize_with(i + 1, Vec::new);
        }
        debug_assert!(self.of_slot[i].is_empty(), "slot joined twice");
        let mut of = Vec::new();
        for key in keys {
            let g = match self.by_key.get(&key) {
                Some(&g) => g,
                None => {
                    let group = Group::new(key.clone());
                    let g = match self.free.pop() {
                        Some(g) => {
                            self.groups[g as usize] = Some(group);
                            g
                        }
                        None => {
                            self.groups.push(Some(group));
                            (self.groups.len() - 1) as u32
                        }
                    };
                    if matches!(key, GroupKey::Kind(_)) {
                        self.kinds.push(g);
                    }
                    self.by_key.insert(key, g);
                    g
                }
            };
            let group = self.group_mut(g);
            let pos = match group.free.pop() {
                Some(p) => {
                    group.slots[p as usize] = slot;
                    p
                }
                None => {
                    group.slots.push(slot);
                    (group.slots.len() - 1) as u32
                }
            };
            group.members += 1;
            group.set_global(pos, global);
            for (ctx, record) in records {
                group.apply(pos, *ctx, &ContextSlot::default(), record);
            }
            of.push((g, pos));
        }
        self.of_slot[i] = of;
    }

    /// Takes `slot` out of every group it is in, undoing its records.
    pub fn leave(&mut self, slot: u32, records: &[(u32, ContextSlot)]) {
        let Some(of) = self.of_slot.get_mut(slot as usize).map(core::mem::take) else { return };
        for (g, pos) in of {
            let group = self.group_mut(g);
            for (ctx, record) in records {
                group.apply(pos, *ctx, record, &ContextSlot::default());
            }
            group.set_global(pos, None);
            group.slots[pos as usize] = FREE;
            group.free.push(pos);
            group.members -= 1;
            if group.members == 0 {
                let key = self.groups[g as usize].take().expect("group in use").key;
                self.by_key.remove(&key);
                self.kinds.retain(|&k| k != g);
                self.free.push(g);
            }
        }
    }

    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        table::<(GroupKey, u32)>(self.by_key.capacity())
            + vec::<Option<Group>>(self.groups.capacity())
            + self.groups.iter().flatten().map(Group::heap_bytes).sum::<usize>()
            + vec::<u32>(self.free.capacity())
            + vec::<Vec<(u32, u32)>>(self.of_slot.capacity())
            + self.of_slot.iter().map(|o| vec::<(u32, u32)>(o.capacity())).sum::<usize>()
            + vec::<u32>(self.kinds.capacity())
    }
}
