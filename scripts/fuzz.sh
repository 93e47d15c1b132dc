#!/usr/bin/env bash
# Runs every libFuzzer target of a WEIR_FUZZ=ON build for SECONDS each,
# starting from (and adding to) a scratch copy of its corpus, and prints the
# executions. New inputs worth keeping are minimised into tests/fuzz/corpus
# by hand (libFuzzer's -merge=1).
# usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
for bin in "$build"/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin" | sed 's/^fuzz_//')
    work=$(mktemp -d)
    cp -r "$root/tests/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
    echo "== $name: ${seconds}s"
    "$bin" -max_total_time="$seconds" -print_final_stats=1 "$work" 2>&1 |
        grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)|ERROR|SUMMARY' || true
    rm -rf "$work"
done
