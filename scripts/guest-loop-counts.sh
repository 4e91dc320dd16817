#!/usr/bin/env bash
# Instructions per acquire+release pair of the core's benchmark workload,
# counted by callgrind (a run of PAIRS pairs minus a run of none, over
# PAIRS): the core's own loop natively and inside the component (`guest`,
# one call for all pairs), and one call per operation through the natively
# linked core (`linked`) and through the component (`pool`). With
# `--quota`: the core's quota comparison instead, keys in no quota group
# (`quota-none`) against the same keys each in one (`quota-group`).
#
# Usage: scripts/guest-loop-counts.sh [--quota] [PAIRS]   (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
quota=false
if [ "${1:-}" = --quota ]; then
    quota=true
    shift
fi
pairs=${1:-20000}
cargo build --quiet --release --locked -p repute-host --features testing --example guest_loop
bin="${CARGO_TARGET_DIR:-target}/release/examples/guest_loop"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() {
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$@" >/dev/null 2>"$out/log"
    grep -o 'Collected : [0-9]*' "$out/log" | grep -o '[0-9]*$'
}

per_pair() {
    local base full
    base=$(count "$@" 0)
    full=$(count "$@" "$pairs")
    echo $(( (full - base) / pairs ))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }

if $quota; then
    printf '%-10s %-9s %11s %12s %7s\n' resources strategy quota-none quota-group ratio
    for strategy in classic thompson; do
        none=$(per_pair quota-none 1000 "$strategy")
        grouped=$(per_pair quota-group 1000 "$strategy")
        printf '%-10s %-9s %11s %12s %7s\n' 1000 "$strategy" "$none" "$grouped" "$(ratio "$grouped" "$none")"
    done
    exit 0
fi

printf '%-10s %-9s %10s %10s %6s %10s %10s %6s\n' resources strategy native guest ratio linked pool ratio
for resources in 1000 100000; do
    for strategy in classic thompson; do
        declare -A per=()
        for side in native guest linked pool; do
            per[$side]=$(per_pair "$side" "$resources" "$strategy")
        done
        printf '%-10s %-9s %10s %10s %6s %10s %10s %6s\n' "$resources" "$strategy" \
            "${per[native]}" "${per[guest]}" "$(ratio "${per[guest]}" "${per[native]}")" \
            "${per[linked]}" "${per[pool]}" "$(ratio "${per[pool]}" "${per[linked]}")"
    done
done
