"""Float-safe releases: exact validity, exact privacy and integer-valued outputs.

The merged release is g·(M + K) − c with M the floored batch integer, K an exact
discrete Laplace draw and c its exact compensator (``_merge``); the exact statistics
draw two-sided geometric noise at a quantised rate and evaluate every density at that
same rate (``_exact``, ``_lattice``). Sums over the noise are computed here from the
pmf written out, P(K = k) = tanh(r/2) e^{−r|k|}, with certified tail bounds (both from
``_reference.py``: ``dlaplace_log_pmf``, ``log_mgf_bounds``, ``tail_cut_closed_form``).
"""

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

import skdptest.evalue._exact as exact_module
import skdptest.evalue._lattice as lattice_module
import skdptest.evalue._merge as merge_module
from skdptest._noise import quantise_rate
from skdptest.evalue._exact import BinaryExact
from skdptest.evalue._lattice import LatticeExact
from skdptest.evalue._laws import make_laws
from skdptest.evalue._merge import (
    choose_bet,
    expected_log_release,
    merged_integer,
    merged_sensitivity,
    release,
    release_noise,
)
from skdptest.evalue._optimal import optimal_statistic
from tests.evalue._reference import (
    P0,
    chi2_pvalue_written,
    dlaplace_log_pmf,
    log_mgf_bounds,
    tail_cut_closed_form,
)


def _two_point(q, eps):
    laws = make_laws(stats.bernoulli(P0), stats.bernoulli(q))
    return laws, optimal_statistic(laws, eps)[0]


def _batch_integers(laws, stat, bet, noise, n):
    """M(k), k = 0..n: the batch integer of n two-point rows with k at x = 1."""
    log_e = stat.log_e(laws.log_ratio(np.array([[0.0], [1.0]])))
    terms = merge_module._log_merge(log_e, bet)
    return np.array([merged_integer(np.repeat(terms, [n - k, k]), noise)
                     for k in range(n + 1)]), terms


# ---------------------------------------------------------------- (a) exact validity
@pytest.mark.parametrize("q, eps, n", [(0.7, 1.0, 5), (0.7, 1.0, 40), (0.5, 0.7, 20)])
def test_merged_release_is_an_e_value_by_exact_summation(q, eps, n):
    """E_P[exp(g(M + K) − c)] = E_P[e^{gM}] E[e^{gK}] e^{−c}, summed exactly over the
    binomial law of the count and the discrete Laplace pmf (tail bound added): <= 1.
    Without the compensator it exceeds 1, so the check can fail."""
    laws, stat = _two_point(q, eps)
    bet = choose_bet(laws, stat, n, eps)
    noise = release_noise(stat, bet, eps)
    m, terms = _batch_integers(laws, stat, bet, noise, n)
    k = np.arange(n + 1)
    log_e_gm = float(special.logsumexp(stats.binom.logpmf(k, n, P0) + noise.grid * m))
    # the floors only lower: g M(k) <= Σ of the per-row terms, by at most g + n h
    exact_sum = (n - k) * terms[0] + k * terms[1]
    assert np.all(noise.grid * m <= exact_sum)
    assert np.all(noise.grid * m >= exact_sum - noise.grid - n * noise.fine)
    cut = int(80 / (noise.rate - noise.grid)) + 1
    lo, hi = log_mgf_bounds(noise.rate, noise.grid, cut)
    assert hi - lo < 1e-15
    c = noise.log_mgf
    assert c == pytest.approx(lo, rel=1e-12)  # the compensator is the exact log mgf
    upper = log_e_gm + hi - c
    assert upper <= 1e-12
    # not vacuous: E_P[exp(Λ_n)] = 1 for E*, so only the floors' loss (<= g) remains
    assert upper >= -noise.grid - n * noise.fine - 1e-12
    # mutant: no compensator
    assert log_e_gm + lo > 1e-2


# ---------------------------------------------------------------- (b) exact privacy
def _worst_log_ratio(stat, bet, eps, X_rows, rng, trials=20):
    """max over neighbouring batches (one row moved from the statistic's minimum to its
    maximum) of the exact log pmf ratio of the released integer J = M + K."""
    noise = release_noise(stat, bet, eps)
    terms = merge_module._log_merge(X_rows, bet)
    lo, hi = merge_module._log_merge(np.array([stat.log_lo, stat.log_hi]), bet)
    worst = 0.0
    for _ in range(trials):
        t = rng.permutation(terms)
        a, b = t.copy(), t.copy()
        a[0], b[0] = lo, hi
        m_a, m_b = merged_integer(a, noise), merged_integer(b, noise)
        assert abs(m_b - m_a) <= noise.steps
        j = np.arange(min(m_a, m_b) - 3 * noise.steps, max(m_a, m_b) + 3 * noise.steps)
        ratio = dlaplace_log_pmf(j - m_a, noise.rate) - dlaplace_log_pmf(j - m_b, noise.rate)
        worst = max(worst, float(np.max(np.abs(ratio))))
    return worst, noise


