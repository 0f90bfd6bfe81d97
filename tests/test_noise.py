"""Exact discrete Laplace noise and the grid helpers of ``skdptest._noise``.

Statistical checks use fixed seeds and thresholds from the exact law: a G-test p-value
below ``P_FLOOR`` fails (with the handful of G-tests below, a correct sampler fails one
with probability < 1e-3); each check is shown able to fail on a mutant sampler.
"""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest._noise import (
    RATE_BITS,
    discrete_laplace,
    discrete_laplace_log_mgf,
    discrete_laplace_log_pmf,
    floor_to_grid,
    power_of_two_grid,
    quantise_rate,
    two_sided_geometric,
)

P_FLOOR = 1e-4
UNIT = 2.0**-RATE_BITS


def _cells(rate, n_pos=12):
    """Symmetric cells of the integers with their exact probabilities.

    Returns positive edges 1 = m_0 < m_1 < ... (cells [m_j, m_{j+1}), the last one open)
    and the probabilities of (0, positive cells, negative cells). Uses
    P(K >= m) = p^m / (1 + p) for m >= 1, p = e^{-rate}.
    """
    # edges near the quantiles of |K|, so that every cell has mass
    quantiles = -np.log1p(-np.arange(1, n_pos) / n_pos) / rate
    edges = np.unique(np.concatenate([[1], 1 + np.floor(quantiles).astype(np.int64)]))
    log_tail = -rate * edges - math.log1p(math.exp(-rate))  # log P(K >= m)
    widths = np.diff(edges)
    cell = np.exp(log_tail[:-1]) * -np.expm1(-rate * widths)
    pos = np.concatenate([cell, [math.exp(log_tail[-1])]])
    probs = np.concatenate([[math.tanh(rate / 2)], pos, pos])
    return edges, probs


def _g_test_pvalue(draws, rate):
    """G-test p-value of the draws against the discrete Laplace law of ``rate``."""
    edges, probs = _cells(rate)
    mag = np.abs(draws)
    idx = np.searchsorted(edges, mag, side="right") - 1  # cell of |k| among the edges
    counts = np.concatenate([
        [np.count_nonzero(draws == 0)],
        np.bincount(idx[draws > 0], minlength=edges.size),
        np.bincount(idx[draws < 0], minlength=edges.size),
    ])
    assert counts.sum() == draws.size and abs(probs.sum() - 1) < 1e-12
    keep = probs * draws.size >= 5  # cells with too little mass merged into one
    obs = np.concatenate([counts[keep], [counts[~keep].sum()]])
    exp = np.concatenate([probs[keep], [probs[~keep].sum()]]) * draws.size
    obs, exp = obs[exp > 0], exp[exp > 0]
    return stats.power_divergence(obs, exp, lambda_="log-likelihood").pvalue


@pytest.mark.parametrize(
    "rate, seed",
    [(6 * UNIT, 0), (0.01 - 0.01 % UNIT, 1), (0.5, 2), (1.0, 3), (2.75, 4), (10.0, 5)],
)
def test_draws_follow_the_exact_law_and_the_half_rate_mutant_is_rejected(rate, seed):
    # 50 000 draws per check: the half-rate mutant's p-value underflows to 0.0 at every
    # rate here (and for 20 other seeds each)
    rng = np.random.default_rng(seed)
    assert rate == quantise_rate(rate)
    assert _g_test_pvalue(discrete_laplace(rng, rate, size=50_000), rate) > P_FLOOR
    mutant = discrete_laplace(rng, quantise_rate(rate / 2), size=50_000)  # twice the noise
    assert _g_test_pvalue(mutant, rate) < P_FLOOR


