-- A/A noise from repeated eager baselines: the same eager model (model, phase, dtype, batch size)
-- is measured in every mode's cell, each in its own process. Per run: the number of pairs of such
-- measurements and the 95th percentile of |ln(eager median i / eager median j)| over those pairs,
-- i.e. how far two processes measuring the same thing land apart.
WITH e AS (
    SELECT run_id, cell_id, model, phase, dtype, batch_size, eager_median_ms
    FROM stats
    WHERE run_id IN ($baseline, $candidate) AND eager_median_ms > 0 AND status = 'ok'
)
SELECT a.run_id, count(*) AS pairs, quantile_cont(abs(ln(a.eager_median_ms / b.eager_median_ms)), 0.95) AS q95_abs_log
FROM e a JOIN e b
  ON a.run_id = b.run_id AND a.model = b.model AND a.phase = b.phase AND a.dtype = b.dtype
 AND a.batch_size = b.batch_size AND a.cell_id < b.cell_id
GROUP BY a.run_id ORDER BY a.run_id;
