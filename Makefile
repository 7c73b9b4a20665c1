# compile-bench: `make help` lists the targets.
# PYTHON=python3 uses an existing interpreter as it is (a CUDA image, the GPU box) and installs nothing;
# without it every target installs what it needs into the project virtualenv .venv on first use.
SHELL := /bin/bash

# the collect command's variables and the options they pass: written from the collector's one table of
# options (collector/commands/options.py) by `python -m collector.commands.options --write`
include collector/commands/options.mk
# every variable this Makefile reads from the command line; anything else (MODEL= for MODELS=) is a
# typo that would otherwise be ignored silently
KNOWN_VARS := PYTHON TORCH $(COLLECT_VARS) BASELINE CANDIDATE REPEATS ALLOW_MISMATCH STRICT MIN_EFFECT MAX_REGRESSION \
  QUANTITIES PER_CELL_FIRST_CALL ALL RELIABILITY_TESTS SHARDS RESUBMIT WATCH THRESHOLD AA DRY MAX_CELLS WRITE_ONLY
UNKNOWN_VARS := $(filter-out $(KNOWN_VARS),$(strip $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))))
ifneq ($(UNKNOWN_VARS),)
$(error unknown variable(s) $(UNKNOWN_VARS) (a typo? e.g. MODELS=, not MODEL=); known: $(KNOWN_VARS))
endif
PYTHON ?=
TORCH ?= 2.13.0
# TORCH=<version> given to make gets its own virtualenv, so versions live side by side
ifneq ($(filter command line environment,$(origin TORCH)),)
VENV := .venv-torch-$(TORCH)
else
VENV := .venv
endif

ifeq ($(strip $(PYTHON)),)
PY := $(VENV)/bin/python
REPORT_DEPS := $(VENV)/.report-deps
COLLECT_DEPS := $(VENV)/.collect-deps
else
PY := $(PYTHON)
REPORT_DEPS :=
COLLECT_DEPS :=
endif

# collect options (empty = the preset's value)
PRESET ?= auto
RUN ?=
RUNS ?= data/runs
# a value as one shell word in single quotes ('\'' for a quote inside): nothing in it (`, $(...), ", a
# space) reaches the shell as code or splits the command line
sq = '$(subst ','\'',$(1))'
opt = $(if $(strip $(2)),$(1) $(call sq,$(strip $(2))))
# a switch (RETRY=1, SLURM_EXCLUSIVE=1, ...): empty, 0, no, false or off mean off
on = $(filter-out 0 no No NO false False FALSE off Off OFF,$(strip $(1)))
# make puts command-line variables into every recipe's environment, and sbatch's default --export=ALL
# would carry them into the job, where srun reads SLURM_EXCLUSIVE, SLURM_ACCOUNT, ... as its own input:
# this project's SLURM settings reach the collector as options only
SLURM_SETTINGS := SLURM_PARTITION SLURM_ACCOUNT SLURM_CONSTRAINT SLURM_TIME SLURM_PARALLELISM SLURM_CPUS SLURM_GPUS \
  SLURM_MEM SLURM_QOS SLURM_EXCLUSIVE SLURM_ARGS
$(foreach v,$(SLURM_SETTINGS),$(if $(filter command line,$(origin $(v))),$(eval unexport $(v))))
# PYTHONS="<python> [<label>=<python> ...]": the same matrix under several interpreters (torch versions),
# interleaved cell by cell on this machine; each writes its own run <RUN>-<label>
PYTHONS ?=
COLLECT_ARGS = --preset $(call sq,$(PRESET)) --out $(call sq,$(RUNS)) $(if $(strip $(PYTHONS)),$(foreach p,$(PYTHONS),--python $(call sq,$(p))),--python $(call sq,$(PY))) \
  $(COLLECT_OPTION_ARGS)
REPORT_ARGS = --out reports $(if $(call on,$(ALL)),--all) $(if $(BASELINE),--baseline $(call sq,$(BASELINE)) $(foreach c,$(CANDIDATE),--candidate $(call sq,$(c))),$(foreach r,$(RUN),--run $(call sq,$(r)))) \
  $(foreach p,$(REPEATS),--repeat $(call sq,$(p))) \
  $(if $(call on,$(STRICT)),--strict) $(if $(call on,$(ALLOW_MISMATCH)),--allow-mismatch) \
  $(call opt,--min-effect,$(MIN_EFFECT))

