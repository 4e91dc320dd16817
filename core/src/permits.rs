//! The permits of one resource: which lease holds each, and the last token
//! minted for each.
//!
//! Nearly every resource has one permit and has only ever had one. That case
//! lives inline in the resource, so a grant or a release touches no second
//! and third allocation (a cache miss each in a large pool); other shapes
//! spill to the heap. Fence counters never shrink, so a resource that once
//! had more permits keeps the spilled form.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::num::NonZeroU64;

/// A permit's holder: a lease id (ids start at 1) or a mark of the same kind.
type Holder = Option<NonZeroU64>;

#[derive(Debug, Clone)]
pub(crate) struct Permits(Repr);

#[derive(Debug, Clone)]
enum Repr {
    One { holder: Holder, fence: u64 },
    Many(Box<Spilled>),
}

#[derive(Debug, Clone)]
struct Spilled {
    holders: Vec<Holder>,
    /// At least one counter per permit.
    fences: Vec<u64>,
}

impl Permits {
    pub fn heap_bytes(&self) -> usize {
        use crate::footprint::vec;
        match &self.0 {
            Repr::One { .. } => 0,
            Repr::Many(s) => {
                core::mem::size_of::<Spilled>() + vec::<Holder>(s.holders.capacity()) + vec::<u64>(s.fences.capacity())
            }
        }
    }

    /// `count` free permits continuing the token sequences in `fences`
    /// (missing counters start at 0).
    pub fn new(count: u32, mut fences: Vec<u64>) -> Self {
        if count == 1 && fences.len() <= 1 {
            return Permits(Repr::One { holder: None, fence: fences.first().copied().unwrap_or(0) });
        }
        if fences.len() < count as usize {
            fences.resize(count as usize, 0);
        }
        Permits(Repr::Many(Box::new(Spilled { holders: vec![None; count as usize], fences })))
    }

    fn holders(&self) -> &[Holder] {
        match &self.0 {
            Repr::One { holder, .. } => core::slice::from_ref(holder),
            Repr::Many(s) => &s.holders,
        }
    }

    fn holders_mut(&mut self) -> &mut [Holder] {
        match &mut self.0 {
            Repr::One { holder, .. } => core::slice::from_mut(holder),
            Repr::Many(s) => &mut s.holders,
        }
    }

    pub fn count(&self) -> usize {
        self.holders().len()
    }

    pub fn holder(&self, permit: usize) -> Option<u64> {
        self.holders()[permit].map(NonZeroU64::get)
    }

    /// Marks `permit` held by `lease`, which is never 0 (lease ids and marks start at 1).
    pub fn hold(&mut self, permit: usize, lease: u64) {
        self.holders_mut()[permit] = NonZeroU64::new(lease);
    }

    pub fn free(&mut self, permit: usize) {
        self.holders_mut()[permit] = None;
    }

    pub fn first_free(&self) -> Option<usize> {
        self.holders().iter().position(Option::is_none)
    }

