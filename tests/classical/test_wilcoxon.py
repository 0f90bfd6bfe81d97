"""DPWilcoxonTest: the non-private limit against scipy (one sample and pairs), zeros,
validity on a symmetric null grid with a zeros-counted-positive mutant that the grid
catches."""

import numpy as np
import pytest
from scipy import stats

from skdptest import DPWilcoxonTest
from tests.classical._reference import (
    confirmed_failures,
    grid_failures,
    scipy_tolerance,
    wilcoxon_cells,
    wilcoxon_type_one,
    zeros_positive,
)

GRID_LAWS = ["cauchy", "t1e-6", "laplace", "poisson-diff", "rademacher-ties",
             "paired-lognormal"]
GRID_NS = [10, 30, 60]
GRID_EPS = [0.1, 1.0, 10.0]


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_non_private_limit_matches_scipy_exact(alternative):
    rng = np.random.default_rng(0)
    x = rng.normal(0.5, 1.0, size=18)
    result = DPWilcoxonTest(epsilon=1e9, n_resamples=4000, alternative=alternative,
                            random_state=1).test(x[:, None])
    ref = stats.wilcoxon(x, alternative=alternative, method="exact")
    w_plus = (np.abs(x) * 0 + stats.rankdata(np.abs(x)))[x > 0].sum()
    assert result.statistic == w_plus
    assert abs(result.pvalue - ref.pvalue) <= scipy_tolerance(ref.pvalue, 4000)


def test_pairs_and_center_match_scipy():
    rng = np.random.default_rng(2)
    before = rng.normal(size=16)
    after = before + rng.normal(0.9, 1.0, size=16)
    result = DPWilcoxonTest(epsilon=1e9, n_resamples=4000, center=0.2, alternative="greater",
                            random_state=3).test(after[:, None], before)
    ref = stats.wilcoxon(after - before - 0.2, alternative="greater", method="exact")
    assert abs(result.pvalue - ref.pvalue) <= scipy_tolerance(ref.pvalue, 4000)


def test_all_zero_differences_give_a_valid_uninformative_test():
    rng = np.random.default_rng(4)
    est = DPWilcoxonTest(epsilon=1e9, n_resamples=199, random_state=rng)
    pvalues = [est.fit(np.zeros((20, 1))).result_.pvalue for _ in range(60)]
    # zeros get fair random signs: the p-value is (close to) uniform, not 0 or 1
    assert 0.3 < np.mean(pvalues) < 0.7
    assert np.mean(np.array(pvalues) <= 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 60)


def test_level_holds_on_ties_zeros_and_heavy_tails_fast():
    cells = wilcoxon_cells([20], [1.0], ["poisson-diff", "cauchy"])
    failing, pooled, pooled_fail = grid_failures(wilcoxon_type_one(cells, 400, 31), 400)
    assert not failing and not pooled_fail, (failing, pooled)


def test_zeros_counted_positive_mutant_is_caught_fast():
    cells = wilcoxon_cells([30], [10.0], ["rademacher-ties"])
    failing, pooled, _ = grid_failures(wilcoxon_type_one(cells, 200, 32, signs=zeros_positive),
                                       200)
    assert failing and pooled > 0.15


@pytest.mark.slow
def test_validity_grid():
    cells = wilcoxon_cells(GRID_NS, GRID_EPS, GRID_LAWS)
    assert len(cells) >= 50
    failing, pooled, pooled_fail = confirmed_failures(wilcoxon_type_one, cells, 400, 2028)
    assert not failing and not pooled_fail, (failing, pooled)


@pytest.mark.slow
def test_validity_grid_catches_zeros_counted_positive():
    cells = wilcoxon_cells(GRID_NS, GRID_EPS, GRID_LAWS)
    failing, pooled, pooled_fail = grid_failures(
        wilcoxon_type_one(cells, 200, 2028, signs=zeros_positive), 200)
    assert len(failing) >= 5 and pooled_fail
