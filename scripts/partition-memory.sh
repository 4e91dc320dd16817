#!/usr/bin/env bash
# Memory and fold work of one tenant split across processes, measured on
# real `repute serve` processes over one PostgreSQL database: the tenant's
# log is written straight into the database (RESOURCES registrations, then
# one report for every resource in every one of CONTEXTS contexts, so each
# report makes a cell), then
#   1. one process of sharded mode opens the whole tenant (folds the log);
#   2. PROCESSES processes of partitioned mode share PARTITIONS partitions,
#      placed as an operator would: the largest first on the process that
#      holds the fewest cells so far; each process opens its partitions
#      (folds their part of the log) by a first request in one of their
#      contexts.
# For each process: resident memory after the open (VmRSS, and its peak
# VmHWM), log entries folded (repute_log_entries_folded_total) and the
# seconds the open took; and the idle RSS of a process with no tenant.
# Last, each process's VmRSS over the whole tenant's peak (VmHWM): when the
# whole does not fit a shard's memory, that peak, reached before the shard
# trapped, is less than holding it all takes, so the ratios are upper bounds.
#
#   scripts/partition-memory.sh [RESOURCES] [CONTEXTS] [PARTITIONS] [PROCESSES]
#
# Needs the server of `scripts/services.sh start` (or REPUTE_TEST_PG_URL),
# python3 and `cargo build --release -p repute-cli`. The servers take their
# other settings from the environment: REPUTE_SHARD_MEMORY_MIB (default
# 1024) bounds what one shard, and so one tenant or partition, may hold;
# REPUTE_SHARDS spreads a process's partitions over more instances.
set -euo pipefail
cd "$(dirname "$0")/.."

RESOURCES="${1:-20000}"
CONTEXTS="${2:-30}"
PARTITIONS="${3:-6}"
PROCESSES="${4:-3}"
URL="${REPUTE_TEST_PG_URL:-$(scripts/services.sh env | cut -d= -f2-)}"
REPUTE="$PWD/target/release/repute"
DB="${URL%/*}/repute_partmem"
TENANT=mem
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    # Nothing to save: a measurement, so no last checkpoint of big pools.
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

psql "$URL" -qc "DROP DATABASE IF EXISTS repute_partmem" >/dev/null 2>&1
psql "$URL" -qc "CREATE DATABASE repute_partmem" >/dev/null

# The schema comes from the first process that connects.
start() { # name, args...: starts a server, sets BASE and PID
    local name=$1
    shift
    "$REPUTE" serve --no-auth --store "$DB" --listen 127.0.0.1:0 --log warn --checkpoint-every 100000 "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    disown "$PID"
    PIDS+=("$PID")
    for _ in $(seq 100); do
        grep -q "listening on" "$WORK/$name.out" 2>/dev/null && break
        sleep 0.1
    done
    BASE="http://$(sed -n 's/^listening on //p' "$WORK/$name.out")"
}
rss() { # pid: "VmRSS VmHWM" in MiB
    awk '/^VmRSS/ {rss = $2} /^VmHWM/ {hwm = $2} END {printf "%.0f %.0f ", rss / 1024, hwm / 1024}' "/proc/$1/status"
}
folded() { # base
    curl -s "$1/metrics" | awk '/^repute_log_entries_folded_total/ {s += $NF} END {print s + 0}'
}
open_context() { # base, context: the first request for it, which opens its pool
    local status
    status=$(curl -s -o "$WORK/answer" -w '%{http_code}' -X POST "$1/v1/leases" -H "Repute-Tenant: $TENANT" \
        -H 'Content-Type: application/json' -d "{\"context\": \"$2\"}")
    if [ "$status" != 201 ] && [ "$status" != 409 ]; then
        echo "  the pool of $2 did not open: $status $(head -c 300 "$WORK/answer")"
    fi
}

start idle --mode sharded
idle_pid=$PID
echo "idle process: VmRSS VmHWM (MiB): $(rss "$idle_pid")"
kill -KILL "$idle_pid"

