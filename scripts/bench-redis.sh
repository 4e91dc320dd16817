#!/usr/bin/env bash
# Shared mode on Redis against the server's own yardstick, in one run on one
# server: repute acquire+release pairs per second (embedded pools, one tenant
# and connection per client; each pair is two scripts: grant and revoke)
# next to `redis-benchmark` running the grant script alone by EVALSHA with the
# same number of clients, plus the script calls (round trips) repute makes
# per pair, counted by the server (INFO commandstats).
#
#   scripts/bench-redis.sh [CLIENTS] [SECONDS]
#
# Needs the server of `scripts/services.sh start` (or REPUTE_TEST_REDIS_URL),
# redis-benchmark (Debian's redis-tools) and `cargo build --release -p repute-cli`.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS="${1:-4}"
SECONDS_RUN="${2:-10}"
URL="${REPUTE_TEST_REDIS_URL:-$(scripts/services.sh env | grep REDIS | cut -d= -f2-)}"
HOSTPORT="${URL#redis://}"
HOSTPORT="${HOSTPORT%%/*}"
HOST="${HOSTPORT%:*}"
PORT="${HOSTPORT##*:}"
REPUTE=target/release/repute
cli() { redis-cli -h "$HOST" -p "$PORT" "$@"; }

calls() {
    cli INFO commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_eval/ { n += $3 } END { print n + 0 }'
}

# A warm-up run registers the tenants, so the counted run is acquire+release only.
"$REPUTE" bench --store "$URL" --threads "$CLIENTS" --tenants "$CLIENTS" --resources 100 --count 100 >/dev/null
before=$(calls)
repute_out=$("$REPUTE" bench --store "$URL" --threads "$CLIENTS" --tenants "$CLIENTS" --resources 100 \
    --duration "$SECONDS_RUN")
after=$(calls)
echo "$repute_out"
pairs=$(echo "$repute_out" | grep -o '^[0-9]* pairs' | head -n1 | cut -d' ' -f1)
rate=$(echo "$repute_out" | grep -o '[0-9.]* pairs/s' | head -n1 | cut -d' ' -f1)

# The grant script as repute runs it, read from its source (the PRELUDE, NOW
# and GRANT constants of host/src/providers/redis/mod.rs), on random permits with
# a zero TTL so that every call grants.
lua() {
    awk -v name="$1" '$0 ~ "^const " name ": &str = \"" { on = 1; sub(/^[^"]*"/, "") }
        on && /^";$/ { exit }
        on { print }' host/src/providers/redis/mod.rs
}
grant="$(lua PRELUDE)"$'\n'"$(lua NOW)"$'\n'"$(lua GRANT)"
sha=$(cli SCRIPT LOAD "$grant")
requests=$(( ${rate%.*} * SECONDS_RUN * 2 ))
bench_out=$(redis-benchmark -h "$HOST" -p "$PORT" -c "$CLIENTS" -n "$requests" -r 100 -q \
    EVALSHA "$sha" 3 bench:e bench:f:__rand_int__ bench:l:__rand_int__ 0 0 0 2>&1 | tr '\r' '\n' | tail -n1)
echo "redis-benchmark EVALSHA grant: $bench_out"
evalsha=$(echo "$bench_out" | grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
cli --scan --pattern "bench:*" | xargs -r -n 500 redis-cli -h "$HOST" -p "$PORT" DEL >/dev/null

python3 - "$pairs" "$rate" "$evalsha" "$before" "$after" <<'PY'
import sys
pairs, rate, evalsha, before, after = sys.argv[1:]
pairs, rate, evalsha = int(pairs), float(rate), float(evalsha)
per_pair = (int(after) - int(before)) / pairs
print(f"repute shared-mode {rate:.0f} pairs/s = {2 * rate:.0f} scripts/s; redis-benchmark grant script "
      f"{evalsha:.0f}/s; ratio (scripts/s) {2 * rate / evalsha:.2f}; script calls per pair {per_pair:.2f} "
      f"(one round trip for the acquire, one for the release)")
PY
