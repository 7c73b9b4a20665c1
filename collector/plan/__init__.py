"""The plan layer: what is to be measured (the matrix from a preset and overrides, its cells, the
per-cell job a child runs), before any process starts. No torch. May import: collector.record,
collector.models, collector.modes.
"""
