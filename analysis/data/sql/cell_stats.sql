-- Per-cell statistics from the raw samples: medians and quartiles (ms), enqueue time,
-- memory ratios, and compile-time break-even (steps). One row per cell of every loaded run.
-- A cell's samples come from `processes` fresh processes, stored one after the other: each
-- process's median is taken apart, and a side's median is the geometric mean of its processes'
-- medians, so speedup = eager / compiled is the geometric mean of the per-process speedups (the
-- estimate whose interval analysis/stats/core.py draws). One process: the plain median.
CREATE OR REPLACE TABLE stats AS
WITH per_process AS (
    SELECT *,
        list_transform(range(processes), lambda p: list_aggregate(list_slice(eager_step_ms,
            p * (len(eager_step_ms) // processes) + 1,
            (p + 1) * (len(eager_step_ms) // processes)), 'median')) AS eager_process_ms,
        list_transform(range(processes), lambda p: list_aggregate(list_slice(compiled_step_ms,
            p * (len(compiled_step_ms) // processes) + 1,
            (p + 1) * (len(compiled_step_ms) // processes)), 'median')) AS compiled_process_ms
    FROM cells
)
SELECT
    run_id, cell_id, model, phase, dtype, batch_size,
    -- a dynamic-shapes variant is its own mode in every table ("default dynamic=true"); base_mode
    -- is torch.compile's mode alone
    CASE WHEN dynamic = 'auto' THEN mode ELSE mode || ' dynamic=' || dynamic END AS mode,
    mode AS base_mode, dynamic, compile_scope, tf32, device,
    device_name, torch_version, hostname, status, error, timing_method, blocks, steps_per_block,
    steps_per_sample, processes, process_wall_s, process_errors, hygiene, planted_slowdown_pct, planted_compile_ms,
    eager_process_ms, compiled_process_ms,
    -- per-process speedups and how far the processes spread: max / min - 1
    list_transform(range(1, len(compiled_process_ms) + 1),
                   lambda j: eager_process_ms[j] / compiled_process_ms[j]) AS process_speedups,
    list_max(process_speedups) / list_min(process_speedups) - 1 AS process_spread,
    list_max(eager_process_ms) / list_min(eager_process_ms) - 1 AS eager_process_spread,
    list_max(compiled_process_ms) / list_min(compiled_process_ms) - 1 AS compiled_process_spread,
    len(eager_step_ms) AS eager_n,
    len(compiled_step_ms) AS compiled_n,
    exp(list_aggregate(list_transform(eager_process_ms, lambda v: ln(v)), 'avg')) AS eager_median_ms,
    list_aggregate(eager_step_ms, 'quantile_cont', 0.25) AS eager_q1_ms,
    list_aggregate(eager_step_ms, 'quantile_cont', 0.75) AS eager_q3_ms,
    exp(list_aggregate(list_transform(compiled_process_ms, lambda v: ln(v)), 'avg')) AS compiled_median_ms,
    list_aggregate(compiled_step_ms, 'quantile_cont', 0.25) AS compiled_q1_ms,
    list_aggregate(compiled_step_ms, 'quantile_cont', 0.75) AS compiled_q3_ms,
    list_aggregate(eager_enqueue_ms, 'median') AS eager_enqueue_median_ms,
    list_aggregate(compiled_enqueue_ms, 'median') AS compiled_enqueue_median_ms,
    (eager_q3_ms - eager_q1_ms) / eager_median_ms AS eager_iqr_rel,
    (compiled_q3_ms - compiled_q1_ms) / compiled_median_ms AS compiled_iqr_rel,
    eager_median_ms / compiled_median_ms AS speedup,
    -- launch-bound or not, from the first sample of each block: a block starts after a synchronise,
    -- so that sample's steps go into an empty launch queue. Later samples of a GPU-bound step fill
    -- the queue and then every enqueue waits as long as the device step, which would look
    -- launch-bound. Per block: host enqueue time / device time of its first sample; median over blocks.
    list_filter(eager_enqueue_ms, lambda x, i: (i - 1) % steps_per_block = 0) AS eager_first_enq,
    list_filter(eager_step_ms, lambda x, i: (i - 1) % steps_per_block = 0) AS eager_first_step,
    list_filter(compiled_enqueue_ms, lambda x, i: (i - 1) % steps_per_block = 0) AS compiled_first_enq,
    list_filter(compiled_step_ms, lambda x, i: (i - 1) % steps_per_block = 0) AS compiled_first_step,
    list_aggregate(eager_first_enq, 'median') AS eager_enqueue_first_ms,
    list_aggregate(compiled_first_enq, 'median') AS compiled_enqueue_first_ms,
    list_aggregate(list_transform(range(1, len(eager_first_enq) + 1),
                                  lambda j: eager_first_enq[j] / eager_first_step[j]), 'median') AS eager_launch_ratio,
    list_aggregate(list_transform(range(1, len(compiled_first_enq) + 1),
                                  lambda j: compiled_first_enq[j] / compiled_first_step[j]), 'median')
        AS compiled_launch_ratio,
    -- launch-bound: with an empty queue the host needs at least 90% of the device time to enqueue
    coalesce(eager_launch_ratio >= 0.9, false) AS eager_launch_bound,
    coalesce(compiled_launch_ratio >= 0.9, false) AS compiled_launch_bound,
    first_call_eager_s, first_call_compiled_s, warm_first_call_compiled_s,
    compile_dynamo_s, compile_inductor_s, compile_backward_s, warm_compile_dynamo_s,
    graph_count, graph_break_count, kernel_count, warmup_calls_compiled,
    eager_peak_allocated_bytes, compiled_peak_allocated_bytes,
    eager_peak_reserved_bytes, compiled_peak_reserved_bytes, eager_cold_peak_reserved_bytes,
    compiled_cold_peak_allocated_bytes, compiled_cold_peak_reserved_bytes,
    compiled_peak_allocated_bytes / eager_peak_allocated_bytes AS mem_allocated_ratio,
    -- reserved memory is process-wide and never shrinks here, so the comparable figure is its
    -- growth from the eager first call to the end of the timed blocks (CUDA-graph pools included)
    greatest(eager_peak_reserved_bytes, compiled_peak_reserved_bytes) AS end_peak_reserved_bytes,
    end_peak_reserved_bytes / eager_cold_peak_reserved_bytes AS mem_reserved_growth,
    compiled_cold_peak_allocated_bytes / eager_peak_allocated_bytes AS mem_cold_allocated_ratio,
    output_rel_err, grad_rel_err, tolerance, accuracy_ok, eager_output_rel_err, eager_grad_rel_err,
    gpu_util_pct, gpu_power_w, sm_clock_mhz, gpu_temp_c, eager_energy_j, compiled_energy_j,
    -- energy per step and per sample (one batch item): the side's energy over the steps it timed
    -- (v4: one back-to-back window per side with its own step count; v3: the timed blocks)
    eager_energy_j / eager_energy_steps AS eager_energy_per_step_j,
    compiled_energy_j / compiled_energy_steps AS compiled_energy_per_step_j,
    eager_energy_j / eager_energy_window_s AS eager_power_w,
    compiled_energy_j / compiled_energy_window_s AS compiled_power_w,
    eager_energy_per_step_j / batch_size AS eager_energy_per_sample_j,
    compiled_energy_per_step_j / batch_size AS compiled_energy_per_sample_j,
    -- work and achieved rate: FLOPs of one eager step over each side's median step time
    flops_per_step,
    flops_per_step / (eager_median_ms / 1e3) / 1e12 AS eager_tflops,
    flops_per_step / (compiled_median_ms / 1e3) / 1e12 AS compiled_tflops,
    -- diagnostics (schema v3; null before, or where the torch could not tell)
    graph_break_reasons_json, recompile_count, recompile_reasons_json, cudagraph_skip_count,
    cudagraph_skip_reasons_json, compile_split_json, cache_inductor_bytes, cache_triton_bytes,
    gpu_index, concurrent_cells, timing_wait_s,  -- timing_wait_s: cells that took turns on a shared GPU (GPUS=0,0)
    process_stages_json,  -- schema v14: each process's seconds by stage (run_tables.collection_rows)
    packages_json, inputs_json, graph_ops_json,  -- schema v11: what built the model, the captured graph
    kernel_profile_json,  -- schema v7 (PROFILE=1): analysis/explain/kernels.py
    autotune_json,  -- schema v8: the cold compile's autotuned launch configurations (analysis/explain/kernels.py)
    process_first_call_compiled_s, replicate_cache,  -- schema v8: each process's first call; cold or warm replicates
    aot_export_s, aot_compile_s, aot_load_s,  -- schema v4
    portable_first_call_compiled_s, portable_load_s, portable_cache_bytes,
    sweep_batch_sizes, sweep_first_call_s, sweep_recompile_count, sweep_graph_count,
    -- break-even N* = extra first-call time / time saved per step (null where it never pays off)
    CASE WHEN eager_median_ms > compiled_median_ms
         THEN greatest(first_call_compiled_s - first_call_eager_s, 0) / ((eager_median_ms - compiled_median_ms) / 1e3)
    END AS breakeven_cold_steps,
    CASE WHEN eager_median_ms > compiled_median_ms
         THEN greatest(warm_first_call_compiled_s - first_call_eager_s, 0) / ((eager_median_ms - compiled_median_ms) / 1e3)
    END AS breakeven_warm_steps
FROM per_process;
