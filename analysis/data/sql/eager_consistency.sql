-- The same eager model (model, phase, dtype, batch size) is measured in every mode's cell, each in
-- its own process: how far apart do those eager medians land? (A/A check of the run.)
SELECT model, phase, dtype, batch_size,
       count(*) AS cells,
       min(eager_median_ms) AS min_ms,
       max(eager_median_ms) AS max_ms,
       max(eager_median_ms) / min(eager_median_ms) - 1 AS spread
FROM stats
WHERE run_id = $run_id AND status IN ('ok', 'accuracy_fail') AND eager_median_ms > 0
GROUP BY ALL
HAVING count(*) >= 2
ORDER BY spread DESC, model, phase, dtype, batch_size;
