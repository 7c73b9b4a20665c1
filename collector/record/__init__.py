"""The record layer: what a run folder holds and the rules both sides read it by (the row's
columns and schema version, cell ids, statuses, the compact index, the manifest's upgrade path). No
torch, no duckdb, no numpy. May import: collector.modes (the mode labels) and the standard library,
pyarrow. The analysis reads the collector only through this package and collector.modes.
"""
