"""The exact intervals of analysis/stats/tdist.py: closed forms where they exist, the Monte Carlo draws of
the same model under several seeds where they do not, and no random number in a comparison's calls."""
import math

import numpy as np
import pytest

from analysis.stats import core as stats, tdist
from analysis.stats.tdist import LogDist


def test_t_cdf_vec_is_the_scalar_closed_form():
    x = np.linspace(-40, 40, 81)
    for df in (1, 2, 3, 4, 7, 12):
        assert np.allclose(tdist.t_cdf_vec(x, df), [stats.t_cdf(v, df) for v in x], atol=1e-12)


def test_t_cdf_vec_takes_the_limits_at_infinity():
    x = np.array([-np.inf, np.inf])
    for df in (1, 2, 3, 4):
        assert tdist.t_cdf_vec(x, df).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("n", [150, 2000])
def test_a_large_sum_is_convolved_once_and_holds_a_finer_wider_grid(n, monkeypatch):
    """A geometric mean over a large group (3 processes a cell: t terms of 2 df): its first grid must
    be wide enough for the sum's heavy tails, or the sum is convolved again on a wider one (a
    10,000-cell group took twice the time). The one pass holds the quantile of a grid four times
    finer and three times wider to 0.5% (its bins are then wider than a term's scale: 0.19% at
    2,000 terms, as the two passes before)."""
    calls = []
    real = tdist._centred_cdf
    monkeypatch.setattr(tdist, "_centred_cdf", lambda *a, **k: calls.append(1) or real(*a, **k))
    terms = tuple((float(s), 2) for s in np.random.default_rng(n).uniform(0.01, 0.1, n))
    lo, hi = LogDist(0.0, terms).interval()
    assert len(calls) == 1
    monkeypatch.setattr(tdist, "GRID_STEPS", 4 * tdist.GRID_STEPS)
    assert hi == pytest.approx(tdist._grid_quantile(*real(terms, 6 * hi), 0.975), rel=5e-3)


@pytest.mark.parametrize("scales", [(1.0, 1.0), (1.0, 0.1), (0.3, 2.0), (0.01, 0.02, 0.05, 0.01)])
def test_a_sum_of_cauchy_terms_has_the_closed_form_quantile(scales):
    """df 1 (two processes): Cauchy terms add their scales, so the 97.5% quantile of the sum is
    sum(scales) * tan(0.475 pi), a check of the grid convolution with the heaviest tails it meets."""
    d = LogDist(0.2, tuple((s, 1) for s in scales))
    lo, hi = d.interval()
    want = sum(scales) * math.tan(0.475 * math.pi)
    assert hi - 0.2 == pytest.approx(want, rel=1e-3) and 0.2 - lo == pytest.approx(want, rel=1e-3)


def test_one_term_is_the_exact_t_interval_and_a_change_matches_the_draws_under_any_seed():
    x = np.log([1.52, 1.49, 1.61])
    one = LogDist.of_processes(x)
    assert tuple(np.exp(one.interval())) == pytest.approx(stats.exact_t_interval(x), rel=1e-12)
    change = LogDist.of_processes(np.log([1.70, 1.66, 1.80])) - one  # two t terms of 2 df
    lo, hi = change.interval()
    for seed in (1, 2, 3):  # the draws the comparison used to take: around the exact bounds, any seed
        rng = np.random.default_rng(seed)
        draws = change.loc + sum(s * rng.standard_t(d, 2_000_000) for s, d in change.terms)
        mlo, mhi = np.quantile(draws, [0.025, 0.975])
        assert abs(mlo - lo) < 0.01 * (hi - lo) and abs(mhi - hi) < 0.01 * (hi - lo)
        assert change.p_value() == pytest.approx(2 * np.mean(draws <= 0), abs=2e-3)


def test_many_terms_of_a_geometric_mean_match_the_draws():
    terms = tuple((0.01 * (1 + i % 5), 2) for i in range(40))
    d = LogDist(0.0, terms).scaled(1 / 40)
    lo, hi = d.interval()
    rng = np.random.default_rng(4)
    draws = sum(s * rng.standard_t(df, 1_000_000) for s, df in d.terms)
    assert hi == pytest.approx(np.quantile(draws, 0.975), rel=5e-3) and lo == pytest.approx(-hi)


@pytest.mark.evidence
def test_a_comparison_of_cells_with_processes_draws_no_random_number(monkeypatch):
    """The v-h200 comparison (every cell 3 processes a run): its calls come from no generator at
    all, so no seed can change them; GNN training's speedup change is +12.9%, -1.4% to +29.3%, not
    called (the draws called it +0.7% to +30.0% with one seed pair, and not with others)."""
    from conftest import ROOT
    from analysis.stats import pair_estimates
    from analysis.run_report.context import prepare
    from analysis.data.load import discover_runs, load

    def no_rng(*a, **k):
        raise AssertionError("a random number was drawn")

    found = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples")}
    a, b = found["v-h200-torch2.11.0-cu130"], found["v-h200-torch2.14.1-cu130"]
    loaded = load([a, b])
    prepare(loaded)
    monkeypatch.setattr(np.random, "default_rng", no_rng)
    pe = pair_estimates.estimate_pair(loaded, a, b)
    gnn = pe.ests["speedup"]["gnn__train__amp_bf16__bs16__default__model"]
    assert (round(100 * (gnn.point - 1), 1), round(100 * (gnn.lo - 1), 1), round(100 * (gnn.hi - 1), 1)) == (12.9, -1.4, 29.3)
    assert not gnn.called


def test_a_one_process_part_is_drawn_with_its_own_seed():
    """A figure that rests on one process's blocks keeps replicates; adding exact terms to it draws
    them seeded by the terms themselves: the same result twice, and two different terms independent."""
    rng = np.random.default_rng(0)
    boot = LogDist.of_replicates(0.1 + 0.01 * rng.standard_normal(4000))
    t = LogDist.of_processes([0.0, 0.02, -0.01])
    u = LogDist.of_processes([0.05, 0.03, 0.04])
    assert np.array_equal((boot + t).reps, (boot + t).reps)
    assert abs(np.corrcoef(t.draws(4000), u.draws(4000))[0, 1]) < 0.1
    assert not (boot - t).exact and (t - u).exact