.PHONY: help collect confirm collect-status collect-cancel merge report gate test test-fast bench reliability clean-reports
RELIABILITY_TESTS = kill or ctrl_c or full_disk or memory_limit or crashing or hanging or sigterm or concurrent or unwritable \
  or partial_file or compile_failure or nan_output or bad_input or malformed or bad_files or hostile or escapes \
  or crashed_cell or stop_after or dry_run

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'
	@echo "  collect variables (docs/options.md says what each does): $(addsuffix =,$(COLLECT_VARS))" | fold -s -w 110 | sed '2,$$s/^/                   /'
	@echo "  collect options: PRESET=auto|smoke|quick|default|shapes|file.toml MODELS= MODES= PHASES= DTYPES="
	@echo "                   DYNAMIC=auto,true,false"
	@echo "                   BATCH_SIZES= SCOPES= BLOCKS= STEPS= WARMUP= TIMEOUT= WARM_COMPILE=0|1 TF32=0|1 RUN= RUNS="
	@echo "                   PROCESSES=<n> (fresh processes timing each cell, default 3)"
	@echo "                   PLANT_SLOWDOWN=<pct> (test option: slow each compiled step by pct%)"
	@echo "                   PLANT_COMPILE=<ms> (test option: add ms to every compiled first call)"
	@echo "                   PYTHONS=\"python3 [label=]/path/to/python ...\" (several torch versions, interleaved"
	@echo "                     cell by cell on this machine; runs <RUN>-<label>) PLANT_ON=<label> (plant in one only)"
	@echo "                   GPUS=all|0,1 (cells concurrently, one per GPU; default one at a time); GPUS=0,0 (two"
	@echo "                     cells at a time on GPU 0, their timed sections in turn: docs/scale-out.md)"
	@echo "                   RETRY=1 (measure again the cells whose saved row failed)"
	@echo "                   CELLS=<pattern>[,<pattern>] (only the cells whose id matches, e.g. 'gpt__*__bs128__*')"
	@echo "                   EXECUTOR=slurm (one SLURM array task per cell; returns after submitting)"
	@echo "                     SLURM_PARTITION= SLURM_ACCOUNT= SLURM_CONSTRAINT= SLURM_TIME=<min> SLURM_PARALLELISM=<n> ALLOW_MIXED=1"
	@echo "                     SLURM_CPUS=<n> SLURM_GPUS=<n> SLURM_MEM=64G SLURM_QOS= SLURM_EXCLUSIVE=1 SLURM_ARGS=\"gres=gpu:h200:1 ...\""
	@echo "                     SITE_PROFILE=site.toml (partition, account, qos, gres, cpus, mem, time, setup lines, sbatch options: docs/scale-out.md)"
	@echo "                   LAUNCHER=fork|exec (fork cell processes from a parent with torch imported: default)"
	@echo "                   STOP_AFTER=<seconds> (start no new cell after that; the same command resumes)"
	@echo "                   DEVICE=auto|cuda|cpu SHARD=<k>/<N> (the k-th of N disjoint slices, its own run folder)"
	@echo "                   PORTABLE=1 (also time a compile from the portable cache artifacts)"
	@echo "                   SWEEP=1 (inference: other batch sizes in the same process, recompiles counted)"
	@echo "                   PROFILE=1 (after timing, each side's kernels by kind and name: torch.profiler, cold process)"
	@echo "                   COLD_REPLICATES=1 (every process compiles cold in its own cache: the compile's autotuning"
	@echo "                     draw inside the intervals, one cold-compile sample a process)"
	@echo "                   ENERGY=0 (no energy windows after the timing: the suite presets' setting)"
	@echo "  make collect-status RUN=<id> [RESUBMIT=1 [SLURM_TIME=<min>]] [WATCH=1]   a SLURM run's progress and why a"
	@echo "                   task left no row (timed out, cancelled, node failure, crashed); RESUBMIT=1 queues those"
	@echo "                   cells again (SLURM_TIME= a new limit); WATCH=1 follows it until nothing is queued or running"
	@echo "  report options:  RUN=<run id> (repeatable, space-separated) STRICT=1"
	@echo "  compare:         make report BASELINE=<run> CANDIDATE=\"<run> [<run> ...]\" [ALLOW_MISMATCH=1]"
	@echo "                   REPEATS=\"<A2>:<B2> [<A3>:<B3> ...]\" (the same two versions from other machines: which"
	@echo "                   called changes repeat in every pair; with one CANDIDATE)"
	@echo "  suites:          make collect PRESET=suites|timm|huggingface|torchvision|builtin (screen: 1 process a cell), then"
	@echo "                   make confirm BASELINE=<screen A> CANDIDATE=<screen B> [AA=<X>:<Y>|THRESHOLD=10%] (docs/suites.md)"
	@echo "                   [CELLS=<pattern>,...] [MAX_CELLS=<n>] [DRY=1|WRITE_ONLY=1 (write the preset, measure elsewhere)]"
	@echo "  models:          MODELS=timm:<name>,hf:<ModelClass>,tv:<name>,<file.py>:<function> (docs/models.md)"
	@echo "  gate:            make gate BASELINE=<run> CANDIDATE=<run> [MAX_REGRESSION=5%] [QUANTITIES=compiled,memory] [MIN_EFFECT=0.02] [PER_CELL_FIRST_CALL=1] [ALLOW_NEW_FAILURES=1]"
	@echo "                   [REPEATS=\"<A2>:<B2> ...\"] (fail only on regressions that repeat in every pair)"
	@echo "                   measured (benchmarks/false_alarms.py): fails 0 of 196 same-torch comparisons (5 unverified: exit 4), 21 of 26 planted GPU pairs (24 at 2%)"
	@echo "  PYTHON=python3   use that interpreter as it is, install nothing"
	@echo "  TORCH=<version>  collect with that torch, in its own virtualenv .venv-torch-<version>"

