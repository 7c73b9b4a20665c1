-- Raw samples of every cell of a run that has eager samples (compiled may be empty: eager-only cells).
SELECT run_id, cell_id, blocks, steps_per_block, eager_step_ms, compiled_step_ms
FROM cells
WHERE run_id = $run_id AND eager_step_ms IS NOT NULL AND len(eager_step_ms) > 0
ORDER BY cell_id;
