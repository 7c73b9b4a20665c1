# Written by `python -m collector.commands.options --write` from collector/commands/options.py;
# tests/test_options.py fails when it is stale. The Makefile includes it.
COLLECT_VARS := PRESET MODELS PHASES MODES DTYPES BATCH_SIZES SCOPES DYNAMIC BLOCKS STEPS WARMUP TIMEOUT PROCESSES COLD_REPLICATES PLANT_SLOWDOWN PLANT_COMPILE WARM_COMPILE PORTABLE SWEEP PROFILE ENERGY GRAPH_CAPTURE TF32 DEVICE RUN RUNS GPUS TIMED_CPUS RETRY STOP_AFTER SHARD CELLS EXECUTOR PYTHONS PLANT_ON LAUNCHER NOTE SLURM_PARTITION SLURM_ACCOUNT SLURM_CONSTRAINT SLURM_TIME SLURM_PARALLELISM SLURM_CPUS SLURM_GPUS SLURM_MEM SLURM_QOS SLURM_EXCLUSIVE SLURM_ARGS SITE_PROFILE ALLOW_MIXED
COLLECT_OPTION_ARGS = $(call opt,--models,$(MODELS)) \
  $(call opt,--phases,$(PHASES)) \
  $(call opt,--modes,$(MODES)) \
  $(call opt,--dtypes,$(DTYPES)) \
  $(call opt,--batch-sizes,$(BATCH_SIZES)) \
  $(call opt,--scopes,$(SCOPES)) \
  $(call opt,--dynamic,$(DYNAMIC)) \
  $(call opt,--blocks,$(BLOCKS)) \
  $(call opt,--steps-per-block,$(STEPS)) \
  $(call opt,--warmup-steps,$(WARMUP)) \
  $(call opt,--timeout,$(TIMEOUT)) \
  $(call opt,--processes,$(PROCESSES)) \
  $(call opt,--cold-replicates,$(COLD_REPLICATES)) \
  $(call opt,--plant-slowdown,$(PLANT_SLOWDOWN)) \
  $(call opt,--plant-compile,$(PLANT_COMPILE)) \
  $(call opt,--warm-compile,$(WARM_COMPILE)) \
  $(call opt,--portable-cache,$(PORTABLE)) \
  $(call opt,--recompile-sweep,$(SWEEP)) \
  $(call opt,--kernel-profile,$(PROFILE)) \
  $(call opt,--energy-windows,$(ENERGY)) \
  $(call opt,--graph-capture,$(GRAPH_CAPTURE)) \
  $(call opt,--tf32,$(TF32)) \
  $(call opt,--device,$(DEVICE)) \
  $(call opt,--run-id,$(RUN)) \
  $(call opt,--gpus,$(GPUS)) \
  $(call opt,--timed-cpus,$(TIMED_CPUS)) \
  $(if $(call on,$(RETRY)),--retry-failed) \
  $(call opt,--stop-after,$(STOP_AFTER)) \
  $(call opt,--shard,$(SHARD)) \
  $(call opt,--cells,$(CELLS)) \
  $(call opt,--executor,$(EXECUTOR)) \
  $(call opt,--plant-on,$(PLANT_ON)) \
  $(call opt,--launcher,$(LAUNCHER)) \
  $(call opt,--note,$(NOTE)) \
  $(call opt,--slurm-partition,$(SLURM_PARTITION)) \
  $(call opt,--slurm-account,$(SLURM_ACCOUNT)) \
  $(call opt,--slurm-constraint,$(SLURM_CONSTRAINT)) \
  $(call opt,--slurm-time,$(SLURM_TIME)) \
  $(call opt,--slurm-parallelism,$(SLURM_PARALLELISM)) \
  $(call opt,--slurm-cpus,$(SLURM_CPUS)) \
  $(call opt,--slurm-gpus,$(SLURM_GPUS)) \
  $(call opt,--slurm-mem,$(SLURM_MEM)) \
  $(call opt,--slurm-qos,$(SLURM_QOS)) \
  $(if $(call on,$(SLURM_EXCLUSIVE)),--slurm-exclusive) \
  $(foreach a,$(SLURM_ARGS),--slurm-arg $(call sq,$(a))) \
  $(call opt,--site-profile,$(SITE_PROFILE)) \
  $(if $(call on,$(ALLOW_MIXED)),--allow-mixed)
