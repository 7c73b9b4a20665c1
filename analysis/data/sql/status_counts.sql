-- Number of cells per status in a run.
SELECT status, count(*) AS cells FROM stats WHERE run_id = $run_id GROUP BY status ORDER BY cells DESC, status;