@pytest.mark.parametrize("eps", [1.0, 0.3, 2.0])
def test_release_pmf_ratio_on_extreme_neighbours_is_at_most_epsilon(eps):
    laws, stat = _two_point(0.7, eps)
    bet = choose_bet(laws, stat, 50, eps)
    rng = np.random.default_rng(0)
    rows = stat.log_e(laws.log_ratio(rng.binomial(1, 0.5, size=(50, 1)).astype(float)))
    worst, noise = _worst_log_ratio(stat, bet, eps, rows, rng)
    assert noise.rate * noise.steps <= eps
    assert worst <= eps + 1e-12
    # attained up to one grid step and the rate's quantisation
    assert worst >= eps - noise.rate - noise.steps * 2.0**-20 - 1e-12


def test_release_pmf_ratio_gaussian_planned_clip():
    """Continuous laws, merged and unmerged plans: same bound on random rows."""
    laws = make_laws(stats.norm(0, 1), stats.norm(0.5, 1))
    stat = optimal_statistic(laws, 1.0)[0]
    rng = np.random.default_rng(1)
    rows = stat.log_e(laws.log_ratio(rng.normal(size=(200, 1))))
    for bet in (choose_bet(laws, stat, 200, 1.0), 1.0 - 1e-3):
        worst, noise = _worst_log_ratio(stat, bet, 1.0, rows, rng)
        assert worst <= 1.0 + 1e-12
        assert worst >= 1.0 - 2 * noise.rate - 1e-12


def test_half_noise_mutant_exceeds_epsilon(monkeypatch):
    real = merge_module.quantise_rate
    monkeypatch.setattr(merge_module, "quantise_rate", lambda r: real(2 * r))
    laws, stat = _two_point(0.7, 1.0)
    rng = np.random.default_rng(0)
    rows = stat.log_e(laws.log_ratio(rng.binomial(1, 0.5, size=(50, 1)).astype(float)))
    worst, _ = _worst_log_ratio(stat, choose_bet(laws, stat, 50, 1.0), 1.0, rows, rng)
    assert worst > 1.9


def test_batch_integer_sensitivity_on_random_replacements():
    """|M(D) − M(D')| <= Δ_int for arbitrary replacements, including rows beyond the
    extremes (clipped), on random batches of continuous rows."""
    laws = make_laws(stats.norm(0, 1), stats.norm(0.5, 1))
    stat = optimal_statistic(laws, 1.0)[0]
    rng = np.random.default_rng(2)
    bet = 0.6
    noise = release_noise(stat, bet, 1.0)
    moves = []
    for _ in range(300):
        x = rng.normal(size=(rng.integers(1, 400), 1))
        t = merge_module._log_merge(stat.log_e(laws.log_ratio(x)), bet)
        t2 = t.copy()
        t2[rng.integers(t.size)] = rng.choice([-1e3, 1e3, rng.normal()])
        moves.append(abs(merged_integer(t2, noise) - merged_integer(t, noise)))
    assert max(moves) <= noise.steps
    assert noise.steps == math.ceil(merged_sensitivity(stat, bet) / noise.grid) or \
        noise.steps == math.ceil(merged_sensitivity(stat, bet) / noise.grid) + 1


# ---------------------------------------------------------------- (c) attainable floats
def _old_float_release(terms, stat, bet, eps, rng):
    """The former release, kept here only as a mutant: Λ + Laplace(R/ε) − log(1 − b²)."""
    b = merged_sensitivity(stat, bet) / eps
    return float(np.sum(terms)) + float(rng.laplace(0.0, b)) + math.log1p(-b * b)


