"""One run's report as numbers and sentences: the context a template renders (context), its tables
(run_tables), the verdict (verdict) and the suite figures (suites). May import: analysis.explain,
analysis.stats, analysis.data, collector.record.
"""
