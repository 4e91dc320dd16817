//! Affinity: which resource the last lease granted under a key got, so the
//! next acquire with that key tries it first (sticky sessions).
//!
//! Bindings are soft state: bounded (the oldest binding goes first once
//! `MAX_AFFINITIES` keys are bound), kept neither in snapshots nor in the
//! log, and a binding whose resource is gone or not selectable is simply
//! passed over and re-bound by the next grant.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use hashbrown::HashMap;

use crate::key::ResourceKey;

/// Most affinity keys a pool keeps bound.
pub const MAX_AFFINITIES: usize = 65_536;

#[derive(Debug, Default)]
pub(crate) struct Affinities {
    /// Key → the resource it is bound to and the stamp of that binding.
    bound: HashMap<Box<str>, (ResourceKey, u64)>,
    /// Bindings oldest first; an entry whose stamp is not the key's current
    /// one was overtaken by a later binding of the key.
    order: VecDeque<(Box<str>, u64)>,
    next_stamp: u64,
}

impl Affinities {
    pub fn get(&self, key: &str) -> Option<ResourceKey> {
        self.bound.get(key).map(|&(k, _)| k)
    }

    /// Binds `key` to `resource`, dropping the oldest bindings past the bound.
    pub fn bind(&mut self, key: &str, resource: ResourceKey) {
        if self.bound.get(key).is_some_and(|&(k, _)| k == resource) {
            return;
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.bound.insert(key.into(), (resource, stamp));
        self.order.push_back((key.into(), stamp));
        while self.bound.len() > MAX_AFFINITIES {
            self.drop_oldest();
        }
        // Re-bindings leave overtaken entries behind; keep them bounded too.
        while self.order.len() > 2 * MAX_AFFINITIES {
            self.drop_oldest();
        }
    }

    fn drop_oldest(&mut self) {
        let Some((key, stamp)) = self.order.pop_front() else { return };
        if self.bound.get(&key).is_some_and(|&(_, s)| s == stamp) {
            self.bound.remove(&key);
        }
    }

    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        let keys: usize =
            self.bound.keys().map(|k| k.len()).sum::<usize>() + self.order.iter().map(|(k, _)| k.len()).sum::<usize>();
        table::<(Box<str>, (ResourceKey, u64))>(self.bound.capacity())
            + vec::<(Box<str>, u64)>(self.order.capacity())
            + keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    fn key(slot: u32) -> ResourceKey {
        ResourceKey { slot, serial: u64::from(slot) }
    }

    #[test]
    fn the_latest_binding_wins_and_the_oldest_goes_first() {
        let mut a = Affinities::default();
        a.bind("u1", key(1));
        a.bind("u1", key(2));
        assert_eq!(a.get("u1"), Some(key(2)));
        for i in 0..MAX_AFFINITIES as u32 {
            a.bind(&format!("k{i}"), key(i));
        }
        assert_eq!(a.bound.len(), MAX_AFFINITIES);
        assert_eq!(a.get("u1"), None, "the oldest binding was dropped");
        assert_eq!(a.get("k0"), Some(key(0)));
        assert!(a.order.len() <= 2 * MAX_AFFINITIES);
    }
}