@pytest.mark.parametrize("rate, seed", [(0.01 - 0.01 % UNIT, 11), (1.0, 12), (2.75, 13)])
def test_small_requests_follow_the_exact_law_and_the_mutant_is_rejected(rate, seed):
    # requests of at most 16 draws take the scalar path: same law, checked on its own
    # 1000 draws per check (~50 us per scalar call): the half-rate mutant's p-value is
    # below 1e-55 at each rate (here and for 10 other seeds)
    rng = np.random.default_rng(seed)
    draws = np.concatenate([discrete_laplace(rng, rate, size=8) for _ in range(125)])
    singles = np.array([discrete_laplace(rng, rate) for _ in range(1000)])
    assert _g_test_pvalue(draws, rate) > P_FLOOR and _g_test_pvalue(singles, rate) > P_FLOOR
    half = quantise_rate(rate / 2)
    mutant = np.array([discrete_laplace(rng, half) for _ in range(1000)])
    assert _g_test_pvalue(mutant, rate) < P_FLOOR


def test_large_rate_is_almost_surely_zero_and_a_smaller_rate_is_not():
    # n = 200 000: P(K != 0) = 2 e^{-30} / (1 + e^{-30}): expect 3.7e-8 nonzero draws in
    # total at rate 30; at rate 8 expect 134 (sd 11.6): half the noise (rate 16, mean
    # 0.05) and twice the noise (rate 4, mean 7 200) fail the Poisson check, and so does
    # a rate off by 10 % (rate 8.8, mean 60, z = 6.4)
    rng = np.random.default_rng(6)
    n = 200_000
    assert np.count_nonzero(discrete_laplace(rng, 30.0, size=n)) == 0
    nonzero = np.count_nonzero(discrete_laplace(rng, 8.0, size=n))
    expect = n * 2 * math.exp(-8.0) / (1 + math.exp(-8.0))
    assert stats.poisson.cdf(nonzero, expect) > P_FLOOR
    assert stats.poisson.sf(nonzero - 1, expect) > P_FLOOR


def test_symmetry():
    rng = np.random.default_rng(7)
    draws = discrete_laplace(rng, 0.25, size=400_000)
    pos, neg = np.count_nonzero(draws > 0), np.count_nonzero(draws < 0)
    assert stats.binomtest(pos, pos + neg).pvalue > P_FLOOR
    # the laws of K and -K agree (two-sample G-test over the cells of the exact law)
    a, b = draws[: draws.size // 2], -draws[draws.size // 2:]
    edges, _ = _cells(0.25)
    bins = np.concatenate([-edges[::-1][:-1] - 0.5, [-0.5, 0.5], edges[1:] - 0.5])
    ca = np.histogram(a, np.concatenate([[-np.inf], bins, [np.inf]]))[0]
    cb = np.histogram(b, np.concatenate([[-np.inf], bins, [np.inf]]))[0]
    keep = ca + cb > 0
    assert stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1] > P_FLOOR


def test_log_pmf_has_the_exact_ratio_and_sums_to_one():
    rate = quantise_rate(0.3)
    k = np.arange(-50, 50)
    diff = discrete_laplace_log_pmf(k, rate) - discrete_laplace_log_pmf(k + 1, rate)
    np.testing.assert_allclose(diff, np.where(k >= 0, rate, -rate), rtol=1e-12)
    # pmf sums to one: direct sum over |k| <= 400 plus the tail 2 p^401 / (1 + p)
    big = np.arange(-400, 401)
    total = np.exp(discrete_laplace_log_pmf(big, rate)).sum()
    assert total + 2 * math.exp(-401 * rate) / (1 + math.exp(-rate)) == pytest.approx(1, 1e-13)
    assert discrete_laplace_log_pmf(0, 40.0) == pytest.approx(math.log(math.tanh(20.0)), 1e-12)
    with pytest.raises(ValueError, match="k must hold integers"):
        discrete_laplace_log_pmf([0.5], rate)
    with pytest.raises(ValueError, match="rate must be finite and > 0"):
        discrete_laplace_log_pmf(0, 0.0)


