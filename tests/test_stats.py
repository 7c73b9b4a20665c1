import numpy as np
import pytest

from analysis.stats import core as stats, tdist


def t_interval(logs, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi) of per-process log values: Student's t with n - 1 degrees of freedom."""
    from math import sqrt

    logs = np.asarray(logs, float)
    n = len(logs)
    m = float(logs.mean())
    if n < 2:
        return m, float("nan"), float("nan")
    half = t_quantile(0.5 + level / 2, n - 1) * float(logs.std(ddof=1)) / sqrt(n)
    return m, m - half, m + half


def t_quantile(q: float, df: int) -> float:
    """Student's t quantile (numpy has no ppf), the reference for the test below: the t density
    integrated with the trapezoid rule on a fine grid, then the CDF inverted by interpolation."""
    from math import gamma, pi, sqrt

    c = gamma((df + 1) / 2) / (sqrt(df * pi) * gamma(df / 2))
    grid = np.linspace(0.0, 200.0, 400001)
    dens = c * (1 + grid ** 2 / df) ** (-(df + 1) / 2)
    cdf = 0.5 + np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
    return float(np.interp(q, cdf, grid))


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
    dists = stats.cell_dists(cells, reps=1000)
    lo, hi = stats.geomean_interval([d["speedup"] for d in dists.values()])
    assert lo < 1.0 < hi  # sqrt(2 * 0.5) = 1
    # cells of three processes: the exact t model, the same interval the Monte Carlo draws approach
    procs = [stats.CellSamples(i, *_replicated(rng, s, 3, 0.03), 8, 10, 3) for i, s in enumerate((1.5, 2.5, 0.8))]
    lo, hi = stats.geomean_interval([d["speedup"] for d in stats.cell_dists(procs).values()])
    drawn = stats.process_replicates(procs, 400_000, np.random.default_rng(9))
    mc = np.quantile(np.exp(np.mean([np.log(e / k) for e, k in drawn.values()], axis=0)), [0.025, 0.975])
    assert (lo, hi) == pytest.approx(tuple(mc), rel=2e-3)


def test_verdict_and_noise():
    assert stats.verdict(0.8, 0.95) == "slower"
    assert stats.verdict(0.95, 1.05) == "no clear difference"
    assert stats.is_noisy(0.05, 0.2)
    assert not stats.is_noisy(0.05, None, 0.09)


def test_missing_knows_the_three_nulls_and_nothing_else():
    import pandas as pd
    from analysis.stats.core import missing
    assert missing(None) and missing(float("nan")) and missing(pd.NA)
    assert not any(missing(v) for v in (0, 0.0, "", False, [], "nan"))


def _replicated(rng, true_speedup, processes, between, within=0.02, blocks=8, spb=10):
    """Samples of one cell timed in `processes` processes: each process (and side) lands at its own
    level (lognormal, sd `between`), samples scatter `within` around it. Stored process-major."""
    n = blocks * spb
    e, c = [], []
    for _ in range(processes):
        e.append(10.0 * np.exp(between * rng.standard_normal()) * (1 + within * rng.standard_normal(n)))
        c.append(10.0 / true_speedup * np.exp(between * rng.standard_normal()) * (1 + within * rng.standard_normal(n)))
    return np.concatenate(e), np.concatenate(c)


def _coverage(processes_as: int, sims: int = 400, between: float = 0.03, seed: int = 5) -> float:
    """Share of simulated cells (3 processes each, known between-process sd) whose 95% interval
    covers the true speedup, when the samples are analysed as `processes_as` processes."""
    rng = np.random.default_rng(seed)
    cells, true = [], 1.5
    for i in range(sims):
        e, c = _replicated(rng, true, 3, between)
        if processes_as == 3:
            cells.append(stats.CellSamples(i, e, c, 8, 10, 3))
        else:  # today's one-level interval: the three processes pooled as 24 blocks of one process
            cells.append(stats.CellSamples(i, e, c, 24, 10, 1))
    reps = stats.bootstrap_speedups(cells, reps=1000)
    bounds = stats.intervals(np.stack(list(reps.values())))
    return float(np.mean((bounds[:, 0] <= true) & (true <= bounds[:, 1])))


