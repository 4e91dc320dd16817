#!/usr/bin/env bash
# The Node binding's test command, from a clean checkout with Rust and
# Node >= 20: `npm install` fetches the tools, the napi CLI builds the addon
# from source (release profile, the workspace's target dir) with the `etcd`
# feature, as every build of the test command, for the etcd owner tests;
# then `npm test` runs the node:test suite and type-checks test/types.ts
# against index.d.ts.
set -euo pipefail
cd "$(dirname "$0")"
# Without the package's own install script, which builds without features.
npm install --no-audit --no-fund --ignore-scripts
npx napi build --release --features etcd
npm test
