-- Peak allocated memory of eager and compiled steps (warm) and of compilation (cold); reserved growth.
SELECT cell_id, model, phase, dtype, batch_size, mode, compile_scope,
       eager_peak_allocated_bytes, compiled_peak_allocated_bytes, mem_allocated_ratio,
       eager_cold_peak_reserved_bytes, compiled_cold_peak_reserved_bytes, end_peak_reserved_bytes, mem_reserved_growth,
       compiled_cold_peak_allocated_bytes, mem_cold_allocated_ratio
FROM stats
WHERE run_id = $run_id AND mode <> 'eager' AND status IN ('ok', 'accuracy_fail')
  AND eager_peak_allocated_bytes IS NOT NULL
ORDER BY phase, model, dtype, batch_size, mode, compile_scope;
