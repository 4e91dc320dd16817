//! Fenwick trees of (weight, count) pairs: the structure that keeps weighted
//! selection logarithmic in pool size. Integer weights keep sums exact, so
//! repeated add/remove never drifts and native and wasm agree bit for bit.

use alloc::vec;
use alloc::vec::Vec;
use hashbrown::HashMap;

/// A node's (weight sum, element count).
pub(crate) type Node = (i64, i64);

/// Capacity is a power of two so growth only has to copy the root.
#[derive(Debug, Clone)]
pub(crate) struct Fenwick {
    nodes: Vec<Node>,
}

impl Fenwick {
    pub fn new() -> Self {
        Fenwick { nodes: vec![(0, 0); 2] }
    }

    pub fn capacity(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Doubles until `index` (0-based) fits; returns whether it grew.
    pub fn ensure(&mut self, index: usize) -> bool {
        let mut grew = false;
        while index >= self.capacity() {
            let cap = self.capacity();
            let root = self.nodes[cap];
            self.nodes.resize(2 * cap + 1, (0, 0));
            self.nodes[2 * cap] = root;
            grew = true;
        }
        grew
    }

    pub fn add(&mut self, index: usize, dw: i64, dc: i64) {
        let mut i = index + 1;
        while i < self.nodes.len() {
            self.nodes[i].0 += dw;
            self.nodes[i].1 += dc;
            i += i & i.wrapping_neg();
        }
    }

    pub fn node(&self, i: usize) -> Node {
        self.nodes[i]
    }

    pub fn total(&self) -> Node {
        self.nodes[self.capacity()]
    }
}

/// Per-context corrections to the global tree, laid out on the same indices so
/// that global + delta can be descended together. Sparse while few resources
/// have a cell in the context, dense once many do.
#[derive(Debug, Clone)]
pub(crate) enum Delta {
    Sparse(HashMap<u32, Node>),
    Dense(Vec<Node>),
}

impl Delta {
    pub fn new() -> Self {
        Delta::Sparse(HashMap::new())
    }

    pub fn node(&self, i: usize) -> Node {
        match self {
            Delta::Sparse(m) => m.get(&(i as u32)).copied().unwrap_or((0, 0)),
            Delta::Dense(v) => v[i],
        }
    }

    pub fn add(&mut self, capacity: usize, index: usize, dw: i64, dc: i64) {
        if let Delta::Sparse(m) = self {
            if m.len() * 4 > capacity {
                let mut dense = vec![(0, 0); capacity + 1];
                for (&i, &n) in m.iter() {
                    dense[i as usize] = n;
                }
                *self = Delta::Dense(dense);
            }
        }
        let mut i = index + 1;
        while i <= capacity {
            match self {
                Delta::Sparse(m) => {
                    let n = m.entry(i as u32).or_insert((0, 0));
                    n.0 += dw;
                    n.1 += dc;
                    if *n == (0, 0) {
                        m.remove(&(i as u32));
                    }
                }
                Delta::Dense(v) => {
                    v[i].0 += dw;
                    v[i].1 += dc;
                }
            }
            i += i & i.wrapping_neg();
        }
    }

    /// Follows a growth of the global tree from `old` to `new` capacity.
    pub fn grow(&mut self, old: usize, new: usize) {
        let mut cap = old;
        while cap < new {
            let root = self.node(cap);
            match self {
                Delta::Sparse(m) => {
                    if root != (0, 0) {
                        m.insert((2 * cap) as u32, root);
                    }
                }
                Delta::Dense(v) => {
                    v.resize(2 * cap + 1, (0, 0));
                    v[2 * cap] = root;
                }
            }
            cap *= 2;
        }
    }
}

/// Finds the element where the running sum of `w + k·c` first exceeds `target`
/// over the sum of `base` and optional `delta`. Every element's combined value
/// must be ≥ 0, which holds because each is either absent (0, 0) or has a
/// weight of at least the exploration floor.
pub(crate) fn descend(base: &Fenwick, delta: Option<&Delta>, k: i64, mut target: i64) -> usize {
    let cap = base.capacity();
    let mut pos = 0usize;
    let mut step = cap;
    while step > 0 {
        let next = pos + step;
        if next <= cap {
            let (mut w, mut c) = base.node(next);
            if let Some(d) = delta {
                let (dw, dc) = d.node(next);
                w += dw;
                c += dc;
            }
            let v = w + k * c;
            if v <= target {
                target -= v;
                pos = next;
            }
        }
        step >>= 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combined_prefix(f: &Fenwick, d: &Delta, i: usize) -> Node {
        let mut i = i;
        let (mut w, mut c) = (0, 0);
        while i > 0 {
            let a = f.node(i);
            let b = d.node(i);
            w += a.0 + b.0;
            c += a.1 + b.1;
            i -= i & i.wrapping_neg();
        }
        (w, c)
    }

    #[test]
    fn growth_keeps_sums_for_sparse_and_dense_deltas() {
        let mut f = Fenwick::new();
        let mut d = Delta::new();
        for i in 0..40usize {
            let old = f.capacity();
            f.ensure(i);
            d.grow(old, f.capacity());
            f.add(i, 10, 1);
            d.add(f.capacity(), i, -(i as i64 % 3), 0);
        }
        let expected: i64 = (0..40).map(|i| 10 - (i % 3)).sum();
        assert_eq!(combined_prefix(&f, &d, f.capacity()), (expected, 40));
        assert!(matches!(d, Delta::Dense(_)));
        assert_eq!(f.total(), (400, 40));
    }

    #[test]
    fn descend_picks_by_cumulative_weight() {
        let mut f = Fenwick::new();
        f.ensure(7);
        for (i, w) in [(0, 5), (2, 3), (5, 2)] {
            f.add(i, w, 1);
        }
        assert_eq!(descend(&f, None, 0, 0), 0);
        assert_eq!(descend(&f, None, 0, 4), 0);
        assert_eq!(descend(&f, None, 0, 5), 2);
        assert_eq!(descend(&f, None, 0, 7), 2);
        assert_eq!(descend(&f, None, 0, 8), 5);
        // k adds a constant per present element: weights 6, 4, 3.
        assert_eq!(descend(&f, None, 1, 9), 2);
        assert_eq!(descend(&f, None, 1, 10), 5);
    }
}
