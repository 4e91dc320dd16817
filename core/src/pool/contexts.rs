//! The interned contexts: each context name the pool has seen gets a small
//! number, which the cells, the index and the timers use instead of the name.

use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::Hash;
use hashbrown::HashMap;

use crate::id::Context;
use crate::lease::LeaseEntry;

use super::Pool;

/// Context names by number and numbers by name. Numbers are dense and never
/// reused, so the index can keep one entry per context in a vector.
#[derive(Debug, Default)]
pub(crate) struct Contexts {
    names: Vec<Context>,
    ids: HashMap<Context, u32>,
}

impl Contexts {
    /// The number of `context`, given one if it is new.
    pub fn intern(&mut self, context: &Context) -> u32 {
        if let Some(&c) = self.ids.get(context) {
            return c;
        }
        let c = self.names.len() as u32;
        self.names.push(context.clone());
        self.ids.insert(context.clone(), c);
        c
    }

    /// The number of a context seen before, looked up by the context or by its name.
    #[inline]
    pub fn id<Q>(&self, name: &Q) -> Option<u32>
    where
        Context: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ids.get(name).copied()
    }

    #[inline]
    pub fn name(&self, c: u32) -> &Context {
        &self.names[c as usize]
    }

    /// Contexts interned.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Heap bytes of the interner (see `Pool::footprint`).
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::{table, vec};
        let names: usize = self.names.iter().map(Context::heap_bytes).sum();
        vec::<Context>(self.names.capacity()) + names + table::<(Context, u32)>(self.ids.capacity())
    }
}

impl Pool {
    /// The context of this name if the pool has seen it, shared rather than built anew.
    pub fn known_context(&self, name: &str) -> Option<Context> {
        self.contexts.id(name).map(|c| self.contexts.name(c).clone())
    }
}

impl LeaseEntry {
    /// The interned number of the lease's context: the one it was granted
    /// with, else (the context was new then) the one it may have now.
    pub fn ctx(&self, contexts: &Contexts) -> Option<u32> {
        self.ctx.or_else(|| contexts.id(&self.lease.context))
    }
}
