#!/usr/bin/env bash
# The one test command: formatting, lints, then every test suite in the repo —
# the Rust workspace (core, component host, CLI/server, fault harness), the
# Python binding (pytest + mypy), the real-traffic harness and the Node
# binding (node:test + tsc) — and schemathesis against the server's OpenAPI
# document, and the web console in a real browser.
#
# On a fresh Debian machine, run as root, it first installs what is missing:
# the Debian packages of the servers the tests run against and of the tools
# the build needs, and the rustup components. As a normal user those must be
# there already; it says which are not. It then starts throwaway PostgreSQL,
# Redis and etcd servers on loopback (scripts/services.sh), unless
# REPUTE_TEST_PG_URL, REPUTE_TEST_ETCD_URL and REPUTE_TEST_REDIS_URL name
# running ones, and stops the ones it started when it ends, passed or failed.
#
# Everything builds in release with the `etcd` feature (repute-cli's turns
# on every backend of repute-host: postgres, redis and etcd) and the host's
# `testing` one (its test doubles), so every test runs; the workspace-hack
# crate keeps wasmtime compiled once and shared by cargo, maturin and napi.
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the tests need, each named with a file that shows it is there.
missing=()
have_file() { compgen -G "$1" >/dev/null; }
have_file '/usr/lib/postgresql/*/bin/initdb' || missing+=(postgresql postgresql-contrib)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v etcd >/dev/null || missing+=(etcd-server)
# protoc and its well-known types: etcd-client generates its gRPC code at build time.
command -v protoc >/dev/null || missing+=(protobuf-compiler)
have_file '/usr/include/google/protobuf/descriptor.proto' || missing+=(libprotobuf-dev)
command -v cc >/dev/null || missing+=(build-essential)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
# Real proxy processes for the real-traffic harness.
command -v tinyproxy >/dev/null || missing+=(tinyproxy)
# The headless browser the web console's suite drives (tests/console).
command -v chromium >/dev/null || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "test.sh: missing Debian packages: ${missing[*]}" >&2
        echo "install them (sudo apt-get install ${missing[*]}) or run ./test.sh as root" >&2
        exit 1
    fi
    echo "test.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends ca-certificates "${missing[@]}" >/dev/null
    # Installing may start the packaged servers on their default ports; the
    # tests use throwaway ones, so those are stopped again.
    for unit in postgresql redis-server etcd tinyproxy; do
        service "$unit" stop >/dev/null 2>&1 || true
    done
fi

python3 -c 'import sys; assert sys.version_info >= (3, 10), sys.version' \
    || { echo "test.sh: python3 >= 3.10 is required" >&2; exit 1; }
command -v node >/dev/null && node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
    || { echo "test.sh: Node.js >= 20 is required" >&2; exit 1; }

# The rustup components the lints and the component build use.
components=$(rustup component list --installed)
[[ "$components" == *rustfmt* ]] || rustup component add rustfmt
[[ "$components" == *clippy* ]] || rustup component add clippy
[[ "$(rustup target list --installed)" == *wasm32-wasip2* ]] || rustup target add wasm32-wasip2

# cargo-hakari keeps the workspace-hack crate (hack/, see .config/hakari.toml),
# which gives every shared dependency one feature set in every build, so
# wasmtime is compiled once. A pinned version, installed when missing (about
# 3 minutes of compiling on two cores); its output format is pinned in the
# config.
hakari_version=0.9.39
[[ "$(cargo hakari --version 2>/dev/null)" == "cargo-hakari $hakari_version" ]] \
    || cargo install cargo-hakari --version "$hakari_version" --locked

# Throwaway servers unless the caller named its own. Servers that
# scripts/services.sh already runs for this checkout are used and left running.
if [ -z "${REPUTE_TEST_PG_URL:-}" ] || [ -z "${REPUTE_TEST_ETCD_URL:-}" ] || [ -z "${REPUTE_TEST_REDIS_URL:-}" ]; then
    if ! compgen -G 'target/services/*.dir' >/dev/null; then
        trap 'scripts/services.sh stop' EXIT
    fi
    scripts/services.sh start
    service_url() {
        scripts/services.sh env | sed -n "s/^$1=//p"
    }
    # Every suite below reads these, the Python and Node ones included.
    export REPUTE_TEST_PG_URL="${REPUTE_TEST_PG_URL:-$(service_url REPUTE_TEST_PG_URL)}"
    export REPUTE_TEST_ETCD_URL="${REPUTE_TEST_ETCD_URL:-$(service_url REPUTE_TEST_ETCD_URL)}"
    export REPUTE_TEST_REDIS_URL="${REPUTE_TEST_REDIS_URL:-$(service_url REPUTE_TEST_REDIS_URL)}"
fi

# How long each step took is what the CI time is made of: printed as it goes.
mark() { echo "test.sh: ${SECONDS}s in, $*" >&2; }
mark "installs and services ready"
cargo fmt --all --check
# The workspace-hack crate must match the dependency graph: its lines are
# what `cargo hakari generate` writes now, every member but the core (built
# for wasm too, see .config/hakari.toml) depends on it, and with it every
# dependency is built one way. On a failure, run `cargo hakari generate` and
# `cargo hakari manage-deps`. hakari reads `cargo metadata`, which would
# update a stale Cargo.lock: that is checked first.
cargo metadata --locked --format-version 1 >/dev/null
cargo hakari generate --diff
cargo hakari manage-deps --dry-run
cargo hakari verify
mark "lints"
cargo clippy --workspace --all-targets --release --locked --features repute-cli/etcd,repute-host/testing -- -D warnings
# The host library as an embedder that enables no networked backend builds it.
cargo clippy -p repute-host --release --locked --no-default-features -- -D warnings
# The component glue only compiles for wasm; lint it there too.
cargo clippy -p repute-core --target wasm32-wasip2 --features guest-bench,trap-test --release --locked -- -D warnings
# The binding crates are extension modules: their symbols come from the
# Python / Node process, so they are tested through their own suites below.
mark "the Rust tests"
cargo test --workspace --release --locked --features repute-cli/etcd,repute-host/testing --exclude repute-python --exclude repute-node
# The server against its own OpenAPI document (schemathesis, from PyPI).
mark "schemathesis"
scripts/schemathesis.sh
# The web console (/ui) in headless Chromium, driven by playwright-core from
# npm (pinned): the server's own pages against a server the suite starts.
mark "the console in a browser"
tests/console/run.sh
mark "the Python binding"
./bindings-python/test.sh
# The real-traffic harness (tests/realtraffic): real tinyproxy processes and
# the real openai SDK on loopback, repute (by hand and through its
# adapters) beside a careful round-robin, Crawlee's SessionPool and
# LiteLLM's Router, one seed, about three minutes;
# its --check holds repute to what tests/realtraffic/checks.py asserts.
mark "the real-traffic harness"
tests/realtraffic/run.sh "$PWD/.venv/bin/python" --check
# The fault harness's Python scenario (kill -9 of a Python process holding
# leases on SQLite) needs the binding the step above installed in .venv.
mark "the fault harness's Python scenario"
REPUTE_TEST_PYTHON="$PWD/.venv/bin/python" cargo test --workspace --release --locked --features repute-cli/etcd,repute-host/testing \
    --exclude repute-python --exclude repute-node --test faults sqlite_python -- --ignored
mark "the Node binding"
./bindings-node/test.sh
mark "all passed"
