-- Every loaded row brought up to the current schema version, in one place: the columns a newer
-- schema added get the value that older rows meant (docs/data.md). Queries read `cells`, never
-- `cells_raw`, and need no coalesce of their own for these columns.
CREATE OR REPLACE VIEW cells AS
SELECT * REPLACE (
    -- before status oom_shared: `oom` with the shared GPU's words (collector.record.contract.shared_status)
    CASE WHEN status = 'oom' AND starts_with(coalesce(error, ''), 'out of memory on a GPU shared with another cell')
         THEN 'oom_shared' ELSE status END AS status,
    coalesce(steps_per_sample, 1) AS steps_per_sample,   -- v1: one step per sample
    coalesce(dynamic, 'auto') AS dynamic,                 -- before v4: torch.compile's default
    coalesce(concurrent_cells, 1) AS concurrent_cells,    -- before v3: one cell at a time
    coalesce(processes, 1) AS processes,                  -- before v5 (and rows without samples): one
    -- before v4 the energy was summed over the timed blocks: samples x steps per sample steps
    coalesce(eager_energy_steps, len(eager_step_ms) * coalesce(steps_per_sample, 1)) AS eager_energy_steps,
    coalesce(compiled_energy_steps, len(compiled_step_ms) * coalesce(steps_per_sample, 1)) AS compiled_energy_steps
)
FROM cells_raw;
