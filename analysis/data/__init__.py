"""The data layer: finds runs, checks cell files and manifests against the contract, loads them into
DuckDB (load, sql/), checks estimates.json files against their schemas (schema_check, schemas/).
May import: collector.record, collector.modes.
"""
