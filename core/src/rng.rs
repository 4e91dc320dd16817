//! The pool's only source of randomness: a seeded generator whose state is
//! part of the snapshot, so a restored pool draws exactly what the original
//! would have. All float math goes through `libm` to match across targets,
//! but for the square root, which IEEE 754 defines exactly (see [`sqrt`]).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rng(Xoshiro256PlusPlus);

/// xoshiro256++, seeded by SplitMix64: the same stream and the same serialized
/// form (`{"s": [..4]}`) as `rand_xoshiro::Xoshiro256PlusPlus`, written out
/// here because that crate's serde support turns on serde's `std` feature,
/// which would pull std (and WASI imports) into the no_std component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Xoshiro256PlusPlus {
    s: [u64; 4],
}

impl Xoshiro256PlusPlus {
    fn seed_from_u64(seed: u64) -> Self {
        let mut x = seed;
        let mut splitmix = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Xoshiro256PlusPlus { s: [splitmix(), splitmix(), splitmix(), splitmix()] }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

/// The correctly rounded square root, the same bits on every target.
/// `libm::sqrt` is the machine's instruction natively but a software
/// routine on wasm32 (its wasm path needs nightly intrinsics), and Thompson
/// sampling takes about 32 square roots per acquire; the component is built
/// with `simd128`, whose `f64x2.sqrt` is the IEEE operation on each lane.
#[inline]
fn sqrt(x: f64) -> f64 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::{f64x2_extract_lane, f64x2_splat, f64x2_sqrt};
        f64x2_extract_lane::<0>(f64x2_sqrt(f64x2_splat(x)))
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        libm::sqrt(x)
    }
}

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// Uniform in `0..n` (`n > 0`), by widening multiply (no modulo bias to speak of).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.0.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        sqrt(-2.0 * libm::log(u1)) * libm::cos(core::f64::consts::TAU * u2)
    }

    /// Gamma(shape, 1) for shape ≥ 1 (Marsaglia–Tsang).
    fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / sqrt(9.0 * d);
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.unit();
            if u < 1.0 - 0.0331 * x * x * x * x || libm::log(u) < 0.5 * x * x + d * (1.0 - v + libm::log(v)) {
                return d * v;
            }
        }
    }

    /// Beta(alpha, beta) for alpha, beta ≥ 1.
    pub fn beta(&mut self, alpha: f64, beta: f64) -> f64 {
        let x = self.gamma(alpha);
        let y = self.gamma(beta);
        x / (x + y)
    }
}

#[cfg(test)]
mod tests {
    use rand_core::{RngCore, SeedableRng};

    use super::*;

    /// The hand-written generator must draw and serialize exactly like the
    /// crate it replaces, so existing snapshots keep their meaning.
    #[test]
    fn matches_rand_xoshiro() {
        for seed in [0, 1, 42, u64::MAX] {
            let mut ours = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut theirs = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            assert_eq!(postcard::to_allocvec(&ours).unwrap(), postcard::to_allocvec(&theirs).unwrap());
            assert_eq!(serde_json::to_string(&ours).unwrap(), serde_json::to_string(&theirs).unwrap());
            for _ in 0..1000 {
                assert_eq!(ours.next_u64(), theirs.next_u64());
            }
        }
    }
}
