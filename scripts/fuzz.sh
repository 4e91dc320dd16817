#!/usr/bin/env bash
# Runs the cargo-fuzz targets under fuzz/ and prints their figures.
#
# Usage: scripts/fuzz.sh [TARGET|all|seeds] [SECONDS]
#   TARGET   snapshot_binary, snapshot_json, differential or http (default: all)
#   SECONDS  run time per target (default: 60)
#   seeds    rewrites the committed seeds of the snapshot targets instead
#
# Each target reads its committed seeds (fuzz/corpus/TARGET, kept small) and
# grows a working corpus in fuzz/target/corpus/TARGET, minimised with
# `cargo fuzz cmin` at the end. Crashes land in fuzz/artifacts/TARGET.
# FUZZ_SANITIZER picks the sanitizer (default: address; `none` runs faster);
# FUZZ_RUNS, when set, also stops each target after that many executions.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(snapshot_binary snapshot_json differential http)
which=${1:-all}
seconds=${2:-60}
sanitizer=${FUZZ_SANITIZER:-address}

if [[ $which == seeds ]]; then
    exec cargo +nightly run --quiet --release --manifest-path fuzz/Cargo.toml -p repute-fuzz-seeds -- fuzz/corpus fuzz/dict
fi
if [[ $which != all ]]; then
    [[ " ${targets[*]} " == *" $which "* ]] || { echo "unknown target $which (one of: ${targets[*]}, all, seeds)" >&2; exit 2; }
    targets=("$which")
fi

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# The host's build script compiles the core to wasm32-wasip2 with a nested
# cargo; where the nightly has no such target, the stable toolchain builds it.
if ! rustup +nightly target list --installed | grep -qx wasm32-wasip2; then
    export REPUTE_COMPONENT_TOOLCHAIN=${REPUTE_COMPONENT_TOOLCHAIN:-stable}
fi

fuzz=(cargo +nightly fuzz)
"${fuzz[@]}" build --sanitizer "$sanitizer"

mkdir -p fuzz/target/logs
failed=()
summary=()
for t in "${targets[@]}"; do
    work=fuzz/target/corpus/$t
    mkdir -p "$work" "fuzz/corpus/$t"
    log=fuzz/target/logs/$t.log
    flags=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072 -print_final_stats=1)
    [[ -f fuzz/dict/$t.dict ]] && flags+=(-dict="fuzz/dict/$t.dict")
    [[ -n ${FUZZ_RUNS:-} ]] && flags+=(-runs="$FUZZ_RUNS")
    echo "== $t: ${seconds}s"
    if ! "${fuzz[@]}" run --sanitizer "$sanitizer" "$t" "$work" "fuzz/corpus/$t" -- "${flags[@]}" 2>"$log"; then
        failed+=("$t")
        tail -n 40 "$log" >&2
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1 || true)
    # A run that crashed prints no final stats: its last status line counts.
    [[ -n $execs ]] || execs=$(grep -o '^#[0-9]*' "$log" | tr -d '#' | tail -n1 || true)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1 || true)
    "${fuzz[@]}" cmin --sanitizer "$sanitizer" "$t" "$work" >>"$log" 2>&1 || true
    files=$(find "$work" -type f | wc -l)
    bytes=$(find "$work" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    crashes=$(find "fuzz/artifacts/$t" -type f 2>/dev/null | wc -l)
    summary+=("$(printf '%-16s execs %-10s exec/s %-7s corpus %5s files %9s bytes  artifacts %s' \
        "$t" "${execs:-?}" "${rate:-?}" "$files" "$bytes" "$crashes")")
done

printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
    echo "crashed: ${failed[*]} (see fuzz/artifacts and fuzz/target/logs)" >&2
    exit 1
fi
