#!/usr/bin/env bash
# The Node binding's test command, from a clean checkout with Rust and
# Node >= 20: `npm install` builds the addon from source (napi CLI, release
# profile, the workspace's target dir), then `npm test` runs the node:test
# suite and type-checks test/types.ts against index.d.ts.
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund
npm test
