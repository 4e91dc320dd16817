#!/usr/bin/env bash
# The web console in a real browser: starts `repute serve` (the release
# binary, built like scripts/schemathesis.sh builds it; in memory, with two
# tenants' keys) on a free loopback port, installs playwright-core at the
# version package-lock.json pins, and runs console.test.mjs with node:test
# in Debian's headless Chromium (no browser is downloaded). Screenshots of
# each view go to target/console-screenshots/. The server is stopped again,
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

"$repute" serve --listen 127.0.0.1:0 --store memory --keys "$work/keys" --log warn \
    >"$work/stdout" 2>"$work/server.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT

addr=""
for _ in $(seq 100); do
    addr="$(sed -n 's/^listening on //p' "$work/stdout")"
    [ -n "$addr" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "console: the server did not start" >&2; exit 1; }

cd tests/console
npm ci --no-audit --no-fund --silent
REPUTE_CONSOLE_URL="http://$addr" REPUTE_CONSOLE_KEY="$key" REPUTE_CONSOLE_BIG_KEY="$big" \
    REPUTE_CONSOLE_SHOTS="$repo/target/console-screenshots" \
    node --test --test-reporter=spec console.test.mjs
