//! `NativeLine`: the order of the event loop's sleeping acquires, the
//! host's ([`repute_host::holder::Order`]): who a release wakes, and who a
//! refused wake goes to. `lib/line.js` keeps the timers and promises, keyed
//! by place, and only converts. Places are whole numbers well within a
//! double's exact range.

use std::hash::{DefaultHasher, Hash, Hasher};

use napi_derive::napi;
use repute_host::holder::Order;

#[napi]
#[derive(Default)]
pub struct NativeLine {
    order: Order,
}

fn key(wish: &str) -> u64 {
    let mut h = DefaultHasher::new();
    wish.hash(&mut h);
    h.finish()
}

#[napi]
impl NativeLine {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeLine::default()
    }

    /// A place in line for one acquire, behind every one before it.
    #[napi]
    pub fn place(&mut self) -> f64 {
        self.order.place() as f64
    }

    /// `place` waits, wishing `wish` (what its next try asks for).
    #[napi]
    pub fn lie_down(&mut self, place: f64, wish: String) {
        self.order.lie_down(place as u64, key(&wish));
    }

    /// `place` stops waiting without a wake; false when a wake took it out.
    #[napi]
    pub fn leave(&mut self, place: f64) -> bool {
        self.order.leave(place as u64)
    }

    /// A permit was freed: the place woken for it, if any waits.
    #[napi]
    pub fn wake_one(&mut self) -> Option<f64> {
        self.order.wake_one().map(|p| p as f64)
    }

    /// Anything may have become selectable: every place in line, woken.
    #[napi]
    pub fn wake_all(&mut self) -> Vec<f64> {
        self.order.wake_all().into_iter().map(|p| p as f64).collect()
    }

    /// `place`'s try after its wake got its permit.
    #[napi]
    pub fn granted(&mut self, place: f64) {
        self.order.granted(place as u64);
    }

    /// `place`'s try after its wake got nothing: the place the wake goes to.
    #[napi]
    pub fn refused(&mut self, place: f64) -> Option<f64> {
        self.order.refused(place as u64).map(|p| p as f64)
    }

    /// `place`'s acquire ended before it tried with its wake: the place the
    /// wake goes to.
    #[napi]
    pub fn left(&mut self, place: f64) -> Option<f64> {
        self.order.left(place as u64).map(|p| p as f64)
    }

    /// How many wait.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.order.len() as u32
    }
}