def test_releases_are_one_public_function_of_an_integer():
    laws, stat = _two_point(0.7, 1.0)
    n = 30
    bet = choose_bet(laws, stat, n, 1.0)
    noise = release_noise(stat, bet, 1.0)
    X = np.random.default_rng(3).binomial(1, 0.5, size=(n, 1)).astype(float)
    X[0, 0] = 0.0
    X2 = X.copy()
    X2[0, 0] = 1.0
    rng = np.random.default_rng(4)
    seen = {}
    for D in (X, X2):
        log_e = stat.log_e(laws.log_ratio(D))
        for _ in range(300):
            v, scale = release(log_e, stat, bet, 1.0, rng)
            assert scale == noise.scale
            j = noise.integer(v)  # raises unless v == g j − c for an integer j
            assert seen.setdefault(j, v) == v
    assert len(seen) > 100
    # the old float construction is not a function of an integer
    terms = merge_module._log_merge(stat.log_e(laws.log_ratio(X)), bet)
    hits = 0
    for _ in range(300):
        v = _old_float_release(terms, stat, bet, 1.0, rng)
        try:
            noise.integer(v)
            hits += 1
        except ValueError:
            pass
    assert hits < 10


def test_constant_statistic_is_released_without_noise():
    laws, stat = _two_point(0.7, 1.0)
    flat = type("Flat", (), {"log_lo": 0.0, "log_hi": 0.0})()
    assert release_noise(flat, 0.5, 1.0) is None
    assert release(np.zeros(7), flat, 0.5, 1.0, np.random.default_rng(0)) == (0.0, 0.0)


# ---------------------------------------------------------------- (d) e-power
def _exact_two_point_expectation(q, eps, n):
    """(laws, stat, bet, noise, E_Q[g(M + K) − c] summed exactly over the count)."""
    laws, stat = _two_point(q, eps)
    bet = choose_bet(laws, stat, n, eps)
    noise = release_noise(stat, bet, eps)
    m, _ = _batch_integers(laws, stat, bet, noise, n)
    k = np.arange(n + 1)
    exact = math.fsum(stats.binom.pmf(k, n, q) * noise.grid * m) - noise.log_mgf
    return laws, stat, bet, noise, exact


def test_planner_matches_the_exact_expectation():
    """Two-point laws: E_Q[g(M + K) − c] = Σ_k Binom_Q(k) g M(k) − c exactly (E[K] = 0);
    the planner is within its stated ± (n h + g)/2 of it."""
    q, eps, n = 0.7, 1.0, 300
    laws, stat, bet, noise, exact = _exact_two_point_expectation(q, eps, n)
    planned = expected_log_release(laws, stat, bet, n, eps)
    assert abs(planned - exact) <= 0.5 * (n * noise.fine + noise.grid) + 1e-9


@pytest.mark.slow
def test_monte_carlo_of_the_release_matches_the_exact_expectation():
    """Slow (800 releases): the default suite compares 400 fits on the same laws, n and ε
    with the planner (test_evalue.py::test_monte_carlo_e_power_matches_exact_expectation,
    compensator mutants off by 11.7 and 5.1 SE), and the planner with this exact sum
    (test_planner_matches_the_exact_expectation)."""
    q, eps, n = 0.7, 1.0, 300
    laws, stat, bet, noise, exact = _exact_two_point_expectation(q, eps, n)
    rng = np.random.default_rng(5)
    log_e = stat.log_e(laws.log_ratio(np.array([[0.0], [1.0]])))
    draws = np.array([release(log_e[rng.binomial(1, q, size=n)], stat, bet, eps, rng)[0]
                      for _ in range(800)])
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - exact) <= 4 * se


@pytest.mark.slow
def test_planner_matches_monte_carlo_on_gaussian_rows():
    # Slow: the default suite checks the planner against Monte Carlo on these Gaussian
    # laws with an unmerged clip through the estimator
    # (test_evalue.py::test_planned_clip_matches_monte_carlo_e_power_and_validity, where
    # omitting the compensator is off by 5.2 SE).
    laws = make_laws(stats.norm(0, 1), stats.norm(0.25, 1))
    stat = optimal_statistic(laws, 0.6)[0]  # an unmerged clip narrower than ε = 1
    n = 100
    planned = expected_log_release(laws, stat, 1.0, n, 1.0)
    rng = np.random.default_rng(6)
    draws = np.array([release(stat.log_e(laws.log_ratio(rng.normal(0.25, 1, size=(n, 1)))),
                              stat, 1.0, 1.0, rng)[0] for _ in range(800)])
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - planned) <= 4 * se


