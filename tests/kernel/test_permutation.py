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


# -- certified approximate statistics (bounds + refine) ---------------------------------------

def _enclosures(exact, rng, width):
    # random enclosures, each side between width / 2 and width (index 0 exact)
    lower = exact - width * (0.5 + 0.5 * rng.random(exact.size))
    upper = exact + width * (0.5 + 0.5 * rng.random(exact.size))
    lower[0] = upper[0] = exact[0]
    approx = np.where(rng.random(exact.size) < 0.5, lower, upper)
    approx[0] = exact[0]
    return approx, (lower, upper)


@pytest.mark.parametrize("width", [0.0, 1e-3, 0.05, 1.0, 100.0])
def test_bounds_and_refine_give_the_exact_release(width):
    # Same seed, same release as from the exact statistics, whatever the
    # enclosure widths; only the undecided comparisons are refined.
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        exact = rng.normal(size=41) * 0.1
        approx, (lower, upper) = _enclosures(exact, rng, width)
        asked = []

        def refine(idx, exact=exact, asked=asked):
            asked.append(idx.copy())
            return exact[idx]

        ref = dp_permutation_pvalue(exact, 0.05, 1.0, 0.0, np.random.default_rng(seed))
        got = dp_permutation_pvalue(approx, 0.05, 1.0, 0.0, np.random.default_rng(seed),
                                    bounds=(lower, upper), refine=refine)
        assert got == ref
        noise = np.random.default_rng(seed).laplace(0.0, 0.1, size=41)
        t0 = exact[0] + noise[0]
        undecided = np.flatnonzero(~(lower[1:] + noise[1:] >= t0)
                                   & ~(upper[1:] + noise[1:] < t0)) + 1
        if undecided.size:
            assert len(asked) == 1
            np.testing.assert_array_equal(asked[0], undecided)
        else:
            assert asked == []
        if width == 0.0:
            assert asked == []
        if width == 100.0:  # nothing decided without refinement
            np.testing.assert_array_equal(asked[0], np.arange(1, 41))


def test_make_result_passes_bounds_and_refine():
    exact = np.array([5.0, 1.0, 2.0, 4.9])
    lower, upper = exact - 10.0, exact + 10.0
    lower[0] = upper[0] = exact[0]
    asked = []

    def refine(idx):
        asked.append(idx.copy())
        return exact[idx]

    kwargs = dict(epsilon=2.0, delta=0.0, alpha=0.4, n_samples=7, method="x")
    ref = make_result(exact, 0.5, rng=np.random.default_rng(3), **kwargs)
    res = make_result(np.zeros(4) + exact[0], 0.5, rng=np.random.default_rng(3),
                      bounds=(lower, upper), refine=refine, **kwargs)
    assert res == ref
    np.testing.assert_array_equal(asked[0], [1, 2, 3])


def test_bounds_errors():
    rng = np.random.default_rng(0)
    s = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="bounds and refine must be given together"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s, s))
    with pytest.raises(ValueError, match="bounds and refine must be given together"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match="bounds must be two arrays of the shape"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s[:2], s[:2]),
                              refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match=r"refine returned shape \(1,\) for 2 indices"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s - 1e9, s + 1e9),
                              refine=lambda idx: s[:1])
