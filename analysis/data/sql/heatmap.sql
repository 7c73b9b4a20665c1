-- Geometric-mean speedup per model and mode (over dtypes and batch sizes), per phase; the
-- whole-step compile scope is its own column ("default [step]"), not mixed into model scope.
SELECT phase, model,
       CASE WHEN compile_scope = 'step' THEN mode || ' [step]' ELSE mode END AS mode,
       exp(avg(ln(speedup))) AS geomean_speedup,
       count(*) AS cells
FROM stats
WHERE run_id = $run_id AND status = 'ok' AND mode <> 'eager' AND speedup > 0
GROUP BY ALL
ORDER BY phase, model, mode;
