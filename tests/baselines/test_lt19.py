"""LT19 Algorithm 1, the sequential LT-style tester and the reference lines."""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest.baselines import (
    cln23_reference_p_bar,
    lt19_acceptance_probability,
    lt19_cap,
    lt19_expected_runs,
    lt19_reference_p_bar,
    lt19_threshold,
    sequential_lt_output_probabilities,
    sequential_lt_privacy,
    sequential_lt_test,
)


class Coin:
    def __init__(self, p, epsilon=0.5):
        self.p, self.epsilon = p, epsilon

    def sample(self, X, y, size, rng):
        return np.where(rng.random(size) < self.p, 1, -1)


def test_cap():
    gamma, eps0 = 0.2, 0.01
    T = lt19_cap(gamma, eps0)
    assert T >= math.log(2 / eps0) / gamma and T >= 1 + 1 / (math.e * gamma)
    assert T - 1 < max(math.log(2 / eps0) / gamma, 1 + 1 / (math.e * gamma))
    with pytest.raises(ValueError, match=r"gamma must lie in \(0, 1\]"):
        lt19_cap(0.0, 0.1)
    with pytest.raises(ValueError, match="epsilon0 must be > 0"):
        lt19_cap(0.5, 0.0)


@pytest.mark.parametrize("cap", [None, 5])
@pytest.mark.parametrize("p", [0.02, 0.3])
def test_algorithm1_monte_carlo_matches_closed_forms(p, cap):
    gamma, n = 0.1, 4000
    rng = np.random.default_rng(1)
    res = [lt19_threshold(Coin(p), None, None, gamma, rng, cap) for _ in range(n)]
    acc = sum(r[0] for r in res)
    lo, hi = stats.binom.ppf([1e-4, 1 - 1e-4], n, lt19_acceptance_probability(p, gamma, cap))
    assert lo <= acc <= hi
    runs = np.array([r[1] for r in res], dtype=float)
    mean = lt19_expected_runs(p, gamma, cap)
    assert abs(runs.mean() - mean) <= 4.5 * runs.std() / math.sqrt(n)
    if cap is not None:
        assert runs.max() <= cap


def _corners(eps, n=400):
    """Pairs (p, p') of an eps-DP binary mechanism at the corners of its box."""
    p = np.linspace(1e-4, 1 - 1e-4, n)
    up = np.minimum(np.exp(eps) * p, 1 - np.exp(-eps) * (1 - p))
    return p, up


@pytest.mark.parametrize("cap_eps0", [None, 0.05])
def test_algorithm1_is_2eps1_dp_exactly(cap_eps0):
    eps1, gamma = 0.5, 0.05
    cap = None if cap_eps0 is None else lt19_cap(gamma, cap_eps0)
    p, q = _corners(eps1)
    a, b = (lt19_acceptance_probability(p, gamma, cap),
            lt19_acceptance_probability(q, gamma, cap))
    loss = np.max(np.abs(np.r_[np.log(a / b), np.log((1 - a) / (1 - b))]))
    assert loss <= 2 * eps1 + (cap_eps0 or 0.0) + 1e-12
    assert loss >= 0.9 * eps1  # the check is not vacuous


def test_sequential_tester_law_and_monte_carlo():
    p = [0.001, 0.002, 0.4, 0.9]
    law = sequential_lt_output_probabilities(p, 0.5, 0.1)
    assert law.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    n = 3000
    mechs = [Coin(v) for v in p]
    out = [sequential_lt_test(mechs, None, None, 0.5, 0.1, rng)[0] for _ in range(n)]
    counts = np.array([out.count(i) for i in range(4)] + [out.count(None)])
    keep = law * n >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[law[keep], law[~keep].sum()] * n
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-3


def test_sequential_tester_accuracy_at_its_levels():
    T, p_star, beta = 10, 0.5, 0.1
    false_stop = 1 - sequential_lt_output_probabilities([p_star * beta**2 / T] * T, p_star,
                                                        beta)[-1]
    assert false_stop <= beta
    miss = 1 - lt19_acceptance_probability(p_star, p_star * beta)
    assert miss <= beta


def test_sequential_tester_is_only_approximately_dp():
    loss, delta = sequential_lt_privacy(10, 0.5, 0.5, 0.1)
    # gtm.md: pure loss 9.5 and delta(eps=1) about 3.5e-3 at T = 10, eps1 = 0.5
    assert loss == pytest.approx(9.5, abs=0.05)
    assert delta == pytest.approx(3.5e-3, rel=0.05)


def test_reference_lines():
    assert cln23_reference_p_bar(10, 0.5, 0.1) == pytest.approx(0.005)
    assert lt19_reference_p_bar(10, 0.5, 0.1, 0.05, 1.0) == pytest.approx(
        0.5 * (0.01 / 10) ** 0.6)
