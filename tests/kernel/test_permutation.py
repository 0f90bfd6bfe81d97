"""The DP permutation framework: noise scale, noise law, p-value."""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest.kernel._permutation import (
    dp_permutation_pvalue,
    laplace_scale,
    make_result,
    privacy_xi,
)


def test_xi_and_scale():
    assert privacy_xi(1.0, 0.0) == 1.0
    assert privacy_xi(0.5, 0.2) == pytest.approx(0.5 + math.log(1 / 0.8), rel=1e-15)
    assert laplace_scale(0.1, 2.0, 0.0) == pytest.approx(0.1, rel=1e-15)
    assert laplace_scale(0.3, 0.5, 0.2) == pytest.approx(0.6 / (0.5 - math.log(0.8)))


def test_pvalue_formula_without_effective_noise():
    # Noise of scale 2e-12 cannot reorder statistics 1 apart.
    statistics = np.array([3.0, 1.0, 5.0, 2.0, 7.0, 0.0])
    _, p, _ = dp_permutation_pvalue(statistics, 1e-12, 1.0, 0.0, np.random.default_rng(0))
    assert p == (1 + 2) / 6
    statistics[0] = 10.0
    _, p, _ = dp_permutation_pvalue(statistics, 1e-12, 1.0, 0.0, np.random.default_rng(0))
    assert p == 1 / 6


def test_noise_is_laplace_with_the_documented_scale():
    # T~_0 - T_0 over many seeds must follow Laplace(2 Delta / xi); a halved
    # scale is rejected by the same test.
    statistics = np.zeros(11)
    sensitivity, epsilon, delta = 0.25, 0.7, 0.1
    draws = np.array([
        dp_permutation_pvalue(statistics, sensitivity, epsilon, delta,
                              np.random.default_rng(seed))[0]
        for seed in range(2000)
    ])
    scale = 2 * sensitivity / (epsilon + math.log(1 / (1 - delta)))
    assert stats.kstest(draws, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(draws, stats.laplace(scale=scale / 2).cdf).pvalue < 1e-6


def test_noise_is_independent_across_statistics():
    # Under equal statistics the p-value is uniform on {1/(B+1), ..., 1}.
    statistics = np.zeros(5)
    ps = np.array([
        dp_permutation_pvalue(statistics, 1.0, 1.0, 0.0, np.random.default_rng(s))[1]
        for s in range(2500)
    ])
    counts = np.array([np.sum(np.isclose(ps, k / 5)) for k in range(1, 6)])
    assert counts.sum() == 2500
    assert stats.chisquare(counts).pvalue > 1e-3


def test_make_result_fields():
    res = make_result(np.array([5.0, 1.0, 2.0]), 0.5, epsilon=2.0, delta=0.0, alpha=0.4,
                      n_samples=7, rng=np.random.default_rng(0), method="x")
    assert res.n_permutations == 2
    assert res.sensitivity == 0.5
    assert res.noise_scale == pytest.approx(0.5)
    assert res.reject == (res.p_value <= 0.4)
    assert res.n_samples == 7 and res.method == "x"


def test_bad_statistics_shape():
    with pytest.raises(ValueError, match="at least 2 values"):
        dp_permutation_pvalue(np.array([1.0]), 1.0, 1.0, 0.0, np.random.default_rng(0))
