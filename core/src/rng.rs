//! The pool's only source of randomness: a seeded generator whose state is
//! part of the snapshot, so a restored pool draws exactly what the original
//! would have. All float math goes through `libm` to match across targets.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rng(Xoshiro256PlusPlus);

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
        libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(core::f64::consts::TAU * u2)
    }

    /// Gamma(shape, 1) for shape ≥ 1 (Marsaglia–Tsang).
    fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / libm::sqrt(9.0 * d);
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.unit();
            if u < 1.0 - 0.0331 * x * x * x * x
                || libm::log(u) < 0.5 * x * x + d * (1.0 - v + libm::log(v))
            {
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
