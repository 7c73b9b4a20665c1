-- Compile cost and amortization per compiled cell: first calls, Dynamo's split, break-even steps.
SELECT run_id, cell_id, model, phase, dtype, batch_size, mode, compile_scope, status,
       first_call_eager_s, first_call_compiled_s, warm_first_call_compiled_s,
       compile_dynamo_s, compile_inductor_s, compile_backward_s, graph_count, graph_break_count, kernel_count,
       compile_split_json, cache_inductor_bytes, cache_triton_bytes,
       aot_export_s, aot_compile_s, aot_load_s, portable_first_call_compiled_s, portable_cache_bytes,
       eager_median_ms, compiled_median_ms, breakeven_cold_steps, breakeven_warm_steps
FROM stats
WHERE run_id = $run_id AND mode <> 'eager' AND first_call_compiled_s IS NOT NULL
ORDER BY phase, model, dtype, batch_size, mode, compile_scope;
