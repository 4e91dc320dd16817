//! Counts per score bucket for the candidate index, with a bitmap of the
//! non-empty buckets: the lowest eligible score is asked on every classic
//! acquire, and a pool's scores sit mostly mid-range, so finding it by
//! walking the counters from the bottom read a hundred of them each time.

use alloc::vec;
use alloc::vec::Vec;

/// Score buckets: scores are integers in [-100, 100].
const BUCKETS: usize = 201;
const WORDS: usize = BUCKETS.div_ceil(64);

#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    counts: Vec<u32>,
    /// Bit `b` is set while `counts[b] > 0`.
    occupied: [u64; WORDS],
}

impl Histogram {
    pub fn heap_bytes(&self) -> usize {
        crate::footprint::vec::<u32>(self.counts.capacity())
    }

    pub fn new() -> Self {
        Histogram { counts: vec![0; BUCKETS], occupied: [0; WORDS] }
    }

    pub fn count(&self, bucket: usize) -> u32 {
        self.counts[bucket]
    }

    /// Moves one member from bucket `old` to bucket `new` (either may be none).
    pub fn recount(&mut self, old: Option<u8>, new: Option<u8>) {
        if old == new {
            return;
        }
        if let Some(b) = old.map(usize::from) {
            self.counts[b] -= 1;
            if self.counts[b] == 0 {
                self.occupied[b / 64] &= !(1 << (b % 64));
            }
        }
        if let Some(b) = new.map(usize::from) {
            self.counts[b] += 1;
            self.occupied[b / 64] |= 1 << (b % 64);
        }
    }

    /// The lowest non-empty bucket `keep` accepts. A plain loop the caller
    /// inlines: as `occupied().find(..)` it compiled to an iterator fold
    /// that, depending on how the crate's code is split for compilation,
    /// was not inlined into the selection path and cost twice as much.
    #[inline]
    pub fn first_occupied(&self, mut keep: impl FnMut(usize) -> bool) -> Option<usize> {
        for (w, &word) in self.occupied.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let b = w * 64 + bits.trailing_zeros() as usize;
                if keep(b) {
                    return Some(b);
                }
                bits &= bits - 1;
            }
        }
        None
    }

    /// The non-empty buckets, lowest first.
    pub fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        (0..WORDS).flat_map(move |w| {
            let mut bits = self.occupied[w];
            core::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    w * 64 + i
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupied_buckets_follow_the_counts() {
        let mut h = Histogram::new();
        assert_eq!(h.occupied().next(), None);
        h.recount(None, Some(200));
        h.recount(None, Some(100));
        h.recount(None, Some(100));
        h.recount(None, Some(63));
        h.recount(None, Some(64));
        assert_eq!(h.occupied().collect::<Vec<_>>(), [63, 64, 100, 200]);
        h.recount(Some(63), Some(0));
        h.recount(Some(100), None);
        assert_eq!((h.count(100), h.count(63), h.count(0)), (1, 0, 1));
        assert_eq!(h.occupied().collect::<Vec<_>>(), [0, 64, 100, 200]);
        h.recount(Some(100), Some(100));
        h.recount(Some(100), None);
        assert_eq!(h.occupied().collect::<Vec<_>>(), [0, 64, 200]);
    }
}
