#!/usr/bin/env bash
# The GPU version comparison's device commands (docs/comparison.md, "Versions on a GPU"), one stage a call:
#   bash benchmarks/gpu_machine/versions_gpu.sh install VERSION...   gather the pieces carried under .carry/g*/ (made here by
#                                                        benchmarks/gpu_machine/carry_groups.py VERSION...), put each VERSION's into
#                                                        .whl/torch-VERSION by its MANIFEST-VERSION and install it
#                                                        (benchmarks/gpu_machine/torch-stack install) unless installed already
#   bash benchmarks/gpu_machine/versions_gpu.sh wheels               install the wheels carried under .whl/site/ (transformers and
#                                                        what the image lacks for it) into /tmp/site, which every stage
#                                                        then puts first on PYTHONPATH, for every interpreter alike
#   bash benchmarks/gpu_machine/versions_gpu.sh release RUN SECONDS PY... PRESET=versions (PRESET= in the environment for another,
#                                                        e.g. suites) under every interpreter PY, interleaved
#                                                        cell by cell; start no cell after SECONDS (the same call resumes);
#                                                        CELLS='<pattern>,...' in the environment narrows the matrix (make
#                                                        reads it), as the t4-h200 runs did (docs/findings-versions.md)
#   bash benchmarks/gpu_machine/versions_gpu.sh collector ARGS...      python3 -m collector ARGS... with the carried wheels on the path:
#                                                        a confirmation written here by `make confirm WRITE_ONLY=1`
#                                                        (its printed command's arguments; docs/suites.md)
#   bash benchmarks/gpu_machine/versions_gpu.sh aa RUN SECONDS CELLS   A/A across interpreters and a planted 5%: the image's python3
#                                                        run directly (direct), through a virtualenv whose only packages
#                                                        are the image's (venv), and through that virtualenv with every
#                                                        compiled step slowed by 5% (venvp5), interleaved
#   bash benchmarks/gpu_machine/versions_gpu.sh resolve RUN SECONDS [N]  what a suite screen can resolve: the cells of
#                                                        benchmarks/gpu_machine/resolve-h200.toml (PRESET= for another) under
#                                                        the image's python3 three times (a, b: the A/A; p5: every compiled
#                                                        step slowed by 5%), interleaved, the preset's screening protocol;
#                                                        once screened, the N (default 1) planted cells that moved most
#                                                        beyond their class's A/A spread (make confirm AA=RUN-a:RUN-b)
#                                                        again under the three with 3 processes, into RUNc-a/-b/-p5;
#                                                        RETRY=1 in the environment measures failed cells again
#   bash benchmarks/gpu_machine/versions_gpu.sh suites RUN SECONDS [N]   the suites' release pass: PRESET (default suites)
#                                                        under OLD (default python3) and NEW (default /tmp/torch-2.14.1/bin/python),
#                                                        interleaved, into RUN-torch<version>; once both hold every cell
#                                                        (CELLS= narrows the matrix), the N (default 12) cells that moved most
#                                                        (make confirm; AA=X:Y in the environment judges each by its class's
#                                                        A/A spread) again under both with 3 processes, into RUNc-torch<version>;
#                                                        PROCESSES=1 is the screen's if the preset says otherwise;
#                                                        GPUS=0,0,0 screens three cells at a time on GPU 0 (every
#                                                        command of a pass alike), the confirmation alone
#   bash benchmarks/gpu_machine/versions_gpu.sh turns RUN SECONDS [CELLS]  several cells at a time on one GPU against one at a
#                                                        time, on one machine, PROCESSES (default 3) a cell so that a change
#                                                        can be called: PRESET (default
#                                                        benchmarks/gpu_machine/resolve-h200.toml; CELLS narrows it) under the
#                                                        image's python3 twice with GPUS=TURNS_GPUS (default 0,0), interleaved,
#                                                        into RUN-N-s and RUN-N-p5 (every compiled step slowed by 5%; N the
#                                                        cells at a time), then alone into RUN-1, in SECONDS (the same call
#                                                        resumes), without energy windows as the suites screen (ENERGY=1 for
#                                                        them), then prints benchmarks/turns_overlap.py and turns_compare.py
#                                                        of the three; TURNS_GPUS=none: no GPUS= (a check of the stage on a CPU);
#                                                        docs/scale-out.md
#   bash benchmarks/gpu_machine/versions_gpu.sh hostprobe RUN CELLS [SHARED]  what slows a launch-bound cell beside other
#                                                        cells on one GPU (tt-*: GPT-2 bs8 1.7-1.9x, with or without a
#                                                        neighbour compiling): CELLS under the image's python3 one at a
#                                                        time, 3 processes, no energy windows, five ways one after the
#                                                        other: RUN-all (every core), RUN-pin (pinned to a third of
#                                                        them, as a worker of GPUS=0,0,0), RUN-ctx (every core, two
#                                                        idle processes holding a CUDA context on the GPU), RUN-busy
#                                                        (pinned, the other cores spinning), RUN-all2 (every core
#                                                        again: the A/A); with SHARED (cells, CELLS among them), those
#                                                        three at a time with GPUS=0,0,0 into RUN-s, then again with
#                                                        TIMED_CPUS=all into RUN-w; then each against RUN-all
#   bash benchmarks/gpu_machine/versions_gpu.sh plant RUN SECONDS CELLS  the kernel profile's A/A and planted check: the image's
#                                                        python3 three times (a, b, and p10 with every compiled step
#                                                        slowed by 10% on the host), PROFILE=1, interleaved
#   bash benchmarks/gpu_machine/versions_gpu.sh coldplant RUN SECONDS CELLS MS  the cold replicates' A/A and planted check: the
#                                                        image's python3 three times with COLD_REPLICATES=1 (a, b, and p
#                                                        with every compiled step slowed by 10% and MS ms planted in
#                                                        every compiled first call), interleaved; PROCESSES= in the
#                                                        environment (default 3)
#   bash benchmarks/gpu_machine/versions_gpu.sh guards RUN CELLS PY...   the cells once under every interpreter PY (interleaved,
#                                                        one process, no warm compile) with TORCH_LOGS=guards: the
#                                                        guards each compile installed, in the cell logs
#   bash benchmarks/gpu_machine/versions_gpu.sh runs PREFIX N SECONDS CELLS  the same cells under the image's python3 (PY= in the
#                                                        environment for another interpreter) in N runs,
#                                                        one after the other (PREFIX1 ... PREFIXN): run-to-run spread
#                                                        (each run compiles cold once; docs/measurement.md);
#                                                        with COLD_REPLICATES=1 PROCESSES=N and
#                                                        TORCH_LOGS=+torch._inductor.runtime.triton_heuristics in
#                                                        the environment, N compiles with the autotuner's timings
#                                                        in the cell log (benchmarks/autotune_draws.py --timings)
#   bash benchmarks/gpu_machine/versions_gpu.sh carry-runs [RUN...]  HERE, before a call that resumes: data/runs without its cell
#                                                        logs (which a resumed run does not read) into .carry/runs/runs.tgz,
#                                                        about a quarter of its size (a screen cell's row: about 41 kB, 10 kB
#                                                        packed); carry .carry/runs, not data/runs, and every stage there
#                                                        unpacks it first, leaving alone any file the machine already has;
#                                                        each RUN (a run id, or a prefix with *: 'su-h100-*') that
#                                                        data/runs lacks is copied in from data/examples first (a pass
#                                                        committed there by an earlier clone resumes from a fresh one)
# Every stage packs data/runs into $OUT/runs.tgz every 30 s while it runs and once more at its end, each
# time under a temporary name renamed into place: a command cut off by the device's time limit still
# brings back every cell finished before the last 30 s (a cell file is whole or absent; the
# collector's own temporary files are left out), and the next command resumes the rest. The pack holds
# every run's rows, manifests and presets, and only the cell logs written during this command, so
# that it stays under the 16 MiB a returned file may have over a suite pass of many commands: unpack
# each command's runs.tgz here (`tar xzf`) before the next.
set -uo pipefail
stage=$1; shift
pack() {
  [ -n "${OUT:-}" ] && [ -d data/runs ] || return 0
  { find data/runs -type f ! -path '*/logs/*' ! -name '.*.tmp' ! -name '.lock' -print0
    find data/runs -type f -path '*/logs/*' -newer "$since" -print0; } \
    | tar czf "$OUT/.runs.tgz.part" --null -T - 2>/dev/null && mv -f "$OUT/.runs.tgz.part" "$OUT/runs.tgz"
}
if [ "$stage" = carry-runs ]; then  # here, not there
  for want in "$@"; do
    found=0
    for d in data/examples/$want; do
      [ -f "$d/run.json" ] || continue
      found=1; r=$(basename "$d")
      [ -e "data/runs/$r" ] || { mkdir -p data/runs && cp -r "$d" "data/runs/$r" && echo "from data/examples: $r"; }
    done
    [ $found = 1 ] || [ -d "data/runs/$want" ] || { echo "no run '$want' in data/examples or data/runs" >&2; exit 2; }
  done
  [ -d data/runs ] || { echo "no data/runs to carry" >&2; exit 2; }
  mkdir -p .carry/runs && tar czf .carry/runs/runs.tgz --exclude='*/logs' --exclude='.*.tmp' --exclude='.lock' data/runs \
    && echo "carry .carry/runs ($(du -k .carry/runs/runs.tgz | cut -f1) kB; data/runs is $(du -sk data/runs | cut -f1) kB)"
  exit
