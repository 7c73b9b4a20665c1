-- A/A noise from repeated eager baselines: the same eager model (model, phase, dtype, batch size)
-- is measured in every mode's cell, each in its own process. Per run: how many such repeated
-- measurements there are, and the 95th percentile of |ln(eager median / median of its group)|.
WITH g AS (
    SELECT run_id, eager_median_ms,
           median(eager_median_ms) OVER w AS group_median,
           count(*) OVER w AS n
    FROM stats
    WHERE run_id IN ($baseline, $candidate) AND eager_median_ms > 0
    WINDOW w AS (PARTITION BY run_id, model, phase, dtype, batch_size)
)
SELECT run_id, count(*) AS cells, quantile_cont(abs(ln(eager_median_ms / group_median)), 0.95) AS q95_abs_log
FROM g WHERE n >= 2
GROUP BY run_id ORDER BY run_id;
