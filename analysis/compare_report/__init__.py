"""Two runs (or more) compared: the numbers per group apart from the sentences (compare_groups),
the called changes (changes), repeats across pairs (repeats), what an A/A can produce (verify) and the report (compare). May import:
analysis.run_report and every layer below it.
"""
