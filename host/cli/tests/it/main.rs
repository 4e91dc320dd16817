//! The CLI's integration tests, one binary: the server driven over HTTP,
//! the simulation's claims, and the binary's tools as a user runs them.

mod serve;
mod simulate;
mod simulate_cli;
mod tools;

/// A fresh directory for one test, unique to this run of the binary.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("repute-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