$(VENV)/bin/python:
	python3 -m venv $(VENV)

$(VENV)/.report-deps: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q "duckdb>=1.3" "jsonschema>=4" "pandas>=2.0" "pyarrow>=14" "jinja2>=3.1" "matplotlib>=3.7" "pytest>=7"
	touch $@

$(VENV)/.collect-deps: $(VENV)/.report-deps
	@$(VENV)/bin/pip install -q "torch==$(TORCH)" "nvidia-ml-py>=12" "submitit>=1.5" || { \
	  echo "error: pip cannot install torch==$(TORCH) here; what pip offers:"; \
	  $(VENV)/bin/pip index versions torch 2>/dev/null | grep -v WARNING | head -3; exit 2; }
	@# the model sources (docs/models.md): transformers for hf: models; timm and the torchvision that pairs with
	@# this torch (2.N -> 0.N+15) for timm: models, kept only where they import (the CPU build 2.13.0 has none)
	@$(VENV)/bin/pip install -q "transformers==5.23.0" || echo "note: transformers did not install: hf: models will be skipped rows"
	@minor=$$($(VENV)/bin/python -c 'import torch; print(torch.__version__.split(".")[1])'); \
	  $(VENV)/bin/pip install -q "torchvision==0.$$((minor + 15)).*" "timm==1.0.31" >/dev/null 2>&1; \
	  $(VENV)/bin/python -c 'import timm' 2>/dev/null || { $(VENV)/bin/pip uninstall -q -y timm torchvision >/dev/null 2>&1; \
	  echo "note: timm does not import beside torch $(TORCH) here (no matching torchvision): timm: and tv: models will be skipped rows; TORCH=2.14.1 has both"; }
	touch $@

collect: $(COLLECT_DEPS) ## measure this machine (GPU preset `default` if CUDA is there, else `smoke`)
	$(PY) -m collector $(COLLECT_ARGS)

confirm: $(COLLECT_DEPS) ## re-measure (PROCESSES, default 3) the cells of two screens that moved: BASELINE= CANDIDATE= [AA=X:Y|THRESHOLD=10%] [RUN=] [DRY=1]
	$(PY) -m analysis confirm --data data --baseline $(call sq,$(BASELINE)) --candidate $(call sq,$(CANDIDATE)) --out $(call sq,$(RUNS)) \
	  --processes $(call sq,$(or $(PROCESSES),3)) $(call opt,--threshold,$(THRESHOLD)) $(call opt,--aa,$(AA)) $(call opt,--run,$(RUN)) \
	  $(call opt,--cells,$(CELLS)) $(call opt,--max-cells,$(MAX_CELLS)) $(if $(call on,$(DRY)),--dry-run) $(if $(call on,$(WRITE_ONLY)),--write-only)

