"""DPMannWhitneyTest: the non-private limit against scipy, validity on a null grid
(skewed, heavy-tailed, tied, unbalanced, small n, ε ∈ {0.1, 1, 10}) with a row-order
tie-breaking mutant that the grid catches, power planning."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from skdptest import DPMannWhitneyTest, PrivacyBudget
from skdptest.power import solve_n
from tests.classical._reference import (
    ALPHA,
    confirmed_failures,
    grid_failures,
    group_cells,
    group_type_one,
    scipy_tolerance,
    stable_ranks,
)

GRID_LAWS = ["exponential", "lognormal", "cauchy", "t1e6", "poisson0.3", "bernoulli0.1"]
GRID_SIZES = [(10, 10), (10, 40), (25, 25)]
GRID_EPS = [0.1, 1.0, 10.0]
ALTERNATIVES = ("two-sided", "greater", "less")


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_non_private_limit_matches_scipy_exact(alternative):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(0.8, 1.0, size=15)
    X, y = np.concatenate([a, b])[:, None], np.repeat(["a", "b"], [12, 15])
    result = DPMannWhitneyTest(epsilon=1e9, n_resamples=4000, alternative=alternative,
                               random_state=1).test(X, y)
    ref = stats.mannwhitneyu(a, b, alternative=alternative, method="exact")
    assert result.statistic == ref.statistic
    assert abs(result.pvalue - ref.pvalue) <= scipy_tolerance(ref.pvalue, 4000)


def test_result_fields_are_public_or_the_release():
    X = np.arange(30.0)[:, None]
    y = pd.Series(np.repeat(["x", "y"], [10, 20]))
    est = DPMannWhitneyTest(n_resamples=99, alternative="less", random_state=0)
    result = est.test(pd.DataFrame({"v": X[:, 0]}), y)
    assert est.classes_.tolist() == ["x", "y"] and est.feature_names_in_.tolist() == ["v"]
    assert result.sensitivity == 20.0 and result.alternative == "less"
    assert result.n_samples == 30 and result.delta == 0.0
    assert result.statistic == int(result.statistic)  # an integer release
    assert result.pvalue * 100 == pytest.approx(round(result.pvalue * 100))
    assert result.reject == (result.pvalue <= 0.05)


def test_score_is_minus_log_pvalue_and_charged():
    budget = PrivacyBudget(epsilon=5.0)
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(40, 1)), np.arange(40) % 2
    est = DPMannWhitneyTest(n_resamples=99, budget=budget, random_state=0).fit(X, y)
    assert est.score(X, y) >= 0.0 and len(budget) == 2


def test_level_holds_on_tied_and_heavy_tailed_nulls_fast():
    cells = group_cells([(10, 30)], [1.0], ["poisson0.3", "cauchy"], ALTERNATIVES)
    results = group_type_one("mw", cells, reps=400, seed=11)
    failing, pooled, pooled_fail = grid_failures(results, 400)
    assert not failing and not pooled_fail, (failing, pooled)


def test_row_order_tie_breaking_mutant_is_caught_fast():
    cells = group_cells([(10, 30)], [10.0], ["poisson0.3"])
    failing, pooled, _ = grid_failures(group_type_one("mw", cells, 200, 12, rank=stable_ranks),
                                       200)
    assert failing and pooled > 0.5


def test_estimator_level_type_one_on_poisson_ties():
    rng = np.random.default_rng(4)
    y = np.repeat([0, 1], [12, 30])
    est = DPMannWhitneyTest(epsilon=1.0, n_resamples=98, random_state=rng)
    rejections = sum(est.fit(rng.poisson(0.3, size=(42, 1)), y).decision() for _ in range(40))
    assert rejections / 40 <= ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / 40)


@pytest.mark.slow
def test_validity_grid():
    cells = group_cells(GRID_SIZES, GRID_EPS, GRID_LAWS, ALTERNATIVES)
    assert len(cells) >= 50
    failing, pooled, pooled_fail = confirmed_failures(
        lambda c, r, s: group_type_one("mw", c, r, s), cells, 400, 2026)
    assert not failing and not pooled_fail, (failing, pooled)


@pytest.mark.slow
def test_validity_grid_catches_row_order_tie_breaking():
    cells = group_cells(GRID_SIZES, GRID_EPS, GRID_LAWS, ALTERNATIVES)
    failing, pooled, pooled_fail = grid_failures(
        group_type_one("mw", cells, 200, seed=2026, rank=stable_ranks), 200)
    assert len(failing) >= 5 and pooled_fail


def test_solve_n_plans_the_test():
    def shifted(n, rng):  # n rows in all, half per group, a large shift
        half = n // 2
        X = np.concatenate([rng.normal(size=half), rng.normal(2.0, 1.0, size=n - half)])
        return X[:, None], np.repeat([0, 1], [half, n - half])

    solution = solve_n(DPMannWhitneyTest(n_resamples=99), shifted, n_min=8, n_max=256,
                       n_repeats=10, rtol=0.5, random_state=0)
    assert 8 <= solution.value <= 256
