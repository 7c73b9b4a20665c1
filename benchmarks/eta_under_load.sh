#!/usr/bin/env bash
# The time-left estimate on this machine's CPU, quiet and under load (docs/performance.md):
#   bash benchmarks/eta_under_load.sh [OUT]     (OUT: default /tmp/eta-load)
# Three `make collect` of the CPU smoke preset into a fresh runs folder, one after the other, each line
# of their output stamped with the epoch seconds it was printed at: q1 quiet (earlier runs: the published
# examples), l2 with two busy processes beside it (earlier runs: q1), q3 quiet again (earlier runs: q1, l2).
# Then `python benchmarks/eta_live.py OUT/*.log` prints each progress line's estimate over the time left.
# Nothing else should run on the machine meanwhile (about 25 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/eta-load}
rm -rf "$OUT" && mkdir -p "$OUT/runs"
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }
make collect RUNS="$OUT/runs" RUN=q1 2>&1 | stamp > "$OUT/q1.log"
yes > /dev/null & Y1=$!
yes > /dev/null & Y2=$!
sleep 60  # the load average climbs to the load before the run starts
make collect RUNS="$OUT/runs" RUN=l2 2>&1 | stamp > "$OUT/l2.log"
kill "$Y1" "$Y2"
sleep 60
make collect RUNS="$OUT/runs" RUN=q3 2>&1 | stamp > "$OUT/q3.log"
.venv/bin/python benchmarks/eta_live.py "$OUT"/q1.log "$OUT"/l2.log "$OUT"/q3.log