@pytest.mark.parametrize("rate, grid", [(0.5, 0.1), (2.0, 1.0), (1e-3, 1e-6), (3.0, 2.9)])
def test_log_mgf_matches_a_direct_sum(rate, grid):
    # direct sum E[e^{gK}] - 1 = sum_{k>=1} P(k) 2 (cosh(gk) - 1), all terms positive (no
    # cancellation), over k <= kmax: the remainder is below e^{-60} relative
    kmax = int(60 / (rate - grid)) + 10
    k = np.arange(1, kmax + 1)
    half = grid * k / 2
    log_sinh = half - math.log(2) + np.log(-np.expm1(-2 * half))  # no overflow
    log_terms = discrete_laplace_log_pmf(k, rate) + math.log(4) + 2 * log_sinh
    direct = math.log1p(math.fsum(np.exp(log_terms - log_terms.max())) * math.exp(
        log_terms.max()))
    assert discrete_laplace_log_mgf(rate, grid) == pytest.approx(direct, rel=1e-9, abs=1e-15)


def test_log_mgf_errors_and_extremes():
    with pytest.raises(ValueError, match="infinite unless rate > grid"):
        discrete_laplace_log_mgf(1.0, 1.0)
    with pytest.raises(ValueError, match="grid must be finite and > 0"):
        discrete_laplace_log_mgf(1.0, 0.0)
    # huge rate: no overflow, essentially no noise
    assert discrete_laplace_log_mgf(2000.0, 1.0) == 0.0
    # tiny grid: second-order g^2 Var(K) / 2
    rate, g = 0.01, 1e-7
    var = 2 * math.exp(-rate) / (-math.expm1(-rate)) ** 2
    assert discrete_laplace_log_mgf(rate, g) == pytest.approx(g * g * var / 2, rel=1e-6)


def test_quantise_rate():
    q = quantise_rate(0.3)
    assert q <= 0.3 < q + UNIT and (q / UNIT).is_integer()
    assert quantise_rate(q) == q and quantise_rate(UNIT) == UNIT
    assert quantise_rate(np.float32(2.0)) == 2.0
    with pytest.raises(ValueError, match="rate must be finite and > 0"):
        quantise_rate(float("nan"))
    with pytest.raises(ValueError, match="rate must be finite and > 0"):
        quantise_rate(float("inf"))
    with pytest.raises(ValueError, match="rate must be finite and > 0"):
        quantise_rate(-1.0)
    with pytest.raises(ValueError, match="rate must be finite and > 0"):
        quantise_rate(0)
    with pytest.raises(ValueError, match="below 2\\*\\*-20"):
        quantise_rate(UNIT / 2)
    with pytest.raises(ValueError, match="at most 2\\*\\*32"):
        quantise_rate(2.0**33)
    with pytest.raises(TypeError, match="rate must be a real number"):
        quantise_rate("1")
    with pytest.raises(TypeError, match="rate must be a real number"):
        quantise_rate(True)


def test_sampler_refuses_unquantised_rates():
    rng = np.random.default_rng(0)
    for sampler in (discrete_laplace, two_sided_geometric):
        with pytest.raises(ValueError, match="multiple of 2\\*\\*-20"):
            sampler(rng, 0.1)
        with pytest.raises(ValueError, match="rate must be finite, > 0"):
            sampler(rng, -0.5)
        with pytest.raises(TypeError, match="rate must be a real number"):
            sampler(rng, None)


def test_reproducible_per_seed_and_shapes():
    a = discrete_laplace(np.random.default_rng(42), 0.75, size=(3, 4))
    b = discrete_laplace(np.random.default_rng(42), 0.75, size=(3, 4))
    assert a.shape == (3, 4) and a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, discrete_laplace(np.random.default_rng(43), 0.75, size=(3, 4)))
    one = discrete_laplace(np.random.default_rng(1), 0.75)
    assert isinstance(one, int)
    np.testing.assert_array_equal(
        two_sided_geometric(np.random.default_rng(42), 0.75, size=(3, 4)), a
    )
    assert discrete_laplace(np.random.default_rng(0), 1.0, size=0).shape == (0,)


