#!/usr/bin/env bash
# Two copies of the test suite side by side on this machine, as on a machine other jobs share:
# two clean clones of this repository's HEAD, `make <target>` in both at once, ROUNDS times in a row;
# prints each one's exit code and wall time (docs/performance.md, "The test suite", quotes them).
# Usage: bash benchmarks/suites_side_by_side.sh [target, default test] [rounds, default 2]
# With the SLURM test cluster up (bash .ci/slurm-up.sh) both suites share it: export TCB_REQUIRE_SLURM=1.
# PYTHON= an interpreter with the project's packages (default: this checkout's .venv).
set -uo pipefail
target=${1:-test}
rounds=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for c in a b; do git clone -q "$root" "$work/$c"; done
fail=0
for round in $(seq 1 "$rounds"); do
  for c in a b; do
    (cd "$work/$c" && start=$(date +%s) && make "$target" PYTHON="$python" > "$work/$c-$round.log" 2>&1;
     rc=$?; echo "round $round, suite $c: make $target exited $rc after $(( $(date +%s) - start )) s;" \
       "$(grep -E '[0-9]+ (passed|failed)' "$work/$c-$round.log" | tail -1)"; exit $rc) &
  done
  for job in $(jobs -p); do wait "$job" || fail=1; done
done
exit $fail
