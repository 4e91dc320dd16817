// Shared verbatim by `build.rs` (which precompiles the component) and the
// library (which loads it): wasmtime refuses a precompiled artifact made under
// different code-affecting settings, so both must build the same `Config`.

/// The wasmtime settings every repute engine runs with. Epoch interruption
/// bounds the time of one call (a ticker thread advances the epoch); memory is
/// bounded per store by `StoreLimits`.
fn engine_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.epoch_interruption(true);
    // The guest is one small, trusted component: keep the per-instance
    // virtual reservation modest so thousands of shards stay cheap.
    config.memory_reservation(1 << 30);
    config.memory_guard_size(64 << 10);
    config
}