def _bernoulli_exp_per_element(rng, num, den):
    """The Bernoulli(exp(-num/den)) construction with one bound den·K per element."""
    k = np.ones(num.shape, dtype=np.int64)
    active = np.flatnonzero(num > 0)
    while active.size:
        go = rng.integers(0, den * k[active]) < num[active]
        active = active[go]
        k[active] += 1
    return (k & 1) == 1


@pytest.mark.parametrize("den", [1, 3, 2**20, 2**33])
def test_one_bound_per_round_draws_the_uniforms_of_per_element_bounds(den):
    # the sampler draws each round with one scalar bound (all active trials share K);
    # it must consume the generator exactly as per-element bounds do: same draws, same
    # generator state after (so the law and every seeded release are unchanged)
    from skdptest._noise import _bernoulli_exp_fraction

    for seed in range(20):
        num = np.random.default_rng(seed).integers(0, den + 1, size=300)
        a, b = np.random.default_rng(100 + seed), np.random.default_rng(100 + seed)
        np.testing.assert_array_equal(_bernoulli_exp_fraction(a, num, den),
                                      _bernoulli_exp_per_element(b, num, den))
        assert a.bit_generator.state == b.bit_generator.state


class _RiggedGenerator:
    """Answers the first ``n_forced`` rounds of the Bernoulli(1/K) trials of the
    Bernoulli(exp(-1)) construction with 'continue at K = 2, stop at K = 3' (a success),
    then draws honestly. Only the integer uniforms with array bounds 2 or 3 are rigged."""

    def __init__(self, seed, n_forced):
        self._rng = np.random.default_rng(seed)
        self.left = n_forced

    def integers(self, low, high=None, size=None, dtype=np.int64):
        draws = self._rng.integers(low, high, size=size, dtype=dtype)
        # only the Bernoulli(1/K) draws of the exp(-1) trials have bounds K = 2, 3 (one
        # bound per call: for all active trials on the vector path, one on the scalar
        # path); the fair signs (bound 2 too) are then all positive, which changes no |K|
        if self.left > 0 and isinstance(high, int) and high in (2, 3) and low == 0:
            self.left -= int(high == 3)
            value = 0 if high == 2 else 1
            draws = value if size is None else np.full(size, value, dtype=np.int64)
        return draws


def test_support_is_unbounded_no_tail_cap():
    # A float inversion with 53-bit uniforms cannot exceed about 53 log 2 / rate = 36.7/rate.
    # Forcing 200 successive Bernoulli(exp(-1)) successes (probability e^-200, a legitimate
    # outcome) must produce |K| >= 200 / rate: the construction has no cap.
    rate = UNIT
    draw = discrete_laplace(_RiggedGenerator(0, 200), rate)  # the scalar path
    assert abs(draw) >= 200 / rate > 37 / rate
    draws = discrete_laplace(_RiggedGenerator(0, 200), rate, size=64)  # the vector path
    assert np.max(np.abs(draws)) >= 200 / rate
    # and honestly drawn tails match P(|K| >= m) = 2 p^m / (1 + p) at m = 8 / rate
    # 250 000 draws, 84 expected hits: half the noise (4 600 expected) or a rate 10 %
    # too large (38 expected, binomial p-value 3e-8) fails the binomial test
    rng = np.random.default_rng(8)
    rate = quantise_rate(1e-3)
    n, m = 250_000, int(8 / rate)
    hits = np.count_nonzero(np.abs(discrete_laplace(rng, rate, size=n)) >= m)
    prob = 2 * math.exp(-rate * m) / (1 + math.exp(-rate))
    assert stats.binomtest(hits, n, prob).pvalue > P_FLOOR


