//! Sum trees of (weight, count) pairs: the structure that keeps weighted
//! selection logarithmic in pool size.
//!
//! Sixteen children per node, each level one contiguous array, so a path from
//! leaf to root is five nodes at a million leaves and a descent reads a few
//! cache lines per level; at large pools cache misses, not arithmetic, are the
//! cost. Integer weights keep sums exact, so repeated add/remove never drifts
//! and native and wasm agree bit for bit.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use hashbrown::HashMap;

/// A node's (weight sum, element count).
pub(crate) type Node = (i64, i64);

const B: usize = 16;
const ZERO: Node = (0, 0);

fn plus(a: Node, b: Node) -> Node {
    (a.0 + b.0, a.1 + b.1)
}

/// Level 0 holds the elements; each level above holds the sums of blocks of
/// sixteen below; the last level is the single root.
#[derive(Debug, Clone)]
pub(crate) struct SumTree {
    levels: Vec<Vec<Node>>,
}

impl SumTree {
    pub fn heap_bytes(&self) -> usize {
        levels_bytes(&self.levels)
    }

    pub fn new() -> Self {
        SumTree { levels: vec![vec![ZERO; B], vec![ZERO]] }
    }

    /// Level lengths, which every delta over this tree mirrors.
    pub fn shape(&self) -> Vec<usize> {
        self.levels.iter().map(Vec::len).collect()
    }

    /// Grows (at least doubling) until element `index` fits; returns whether it grew.
    pub fn ensure(&mut self, index: usize) -> bool {
        if index < self.levels[0].len() {
            return false;
        }
        let len = (index + 1).max(2 * self.levels[0].len()).div_ceil(B) * B;
        grow_levels(&mut self.levels, len);
        true
    }

    pub fn add(&mut self, mut index: usize, dw: i64, dc: i64) {
        for level in &mut self.levels {
            let n = &mut level[index];
            n.0 += dw;
            n.1 += dc;
            index /= B;
        }
    }

    pub fn total(&self) -> Node {
        self.levels[self.levels.len() - 1][0]
    }
}

/// Resizes level 0 to `len` and the levels above to match, adding roots as
/// needed. Existing sums all live in block 0 of every level, so a new root is
/// the old root.
fn levels_bytes(levels: &[Vec<Node>]) -> usize {
    use crate::footprint::vec as bytes;
    bytes::<Vec<Node>>(levels.len()) + levels.iter().map(|l| bytes::<Node>(l.capacity())).sum::<usize>()
}

fn grow_levels(levels: &mut Vec<Vec<Node>>, len: usize) {
    levels[0].resize(len, ZERO);
    let mut l = 1;
    loop {
        let need = levels[l - 1].len().div_ceil(B);
        if l == levels.len() {
            let mut top = vec![ZERO; need];
            top[0] = levels[l - 1][0];
            levels.push(top);
        } else {
            levels[l].resize(need, ZERO);
        }
        if need == 1 {
            break;
        }
        l += 1;
    }
}

/// Per-context corrections to the global tree, on the same shape so that
/// global + delta can be descended together. Sparse (blocks of sixteen in a
/// map) while few resources have a cell in the context, dense once many do.
#[derive(Debug, Clone)]
pub(crate) enum Delta {
    Sparse { depth: usize, blocks: HashMap<(u8, u32), Box<[Node; B]>> },
    Dense(Vec<Vec<Node>>),
}

impl Delta {
    pub fn heap_bytes(&self) -> usize {
        match self {
            Delta::Sparse { blocks, .. } => {
                crate::footprint::table::<((u8, u32), Box<[Node; B]>)>(blocks.capacity())
                    + blocks.len() * core::mem::size_of::<[Node; B]>()
            }
            Delta::Dense(levels) => levels_bytes(levels),
        }
    }

    pub fn new(shape: &[usize]) -> Self {
        Delta::Sparse { depth: shape.len(), blocks: HashMap::new() }
    }

    fn node(&self, level: usize, index: usize) -> Node {
        match self {
            Delta::Sparse { blocks, .. } => {
                blocks.get(&(level as u8, (index / B) as u32)).map_or(ZERO, |b| b[index % B])
            }
            Delta::Dense(levels) => levels[level][index],
        }
    }

    pub fn total(&self) -> Node {
        match self {
            Delta::Sparse { depth, .. } => self.node(depth - 1, 0),
            Delta::Dense(levels) => levels[levels.len() - 1][0],
        }
    }

