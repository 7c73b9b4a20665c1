-- Every cell of a run with its statistics (diagnostics, efficiency and energy included).
SELECT * FROM stats WHERE run_id = $run_id
ORDER BY phase, model, dtype, batch_size, mode, compile_scope;