# Contexts and their FNV-1a hashes (repute_host::partition_of), then the log.
python3 - "$CONTEXTS" "$PARTITIONS" >"$WORK/contexts.tsv" <<'PY'
import sys
contexts, parts = int(sys.argv[1]), int(sys.argv[2])
def fnv1a(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h
for i in range(contexts):
    name = f"site-{i}.example"
    h = fnv1a(name)
    print(f"{i}\t{name}\t{h - 2**64 if h >= 2**63 else h}\t{h % parts}")
PY
started=$(date +%s)
psql "$DB" -q >/dev/null <<SQL
CREATE TEMP TABLE ctx (i int, name text, hash bigint, part int);
\copy ctx FROM '$WORK/contexts.tsv'
INSERT INTO repute_tenant (tenant, log_seq) VALUES ('$TENANT', $RESOURCES + $RESOURCES * $CONTEXTS);
INSERT INTO repute_log (tenant, seq, entry)
SELECT '$TENANT', r, jsonb_build_object('Register', jsonb_build_object('permits', 1,
       'resource', jsonb_build_object('kind', 'proxy', 'value', 'proxy-' || r)))
FROM generate_series(1, $RESOURCES) r;
INSERT INTO repute_log (tenant, seq, entry, ctx_hash)
SELECT '$TENANT', $RESOURCES + (r - 1) * $CONTEXTS + ctx.i + 1,
       jsonb_build_object('Report', jsonb_build_object('context', ctx.name,
       'outcome', jsonb_build_object('result', 'success', 'latency_ms', 100),
       'resource', jsonb_build_object('kind', 'proxy', 'value', 'proxy-' || r))), ctx.hash
FROM generate_series(1, $RESOURCES) r CROSS JOIN ctx;
SQL
echo "log written: $RESOURCES registrations, $((RESOURCES * CONTEXTS)) reports ($(($(date +%s) - started)) s)"

start whole --mode sharded
t0=$(date +%s.%N)
open_context "$BASE" site-0.example
t1=$(date +%s.%N)
whole=$(rss "$PID")
whole_folded=$(folded "$BASE")
echo "one process, whole tenant: VmRSS VmHWM (MiB) $whole; folded $whole_folded; open $(echo "$t1 - $t0" | bc) s"
footprint=$(curl -s "$BASE/v1/stats" -H "Repute-Tenant: $TENANT" |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("footprint", -1 << 20) >> 20)')
echo "  its pool's footprint (the heap bytes it asked for; -1: it did not open): $footprint MiB"
kill -KILL "$PID"

# Partition -> process, largest partition first onto the least loaded process.
python3 - "$PARTITIONS" "$PROCESSES" "$WORK/contexts.tsv" >"$WORK/placement.tsv" <<'PY'
import sys
parts, procs, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
size = [0] * parts
for line in open(path):
    size[int(line.split("\t")[3])] += 1
load = [0] * procs
for p in sorted(range(parts), key=lambda p: -size[p]):
    k = load.index(min(load))
    load[k] += size[p]
    print(f"{p}\t{k}")
PY
ratios=()
for k in $(seq 0 $((PROCESSES - 1))); do
    start "process$k" --mode partitioned --partitions "$PARTITIONS"
    mine=$(awk -F'\t' -v k="$k" '$2 == k {print $1}' "$WORK/placement.tsv" | sort -n | tr '\n' ' ')
    t0=$(date +%s.%N)
    contexts=0
    for p in $mine; do
        open_context "$BASE" "$(awk -F'\t' -v p="$p" '$4 == p {print $2; exit}' "$WORK/contexts.tsv")"
        contexts=$((contexts + $(awk -F'\t' -v p="$p" '$4 == p' "$WORK/contexts.tsv" | wc -l)))
    done
    t1=$(date +%s.%N)
    held=$(rss "$PID")
    ratios+=("$(echo "scale=3; ${held%% *} / ${whole#* }" | bc)")
    echo "process $k: partitions $mine($contexts of $CONTEXTS contexts): VmRSS VmHWM (MiB) $held; folded $(folded "$BASE"); open $(echo "$t1 - $t0" | bc) s"
done
entries=$((RESOURCES + RESOURCES * CONTEXTS))
echo "whole tenant in one process: VmHWM ${whole#* }MiB, $whole_folded of $entries log entries folded; each process's VmRSS over it: ${ratios[*]}"
