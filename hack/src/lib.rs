//! The workspace-hack crate: no code, only dependencies. `cargo hakari
//! generate` lists in its Cargo.toml every third-party crate that the
//! workspace's front ends (the test run, the CLI, maturin, napi) would
//! otherwise build with different features, with the union of them, so that
//! all of them share one build of wasmtime and its dependencies. See
//! `.config/hakari.toml`.
