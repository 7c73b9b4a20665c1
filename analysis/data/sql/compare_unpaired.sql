-- Cells present in only one of the two runs (listed, never silently dropped).
SELECT run_id, cell_id, status FROM stats
WHERE (run_id = $baseline AND cell_id NOT IN (SELECT cell_id FROM stats WHERE run_id = $candidate))
   OR (run_id = $candidate AND cell_id NOT IN (SELECT cell_id FROM stats WHERE run_id = $baseline))
ORDER BY run_id, cell_id;
