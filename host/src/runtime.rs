//! The process-wide wasmtime state: one `Engine`, the component loaded once
//! from its precompiled form, and the epoch ticker that bounds call time.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Engine;

use crate::bindings::{Repute, ReputePre};
use crate::error::Error;
use crate::shard::state::ShardState;

include!("engine_config.rs");

/// Set (to anything) to have wasmtime write `/tmp/perf-PID.map`, which names
/// the component's compiled functions for `perf` and for mapping callgrind's
/// anonymous code addresses (host/BENCH.md): where guest time goes.
const PERF_MAP_VAR: &str = "REPUTE_WASM_PERFMAP";

/// How often the engine's epoch advances; the unit of `ShardLimits::call_timeout`.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Which build of the component to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[doc(hidden)]
pub enum Variant {
    /// The product.
    Release,
    /// Built with the core's `trap-test` and `guest-bench` features:
    /// registering a resource of kind `"__trap__"` traps (for tests of trap
    /// containment), and it exports the guest benchmark (`GuestWorkload`).
    #[cfg(feature = "testing")]
    Testing,
}

/// A loaded component and the linker that satisfies its imports.
pub(crate) struct Runtime {
    pub engine: Engine,
    /// The component with its imports resolved: instantiating a shard is
    /// then only allocating its memory and running its start.
    pub pre: ReputePre<ShardState>,
    /// Whether the build-time precompiled form was used (else it was
    /// compiled here): what the cold-start benchmark and its test report.
    #[cfg(feature = "testing")]
    pub precompiled: bool,
}

fn engine() -> Result<&'static Engine, Error> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = engine_config();
            if std::env::var_os(PERF_MAP_VAR).is_some() {
                // Names code without changing it: the precompiled form still loads.
                config.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            let ticker = engine.clone();
            std::thread::Builder::new()
                .name("repute-epoch".into())
                .spawn(move || loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticker.increment_epoch();
                })
                .map_err(|e| format!("epoch ticker: {e}"))?;
            Ok(engine)
        })
        .as_ref()
        .map_err(|message| Error::Runtime { message: format!("wasmtime engine: {message}") })
}

fn load(engine: Engine, variant: Variant) -> Result<Arc<Runtime>, String> {
    let (precompiled, wasm): (&[u8], &[u8]) = match variant {
        Variant::Release => (
            include_bytes!(concat!(env!("OUT_DIR"), "/repute.cwasm")),
            include_bytes!(concat!(env!("OUT_DIR"), "/repute.wasm")),
        ),
        #[cfg(feature = "testing")]
        Variant::Testing => (
            include_bytes!(concat!(env!("OUT_DIR"), "/repute-testing.cwasm")),
            include_bytes!(concat!(env!("OUT_DIR"), "/repute-testing.wasm")),
        ),
    };
    // SAFETY: the precompiled bytes were produced by `build.rs` with this
    // wasmtime and this engine configuration, and are embedded read-only.
    // wasmtime still checks version and settings and refuses a mismatch, in
    // which case the component is compiled from its wasm instead.
    let loaded =
        (!precompiled.is_empty()).then(|| unsafe { Component::deserialize(&engine, precompiled) }).and_then(Result::ok);
    #[cfg(feature = "testing")]
    let precompiled = loaded.is_some();
    let component = match loaded {
        Some(component) => component,
        None => Component::new(&engine, wasm).map_err(|e| format!("compiling the component: {e:#}"))?,
    };
    let mut linker = Linker::new(&engine);
    let pre = Repute::add_to_linker::<ShardState, HasSelf<ShardState>>(&mut linker, |state| state)
        .and_then(|()| ReputePre::new(linker.instantiate_pre(&component)?))
        .map_err(|e| format!("linking the component: {e:#}"))?;
    Ok(Arc::new(Runtime {
        engine,
        pre,
        #[cfg(feature = "testing")]
        precompiled,
    }))
}

/// The runtime for `variant`, loaded on first use and shared by every shard.
pub(crate) fn runtime(variant: Variant) -> Result<Arc<Runtime>, Error> {
    static RELEASE: OnceLock<Result<Arc<Runtime>, String>> = OnceLock::new();
    #[cfg(feature = "testing")]
    static TESTING: OnceLock<Result<Arc<Runtime>, String>> = OnceLock::new();
    let cell = match variant {
        Variant::Release => &RELEASE,
        #[cfg(feature = "testing")]
        Variant::Testing => &TESTING,
    };
    let engine = engine()?.clone();
    cell.get_or_init(|| load(engine, variant)).clone().map_err(|message| Error::Runtime { message })
}

/// A runtime of its own on a new engine, loaded as a new process loads it
/// (the cold-start benchmark): no epoch ticker runs for this engine, so its
/// call deadline never fires; the path is otherwise the real one.
#[cfg(feature = "testing")]
pub(crate) fn cold() -> Result<Arc<Runtime>, Error> {
    let engine = Engine::new(&engine_config()).map_err(|e| Error::Runtime { message: format!("{e:#}") })?;
    load(engine, Variant::Release).map_err(|message| Error::Runtime { message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_imports_only_the_repute_capabilities() {
        let rt = runtime(Variant::Release).unwrap();
        let component = rt.pre.instance_pre().component();
        let ty = component.component_type();
        let mut imports: Vec<&str> = ty.imports(&rt.engine).map(|(name, _)| name).collect();
        imports.sort();
        assert_eq!(
            imports,
            [
                "repute:pool/clock@0.1.0",
                "repute:pool/fencing@0.1.0",
                "repute:pool/storage@0.1.0",
                "repute:pool/types@0.1.0",
            ],
            "no WASI: the host links nothing but the repute capabilities"
        );
    }

    #[cfg(feature = "testing")]
    #[test]
    fn the_build_time_precompiled_component_is_used() {
        assert!(runtime(Variant::Release).unwrap().precompiled);
        assert!(runtime(Variant::Testing).unwrap().precompiled);
    }
}
