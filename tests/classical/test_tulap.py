"""The Tulap law and the binomial p-values against independent computations."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from skdptest._noise import tulap
from skdptest.classical import _tulap
from skdptest.classical._tulap import (
    _binomial,
    _centre,
    binomial_log_pvalue,
    binomial_pvalue,
    tulap_cdf,
    tulap_log_cdf,
    tulap_log_pdf,
    tulap_log_sf,
)
from tests.classical._reference import tulap_other_side_every_time


def _brute_cdf(t, rate, k_max=400):
    """F(t) by convolution: Σ_k P(G = k) P(U <= t − k), G discrete Laplace, U uniform."""
    b = math.exp(-rate)
    k = np.arange(-k_max, k_max + 1)
    pk = (1 - b) / (1 + b) * b ** np.abs(k)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    return (pk[None, :] * np.clip(t[:, None] - k[None, :] + 0.5, 0.0, 1.0)).sum(axis=1)


def _brute_pvalue(z, n, theta0, rate, upper=True, last=None):
    """Σ_{x=0}^{last} pmf(x) P(N >= z − x) (upper) or P(N <= z − x), plain floats."""
    last = n if last is None else last
    x = np.arange(last + 1)
    pmf = stats.binom.pmf(x, n, theta0)
    tail = _brute_cdf(x - z, rate) if upper else _brute_cdf(z - x, rate)
    return float(np.sum(pmf * tail))


@pytest.mark.parametrize("rate", [0.125, 1.0, 5.0])
def test_cdf_closed_form_matches_convolution(rate):
    t = np.linspace(-30, 30, 2401)
    np.testing.assert_allclose(tulap_cdf(t, rate), _brute_cdf(t, rate), rtol=0, atol=1e-15)
    # log space: far tails keep relative accuracy
    far = np.array([-600.3, -150.5, -30.0]) / rate
    np.testing.assert_allclose(tulap_log_cdf(far, rate), np.log(_brute_cdf(far, rate, k_max=5000)),
                               rtol=1e-12)
    np.testing.assert_allclose(tulap_log_sf(t, rate), tulap_log_cdf(-t, rate))
    # density: the slope of F, a step function constant on (k − 1/2, k + 1/2)
    mid = np.arange(-20, 21) + 0.25
    h = 1e-6
    slope = (_brute_cdf(mid + h, rate) - _brute_cdf(mid - h, rate)) / (2 * h)
    np.testing.assert_allclose(np.exp(tulap_log_pdf(mid, rate)), slope, rtol=1e-6, atol=1e-9)


def test_cdf_matches_simulation():
    rate = 0.5
    draws = tulap(np.random.default_rng(4), rate, size=50_000)
    assert stats.kstest(draws, lambda v: tulap_cdf(v, rate)).pvalue > 1e-3
    # a mutant law (uniform part dropped) is caught by the same check
    assert stats.kstest(np.round(draws), lambda v: tulap_cdf(v, rate)).pvalue < 1e-6


def test_density_ratio_is_e_epsilon():
    """Shifting the release by one count changes the density by at most e^ε (ε-DP of
    X + N for a count), and exactly e^ε somewhere (no slack)."""
    rate = 0.75
    t = np.linspace(-40, 40, 160_001)
    ratio = tulap_log_pdf(t, rate) - tulap_log_pdf(t + 1, rate)
    assert np.max(np.abs(ratio)) <= rate + 1e-12
    assert np.max(np.abs(ratio)) >= rate - 1e-12
    # halved noise (rate 2ε) exceeds e^ε on neighbours
    ratio2 = tulap_log_pdf(t, 2 * rate) - tulap_log_pdf(t + 1, 2 * rate)
    assert np.max(np.abs(ratio2)) > rate + 0.1


@pytest.mark.parametrize("n, theta0", [(10, 0.9), (10, 0.5), (25, 0.02), (7, 0.999), (1, 0.3)])
@pytest.mark.parametrize("rate", [0.25, 1.0, 4.0])
def test_one_sided_pvalues_match_brute_sum(n, theta0, rate):
    for z in [-3.7, 0.0, 0.2, n / 2 + 0.31, n - 0.5, n + 2.25]:
        assert binomial_pvalue(z, n, theta0, rate, "greater") == pytest.approx(
            _brute_pvalue(z, n, theta0, rate, upper=True), rel=1e-10, abs=1e-300)
        assert binomial_pvalue(z, n, theta0, rate, "less") == pytest.approx(
            _brute_pvalue(z, n, theta0, rate, upper=False), rel=1e-10, abs=1e-300)


def _level(n, theta0, rate, alpha, alternative, theta=None, pvalue=binomial_pvalue):
    """P_θ(p(Z) <= α) computed exactly: the rejection boundaries by root finding on the
    p-value, then Σ_x pmf_θ(x) P(x + N in the rejection region) with the brute-force CDF."""
    theta = theta0 if theta is None else theta
    x = np.arange(n + 1)
    pmf = stats.binom.pmf(x, n, theta)

    def p(z):
        return pvalue(z, n, theta0, rate, alternative) - alpha

    span = n + 60.0 / rate + 10
    if alternative == "greater":
        c = optimize.brentq(p, -span, span, xtol=1e-12)
        return float(np.sum(pmf * _brute_cdf(x - c, rate)))
    if alternative == "less":
        c = optimize.brentq(p, -span, span, xtol=1e-12)
        return float(np.sum(pmf * _brute_cdf(c - x, rate)))
    centre = _centre(_binomial(n, theta0), rate)[0]  # where p = 1
    c1 = optimize.brentq(p, -span, centre, xtol=1e-12)
    c2 = optimize.brentq(p, centre, span, xtol=1e-12)
    return float(np.sum(pmf * (_brute_cdf(c1 - x, rate) + _brute_cdf(x - c2, rate))))


# The upper tail by default, the lower one (15, 0.05) in the slow suite: the same p-value
# code at (7, 0.5), (10, 0.02), (10, 0.98) and (20, 0.999) is held at level α exactly by
# test_proportion's test_exact_level_by_enumeration.
@pytest.mark.parametrize("n, theta0", [(10, 0.9),
                                       pytest.param(15, 0.05, marks=pytest.mark.slow)])
def test_exact_level_and_unbiasedness(n, theta0):
    rate = 1.0
    # exact level (at 0.05 too in test_proportion's enumeration, with the closed-form CDF,
    # equal to the convolution above to 1e-15)
    for alt in ("greater", "less", "two-sided"):
        assert _level(n, theta0, rate, 0.2, alt) == pytest.approx(0.2, abs=1e-9)
    for alpha in (0.05, 0.2):
        # the two-sided test is unbiased: power >= α on both sides of θ0
        for theta in (theta0 - 0.04, theta0 + 0.02):
            if 0 < theta < 1:
                assert _level(n, theta0, rate, alpha, "two-sided", theta) >= alpha - 1e-9


def test_off_by_one_mutant_is_caught():
    """The published off-by-one (x summed to n − 1) rejects a true θ0 = 0.9 far too often
    at n = 10; all n + 1 terms give exactly α."""
    n, theta0, rate, alpha = 10, 0.9, 1.0, 0.05

    def mutant(z, n, theta0, rate, alternative):
        return _brute_pvalue(z, n, theta0, rate, upper=True, last=n - 1)

    assert _level(n, theta0, rate, alpha, "greater") == pytest.approx(alpha, abs=1e-9)
    assert _level(n, theta0, rate, alpha, "greater", pvalue=mutant) > 0.1


@pytest.mark.slow
def test_level_by_simulation():
    """Slow (800 two-sided p-values, 0.8 s): the same (n, theta0) is held at level alpha
    exactly, for both alternatives, by ``test_exact_level_and_unbiasedness``; this draws
    the releases with the shipped Tulap sampler end to end."""
    n, theta0, rate = 10, 0.9, 1.0
    rng = np.random.default_rng(8)
    x = rng.binomial(n, theta0, size=400)
    z = tulap(rng, rate, size=x.size, shift=x)
    for alt in ("greater", "two-sided"):
        p = np.array([binomial_pvalue(v, n, theta0, rate, alt) for v in z])
        se = math.sqrt(0.2 * 0.8 / p.size)
        assert abs(np.mean(p <= 0.2) - 0.2) <= 3 * se


def test_boundary_nulls():
    """θ0 = 0 or 1: X is a point mass; two-sided is the one-sided test of the only side."""
    rate, n = 1.0, 9
    for z in (-1.2, 0.3, 4.0):
        assert binomial_pvalue(z, n, 0.0, rate, "greater") == pytest.approx(
            float(tulap_cdf(-z, rate)))
        assert binomial_pvalue(z, n, 0.0, rate, "two-sided") == binomial_pvalue(
            z, n, 0.0, rate, "greater")
        assert binomial_pvalue(z, n, 0.0, rate, "less") == pytest.approx(
            float(tulap_cdf(z, rate)))
        assert binomial_pvalue(z + n, n, 1.0, rate, "two-sided") == pytest.approx(
            float(tulap_cdf(z, rate)))
    with pytest.raises(ValueError, match="alternative must be"):
        binomial_pvalue(0.0, n, 0.5, rate, "both")


def test_large_n_log_space():
    """n = 10⁵: the windowed log-space sum (11 342 of the 100 001 terms kept) equals the
    plain sum over all n + 1 terms, and p-values far below 1e-300 stay finite in log."""
    from scipy import special

    n, theta0, rate = 10**5, 0.3, 0.5
    assert _binomial(n, theta0).x.size < n // 5  # the window is in use
    x = np.arange(n + 1)
    lp = stats.binom.logpmf(x, n, theta0)
    for z in (n * theta0 + 900.4, n * theta0 - 2500.0):
        full = special.logsumexp(lp + tulap_log_cdf(x - z, rate))
        assert binomial_log_pvalue(z, n, theta0, rate, "greater") == pytest.approx(
            full, rel=1e-10)
    far = binomial_log_pvalue(n * theta0 + 5e4, n, theta0, rate, "greater")
    assert -1e5 < far < -700
    two = binomial_log_pvalue(n * theta0 + 5e4, n, theta0, rate, "two-sided")
    assert far < two < far + 1.0  # the other tail adds a comparable amount
    assert binomial_log_pvalue(n * theta0, n, theta0, rate, "two-sided") > math.log(0.95)


def test_non_private_limit_is_randomised_exact_binomial_test():
    """ε → ∞: Z = X + U and p = P(X' > x) + P(X' = x)(1/2 − u), the randomised exact
    binomial test; at u → −1/2 it is scipy's exact one-sided binomial test."""
    rate, n, theta0 = 512.0, 20, 0.35
    for k in (0, 3, 7, 12, 20):
        for u in (-0.4999999, -0.1, 0.3):
            expected = stats.binom.sf(k, n, theta0) + stats.binom.pmf(k, n, theta0) * (0.5 - u)
            assert binomial_pvalue(k + u, n, theta0, rate, "greater") == pytest.approx(
                expected, rel=1e-9)
        assert binomial_pvalue(k - 0.5 + 1e-12, n, theta0, rate, "greater") == pytest.approx(
            stats.binomtest(k, n, theta0, alternative="greater").pvalue, rel=1e-9)
        assert binomial_pvalue(k + 0.5 - 1e-12, n, theta0, rate, "less") == pytest.approx(
            stats.binomtest(k, n, theta0, alternative="less").pvalue, rel=1e-9)