    pub fn add(&mut self, shape: &[usize], mut index: usize, dw: i64, dc: i64) {
        if let Delta::Sparse { blocks, .. } = self {
            if blocks.len() * B * 2 > shape.iter().sum::<usize>() {
                let mut levels: Vec<Vec<Node>> = shape.iter().map(|&n| vec![ZERO; n]).collect();
                for (&(l, b), block) in blocks.iter() {
                    let start = b as usize * B;
                    let end = (start + B).min(shape[l as usize]);
                    levels[l as usize][start..end].copy_from_slice(&block[..end - start]);
                }
                *self = Delta::Dense(levels);
            }
        }
        for level in 0..shape.len() {
            match self {
                Delta::Sparse { blocks, .. } => {
                    let key = (level as u8, (index / B) as u32);
                    let block = blocks.entry(key).or_insert_with(|| Box::new([ZERO; B]));
                    let n = &mut block[index % B];
                    n.0 += dw;
                    n.1 += dc;
                    if block.iter().all(|n| *n == ZERO) {
                        blocks.remove(&key);
                    }
                }
                Delta::Dense(levels) => {
                    let n = &mut levels[level][index];
                    n.0 += dw;
                    n.1 += dc;
                }
            }
            index /= B;
        }
    }

    /// Follows a growth of the global tree to `shape`.
    pub fn grow(&mut self, shape: &[usize]) {
        let root = self.total();
        match self {
            Delta::Dense(levels) => grow_levels(levels, shape[0]),
            Delta::Sparse { depth, blocks } => {
                if root != ZERO {
                    for l in *depth..shape.len() {
                        blocks.entry((l as u8, 0)).or_insert_with(|| Box::new([ZERO; B]))[0] = root;
                    }
                }
                *depth = shape.len();
            }
        }
    }
}

/// Finds the element where the running sum of `w + k·c` first exceeds `target`
/// (`target` < the total) over `base` plus optional `delta`. Every element's
/// combined value is ≥ 0: either absent (0, 0) or at least the exploration floor.
pub(crate) fn descend(base: &SumTree, delta: Option<&Delta>, k: i64, mut target: i64) -> usize {
    let mut j = 0usize;
    for l in (0..base.levels.len() - 1).rev() {
        let level = &base.levels[l];
        let start = j * B;
        let end = (start + B).min(level.len());
        let dense;
        let block: Option<&[Node]> = match delta {
            None => None,
            Some(Delta::Dense(levels)) => {
                dense = &levels[l][start..end];
                Some(dense)
            }
            Some(Delta::Sparse { blocks, .. }) => blocks.get(&(l as u8, j as u32)).map(|b| &b[..end - start]),
        };
        let mut next = end - 1;
        for c in start..end {
            let n = match block {
                Some(d) => plus(level[c], d[c - start]),
                None => level[c],
            };
            let v = n.0 + k * n.1;
            if v > target {
                next = c;
                break;
            }
            target -= v;
        }
        j = next;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(t: &SumTree, d: &Delta, i: usize) -> Node {
        plus(t.levels[0][i], d.node(0, i))
    }

    #[test]
    fn growth_keeps_sums_for_sparse_and_dense_deltas() {
        let mut t = SumTree::new();
        let mut d = Delta::new(&t.shape());
        for i in 0..5000usize {
            if t.ensure(i) {
                d.grow(&t.shape());
            }
            t.add(i, 10, 1);
            d.add(&t.shape(), i, -((i % 3) as i64), 0);
        }
        let expected: i64 = (0..5000).map(|i| 10 - (i % 3) as i64).sum();
        assert_eq!(plus(t.total(), d.total()), (expected, 5000));
        assert!(matches!(d, Delta::Dense(_)));
        assert_eq!(element(&t, &d, 4), (9, 1));
    }

    #[test]
    fn sparse_delta_survives_root_growth() {
        let mut t = SumTree::new();
        let mut d = Delta::new(&t.shape());
        t.add(3, 5, 1);
        d.add(&t.shape(), 3, -2, 0);
        t.ensure(100_000);
        d.grow(&t.shape());
        assert_eq!(t.shape().len(), 6);
        assert_eq!(plus(t.total(), d.total()), (3, 1));
        assert_eq!(descend(&t, Some(&d), 0, 2), 3);
    }

    #[test]
    fn descend_picks_by_cumulative_weight() {
        let mut t = SumTree::new();
        t.ensure(40);
        for (i, w) in [(0, 5), (2, 3), (35, 2)] {
            t.add(i, w, 1);
        }
        assert_eq!(descend(&t, None, 0, 0), 0);
        assert_eq!(descend(&t, None, 0, 4), 0);
        assert_eq!(descend(&t, None, 0, 5), 2);
        assert_eq!(descend(&t, None, 0, 7), 2);
        assert_eq!(descend(&t, None, 0, 8), 35);
        // k adds a constant per present element: weights 6, 4, 3.
        assert_eq!(descend(&t, None, 1, 9), 2);
        assert_eq!(descend(&t, None, 1, 10), 35);
    }
}
