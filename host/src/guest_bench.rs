//! The core's benchmark workload run inside the testing build of the
//! component, through its `guest-bench` export: one call runs many pairs,
//! so what it measures is the core compiled to WebAssembly, not the boundary.

use wasmtime::component::TypedFunc;
use wasmtime::Store;

use repute_core::Strategy;

use crate::bindings::repute::pool::types as wit;
use crate::config::ShardLimits;
use crate::convert::strategy_out;
use crate::error::{Error, Result};
use crate::runtime::{runtime, Variant};
use crate::shard::state::ShardState;

/// The export's interface, as the component names it.
const INTERFACE: &str = "repute:pool/guest-bench@0.1.0";

/// A guest holding a warmed pool (`repute_core::workload::warmed`).
#[doc(hidden)]
pub struct GuestWorkload {
    store: Store<ShardState>,
    pairs: TypedFunc<(u64,), (u64,)>,
}

impl std::fmt::Debug for GuestWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestWorkload").finish_non_exhaustive()
    }
}

fn runtime_err(e: impl std::fmt::Display) -> Error {
    Error::Runtime { message: format!("guest benchmark: {e:#}") }
}

impl GuestWorkload {
    /// A fresh instance whose pool has `resources` resources.
    pub fn new(resources: u32, strategy: Strategy) -> Result<GuestWorkload> {
        let runtime = runtime(Variant::Testing)?;
        let limits = ShardLimits { memory_bytes: usize::MAX, ..ShardLimits::default() };
        let mut store = Store::new(&runtime.engine, ShardState::new(&limits));
        // The epoch ticker stays on, as for a shard; a run may take long.
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = runtime.pre.instance_pre().instantiate(&mut store).map_err(runtime_err)?;
        let export = |store: &mut Store<ShardState>, name: &str| {
            let interface = instance.get_export_index(&mut *store, None, INTERFACE);
            instance.get_export_index(&mut *store, interface.as_ref(), name).ok_or_else(|| runtime_err(name))
        };
        let prepare = export(&mut store, "prepare")?;
        let prepare: TypedFunc<(u32, wit::Strategy), ()> =
            instance.get_typed_func(&mut store, prepare).map_err(runtime_err)?;
        let pairs = export(&mut store, "pairs")?;
        let pairs = instance.get_typed_func(&mut store, pairs).map_err(runtime_err)?;
        prepare.call(&mut store, (resources, strategy_out(strategy))).map_err(runtime_err)?;
        Ok(GuestWorkload { store, pairs })
    }

    /// Runs `count` acquire+release pairs in the guest; the checksum of
    /// `repute_core::workload::Workload::pairs`.
    pub fn pairs(&mut self, count: u64) -> Result<u64> {
        self.pairs.call(&mut self.store, (count,)).map(|(sum,)| sum).map_err(runtime_err)
    }
}
