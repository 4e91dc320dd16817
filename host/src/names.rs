//! The resource ids behind the keys a tenant's component has returned, so a
//! lease crosses the boundary as numbers and the host fills in the id from
//! here (asking the component once per registration it has not seen yet);
//! and the contexts leases were granted in, shared rather than allocated for
//! every lease.
//!
//! A key's serial is never reused by the component instance that issued it,
//! so an entry can only go stale, never name the wrong resource; entries are
//! dropped whenever the tenant gets a new pool (a rebuild after a trap
//! starts serials over) and on restore (every old key is dead then).

use std::collections::HashSet;

use repute_core::{Context, ResourceId};

use crate::bindings::repute::pool::types::ResourceKey;

/// Slots above this are answered but not cached: a component that claims
/// such a slot would otherwise make the host allocate on its word.
const MAX_CACHED_SLOT: u32 = 1 << 22;
/// Contexts kept at most; past it the set starts over, so a caller that
/// names a new context per call costs memory only up to here.
const MAX_CONTEXTS: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Names {
    /// Indexed by slot: the serial registered there and its id.
    by_slot: Vec<Option<(u64, ResourceId)>>,
    contexts: HashSet<Context>,
}

impl Names {
    pub fn get(&self, key: ResourceKey) -> Option<&ResourceId> {
        match self.by_slot.get(key.slot as usize) {
            Some(Some((serial, id))) if *serial == key.serial => Some(id),
            _ => None,
        }
    }

    pub fn insert(&mut self, key: ResourceKey, id: ResourceId) {
        if key.slot > MAX_CACHED_SLOT {
            return;
        }
        let slot = key.slot as usize;
        if self.by_slot.len() <= slot {
            self.by_slot.resize(slot + 1, None);
        }
        self.by_slot[slot] = Some((key.serial, id));
    }

    pub fn clear(&mut self) {
        self.by_slot.clear();
    }

    /// The context named `name`, validated when first seen.
    pub fn context(&mut self, name: &str) -> Result<Context, repute_core::Error> {
        if let Some(c) = self.contexts.get(name) {
            return Ok(c.clone());
        }
        let c = Context::new(name)?;
        if self.contexts.len() >= MAX_CONTEXTS {
            self.contexts.clear();
        }
        self.contexts.insert(c.clone());
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(value: &str) -> ResourceId {
        ResourceId::new("proxy", value).unwrap()
    }

    #[test]
    fn a_key_finds_only_the_registration_it_was_stored_for() {
        let mut names = Names::default();
        let a = ResourceKey { slot: 3, serial: 7 };
        assert_eq!(names.get(a), None);
        names.insert(a, id("a"));
        assert_eq!(names.get(a), Some(&id("a")));
        assert_eq!(names.get(ResourceKey { slot: 3, serial: 8 }), None, "same slot, later registration");
        assert_eq!(names.get(ResourceKey { slot: 2, serial: 7 }), None);
        names.insert(ResourceKey { slot: 3, serial: 9 }, id("b"));
        assert_eq!((names.get(a), names.get(ResourceKey { slot: 3, serial: 9 })), (None, Some(&id("b"))));
        names.clear();
        assert_eq!(names.get(ResourceKey { slot: 3, serial: 9 }), None);
    }

    #[test]
    fn contexts_are_validated_once_and_bounded() {
        let mut names = Names::default();
        assert_eq!(names.context("x.com").unwrap().as_str(), "x.com");
        assert_eq!(names.context("x.com").unwrap().as_str(), "x.com");
        assert_eq!(names.contexts.len(), 1);
        assert!(names.context("*").is_err());
        for i in 0..MAX_CONTEXTS + 1 {
            names.context(&format!("c{i}")).unwrap();
        }
        assert_eq!(names.contexts.len(), 2, "started over after the bound");
    }

    #[test]
    fn huge_slots_are_not_cached() {
        let mut names = Names::default();
        let key = ResourceKey { slot: u32::MAX, serial: 0 };
        names.insert(key, id("a"));
        assert_eq!((names.get(key), names.by_slot.len()), (None, 0));
    }
}
