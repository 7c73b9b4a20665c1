-- Raw samples of the compiled cells of a run, for the bootstrap (stats.py).
SELECT run_id, cell_id, blocks, steps_per_block, eager_step_ms, compiled_step_ms
FROM cells
WHERE run_id = $run_id AND compiled_step_ms IS NOT NULL AND len(compiled_step_ms) > 0
  AND eager_step_ms IS NOT NULL AND len(eager_step_ms) > 0
ORDER BY cell_id;
