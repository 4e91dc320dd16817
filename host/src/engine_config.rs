// Shared verbatim by `build.rs` (which precompiles the component) and the
// library (which loads it): wasmtime refuses a precompiled artifact made under
// different code-affecting settings, so both must build the same `Config`.

/// The wasmtime settings every repute engine runs with. Epoch interruption
/// bounds the time of one call (a ticker thread advances the epoch); memory is
/// bounded per store by `StoreLimits`.
fn engine_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.epoch_interruption(true);
    // Linear memory keeps wasmtime's default 4 GiB reservation plus guard
    // region: it is only address space, and it lets compiled code skip
    // explicit bounds checks (a smaller reservation made every acquire ~2x
    // slower).
    config
}