@pytest.mark.slow
def test_two_level_interval_covers_95_percent_with_between_process_variance():
    """The claim behind every interval in a report: with real between-process variance, about
    95% of the process-level intervals cover the true speedup; the one-level block bootstrap
    over the same samples covers far less (docs/measurement.md has the figures)."""
    two_level = _coverage(3)
    one_level = _coverage(1)
    assert 0.92 <= two_level <= 0.98, two_level
    assert one_level < 0.6, one_level


def test_process_replicates_are_exactly_t_over_processes():
    """The multivariate-t draws give, for ln speedup, Student's t interval of the per-process values."""
    rng = np.random.default_rng(3)
    e, c = _replicated(rng, 1.3, 3, 0.05)
    cell = stats.CellSamples("x", e, c, 8, 10, 3)
    reps = stats.bootstrap_speedups([cell], reps=200_000)["x"]
    lo, hi = stats.interval(reps)
    per_process = np.log(stats.process_medians(e, 3)) - np.log(stats.process_medians(c, 3))
    m, tlo, thi = t_interval(per_process)
    assert abs(np.log(lo) - tlo) < 0.01 * (thi - tlo) + 1e-4
    assert abs(np.log(hi) - thi) < 0.01 * (thi - tlo) + 1e-4
    assert abs(t_quantile(0.975, 2) - 4.303) < 1e-3 and abs(t_quantile(0.975, 30) - 2.042) < 1e-3


def test_planted_regression_is_found_and_sized_at_the_statistics_level():
    """Run B's compiled side 10% slower in every process: the interval of the speedup change
    (B's log speedup less A's) excludes no change and covers -9.1%; an A/A pair does not."""
    rng = np.random.default_rng(11)
    ea, ca = _replicated(rng, 2.0, 3, 0.005)
    eb, cb = _replicated(rng, 2.0 / 1.10, 3, 0.005)
    ea2, ca2 = _replicated(rng, 2.0, 3, 0.005)
    def speedup(e, c):
        return stats.cell_dists([stats.CellSamples("x", e, c, 8, 10, 3)])["x"]["speedup"]

    ra, rb, ra2 = speedup(ea, ca), speedup(eb, cb), speedup(ea2, ca2)
    lo, hi = np.exp((rb - ra).interval())
    assert hi < 1 and lo < 1 / 1.10 < hi
    lo, hi = np.exp((ra2 - ra).interval())
    assert lo < 1 < hi


def test_verdict_needs_the_minimum_effect():
    assert stats.verdict(1.001, 1.008, 1.004, 0.02) == "no clear difference"
    assert stats.verdict(1.02, 1.08, 1.05, 0.02) == "faster"
    assert stats.verdict(0.9, 0.97, 0.94, 0.02) == "slower"


def test_t_at_non_integer_degrees_of_freedom_as_welch_needs():
    """Welch's degrees of freedom are not integers: the integrated distribution function agrees with
    the closed form at integer df and lies between its integer neighbours at half-integer df, and the
    quantile matches the integrated reference (which takes any df)."""
    for df in (1, 2, 5, 12):
        for t in (-3.0, 0.4, 2.5):
            assert abs(tdist._t_cdf_real(t, float(df)) - stats.t_cdf(t, df)) < 1e-9, (df, t)
    for df in (2.5, 4.7, 11.3):
        q = stats.t_quantile(0.975, df)
        assert stats.t_quantile(0.975, int(df) + 1) < q < stats.t_quantile(0.975, int(df))
        assert abs(q - t_quantile(0.975, df)) < 2e-3 * q, df
    with pytest.raises(ValueError):
        stats.t_cdf(1.0, -0.5)
    from analysis.stats.core import welch

    a, b = np.array([0.0, 0.1, -0.1]), np.array([1.0, 1.3, 0.7, 1.0])
    lo, hi = welch(a, b)
    va, vb = 0.01 / 3, 0.06 / 4  # each mean's variance
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3)  # Welch-Satterthwaite: 4.17
    assert 4.1 < df < 4.2
    assert lo < 1.0 < hi and (hi - lo) / 2 == pytest.approx(t_quantile(0.975, df) * np.sqrt(va + vb), rel=2e-3)