collect-status: $(COLLECT_DEPS) ## a SLURM run's progress: make collect-status RUN=<run id> [RESUBMIT=1] [WATCH=1]
	@test -n $(call sq,$(RUN)) || { echo 'usage: make collect-status RUN=<run id> [RESUBMIT=1] [WATCH=1]'; exit 2; }
	$(PY) -m collector.slurm.submit status $(call sq,$(RUNS)/$(RUN)) $(if $(call on,$(RESUBMIT)),--resubmit $(call opt,--slurm-time,$(SLURM_TIME))) $(if $(call on,$(WATCH)),--watch)

collect-cancel: $(COLLECT_DEPS) ## cancel a SLURM run's queued and running cells: make collect-cancel RUN=<run id>
	@test -n $(call sq,$(RUN)) || { echo 'usage: make collect-cancel RUN=<run id>'; exit 2; }
	$(PY) -m collector.slurm.submit cancel $(call sq,$(RUNS)/$(RUN))

merge: $(REPORT_DEPS) ## join shard run folders: make merge RUN=<run id> SHARDS="<folder> <folder> ..."
	@test -n $(call sq,$(RUN)) -a -n $(call sq,$(SHARDS)) || { echo 'usage: make merge RUN=<run id> SHARDS="data/runs/<id>-shard1of2 ..."'; exit 2; }
	$(PY) -m collector.commands.shard merge --into $(call sq,$(RUNS)/$(RUN)) $(foreach s,$(SHARDS),$(call sq,$(s)))

report: $(REPORT_DEPS) ## render your runs (data/runs/) and the published examples to reports/ (index.html); RUN=, ALL=1
	$(PY) -m analysis $(REPORT_ARGS)

gate: $(REPORT_DEPS) ## fail (exit 1) on a called regression beyond MAX_REGRESSION (default 5%) of CANDIDATE against BASELINE; 4: unverified
	$(PY) -m analysis gate --data data --baseline $(call sq,$(BASELINE)) --candidate $(call sq,$(CANDIDATE)) \
	  --max-regression $(call sq,$(or $(MAX_REGRESSION),5%)) $(if $(QUANTITIES),--quantities $(call sq,$(QUANTITIES))) \
	  $(foreach p,$(REPEATS),--repeat $(call sq,$(p))) $(if $(call on,$(ALLOW_MISMATCH)),--allow-mismatch) $(call opt,--min-effect,$(MIN_EFFECT)) \
	  $(if $(call on,$(PER_CELL_FIRST_CALL)),--per-cell-first-call) $(if $(call on,$(ALLOW_NEW_FAILURES)),--allow-new-failures) \
	  || { rc=$$?; echo "make gate: python -m analysis gate exited $$rc ($$(case $$rc in 1) echo 'a called regression beyond the bound';; 4) echo 'unverified: only regressions an A/A of one build can produce; repeat the pair or give REPEATS= to decide';; *) echo 'bad input, not a verdict';; esac)); make itself exits 2 on any" >&2; exit $$rc; }

test: $(COLLECT_DEPS) ## run the test suite (includes a real inductor compile on the CPU)
	$(PY) -m pytest -q --durations=15 tests

test-fast: $(COLLECT_DEPS) ## the suite without the slow, compiling, real-SLURM and browser tests (about 6 min)
	$(PY) -m pytest -q -m "not slow and not compile and not slurm and not browser" tests

bench: $(COLLECT_DEPS) ## harness overhead and 10,000-cell report benchmarks (docs/performance.md)
	$(PY) benchmarks/harness_overhead.py
	$(PY) benchmarks/report_scale.py

reliability: $(COLLECT_DEPS) ## fault-injection tests, the kill -9 and stop-signal loops (docs/reliability.md)
	$(PY) -m pytest -v tests/test_reliability.py tests/test_runner.py tests/test_browser.py \
	  tests/test_cell.py tests/test_matrix.py tests/test_analysis.py -k "$(RELIABILITY_TESTS)"
	$(PY) -m pytest -v tests/test_report_robustness.py tests/test_collector_robustness.py
	$(PY) benchmarks/reliability.py --points 20 --signals 120

clean-reports: ## delete rendered reports (reports/)
	rm -rf reports
