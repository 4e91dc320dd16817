//! `ManualClock` for JavaScript: time that moves only when a test says so,
//! so cooldowns, rate limits and lease expiry run without sleeping.

use napi_derive::napi;
use repute_host::{Clock, ManualClock};

use crate::errors::OrThrow;
use crate::units::{ms_to_ns, ns_to_ms};

#[napi]
pub struct NativeClock {
    /// Clones share one reading: the pool holds one, the test the other.
    pub(crate) clock: ManualClock,
}

#[napi]
impl NativeClock {
    #[napi(constructor)]
    pub fn new(start_ms: Option<f64>) -> napi::Result<Self> {
        let start = ms_to_ns("startMs", start_ms.unwrap_or(0.0)).or_throw()?;
        Ok(NativeClock { clock: ManualClock::new(start) })
    }

    #[napi]
    pub fn advance(&self, ms: f64) -> napi::Result<()> {
        self.clock.advance(ms_to_ns("ms", ms).or_throw()?);
        Ok(())
    }

    #[napi]
    pub fn set(&self, ms: f64) -> napi::Result<()> {
        self.clock.set(ms_to_ns("ms", ms).or_throw()?);
        Ok(())
    }

    #[napi]
    pub fn now_ms(&self) -> f64 {
        ns_to_ms(self.clock.now())
    }
}
