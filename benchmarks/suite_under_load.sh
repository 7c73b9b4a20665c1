#!/usr/bin/env bash
# The test suite with a CPU hog beside it: one busy loop per core for the whole run, then the
# suite's own command. Usage: bash benchmarks/suite_under_load.sh [make target, default test]
# (docs/performance.md, "The test suite", quotes its figures). Run from the repository root.
set -uo pipefail
target=${1:-test}
hogs=()
for _ in $(seq 1 "$(nproc)"); do
  python3 -c 'while True: pass' &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
echo "suite_under_load: ${#hogs[@]} busy loop(s) beside make $target"
start=$(date +%s)
make "$target"
rc=$?
echo "suite_under_load: make $target exited $rc after $(( $(date +%s) - start )) s with ${#hogs[@]} busy loop(s) beside it"
exit $rc