@pytest.mark.evidence
def test_a_cells_own_interval_is_the_exact_t_bound():
    """stats.t_quantile (closed form, bisection) agrees with the integrated density for small and
    large df; a run's per-cell interval of a cell with several processes is exp of the exact t
    interval of its per-process log speedups, not the draws' quantiles (which with 2 degrees of
    freedom were up to ~10% off in the tails); a one-process cell keeps the bootstrap quantiles."""
    for df in (1, 2, 3, 4, 5, 7, 10, 29):
        for q in (0.9, 0.975, 0.995):
            assert abs(stats.t_quantile(q, df) - t_quantile(q, df)) < 2e-3 * t_quantile(q, df), (df, q)
        assert abs(stats.t_cdf(stats.t_quantile(0.975, df), df) - 0.975) < 1e-9
    with pytest.raises(ValueError):
        stats.t_cdf(1.0, 0)
    from analysis.run_report.context import prepare
    from analysis.data.load import discover_runs, load
    from conftest import ROOT

    found = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples")}
    loaded = load([found["aa-venv-direct"], found["quick-h200"]])
    prepare(loaded)
    for run_id in ("aa-venv-direct", "quick-h200"):
        rs = stats.run_stats(loaded, run_id)
        for c, _ in stats.run_samples(loaded, run_id):
            if c.key not in rs.intervals:
                continue
            lo, hi = rs.intervals[c.key]
            if c.processes >= 2:
                logs = np.log(stats.process_medians(c.eager_ms, c.processes)
                              / stats.process_medians(c.compiled_ms, c.processes))
                _, tlo, thi = t_interval(logs)
                assert abs(np.log(lo) - tlo) < 1e-3 * (thi - tlo) and abs(np.log(hi) - thi) < 1e-3 * (thi - tlo)
            else:
                assert (lo, hi) == pytest.approx(tuple(np.exp(rs.speedup[c.key].interval())))


def test_cold_compiles_of_every_process_get_a_welch_interval():
    """COLD_REPLICATES=1 runs: the cold first call has one sample a process, so its change gets
    Welch's interval on the logarithms, widened by the run-wide A/A shift (a run's processes share
    the host's state of their minute), instead of the A/A spread of one figure per run."""
    from analysis.stats import estimates as est

    slower = est.first_call_processes("cold", [10.0, 10.4, 9.8], [13.9, 14.3, 14.1], 0.02)
    assert slower.call == est.REGRESSED and 1.38 < slower.point < 1.43 and slower.lo > 1.05
    assert "Welch t over 3 and 3 cold compiles" in slower.reason and "x/1.20" in slower.reason
    # the CPU A/A's training cell (cr-cpu-a against cr-cpu-p10, the plant leaves compiling alone):
    # every process beyond the other run's, +23.7%; Welch alone called it, widened it is not
    aa = est.first_call_processes("cold", [9.42, 9.07, 9.81], [12.2, 11.6, 11.21], 0.02)
    assert 1.23 < aa.point < 1.25 and aa.lo < 1 < aa.hi and aa.call != est.REGRESSED
    same = est.first_call_processes("cold", [10.0, 10.4, 9.8], [10.2, 9.9, 10.3], 0.02)
    assert same.call != est.REGRESSED and same.lo < 1 < same.hi
    # the rows it reads: every process cold (replicate_cache "cold"), at least two first calls
    assert est.cold_samples([14.2, 11.2], "cold") == [14.2, 11.2]
    assert est.cold_samples([14.2, 1.7], "warm") is None and est.cold_samples([14.2, None], "cold") is None
    # one figure per run would not have called the +40% (the A/A spread of one cell is x/1.52)
    assert est.first_call("cold", 10.0, 14.1, 0.02).call != est.REGRESSED
