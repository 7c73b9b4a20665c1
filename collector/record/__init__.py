"""The record layer: what a run folder holds and the rules both sides read it by (the row's
columns and schema version, a cell process's typed result, a saved cell file's validity, cell ids,
statuses, the compact index, run.json's reader and upgrade path). No torch, no duckdb, no numpy;
what the cell process imports of it (schema, result) imports no pyarrow either. May import: collector.modes (the mode labels) and the standard library,
pyarrow. The analysis reads the collector only through this package and collector.modes.
"""
