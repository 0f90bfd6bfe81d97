"""DPKruskalWallisTest: the non-private limit (two groups: scipy's exact Mann–Whitney;
three groups: scipy's permutation test of the same statistic), validity on a null grid
with a row-order tie-breaking mutant that the grid catches."""

import numpy as np
import pytest
from scipy import stats

from skdptest import DPKruskalWallisTest
from tests.classical._reference import (
    confirmed_failures,
    grid_failures,
    group_cells,
    group_type_one,
    scipy_tolerance,
    stable_ranks,
)

GRID_LAWS = ["exponential", "lognormal", "cauchy", "t1e6", "poisson0.3", "bernoulli0.1"]
GRID_SIZES = [(10, 10, 10), (10, 10, 40), (5, 20, 5, 20)]
GRID_EPS = [0.1, 1.0, 10.0]


def test_two_groups_limit_is_the_two_sided_mann_whitney_test():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=11), rng.normal(0.9, 1.0, size=14)
    X, y = np.concatenate([a, b])[:, None], np.repeat([0, 1], [11, 14])
    result = DPKruskalWallisTest(epsilon=1e9, n_resamples=4000, random_state=1).test(X, y)
    ref = stats.mannwhitneyu(a, b, method="exact")
    assert result.statistic == 2 * abs(ref.statistic - 11 * 14 / 2)
    assert result.sensitivity == 2 * 14
    assert abs(result.pvalue - ref.pvalue) <= scipy_tolerance(ref.pvalue, 4000)


def test_three_groups_limit_matches_a_scipy_permutation_test_of_the_statistic():
    rng = np.random.default_rng(1)
    samples = [rng.normal(0.0, 1, 9), rng.normal(0.6, 1, 12), rng.normal(1.0, 1, 7)]
    X = np.concatenate(samples)[:, None]
    y = np.repeat(["a", "b", "c"], [9, 12, 7])
    n = 28

    def absolute_kw(*groups, axis=-1):  # vectorised over resamples (scipy's convention)
        ranks = stats.rankdata(np.concatenate(groups, axis=axis), axis=axis)
        bounds = np.cumsum([0] + [g.shape[axis] for g in groups])
        return sum(g.shape[axis] * np.abs(ranks[..., lo:hi].mean(axis=-1) - (n + 1) / 2)
                   for g, lo, hi in zip(groups, bounds[:-1], bounds[1:], strict=True))

    ref = stats.permutation_test(samples, absolute_kw, n_resamples=9999, vectorized=True,
                                 alternative="greater", random_state=2)
    result = DPKruskalWallisTest(epsilon=1e9, n_resamples=4000, random_state=3).test(X, y)
    assert result.statistic == pytest.approx(absolute_kw(*samples))
    assert abs(result.pvalue - ref.pvalue) <= scipy_tolerance(ref.pvalue, 4000) + 0.005


def test_statistic_is_a_half_integer_release():
    rng = np.random.default_rng(2)
    est = DPKruskalWallisTest(n_resamples=99, random_state=0)
    result = est.test(rng.poisson(1.0, size=(30, 1)), np.arange(30) % 3)
    assert 2 * result.statistic == int(2 * result.statistic)
    assert result.alternative == "two-sided" and result.sensitivity == 2 * (30 - 10)
    assert est.classes_.tolist() == [0, 1, 2]


def test_level_holds_on_tied_and_unbalanced_nulls_fast():
    cells = group_cells([(10, 10, 40)], [1.0], ["poisson0.3", "lognormal"])
    failing, pooled, pooled_fail = confirmed_failures(
        lambda c, r, s: group_type_one("kw", c, r, s), cells, 400, 21)
    assert not failing and not pooled_fail, (failing, pooled)


def test_row_order_tie_breaking_mutant_is_caught_fast():
    cells = group_cells([(10, 10, 40)], [10.0], ["bernoulli0.1"])
    failing, pooled, _ = grid_failures(group_type_one("kw", cells, 200, 22, rank=stable_ranks),
                                       200)
    assert failing and pooled > 0.3


@pytest.mark.slow
def test_validity_grid():
    cells = group_cells(GRID_SIZES, GRID_EPS, GRID_LAWS)
    assert len(cells) >= 50
    failing, pooled, pooled_fail = confirmed_failures(
        lambda c, r, s: group_type_one("kw", c, r, s), cells, 400, 2027)
    assert not failing and not pooled_fail, (failing, pooled)


@pytest.mark.slow
def test_validity_grid_catches_row_order_tie_breaking():
    cells = group_cells(GRID_SIZES, GRID_EPS, GRID_LAWS)
    failing, pooled, pooled_fail = grid_failures(
        group_type_one("kw", cells, 200, 2027, rank=stable_ranks), 200)
    assert len(failing) >= 5 and pooled_fail
