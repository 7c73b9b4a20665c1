"""The statistics layer: one estimate type with exact t intervals (estimates, tdist), the bootstrap and
the call rule (core), pairs of runs (pair_estimates), earlier runs (history), run-level shifts,
attribution, and how numbers are written (fmt). May import: analysis.data, collector.record.
"""
