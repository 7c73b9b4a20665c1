-- Speedup against batch size, for (model, phase, dtype, mode, scope) groups measured at 2+ sizes.
WITH groups AS (
    SELECT model, phase, dtype, mode, compile_scope
    FROM stats
    WHERE run_id = $run_id AND status = 'ok' AND mode <> 'eager'
    GROUP BY ALL
    HAVING count(DISTINCT batch_size) >= 2
)
SELECT s.model, s.phase, s.dtype, s.mode, s.compile_scope, s.batch_size, s.speedup,
       v.speedup_lo, v.speedup_hi
FROM stats s JOIN groups USING (model, phase, dtype, mode, compile_scope)
JOIN verdicts v USING (run_id, cell_id)
WHERE s.run_id = $run_id AND s.status = 'ok'
ORDER BY s.model, s.phase, s.dtype, s.mode, s.compile_scope, s.batch_size;
