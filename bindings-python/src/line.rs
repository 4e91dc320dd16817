//! `repute._Line`: the order of an event loop's sleeping acquires, the
//! host's ([`repute_host::holder::Order`]): who a release wakes, and who a
//! refused wake goes to. The asyncio layer (`repute/_freed.py`) keeps the
//! futures, keyed by place, and only converts.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use repute_host::holder::Order;

#[pyclass(frozen, module = "repute", name = "_Line")]
#[derive(Default)]
pub(crate) struct Line {
    order: Mutex<Order>,
}

impl Line {
    fn order(&self) -> MutexGuard<'_, Order> {
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl Line {
    #[new]
    fn new() -> Self {
        Line::default()
    }

    /// A place in line for one acquire, behind every one before it.
    fn place(&self) -> u64 {
        self.order().place()
    }

    /// `place` waits, wishing `wish` (what its next try asks for, hashed).
    fn lie_down(&self, place: u64, wish: u64) {
        self.order().lie_down(place, wish);
    }

    /// `place` stops waiting without a wake; False when a wake took it out.
    fn leave(&self, place: u64) -> bool {
        self.order().leave(place)
    }

    /// A permit was freed: the place woken for it, if any waits.
    fn wake_one(&self) -> Option<u64> {
        self.order().wake_one()
    }

    /// Anything may have become selectable: every place in line, woken.
    fn wake_all(&self) -> Vec<u64> {
        self.order().wake_all()
    }

    /// `place`'s try after its wake got its permit.
    fn granted(&self, place: u64) {
        self.order().granted(place);
    }

    /// `place`'s try after its wake got nothing: the place the wake goes
    /// to, if any.
    fn refused(&self, place: u64) -> Option<u64> {
        self.order().refused(place)
    }

    /// `place`'s acquire ended before it tried with its wake: the place the
    /// wake goes to, if any.
    fn left(&self, place: u64) -> Option<u64> {
        self.order().left(place)
    }

    fn __len__(&self) -> usize {
        self.order().len()
    }
}
