"""The collector's commands: the executors that run a matrix locally or through SLURM, and the
shard split and merge (`python -m collector.commands.shard merge`). May import every other
collector layer; nothing imports it but collector.__main__.
"""
