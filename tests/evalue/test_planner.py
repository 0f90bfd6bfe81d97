"""The planner's objective and optimiser: accuracy of the Gaussian quadrature split at
the statistic's kinks, optimality of the planned bet and clip against dense grids, and
plans that do not depend on the BLAS thread count."""

import math

import numpy as np
import pytest
import threadpoolctl
from scipy import special, stats

from skdptest.evalue import _cache
from skdptest.evalue._evalue import merged_plan
from skdptest.evalue._laws import make_laws
from skdptest.evalue._merge import (
    _log_merge,
    choose_bet,
    choose_clip,
    expected_log_release,
    release_noise,
)
from skdptest.evalue._optimal import _mass, optimal_statistic, tslr_statistic

GAUSS = [(0.05, 1.0), (0.5, 0.1), (0.5, 1.0), (0.5, 10.0), (3.0, 1.0)]


@pytest.mark.parametrize("mu, eps", GAUSS)
def test_gaussian_expectations_split_at_kinks_match_closed_forms(mu, eps):
    """E_Q[clip(L, a, b)] (truncated normal moments), E_Q[L] = s²/2 and the normaliser
    E_P[clip(e^L, e^a, e^b)] (normal cdfs) are closed forms; the panels split at the
    kinks reproduce them to ~1e-15 (the former quantile grid: up to 9e-9)."""
    laws = make_laws(stats.norm(0, 1), stats.norm(mu, 1))
    stat = optimal_statistic(laws, eps)[0]
    a, b = stat.breaks
    clip_mean = laws.expect(lambda L: np.clip(L, a, b), "Q", breaks=stat.breaks)
    assert clip_mean == pytest.approx(laws.clip_mean_q(a, b), rel=1e-13, abs=1e-16)
    assert laws.expect(lambda L: L, "Q", breaks=stat.breaks) == pytest.approx(
        mu * mu / 2, rel=1e-13)
    mass = laws.expect(lambda L: np.exp(np.clip(L, a, b)), "P", breaks=stat.breaks)
    assert mass == pytest.approx(_mass(laws, a, eps), rel=1e-13)


@pytest.mark.parametrize("mu, eps", GAUSS)
def test_gaussian_planning_objective_agrees_with_the_quantile_grid(mu, eps):
    """The merged per-row term under Q, E* and tsLR, several bets: the split panels and
    the 4000-panel quantile grid (kinks inside panels, accurate to ~1e-9 of the
    statistic's range) agree within the grid's error."""
    laws = make_laws(stats.norm(0, 1), stats.norm(mu, 1))
    for stat in (optimal_statistic(laws, eps)[0], tslr_statistic(laws, eps)):
        for bet in (0.2, 0.97, 1.0):
            def h(L, stat=stat, bet=bet):
                return _log_merge(stat.log_e(L), bet)
            split = laws.expect(h, "Q", breaks=stat.breaks)
            grid = laws.expect(h, "Q")
            assert abs(split - grid) <= 2e-8 * (stat.log_hi - stat.log_lo)


def _dense_best(objective, lo, hi, count=400):
    xs = np.linspace(lo, hi, count)
    return max(objective(x) for x in xs)


@pytest.mark.parametrize("laws_, n, eps", [
    ((stats.norm(0, 1), stats.norm(0.5, 1)), 1000, 0.1),
    ((stats.norm(0, 1), stats.norm(1.0, 1)), 10_000, 1.0),
    ((stats.bernoulli(0.3), stats.bernoulli(0.7)), 1000, 1.0),
])
def test_planned_bet_is_at_least_the_dense_grid_maximum(laws_, n, eps):
    """choose_bet (40-point grid + bounded Brent) reaches the best of 300 bets, searched
    independently in u = −log(1 − λ) over the same range."""
    laws = make_laws(*laws_)
    stat = optimal_statistic(laws, eps)[0]
    planned = expected_log_release(laws, stat, choose_bet(laws, stat, n, eps), n, eps)
    best = _dense_best(
        lambda u: expected_log_release(laws, stat, -math.expm1(-u), n, eps),
        0.02, math.log(n) + 6.0, 300)
    assert planned >= best - 1e-9 * abs(best)