    /// The permits no one holds, in permit order.
    pub fn free_permits(&self) -> impl Iterator<Item = usize> + '_ {
        self.holders().iter().enumerate().filter(|(_, h)| h.is_none()).map(|(i, _)| i)
    }

    pub fn any_free(&self) -> bool {
        self.holders().iter().any(Option::is_none)
    }

    /// The holders of permits `from` and above, in permit order.
    pub fn held_from(&self, from: usize) -> impl Iterator<Item = u64> + '_ {
        self.holders().get(from..).unwrap_or_default().iter().flatten().map(|h| h.get())
    }

    pub fn fences(&self) -> &[u64] {
        match &self.0 {
            Repr::One { fence, .. } => core::slice::from_ref(fence),
            Repr::Many(s) => &s.fences,
        }
    }

    pub fn set_fence(&mut self, permit: usize, token: u64) {
        match &mut self.0 {
            Repr::One { fence, .. } => core::slice::from_mut(fence)[permit] = token,
            Repr::Many(s) => s.fences[permit] = token,
        }
    }

    pub fn into_fences(self) -> Vec<u64> {
        match self.0 {
            Repr::One { fence, .. } => vec![fence],
            Repr::Many(s) => s.fences,
        }
    }

    /// Changes the number of permits; new ones are free, and removed ones
    /// keep their counters for when they come back.
    pub fn resize(&mut self, count: u32) {
        let count = count as usize;
        if matches!(self.0, Repr::One { .. }) && count == 1 {
            return;
        }
        self.spill();
        if let Repr::Many(s) = &mut self.0 {
            s.holders.resize(count, None);
            if s.fences.len() < count {
                s.fences.resize(count, 0);
            }
        }
    }

    fn spill(&mut self) {
        if let Repr::One { holder, fence } = self.0 {
            self.0 = Repr::Many(Box::new(Spilled { holders: vec![holder], fences: vec![fence] }));
        }
    }

    /// Raises each counter to at least the matching one of `fences`, adding
    /// counters `fences` has beyond these.
    pub fn raise(&mut self, fences: &[u64]) {
        match (&mut self.0, fences) {
            (_, []) => {}
            (Repr::One { fence, .. }, [f]) => *fence = (*fence).max(*f),
            _ => {
                self.spill();
                if let Repr::Many(s) = &mut self.0 {
                    raise(&mut s.fences, fences);
                }
            }
        }
    }
}

/// Raises each counter of `target` to at least the matching one of `from`,
/// growing `target` to `from`'s length.
pub(crate) fn raise(target: &mut Vec<u64>, from: &[u64]) {
    if target.len() < from.len() {
        target.resize(from.len(), 0);
    }
    for (t, f) in target.iter_mut().zip(from) {
        *t = (*t).max(*f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_permit_stays_inline_and_spills_when_grown() {
        let mut p = Permits::new(1, vec![7]);
        assert!(matches!(p.0, Repr::One { .. }));
        assert_eq!((p.count(), p.first_free(), p.fences()), (1, Some(0), &[7][..]));
        p.hold(0, 3);
        p.set_fence(0, 8);
        assert_eq!((p.holder(0), p.any_free(), p.fences()), (Some(3), false, &[8][..]));
        p.resize(3);
        assert!(matches!(p.0, Repr::Many(_)));
        assert_eq!((p.count(), p.holder(0), p.first_free(), p.fences()), (3, Some(3), Some(1), &[8, 0, 0][..]));
        p.hold(2, 5);
        assert_eq!(p.held_from(1).collect::<Vec<_>>(), [5]);
        p.free(2);
        p.resize(1);
        assert_eq!((p.count(), p.fences()), (1, &[8, 0, 0][..]), "counters of removed permits are kept");
        assert_eq!(p.into_fences(), [8, 0, 0]);
    }

    #[test]
    fn new_keeps_longer_fence_histories_and_pads_shorter_ones() {
        let p = Permits::new(1, vec![4, 9]);
        assert_eq!((p.count(), p.fences()), (1, &[4, 9][..]));
        let p = Permits::new(3, vec![2]);
        assert_eq!((p.count(), p.fences(), p.first_free()), (3, &[2, 0, 0][..], Some(0)));
        assert_eq!(Permits::new(1, Vec::new()).fences(), [0]);
    }

    #[test]
    fn raise_takes_the_larger_counter_and_keeps_holders() {
        let mut p = Permits::new(1, vec![5]);
        p.hold(0, 2);
        p.raise(&[3]);
        assert_eq!(p.fences(), [5]);
        p.raise(&[6]);
        assert_eq!(p.fences(), [6]);
        p.raise(&[1, 4]);
        assert_eq!((p.count(), p.holder(0), p.fences()), (1, Some(2), &[6, 4][..]));
        let mut v = vec![1, 9];
        raise(&mut v, &[3, 2, 7]);
        assert_eq!(v, [3, 9, 7]);
    }
}
