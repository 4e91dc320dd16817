//! The pool's context cells, by (resource slot, context number).
//!
//! A big tenant's memory is mostly its cells (a few hundred bytes each, one
//! per resource and context heard of), so they are stored where they cost
//! their own size: in chunks that never move (`crate::chunks`), with a hash
//! table from each pair to its place. A table holding the cells themselves
//! costs up to twice their bytes between two growths (buckets are a power
//! of two and at most 7/8 full), and each growth leaves the old buckets
//! behind in a wasm memory that never shrinks: the whole table's size again.
//!
//! Iteration follows the table, so every walk over the cells (timers armed
//! after a restore, snapshots, views) visits them in the order it did when
//! the table held them.

use core::ops::Index;

use hashbrown::HashMap;

use super::ContextCell;
use crate::chunks::Chunks;

type Key = (u32, u32);

/// Cells per chunk: 256 KiB or so each, so the last chunk's unused room is
/// small next to a big tenant and a small one allocates one chunk.
const CHUNK: usize = 512;

#[derive(Debug, Default)]
pub(crate) struct Cells {
    /// Where each pair's cell is in `stored`.
    places: HashMap<Key, u32>,
    /// Each cell beside its key, so a removal can move the last one into the hole.
    stored: Chunks<(Key, ContextCell), CHUNK>,
}

impl Cells {
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn contains_key(&self, key: &Key) -> bool {
        self.places.contains_key(key)
    }

    pub fn get(&self, key: &Key) -> Option<&ContextCell> {
        self.places.get(key).map(|&at| &self.stored[at as usize].1)
    }

    pub fn get_mut(&mut self, key: &Key) -> Option<&mut ContextCell> {
        let at = *self.places.get(key)?;
        Some(&mut self.stored[at as usize].1)
    }

    /// Puts `cell` at `key`, returning the cell it replaced.
    pub fn insert(&mut self, key: Key, cell: ContextCell) -> Option<ContextCell> {
        if let Some(old) = self.get_mut(&key) {
            return Some(core::mem::replace(old, cell));
        }
        self.places.insert(key, self.stored.len() as u32);
        self.stored.push((key, cell));
        None
    }

    /// Takes the cell at `key` out; the last cell moves into its place.
    pub fn remove(&mut self, key: &Key) -> Option<ContextCell> {
        let at = self.places.remove(key)?;
        let (moved_key, moved) = self.stored.pop().expect("a place for every key");
        if at as usize == self.stored.len() {
            return Some(moved);
        }
        self.places.insert(moved_key, at);
        Some(core::mem::replace(&mut self.stored[at as usize], (moved_key, moved)).1)
    }

    /// The cells with their keys, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &ContextCell)> {
        self.places.iter().map(|(key, &at)| (key, &self.stored[at as usize].1))
    }

    /// The cells, in the table's order.
    pub fn values(&self) -> impl Iterator<Item = &ContextCell> {
        self.places.values().map(|&at| &self.stored[at as usize].1)
    }

    /// The cells, in no particular order.
    #[cfg(test)]
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut ContextCell> {
        self.stored.iter_mut().map(|(_, cell)| cell)
    }

    /// Bytes of the table and the chunks (the cells' own heap is the caller's to add).
    pub fn heap_bytes(&self) -> usize {
        crate::footprint::table::<(Key, u32)>(self.places.capacity()) + self.stored.heap_bytes()
    }
}

impl Index<&Key> for Cells {
    type Output = ContextCell;

    fn index(&self, key: &Key) -> &ContextCell {
        self.get(key).expect("a cell at the key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Cell;
    use alloc::collections::BTreeMap;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn cell(n: u32) -> ContextCell {
        let mut cc = ContextCell::new(Cell::new(), None);
        cc.trial = Some(u64::from(n));
        cc
    }

    proptest! {
        /// Any run of inserts and removals leaves the cells a map would
        /// hold, each found at its key and each walk visiting each once.
        #[test]
        fn holds_what_a_map_holds(ops in proptest::collection::vec((any::<bool>(), 0u32..40, 0u32..3), 0..3000)) {
            let mut cells = Cells::default();
            let mut model: BTreeMap<Key, u32> = BTreeMap::new();
            for (n, (insert, slot, ctx)) in ops.into_iter().enumerate() {
                let key = (slot * 97 % 1300, ctx);
                if insert {
                    let old = cells.insert(key, cell(n as u32)).map(|c| c.trial);
                    prop_assert_eq!(old, model.insert(key, n as u32).map(|v| Some(u64::from(v))));
                } else {
                    prop_assert_eq!(cells.remove(&key).map(|c| c.trial), model.remove(&key).map(|v| Some(u64::from(v))));
                }
                prop_assert_eq!(cells.len(), model.len());
            }
            for (key, v) in &model {
                prop_assert_eq!(cells[key].trial, Some(u64::from(*v)));
            }
            let walked: BTreeMap<Key, Option<u64>> = cells.iter().map(|(k, c)| (*k, c.trial)).collect();
            prop_assert_eq!(walked.len(), model.len());
            let mut values: Vec<Option<u64>> = cells.values().map(|c| c.trial).collect();
            let mut mutated: Vec<Option<u64>> = cells.values_mut().map(|c| c.trial).collect();
            values.sort();
            mutated.sort();
            prop_assert_eq!(values, mutated);
        }
    }

    #[test]
    fn many_cells_span_chunks_and_a_removal_fills_its_hole_from_the_end() {
        let mut cells = Cells::default();
        let n = 3 * CHUNK as u32 + 5;
        for i in 0..n {
            assert!(cells.insert((i, 0), cell(i)).is_none());
        }
        assert_eq!(cells.remove(&(0, 0)).map(|c| c.trial), Some(Some(0)));
        // The last cell took place 0.
        assert_eq!(cells.places[&(n - 1, 0)], 0);
        assert_eq!(cells[&(n - 1, 0)].trial, Some(u64::from(n - 1)));
        for i in 1..n {
            assert_eq!(cells.remove(&(i, 0)).map(|c| c.trial), Some(Some(u64::from(i))), "cell {i}");
        }
        assert_eq!(cells.len(), 0);
        assert!(cells.get(&(1, 0)).is_none());
    }
}