@pytest.mark.parametrize("mu, n, eps", [(0.5, 10, 1.0), (0.25, 100, 1.0), (1.0, 1000, 10.0)])
def test_planned_clip_is_at_least_the_dense_grid_maximum(mu, n, eps):
    """choose_clip reaches the best of 200 clip ranges in (0, ε) (each E*_r normalised
    exactly) up to the planner's resolution g, the release grid: the objective is
    piecewise smooth (the integer sensitivity and the quantised rate move in steps, the
    floors' loss is counted at its mean, exact to ± g), so a grid can land on a step
    up to ~1e-5 nats higher (N(0.5), n = 10: 0.445154 against 0.445168), as it could
    before the faster quadrature (the same clip was planned then)."""
    laws = make_laws(stats.norm(0, 1), stats.norm(mu, 1))
    r, value = choose_clip(laws, n, eps, lambda r: optimal_statistic(laws, r, rates=False)[0])
    assert 0 < r < eps
    stat = optimal_statistic(laws, r)[0]
    assert value == expected_log_release(laws, stat, 1.0, n, eps)
    best = _dense_best(
        lambda r: expected_log_release(laws, optimal_statistic(laws, r, rates=False)[0],
                                       1.0, n, eps),
        0.02 * eps, 0.98 * eps, 200)
    assert value >= best - release_noise(stat, 1.0, eps).grid


def test_candidate_statistics_equal_the_checked_statistic():
    """rates=False (the planner's candidates) builds the same statistic as the full call
    (same clip levels, shift and bounds): only the rate, its check and KL are skipped."""
    laws = make_laws(stats.norm(0, 1), stats.norm(0.3, 1))
    for r in (0.05, 0.7, 3.0):
        fast = optimal_statistic(laws, r, rates=False)
        full = optimal_statistic(laws, r)
        assert fast[1] is None and full[1].rate > 0
        assert fast[0].breaks == full[0].breaks
        assert (fast[0].log_lo, fast[0].log_hi) == (full[0].log_lo, full[0].log_hi)
        L = np.linspace(-5, 5, 101)
        assert np.array_equal(fast[0].log_e(L), full[0].log_e(L))


@pytest.mark.parametrize("null, alt, n, eps", [
    (stats.norm(0, 1), stats.norm(0.5, 1), 1000, 0.1),
    (stats.norm(0, 1), stats.norm(0.5, 1), 1000, 1.0),
    (stats.t(5), stats.t(5, loc=0.5), 300, 1.0),
])
def test_plans_do_not_depend_on_the_blas_thread_count(null, alt, n, eps):
    """The planner's sums are numpy's pairwise sums, not a threaded BLAS dot (whose
    last bits, and so the planned bet, changed with the thread count: 0.9369658300925077
    with one thread against 0.9369658300925496 with two at N(0.5), n = 1000, ε = 0.1)."""
    laws = make_laws(null, alt)
    # tsLR for the t pair: its bet is planned on the 40 000-node quantile grid
    stat = optimal_statistic(laws, eps)[0] if laws.fast_rates else tslr_statistic(laws, eps)
    plans = []
    for threads in (1, 2, 3):
        _cache._PLANS.clear()  # plan afresh (a cache of public computations only)
        with threadpoolctl.threadpool_limits(threads):
            plan = merged_plan("auto", laws, stat, n, eps)
        plans.append((plan.bet, plan.clip, plan.noise))
    assert plans[0] == plans[1] == plans[2]


def test_quadrature_handles_extreme_gaussian_scales():
    """Tiny and large shifts (s = 1e-4 and 20): still within 1e-13 of the closed form."""
    a, b = -0.3, 0.6
    for mu in (1e-4, 20.0):
        laws = make_laws(stats.norm(0, 1), stats.norm(mu, 1))
        got = laws.expect(lambda L: np.clip(L, a, b), "Q", breaks=(a, b))
        assert got == pytest.approx(laws.clip_mean_q(a, b), rel=1e-13, abs=1e-16)
        # the probability of the middle band, an indicator: exact panels at its ends
        band = laws.expect(lambda L: ((L >= a) & (L <= b)).astype(float), "Q",
                           breaks=(a, b))
        m, s = mu * mu / 2, mu
        exact = special.ndtr((b - m) / s) - special.ndtr((a - m) / s)
        assert band == pytest.approx(exact, rel=1e-12, abs=1e-15)
