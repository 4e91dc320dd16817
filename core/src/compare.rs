//! Byte-string comparison eight bytes at a time: the component's `memcmp`
//! and `bcmp` (`component::abi`). Compiled code calls them for every string
//! comparison (a context's name looked up in a hash map, ids); wasi-libc's
//! compare one byte per iteration, which in the guest made `memcmp` 19× its
//! native cost and 6% of an acquire+release (callgrind, host/BENCH.md).

use core::cmp::Ordering;

/// `a` against `b` (of the same length) as `memcmp` orders them: by the
/// first byte that differs, as unsigned.
pub(crate) fn compare(a: &[u8], b: &[u8]) -> Ordering {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let word = |s: &[u8], i: usize| u64::from_be_bytes(s[i..i + 8].try_into().expect("eight bytes"));
    if n < 8 {
        return a[..n].iter().zip(&b[..n]).map(|(x, y)| x.cmp(y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal);
    }
    // Big-endian words order as their bytes do; the last word may overlap
    // the one before, whose bytes were equal.
    let mut i = 0;
    loop {
        let at = i.min(n - 8);
        match word(a, at).cmp(&word(b, at)) {
            Ordering::Equal if at + 8 < n => i += 8,
            order => return order,
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any two equal-length strings order as slices do, whatever the
        /// length and wherever (if anywhere) they first differ.
        #[test]
        fn orders_as_slices_do(
            common in proptest::collection::vec(any::<u8>(), 0..40),
            tail in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..20),
        ) {
            let a: Vec<u8> = common.iter().copied().chain(tail.iter().map(|t| t.0)).collect();
            let b: Vec<u8> = common.iter().copied().chain(tail.iter().map(|t| t.1)).collect();
            prop_assert_eq!(compare(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare(&b, &a), b.cmp(&a));
            prop_assert_eq!(compare(&a, &a), Ordering::Equal);
        }
    }

    #[test]
    fn the_first_difference_decides_at_every_length() {
        for n in 1..=24 {
            for at in 0..n {
                let a = alloc::vec![7u8; n];
                let mut b = a.clone();
                b[at] = 200;
                assert_eq!(compare(&a, &b), Ordering::Less, "n {n}, differing at {at}");
                assert_eq!(compare(&b, &a), Ordering::Greater, "n {n}, differing at {at}");
            }
        }
    }
}
