#!/usr/bin/env bash
# Shared mode on PostgreSQL against the server's own yardstick, in one run on
# one server: repute acquire+release pairs per second (embedded pools, one
# tenant and connection per client, the permit table as lease authority)
# next to `pgbench` simple-update transactions per second with the same
# number of clients, plus the statements repute sends per pair, counted by
# the server (transactions committed, every repute statement runs alone).
#
#   scripts/bench-postgres.sh [CLIENTS] [SECONDS]
#
# Needs the server of `scripts/services.sh start` (or REPUTE_TEST_PG_URL) and
# `cargo build --release -p repute-cli`.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS="${1:-4}"
SECONDS_RUN="${2:-10}"
URL="${REPUTE_TEST_PG_URL:-$(scripts/services.sh env | cut -d= -f2-)}"
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
REPUTE=target/release/repute

psql "$URL" -qc "DROP DATABASE IF EXISTS repute_bench" -qc "DROP DATABASE IF EXISTS pgbench_bench" >/dev/null 2>&1
psql "$URL" -qc "CREATE DATABASE repute_bench" -qc "CREATE DATABASE pgbench_bench" >/dev/null
BENCH_URL="${URL%/*}/repute_bench"
PGB_URL="${URL%/*}/pgbench_bench"

commits() {
    psql "$BENCH_URL" -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = 'repute_bench'"
}

# Registration and the first fold happen before the measured run; a short
# warm-up run registers the tenants so the counted run is acquire+release only.
"$REPUTE" bench --store "$BENCH_URL" --threads "$CLIENTS" --tenants "$CLIENTS" --resources 100 --count 100 >/dev/null
sleep 1
before=$(commits)
repute_out=$("$REPUTE" bench --store "$BENCH_URL" --threads "$CLIENTS" --tenants "$CLIENTS" --resources 100 \
    --duration "$SECONDS_RUN")
sleep 1
after=$(commits)
echo "$repute_out"
pairs=$(echo "$repute_out" | grep -o '^[0-9]* pairs' | head -n1 | cut -d' ' -f1)
repute_rate=$(echo "$repute_out" | grep -o '[0-9.]* pairs/s' | head -n1 | cut -d' ' -f1)

"$BIN/pgbench" -i -q -s 10 "$PGB_URL" >/dev/null 2>&1
pgbench_out=$("$BIN/pgbench" -N -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_RUN" "$PGB_URL" 2>&1)
tps=$(echo "$pgbench_out" | grep -o 'tps = [0-9.]*' | head -n1 | cut -d' ' -f3)

# The counted run re-registers the resources (one logged statement each per
# tenant) and opens each tenant (a checkpoint load and a log read).
setup=$(( CLIENTS * (100 + 2) ))
python3 - "$pairs" "$repute_rate" "$tps" "$before" "$after" "$setup" "$CLIENTS" <<'PY'
import sys
pairs, rate, tps, before, after, setup, clients = sys.argv[1:]
pairs, rate, tps = int(pairs), float(rate), float(tps)
statements = (int(after) - int(before) - int(setup)) / pairs
print(f"clients {clients}: repute shared-mode {rate:.0f} pairs/s, pgbench simple-update {tps:.0f} tps, "
      f"ratio {rate / tps:.2f}; statements per acquire+release pair {statements:.2f} "
      f"(one for the acquire, one for the release)")
PY
psql "$URL" -qc "DROP DATABASE repute_bench" -qc "DROP DATABASE pgbench_bench" >/dev/null
