-- Cells of two runs paired on their key (cell_id spells model, phase, dtype, batch size, mode and
-- scope), with both sides' statistics. Eager-only cells are paired too (their eager change counts).
SELECT a.cell_id, a.model, a.phase, a.dtype, a.batch_size, a.mode, a.compile_scope,
       a.status AS status_a, b.status AS status_b,
       a.speedup AS speedup_a, b.speedup AS speedup_b,
       a.eager_median_ms AS eager_a, b.eager_median_ms AS eager_b,
       a.compiled_median_ms AS compiled_a, b.compiled_median_ms AS compiled_b,
       a.first_call_compiled_s AS cold_a, b.first_call_compiled_s AS cold_b,
       a.warm_first_call_compiled_s AS warm_a, b.warm_first_call_compiled_s AS warm_b,
       a.compiled_peak_allocated_bytes AS mem_a, b.compiled_peak_allocated_bytes AS mem_b,
       a.error AS error_a, b.error AS error_b,
       a.eager_launch_bound AS eager_lb_a, b.eager_launch_bound AS eager_lb_b,
       a.concurrent_cells AS beside_a, b.concurrent_cells AS beside_b,
       a.timing_wait_s IS NOT NULL AS turns_a, b.timing_wait_s IS NOT NULL AS turns_b,  -- took turns on a shared GPU
       a.compiled_launch_bound AS compiled_lb_a, b.compiled_launch_bound AS compiled_lb_b,
       a.graph_count AS graphs_a, b.graph_count AS graphs_b,
       a.kernel_count AS kernels_a, b.kernel_count AS kernels_b,
       a.graph_break_count AS breaks_a, b.graph_break_count AS breaks_b,
       a.recompile_count AS recompiles_a, b.recompile_count AS recompiles_b,
       a.cudagraph_skip_count AS cg_skips_a, b.cudagraph_skip_count AS cg_skips_b,
       a.graph_break_reasons_json AS break_reasons_a, b.graph_break_reasons_json AS break_reasons_b,
       a.recompile_reasons_json AS recompile_reasons_a, b.recompile_reasons_json AS recompile_reasons_b,
       a.cudagraph_skip_reasons_json AS cg_reasons_a, b.cudagraph_skip_reasons_json AS cg_reasons_b,
       a.kernel_profile_json AS profile_a, b.kernel_profile_json AS profile_b,
       a.autotune_json AS autotune_a, b.autotune_json AS autotune_b,
       a.process_first_call_compiled_s AS cold_all_a, b.process_first_call_compiled_s AS cold_all_b,
       a.replicate_cache AS rep_cache_a, b.replicate_cache AS rep_cache_b,
       a.compiled_enqueue_first_ms AS compiled_enq_a, b.compiled_enqueue_first_ms AS compiled_enq_b,
       a.graph_ops_json AS graph_ops_a, b.graph_ops_json AS graph_ops_b,
       a.packages_json AS packages_a, b.packages_json AS packages_b,
       a.inputs_json AS inputs_a, b.inputs_json AS inputs_b
FROM stats a JOIN stats b ON a.cell_id = b.cell_id
WHERE a.run_id = $baseline AND b.run_id = $candidate
ORDER BY a.phase, a.model, a.dtype, a.batch_size, a.mode, a.compile_scope;
