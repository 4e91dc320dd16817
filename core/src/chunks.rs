//! A vector for a big tenant's per-resource and per-cell state: elements
//! in chunks of `N` that never move once full. A `Vec` of them costs up to
//! twice their bytes after a doubling, and each growth copies them and
//! leaves the old buffer behind in a wasm memory that never shrinks; here
//! the unused room is at most one chunk and a growth past the first chunk
//! copies nothing. The first chunk grows as a `Vec` does, up to `N`, so a
//! small tenant (a shard holds many) pays for what it holds, not a chunk.

use alloc::vec::Vec;
use core::mem::size_of;

/// Elements `0..len`, `N` a chunk.
#[derive(Debug)]
pub(crate) struct Chunks<T, const N: usize> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T, const N: usize> Default for Chunks<T, N> {
    fn default() -> Self {
        Chunks { chunks: Vec::new(), len: 0 }
    }
}

impl<T, const N: usize> Chunks<T, N> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, at: usize) -> Option<&T> {
        self.chunks.get(at / N)?.get(at % N)
    }

    pub fn push(&mut self, value: T) {
        match self.chunks.get_mut(self.len / N) {
            Some(chunk) => chunk.push(value),
            None => {
                let mut chunk = if self.chunks.is_empty() { Vec::new() } else { Vec::with_capacity(N) };
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<T> {
        self.len = self.len.checked_sub(1)?;
        let value = self.chunks[self.len / N].pop();
        // One empty chunk is kept, so pushes and pops at a chunk's edge do
        // not free and allocate it in turn.
        if self.chunks.len() > self.len / N + 2 {
            self.chunks.pop();
        }
        value
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    #[cfg(test)]
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.chunks.iter_mut().flatten()
    }

    /// Bytes of the chunks and the list of them (the elements' own heap is the caller's to add).
    pub fn heap_bytes(&self) -> usize {
        crate::footprint::vec::<Vec<T>>(self.chunks.capacity())
            + self.chunks.iter().map(|c| c.capacity() * size_of::<T>()).sum::<usize>()
    }
}

impl<T, const N: usize> core::ops::Index<usize> for Chunks<T, N> {
    type Output = T;

    fn index(&self, at: usize) -> &T {
        &self.chunks[at / N][at % N]
    }
}

impl<T, const N: usize> core::ops::IndexMut<usize> for Chunks<T, N> {
    fn index_mut(&mut self, at: usize) -> &mut T {
        &mut self.chunks[at / N][at % N]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        /// Pushes and pops leave what a `Vec` would hold, and at most
        /// one chunk's room unused beyond the last element's chunk.
        #[test]
        fn holds_what_a_vec_holds(ops in proptest::collection::vec(any::<Option<u16>>(), 0..2000)) {
            let mut chunks: Chunks<u16, 8> = Chunks::default();
            let mut model = Vec::new();
            for op in ops {
                match op {
                    Some(v) => {
                        chunks.push(v);
                        model.push(v);
                    }
                    None => prop_assert_eq!(chunks.pop(), model.pop()),
                }
                prop_assert_eq!(chunks.len(), model.len());
                prop_assert!(chunks.chunks.len() <= model.len() / 8 + 2);
            }
            prop_assert!(chunks.iter().eq(model.iter()));
            for (at, v) in model.iter().enumerate() {
                prop_assert_eq!(chunks.get(at), Some(v));
                prop_assert_eq!(chunks[at], *v);
            }
            prop_assert_eq!(chunks.get(model.len()), None);
        }
    }

    #[test]
    fn a_few_elements_take_a_few_elements_room_and_full_chunks_hold_n() {
        let mut chunks: Chunks<u64, 512> = Chunks::default();
        for v in 0..3 {
            chunks.push(v);
        }
        assert!(chunks.heap_bytes() <= 4 * 8 + size_of::<Vec<u64>>() * 4, "{} bytes", chunks.heap_bytes());
        for v in 3..1100 {
            chunks.push(v);
        }
        let capacities: Vec<usize> = chunks.chunks.iter().map(Vec::capacity).collect();
        assert_eq!(capacities, [512, 512, 512]);
        assert!(chunks.iter().copied().eq(0..1100));
    }
}