def test_float_safe_cost_is_a_small_factor_on_the_noise():
    """The noise scale g/r is R_λ/ε up to the grid and the rate quantisation."""
    for eps in (0.1, 0.5, 1.0, 3.0):
        laws, stat = _two_point(0.7, eps)
        bet = choose_bet(laws, stat, 1000, eps)
        noise = release_noise(stat, bet, eps)
        b = merged_sensitivity(stat, bet) / eps
        assert b <= noise.scale <= b * (1 + 2.0**-8 / min(1.0, math.sqrt(eps)))


# ---------------------------------------------------------------- (e) exact statistics
@pytest.mark.parametrize("n, eps", [(10, 0.7), (25, 0.3)])
def test_binary_exact_validity_at_the_quantised_rate(n, eps):
    """Σ_y f_P(y) E(y) = 1 with f_P the law of the count plus noise at the sampler's
    rate, written out; at the unquantised rate the sum is off, so the rates matter."""
    model = BinaryExact(1.0, P0, 0.6)
    rate = quantise_rate(eps)
    assert rate < eps and model.noise_rate(eps) == rate
    cut, tail = tail_cut_closed_form(rate)
    ys = np.arange(-cut, n + cut + 1)
    log_lr = model.log_lr(ys, n, eps)

    def total(r):
        k = np.arange(n + 1)
        f = special.logsumexp(stats.binom.logpmf(k, n, P0)[None, :]
                              + dlaplace_log_pmf(ys[:, None] - k[None, :], r), axis=1)
        return math.fsum(np.exp(f + log_lr))

    assert total(rate) <= 1.0 + tail + 1e-12
    assert total(rate) == pytest.approx(1.0, abs=1e-12)
    assert abs(total(eps) - 1.0) > 1e-9


def test_exact_samplers_follow_the_pmf_used_by_log_lr(monkeypatch):
    """The releases draw the shipped sampler at exactly the rate every density uses
    (spied), and that sampler's draws follow the pmf at that rate (chi-square)."""
    rates = []
    real = exact_module.two_sided_geometric

    def spy(rng, rate, size=None):
        rates.append(rate)
        return real(rng, rate, size)

    monkeypatch.setattr(exact_module, "two_sided_geometric", spy)
    monkeypatch.setattr(lattice_module, "two_sided_geometric", spy)
    rng = np.random.default_rng(7)
    binary = BinaryExact(1.0, P0, 0.6)
    lattice = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 0.7)
    ys = [binary.release(3, 0.7, rng) for _ in range(50)]
    ys += [lattice.release(3, 0.7, rng, 20) for _ in range(50)]
    assert all(y == round(y) for y in ys)
    rate_b, rate_l = binary.noise_rate(0.7), lattice.noise_rate(20)
    assert rates == [rate_b] * 50 + [rate_l] * 50
    assert rate_b == quantise_rate(0.7) < 0.7
    assert rate_l == quantise_rate(0.7 / lattice.steps(20)) < 0.7 / lattice.steps(20)
    # the law the densities assume is the law drawn
    z = real(rng, rate_b, size=20000)
    assert chi2_pvalue_written(z, rate_b, 5) > 1e-3
    assert chi2_pvalue_written(z, 2 * rate_b, 3) < 1e-6  # the check can fail
    assert chi2_pvalue_written(real(rng, rate_l, size=20000), rate_l, 60) > 1e-3


# n = 1 is slow: test_lattice.py::test_validity_discrete_by_enumeration enumerates the
# same laws at n = 1 (and 3); n = 2 stays here at the quantised rate of ε = 0.7
@pytest.mark.parametrize("n", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_lattice_validity_at_the_quantised_rate(n):
    """Enumerated null law of the lattice sum + noise at the model's quantised rate."""
    null, alt = stats.binom(3, 0.3), stats.binom(3, 0.6)
    model = LatticeExact(make_laws(null, alt), 0.7)
    rate = model.noise_rate(n)
    support = np.arange(4)
    g = model.cells(alt.logpmf(support) - null.logpmf(support), n)
    law = np.zeros(n * model.steps(n) + 1)
    for rows in itertools.product(support, repeat=n):
        law[g[list(rows)].sum()] += np.prod(null.pmf(np.array(rows)))
    cut, tail = tail_cut_closed_form(rate)
    t = np.arange(law.size)
    ys = np.arange(-cut, law.size + cut)
    f = np.array([math.fsum(law * np.exp(dlaplace_log_pmf(y - t, rate))) for y in ys])
    total = math.fsum(f * np.exp(model.log_lr(ys, n)))
    assert total <= 1.0 + tail + 1e-12
    assert total == pytest.approx(1.0, abs=1e-8)
