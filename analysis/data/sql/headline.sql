-- Headline per phase, mode, compile scope and dtype (bf16 autocast and float32 are different
-- regimes, not one average): cells, pass rate, geometric-mean speedup of ok cells.
SELECT
    phase, mode, compile_scope, dtype,
    count(*) AS cells,
    count(*) FILTER (WHERE status = 'ok') AS ok_cells,
    count(*) FILTER (WHERE status = 'ok') / count(*) AS pass_rate,
    exp(avg(ln(speedup)) FILTER (WHERE status = 'ok' AND speedup > 0)) AS geomean_speedup,
    count(*) FILTER (WHERE status = 'ok' AND verdict = 'faster') AS faster,
    count(*) FILTER (WHERE status = 'ok' AND verdict = 'slower') AS slower,
    count(*) FILTER (WHERE status = 'ok' AND coalesce(verdict, '') NOT IN ('faster', 'slower')) AS unclear
FROM stats LEFT JOIN verdicts USING (run_id, cell_id)
WHERE run_id = $run_id AND mode <> 'eager'
GROUP BY ALL
ORDER BY phase, ok_cells = 0, mode, compile_scope, dtype;  -- groups where nothing ran come last
