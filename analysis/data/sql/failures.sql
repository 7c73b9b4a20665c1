-- Cells that did not produce a valid comparison, with their status and error text.
SELECT cell_id, model, phase, dtype, batch_size, mode, compile_scope, status, error
FROM stats
WHERE run_id = $run_id AND status <> 'ok'
ORDER BY status, phase, model, mode;
