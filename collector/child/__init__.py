"""The child layer: one cell measured inside its own fresh process (`python -m collector.child.cell`):
build the model, time the eager and compiled sides, the accuracy check, diagnostics, the planted
change, the kernel profile. The only layer that imports torch at module level. May import:
collector.plan, collector.record, collector.models, collector.modes.
"""
