//! The `guest-bench` export: the benchmark workload run inside the guest.

use core::cell::RefCell;

use super::convert::strategy_in;
use super::exports::repute::pool::guest_bench::Guest;
use super::{wit, Component};
use crate::workload::Workload;

/// The guest is single-threaded; the cell only satisfies `Sync`.
struct Bench(RefCell<Option<Workload>>);

// SAFETY: a wasm32 component instance runs on one thread.
unsafe impl Sync for Bench {}

static BENCH: Bench = Bench(RefCell::new(None));

impl Guest for Component {
    fn prepare(resources: u32, strategy: wit::Strategy) {
        *BENCH.0.borrow_mut() = Some(Workload::new(resources as usize, strategy_in(strategy)));
    }

    fn pairs(count: u64) -> u64 {
        BENCH.0.borrow_mut().as_mut().map_or(0, |w| w.pairs(count))
    }
}
