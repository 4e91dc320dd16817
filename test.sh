#!/usr/bin/env bash
# The one test command: formatting, lints, then every test suite in the repo —
# the Rust workspace (core, component host, CLI/server), the Python binding
# (pytest + mypy) and the Node binding (node:test + tsc). Everything builds in
# release so wasmtime is compiled once and shared by cargo, maturin and napi.
set -euo pipefail
cd "$(dirname "$0")"

# The PostgreSQL, etcd and Redis tests run against the servers
# `scripts/services.sh start` put on loopback (or any others, named by
# REPUTE_TEST_PG_URL, REPUTE_TEST_ETCD_URL and REPUTE_TEST_REDIS_URL).
service_url() {
    scripts/services.sh env | sed -n "s/^$1=//p"
}
export REPUTE_TEST_PG_URL="${REPUTE_TEST_PG_URL:-$(service_url REPUTE_TEST_PG_URL)}"
export REPUTE_TEST_ETCD_URL="${REPUTE_TEST_ETCD_URL:-$(service_url REPUTE_TEST_ETCD_URL)}"
export REPUTE_TEST_REDIS_URL="${REPUTE_TEST_REDIS_URL:-$(service_url REPUTE_TEST_REDIS_URL)}"

cargo fmt --all --check
cargo clippy --workspace --all-targets --release --locked -- -D warnings
# The component glue only compiles for wasm; lint it there too.
cargo clippy -p repute-core --target wasm32-wasip2 --features trap-test --release --locked -- -D warnings
# The binding crates are extension modules: their symbols come from the
# Python / Node process, so they are tested through their own suites below.
cargo test --workspace --release --locked --exclude repute-python --exclude repute-node
./bindings-python/test.sh
./bindings-node/test.sh
