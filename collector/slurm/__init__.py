"""The SLURM layer: a run as a job array (submit), each task's own loop over its cells (task), the
run's state from the scheduler (status) and site profiles. May import: collector.host and every
layer below it.
"""
