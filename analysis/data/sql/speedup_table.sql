-- Every compiled cell of a run with medians, spread, speedup and its interval, best first per phase.
SELECT s.*, v.speedup_lo, v.speedup_hi, v.verdict
FROM stats s JOIN verdicts v USING (run_id, cell_id)
WHERE s.run_id = $run_id AND s.mode <> 'eager' AND s.status IN ('ok', 'accuracy_fail')
ORDER BY s.phase, s.model, s.dtype, s.batch_size, s.mode, s.compile_scope;
