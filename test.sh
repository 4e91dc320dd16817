#!/usr/bin/env bash
# The one test command: formatting, lints, then every test suite in the repo.
set -euo pipefail
cd "$(dirname "$0")"

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
