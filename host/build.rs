//! Builds the repute core as a WebAssembly component and precompiles it for
//! this host, so that `cargo build` / `cargo test` need no manual step and a
//! process only deserializes (about a millisecond) instead of compiling.
//!
//! The core is built by a nested cargo in its own target directory: sharing
//! the outer one deadlocks on cargo's build-directory lock.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

include!("src/engine_config.rs");

fn main() {
    let host = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = host.parent().expect("host/ sits in the workspace").to_path_buf();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    for path in ["core/src", "core/Cargo.toml", "wit", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }
    println!("cargo:rerun-if-changed=src/engine_config.rs");
    println!("cargo:rerun-if-env-changed={TOOLCHAIN_VAR}");

    let wasm = build_component(&workspace, "release", &["component"]);
    emit(&out, "repute", &wasm);
    // Only tests (trap containment) and benchmarks (the guest's own speed)
    // run this build; product builds skip it.
    if env::var_os("CARGO_FEATURE_TESTING").is_some() {
        let testing = build_component(&workspace, "testing", &["component", "trap-test", "guest-bench"]);
        emit(&out, "repute-testing", &testing);
    }
}

/// Names the rustup toolchain that builds the component when it is not the
/// outer build's: a nightly (which cargo-fuzz needs) may lack the wasm
/// target, which the stable toolchain has.
const TOOLCHAIN_VAR: &str = "REPUTE_COMPONENT_TOOLCHAIN";

/// Runs `cargo rustc` for the wasm target and returns the component's bytes.
/// Each variant has its own target directory: both write the same artifact
/// path, and two builds running at once (a debug and a release one, say)
/// must not read each other's variant.
fn build_component(workspace: &Path, variant: &str, features: &[&str]) -> Vec<u8> {
    let toolchain = env::var_os(TOOLCHAIN_VAR).filter(|t| !t.is_empty());
    // Another toolchain is reached through rustup's `cargo` proxy; the outer
    // build's own cargo (and the rustc it names) would ignore the choice.
    let cargo = match toolchain {
        Some(_) => "cargo".into(),
        None => env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
    };
    let target_dir = workspace.join("target").join("component").join(variant);
    let mut cmd = Command::new(cargo);
    // The outer build's settings are for the host target: drop them all
    // (flags, target dir, profile overrides) but keep the jobserver, so the
    // nested build shares the outer build's CPU budget.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let outer = key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_MAKEFLAGS";
        if outer || key == "RUSTFLAGS" || key == "RUSTC_WRAPPER" || key == "RUSTC_WORKSPACE_WRAPPER" {
            cmd.env_remove(&key);
        }
    }
    if let Some(toolchain) = &toolchain {
        cmd.env("RUSTUP_TOOLCHAIN", toolchain).env_remove("RUSTC").env_remove("RUSTDOC");
    }
    cmd.current_dir(workspace)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        // wasm SIMD: the hardware square root (see the core's `rng::sqrt`).
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128")
        .args(["rustc", "-p", "repute-core", "--release", "--target", "wasm32-wasip2", "--crate-type", "cdylib"])
        .arg("--features")
        .arg(features.join(","));
    let status = cmd.status().expect("run cargo for the wasm32-wasip2 component");
    assert!(
        status.success(),
        "building the core component failed (is the target installed? `rustup target add wasm32-wasip2`, or name a toolchain that has it in {TOOLCHAIN_VAR})"
    );
    let artifact = target_dir.join("wasm32-wasip2").join("release").join("repute_core.wasm");
    let bytes = std::fs::read(&artifact).expect("the component artifact");
    assert!(
        wasmtime::Engine::detect_precompiled(&bytes).is_none() && bytes.starts_with(b"\0asm\x0d\0\x01\0"),
        "cargo produced a core module, not a component"
    );
    bytes
}

/// Writes the component and, when this build's wasmtime can target the
/// host, its precompiled form. Without the latter the library compiles the
/// component at first use instead.
fn emit(out: &Path, name: &str, wasm: &[u8]) {
    std::fs::write(out.join(format!("{name}.wasm")), wasm).expect("write component");
    let target = env::var("TARGET").expect("set by cargo");
    let bytes = precompile(&target, wasm).unwrap_or_else(|e| {
        println!("cargo:warning=not precompiling the component for {target}: {e}");
        Vec::new()
    });
    std::fs::write(out.join(format!("{name}.cwasm")), bytes).expect("write precompiled component");
}

fn precompile(target: &str, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let mut config = engine_config();
    // Native builds keep wasmtime's host CPU detection, as the runtime engine
    // does; only a cross build names its target.
    if env::var("HOST").ok().as_deref() != Some(target) {
        config.target(target)?;
    }
    wasmtime::Engine::new(&config)?.precompile_component(wasm)
}