fi
since=$(mktemp /tmp/pack-since.XXXXXX)  # the logs written after this are packed
if [ -f .carry/runs/runs.tgz ]; then  # runs carried in to resume: what this machine has already stays
  tar xzf .carry/runs/runs.tgz --skip-old-files && echo "runs carried in: $(ls data/runs | tr '\n' ' ')"
fi
if [ -n "${OUT:-}" ]; then
  ( while sleep 30; do pack; done ) </dev/null >/dev/null 2>&1 &  # holds no pipe of the caller's open: a command
  # piped into tee ends when the stage does, not when the packer's last sleep of up to 30 s does
  packer=$!
  trap 'kill $packer 2>/dev/null; wait $packer 2>/dev/null; pack' EXIT
else
  trap pack EXIT
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
label() {  # the collector's own label of an interpreter: torch<version>, '+' as '-'
  "$1" -c 'import re, torch; print(re.sub(r"[^A-Za-z0-9._-]+", "-", "torch" + torch.__version__))'
}
# screen_confirm RUN SECONDS N BASE CAND AA LABEL=PY...: PRESET's cells under every LABEL=PY, interleaved,
# into RUN-LABEL (make collect; PLANT_*, RETRY, CELLS from the environment); once every run holds every
# cell, and none waits to be measured alone (pending_alone.py), `make confirm` of BASE against CAND (with AA=X:Y, each cell judged by its class's A/A spread)
# writes data/runs/RUNc.toml (CONFIRM_RUN=ID: ID.toml; AFTER=RUNc: not the cells RUNc holds) with the N cells
# that moved most, and those are collected under the same interpreters with the preset's 3 processes into
# RUNc-LABEL (CONFIRM_INTO=RUNc: into an earlier confirmation's runs, which then hold every confirmed cell of
# the screen for one comparison), in the time left; the same call resumes
screen_confirm() {
  local run=$1 secs=$2 n=$3 base=$4 cand=$5 aa=$6 end=$((SECONDS + $2)) want have left side
  local conf=${CONFIRM_RUN:-${1}c}; shift 6
  local into=${CONFIRM_INTO:-$conf}
  local pys="$*"
  make collect PYTHON=python3 PRESET="$PRESET" RUN="$run" STOP_AFTER="$secs" RETRY="${RETRY:-}" PYTHONS="$pys" || return
  want=$(python3 -m collector --preset "$PRESET" ${CELLS:+--cells "$CELLS"} --dry-run --out /tmp/dry \
    --run-id dry | sed -n 's/^\([0-9]*\) cells$/\1/p')
  local dirs=""
  for side in "$@"; do
    have=$(ls data/runs/$run-${side%%=*}/cells/*.parquet 2>/dev/null | wc -l)
    [ "$have" -ge "$want" ] || { echo "screen $run-${side%%=*}: $have of $want cells; the confirmation waits"; return 0; }
    dirs="$dirs data/runs/$run-${side%%=*}"
  done
  # every cell has a row, but those out of memory beside others are not the screen's figures until measured alone
  left=$(python3 benchmarks/gpu_machine/pending_alone.py $dirs 2>/dev/null) || left="an unknown number of"
  [ "${left:-0}" = 0 ] || { echo "screen $run: ${left} cell(s) still to be measured alone; the confirmation waits"; return 0; }
  left=$((end - SECONDS)); [ $left -gt 60 ] || { echo "screen done; no time left to confirm"; return 0; }
  [ -f data/runs/$conf.toml ] || [ ! -f benchmarks/gpu_machine/$conf.toml ] \
    || cp benchmarks/gpu_machine/$conf.toml data/runs/  # a confirmation begun elsewhere: its committed preset
  [ -f data/runs/$conf.toml ] || python3 -m analysis confirm --data data --baseline "$base" --candidate "$cand" \
    ${aa:+--aa "$aa"} ${AFTER:+--after "$AFTER"} --max-cells "$n" --run $conf --out data/runs --write-only || return
  [ -f data/runs/$conf.toml ] || { echo "the screen: nothing moved beyond its threshold; no confirmation"; return 0; }
  make collect PYTHON=python3 PRESET=data/runs/$conf.toml RUN=$into STOP_AFTER="$left" RETRY="${RETRY:-}" PYTHONS="$pys" \
    PROCESSES= GPUS=  # the preset's 3, whatever the screen took; a cell alone on the GPU, whatever GPUS= the screen took
}
case $stage in
  wheels)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/site/*.whl \
      && PYTHONPATH=/tmp/site python3 -c 'import transformers; print("transformers", transformers.__version__)' ;;
  install)
    pool=.whl/pool; mkdir -p $pool
    for g in .carry/g*/; do [ -d "$g" ] && find "$g" -type f -exec mv {} $pool/ \; ; done
    for v in "$@"; do
      dir=.whl/torch-$v
      [ -x /tmp/torch-$v/bin/python ] && { echo "torch $v: installed already"; continue; }
      [ -f $pool/MANIFEST-$v ] || { echo "no MANIFEST-$v among the carried pieces" >&2; exit 2; }
      mkdir -p "$dir" && cp $pool/MANIFEST-$v "$dir/MANIFEST"
      while read -r sum name; do ln -f $pool/"$name".part* "$dir"/ || exit 2; done < "$dir/MANIFEST"
      bash benchmarks/gpu_machine/torch-stack install "$dir" 2>&1 | tail -5
    done ;;
  release)
    run=$1 secs=$2; shift 2
    make collect PYTHON=python3 PRESET="${PRESET:-versions}" RUN="$run" PYTHONS="$*" STOP_AFTER="$secs" ;;
  collector)
    python3 -m collector "$@" ;;
  aa)
    run=$1 secs=$2 cells=$3
    venv=/tmp/venv-image
    if [ ! -x $venv/bin/python ]; then
      python3 -m venv --without-pip $venv
      sp=$($venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$sp/zz-machine-site.pth"
    fi
    make collect PYTHON=python3 PRESET=versions RUN="$run" CELLS="$cells" STOP_AFTER="$secs" \
      PYTHONS="direct=python3 venv=$venv/bin/python venvp5=$venv/bin/python" PLANT_SLOWDOWN=5 PLANT_ON=venvp5 ;;
  resolve)
    run=$1 secs=$2
    PRESET=${PRESET:-benchmarks/gpu_machine/resolve-h200.toml} PLANT_SLOWDOWN=5 PLANT_ON=p5 \
      screen_confirm "$run" "$secs" "${3:-1}" "$run-a" "$run-p5" "$run-a:$run-b" a=python3 b=python3 p5=python3 ;;
  suites)
    run=$1 secs=$2 old=${OLD:-python3} new=${NEW:-/tmp/torch-2.14.1/bin/python}
    lo=$(label "$old") && ln=$(label "$new") || exit 2
    [ "$lo" != "$ln" ] || ln=$ln-2
    PRESET=${PRESET:-suites} screen_confirm "$run" "$secs" "${3:-12}" "$run-$lo" "$run-$ln" "${AA:-}" "$lo=$old" "$ln=$new" ;;
  turns)
    run=$1 secs=$2 end=$((SECONDS + $2))
    export CELLS=${3:-${CELLS:-}}
    gpus=${TURNS_GPUS:-0,0}; n=$(tr ',' '\n' <<< "$gpus" | wc -l); [ "$gpus" = none ] && gpus= n=0
    preset=${PRESET:-benchmarks/gpu_machine/resolve-h200.toml}
    export ENERGY=${ENERGY:-0}  # the suites' screen protocol: no energy windows in the exclusive sections
    make collect PYTHON=python3 PRESET="$preset" RUN="$run-$n" GPUS="$gpus" PROCESSES="${PROCESSES:-3}" \
      PYTHONS="s=python3 p5=python3" PLANT_SLOWDOWN=5 PLANT_ON=p5 STOP_AFTER="$secs" || exit
    left=$((end - SECONDS)); [ $left -gt 30 ] || { echo "no time left for $run-1"; exit 0; }
    make collect PYTHON=python3 PRESET="$preset" RUN="$run-1" GPUS= PROCESSES="${PROCESSES:-3}" STOP_AFTER="$left" || exit
    # what the logs say the shared run's neighbours did while each was timed, and the pace of both protocols
    python3 benchmarks/turns_overlap.py "data/runs/$run-$n-s" "data/runs/$run-$n-p5" | tail -n 25
    python3 benchmarks/turns_compare.py "data/runs/$run-1" "data/runs/$run-$n-s" "data/runs/$run-$n-p5" ;;
  hostprobe)
    run=$1 cells=$2 shared=${3:-}
    third=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(",".join(map(str, c[:max(1, len(c) // 3)])))')
    rest=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(" ".join(map(str, c[max(1, len(c) // 3):])))')
    probe() { make collect PYTHON=python3 PRESET="${PRESET:-benchmarks/gpu_machine/resolve-h200.toml}" RUN="$run-$1" \
      CELLS="${2:-$cells}" PROCESSES=3 ENERGY=0 | grep -- '->'; }
    probe all
    taskset -c "$third" bash -c "$(declare -f probe); run=$run cells='$cells' probe pin"
    pids=; for i in 1 2; do python3 -c 'import time, torch; torch.zeros(1, device="cuda" if torch.cuda.is_available() else "cpu"); time.sleep(3600)' & pids="$pids $!"; done
    sleep 20; probe ctx; kill $pids
    pids=; for c in $rest; do taskset -c "$c" python3 -c 'while True: pass' & pids="$pids $!"; done
    taskset -c "$third" bash -c "$(declare -f probe); run=$run cells='$cells' probe busy"; kill $pids
    probe all2
    ways="all2 pin ctx busy"
    if [ -n "$shared" ]; then
      GPUS=0,0,0 probe s "$shared"; GPUS=0,0,0 TIMED_CPUS=all probe w "$shared"; ways="$ways s w"
    fi
    for w in $ways; do python3 benchmarks/turns_compare.py "data/runs/$run-all" "data/runs/$run-$w" | sed "s/^/$w: /"; done ;;
  plant)
    run=$1 secs=$2 cells=$3
    make collect PYTHON=python3 PRESET=versions RUN="$run" CELLS="$cells" STOP_AFTER="$secs" PROFILE=1 \
      PYTHONS="a=python3 b=python3 p10=python3" PLANT_SLOWDOWN=10 PLANT_ON=p10 ;;
  coldplant)
    run=$1 secs=$2 cells=$3 ms=$4
    make collect PYTHON=python3 PRESET=versions RUN="$run" CELLS="$cells" STOP_AFTER="$secs" COLD_REPLICATES=1 \
      PROCESSES="${PROCESSES:-3}" PYTHONS="a=python3 b=python3 p=python3" PLANT_SLOWDOWN=10 PLANT_COMPILE="$ms" \
      PLANT_ON=p ;;
  guards)
    run=$1 cells=$2; shift 2
    TORCH_LOGS=guards make collect PYTHON=python3 PRESET=versions RUN="$run" CELLS="$cells" PYTHONS="$*" \
      PROCESSES=1 WARM_COMPILE=0 ;;
  runs)
    prefix=$1 n=$2 secs=$3 cells=$4 end=$((SECONDS + $3))
    for i in $(seq 1 "$n"); do
      left=$((end - SECONDS)); [ $left -gt 0 ] || break
      make collect PYTHON="${PY:-python3}" PRESET=versions RUN="$prefix$i" CELLS="$cells" STOP_AFTER="$left"
    done ;;
  *) echo "stages: carry-runs (here) | wheels | install VERSION... | release RUN SECONDS PY... | resolve RUN SECONDS [N] | suites RUN SECONDS [N] | turns RUN SECONDS [CELLS]" \
       "| aa RUN SECONDS CELLS | plant RUN SECONDS CELLS" \
       "| coldplant RUN SECONDS CELLS MS | guards RUN CELLS PY..." \
       "| runs PREFIX N SECONDS CELLS | hostprobe RUN CELLS [SHARED]" >&2; exit 2 ;;
esac