@pytest.mark.parametrize("n, theta0, rate", [(50, 0.3, 1.0), (10, 0.5, 0.25), (1, 0.9, 4.0),
                                             (400, 0.02, 0.5), (7, 0.999, 1e-3)])
def test_remembered_search_is_bit_identical_to_evaluating_every_time(n, theta0, rate,
                                                                      monkeypatch):
    law = _binomial(n, theta0)
    a, b = _tulap._centre_of(n, theta0, rate)
    zs = np.concatenate([np.linspace(-3.0 * n - 30, 3.0 * n + 30, 25), [a - 1e-9, b + 0.5],
                         [1e7, -1e7, 1e300, -1e300, np.inf, -np.inf]])
    for z in zs:
        if a <= z <= b:
            continue
        with np.errstate(all="ignore"):
            target = law.log_minus_h(z, rate)
        if target == -np.inf:
            continue
        want = tulap_other_side_every_time(law, rate, z, target, a, b)
        got = _tulap._other_side(law, rate, z, target, a, b)
        assert np.array_equal(got, want), (z, got, want)
    # the remembering search asks for each point once
    calls = []
    original = type(law).log_minus_h

    def counting(self, c, r):
        calls.append(c)
        return original(self, c, r)

    monkeypatch.setattr(type(law), "log_minus_h", counting)
    _tulap._other_side(law, rate, b + 7.25, original(law, b + 7.25, rate), a, b)
    assert calls and len(calls) == len(set(calls))
