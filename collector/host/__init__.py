"""The host layer: the parent process on one machine. Runs each cell's processes (launch, the fork
server zygote, workers, scratch folders), writes the run folder (store), shows progress and the
time left (progress, earlier), and reads the environment (envinfo). No torch at module level.
May import: collector.child (to start it), collector.plan, collector.record, collector.models,
collector.modes.
"""
