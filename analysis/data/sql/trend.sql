-- Geometric-mean speedup of ok compiled cells per run, phase, mode, scope and dtype (a trend across runs).
SELECT run_id, phase, mode, compile_scope, dtype, count(*) AS cells, exp(avg(ln(speedup))) AS geomean_speedup
FROM stats
WHERE run_id IN (SELECT unnest($runs)) AND status = 'ok' AND mode <> 'eager' AND speedup > 0
GROUP BY ALL ORDER BY phase, mode, compile_scope, dtype, run_id;
