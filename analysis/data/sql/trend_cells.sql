-- Each ok compiled cell's compiled step time (geometric mean of its processes' medians), speedup and
-- generated kernels (null before schema 6) in
-- each of several runs: the per-cell trend over versions.
SELECT run_id, cell_id,
       model || ' ' || phase || ' ' || dtype || ' bs' || batch_size || ' ' || mode
         || CASE WHEN compile_scope = 'model' THEN '' ELSE ' [' || compile_scope || ']' END AS label,
       compiled_median_ms, speedup, kernel_count
FROM stats
WHERE run_id IN (SELECT unnest($runs)) AND status = 'ok' AND mode <> 'eager' AND speedup > 0
ORDER BY cell_id, run_id;
