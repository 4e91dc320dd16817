#!/usr/bin/env bash
# The web console in a real browser: starts `repute serve` (the release
# binary, built like scripts/schemathesis.sh builds it; in memory, one with
# two tenants' keys, one with --no-auth) on free loopback ports, installs playwright-core at the
# version package-lock.json pins, and runs console.test.mjs with node:test
# in Debian's headless Chromium (no browser is downloaded). Screenshots of
# each view go to target/console-screenshots/. The servers are stopped again,
# passed or failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"

command -v chromium >/dev/null || { echo "console: Debian's chromium package is required" >&2; exit 1; }
cargo build --release --locked --features repute-cli/etcd -p repute-cli --bin repute
repute="$repo/target/release/repute"

work="target/console"
rm -rf "$work" target/console-screenshots
mkdir -p "$work"
key="$("$repute" key new --tenant console --keys "$work/keys")"
big="$("$repute" key new --tenant big --keys "$work/keys")"

# start NAME ARGS...: a server on a free loopback port; its address in $addr.
servers=()
trap 'for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done' EXIT
start() {
    local name="$1"
    shift
    "$repute" serve --listen 127.0.0.1:0 --store memory --log warn "$@" \
        >"$work/$name.stdout" 2>"$work/$name.log" &
    local pid=$!
    servers+=("$pid")
    addr=""
    for _ in $(seq 100); do
        addr="$(sed -n 's/^listening on //p' "$work/$name.stdout")"
        [ -n "$addr" ] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$work/$name.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "console: the $name server did not start" >&2
    exit 1
}
start keyed --keys "$work/keys"
keyed="$addr"
# With --no-auth the console asks for a tenant instead of a key.
start open --no-auth
open="$addr"

cd tests/console
npm ci --no-audit --no-fund --silent
REPUTE_CONSOLE_URL="http://$keyed" REPUTE_CONSOLE_OPEN_URL="http://$open" REPUTE_CONSOLE_KEY="$key" REPUTE_CONSOLE_BIG_KEY="$big" \
    REPUTE_CONSOLE_SHOTS="$repo/target/console-screenshots" \
    node --test --test-reporter=spec console.test.mjs