def test_power_of_two_grid():
    assert power_of_two_grid(1.0) == 2.0**-10
    assert power_of_two_grid(3.0, 1.0) == 2.0
    assert power_of_two_grid(0.7, 0.5) == 0.25
    g = power_of_two_grid(0.123, 2.0**-7)
    assert g <= 0.123 * 2.0**-7 < 2 * g and math.frexp(g)[0] == 0.5
    with pytest.raises(ValueError, match="sensitivity must be finite and > 0"):
        power_of_two_grid(0.0)
    with pytest.raises(ValueError, match="resolution must be finite and > 0"):
        power_of_two_grid(1.0, float("inf"))
    with pytest.raises(ValueError, match="not a positive finite float"):
        power_of_two_grid(1e-300, 1e-300)
    with pytest.raises(TypeError, match="sensitivity must be a real number"):
        power_of_two_grid("1")


def test_floor_to_grid():
    g = 0.25
    out = floor_to_grid([0.0, 0.3, -0.1, -0.25, 1.0, 1e3], g)
    np.testing.assert_array_equal(out, [0, 1, -1, -1, 4, 4000])
    assert out.dtype == np.int64
    # an underflowing quotient still floors to -1 for a tiny negative value
    assert floor_to_grid(-5e-324, 2.0**10) == -1
    assert floor_to_grid(5e-324, 2.0**10) == 0
    # integer sensitivity: reals within Δ have floors within ceil(Δ/g)
    rng = np.random.default_rng(9)
    delta, g = 0.3, 2.0**-3
    a = rng.uniform(-10, 10, 100_000)
    b = a + rng.uniform(-delta, delta, a.size)
    diff = np.abs(floor_to_grid(a, g) - floor_to_grid(b, g))
    assert diff.max() <= math.ceil(delta / g) and diff.max() == math.ceil(delta / g)
    with pytest.raises(ValueError, match="values must be finite"):
        floor_to_grid([1.0, np.nan], g)
    with pytest.raises(ValueError, match="overflows int64"):
        floor_to_grid([2.0**70], 1.0)
    with pytest.raises(ValueError, match="grid must be a positive finite power of two"):
        floor_to_grid([1.0], 0.3)


def test_tulap_law_and_exactness():
    from skdptest._noise import tulap

    rng = np.random.default_rng(11)
    rate = 1.0
    z = tulap(rng, rate, size=60_000)
    # integer part: the exact discrete Laplace law of rate ε (G₁ − G₂)
    j = np.round(z).astype(np.int64)
    assert _g_test_pvalue(j, rate) > P_FLOOR
    # fractional part: uniform on (−1/2, 1/2), independent of the integer part
    u = z - j
    assert np.all(np.abs(u) < 0.5)
    assert stats.kstest(u, "uniform", args=(-0.5, 1.0)).pvalue > P_FLOOR
    assert stats.kstest(u[j == 0], "uniform", args=(-0.5, 1.0)).pvalue > P_FLOOR
    # U lies on the odd multiples of 2**-54 (exact, symmetric grid)
    v = tulap(rng, rate, size=1000)
    v = v[np.abs(v) < 0.5]  # J = 0: the float is U itself (no rounding)
    scaled = np.ldexp(v, 54)
    assert np.all(scaled == np.floor(scaled)) and np.all(scaled % 2 == 1)
    # the shift is added in integer arithmetic: same noise, shifted by exactly the count
    a = tulap(np.random.default_rng(3), rate, size=5, shift=0)
    b = tulap(np.random.default_rng(3), rate, size=5, shift=7)
    np.testing.assert_array_equal(b - a, 7.0)
    assert isinstance(tulap(rng, rate), float)
    with pytest.raises(TypeError, match="shift must hold integers"):
        tulap(rng, rate, shift=0.5)
    with pytest.raises(ValueError, match="multiple of 2"):
        tulap(rng, 0.1)
