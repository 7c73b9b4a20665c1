import numpy as np

from analysis import stats


def _cell(key, eager_med, comp_med, rng, blocks=8, spb=10, noise=0.03):
    n = blocks * spb
    return stats.CellSamples(key, eager_med * (1 + noise * rng.standard_normal(n)),
                             comp_med * (1 + noise * rng.standard_normal(n)), blocks, spb)


def test_bootstrap_interval_covers_true_speedup_and_excludes_one():
    rng = np.random.default_rng(0)
    reps = stats.bootstrap_speedups([_cell("a", 10.0, 8.0, rng)], reps=2000)
    lo, hi = stats.interval(reps["a"])
    assert lo < 1.25 < hi
    assert lo > 1.15 and hi < 1.35
    assert stats.verdict(lo, hi) == "faster"


def test_aa_cells_are_not_called_different():
    """Same distribution on both sides: at 95%, about 5% of intervals may exclude 1, not more."""
    rng = np.random.default_rng(1)
    cells = [_cell(i, 5.0, 5.0, rng) for i in range(200)]
    reps = stats.bootstrap_speedups(cells, reps=500)
    calls = [stats.verdict(*stats.interval(r)) for r in reps.values()]
    flagged = sum(c != "no clear difference" for c in calls)
    assert flagged <= 25  # 12.5%: generous bound on a nominal 5%


def test_block_bootstrap_widens_interval_under_block_drift():
    """Drift shared by neighbouring blocks must widen the interval, not vanish into iid resampling."""
    rng = np.random.default_rng(2)
    blocks, spb = 8, 20
    drift = np.repeat(1 + 0.2 * rng.standard_normal(blocks), spb)
    eager = 10.0 * drift * (1 + 0.01 * rng.standard_normal(blocks * spb))
    comp = 8.0 * np.repeat(1 + 0.2 * rng.standard_normal(blocks), spb) * (1 + 0.01 * rng.standard_normal(blocks * spb))
    blocked = stats.bootstrap_speedups([stats.CellSamples("b", eager, comp, blocks, spb)], reps=1000)["b"]
    iid = stats.bootstrap_speedups([stats.CellSamples("i", eager, comp, blocks * spb, 1)], reps=1000)["i"]
    lo_b, hi_b = stats.interval(blocked)
    lo_i, hi_i = stats.interval(iid)
    assert (hi_b - lo_b) > 1.5 * (hi_i - lo_i)


def test_geomean_interval_brackets_geomean():
    rng = np.random.default_rng(3)
    cells = [_cell("x", 10, 5, rng), _cell("y", 10, 20, rng)]
    reps = stats.bootstrap_speedups(cells, reps=1000)
    lo, hi = stats.geomean_interval(list(reps.values()))
    assert lo < 1.0 < hi  # sqrt(2 * 0.5) = 1


def test_verdict_and_noise():
    assert stats.verdict(0.8, 0.95) == "slower"
    assert stats.verdict(0.95, 1.05) == "no clear difference"
    assert stats.is_noisy(0.05, 0.2)
    assert not stats.is_noisy(0.05, None, 0.09)


def test_missing_knows_the_three_nulls_and_nothing_else():
    import pandas as pd
    from analysis.stats import missing
    assert missing(None) and missing(float("nan")) and missing(pd.NA)
    assert not any(missing(v) for v in (0, 0.0, "", False, [], "nan"))
