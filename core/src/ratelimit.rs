//! Token bucket on acquire. Time that runs backwards mints nothing: the bucket
//! remembers the latest instant it has seen and only refills past it.

use crate::policy::RateLimit;
use crate::time::SECOND;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bucket {
    pub tokens: f64,
    pub last: u64,
}

impl Bucket {
    pub fn full(limit: &RateLimit, now: u64) -> Self {
        Bucket { tokens: limit.burst as f64, last: now }
    }

    fn refill(&mut self, limit: &RateLimit, now: u64) {
        if now > self.last {
            let dt = (now - self.last) as f64 / SECOND as f64;
            self.tokens = (self.tokens + dt * limit.rate).min(limit.burst as f64);
            self.last = now;
        }
    }

    /// `Err(retry_after_ns)` when no whole token is available; does not take one.
    pub fn check(&mut self, limit: &RateLimit, now: u64) -> Result<(), u64> {
        self.refill(limit, now);
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            let wait = (1.0 - self.tokens) / limit.rate * SECOND as f64;
            Err(libm::ceil(wait) as u64)
        }
    }

    pub fn take(&mut self) {
        self.tokens -= 1.0;
    }
}
