"""The explaining layer: why a cell is fast or slow (why), kernel counts and autotune records
(kernels), where a number came from (provenance). May import: analysis.stats, analysis.data,
collector.record.
"""
