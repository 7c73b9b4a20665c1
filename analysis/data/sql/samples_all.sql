-- Raw samples of every cell of a run with eager samples, for the bootstraps (compiled is null in eager-only cells).
SELECT run_id, cell_id, blocks, steps_per_block, eager_step_ms, compiled_step_ms, processes
FROM cells
WHERE run_id = $run_id AND eager_step_ms IS NOT NULL AND len(eager_step_ms) > 0
ORDER BY cell_id;
