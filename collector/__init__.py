"""Collector: runs a matrix of torch.compile cells, each in a fresh process.

Nothing imported at package level touches torch: the parent process only
schedules cells and records their rows; torch lives in the child
(`collector.child.cell`) and in the environment probe (`collector.host.envinfo`).
"""
