"""Test oracles of the threshold family (independent computations): the acceptance
probabilities of the shipped mechanisms written from their definitions, GTM-R's exact
output law on neighbouring data sets, and the largest log-ratio over neighbours.

Imported by full name, ``from tests.threshold._reference import ...`` (see
tests/kernel/_reference.py).
"""

import itertools
import math

import numpy as np
from scipy import stats

from skdptest.threshold import GaussianThresholdQuery, exact_output_log_probabilities

EPS = 1.0


def lap_p(gap, eps_t):
    """Pr[q + Lap(1/eps_t) >= c] with gap = (c - q) / sensitivity."""
    return 0.5 * math.exp(-gap * eps_t) if gap >= 0 else 1.0 - 0.5 * math.exp(gap * eps_t)


def rr_p(bit, eps_t):
    """Pr[randomized response reports 1] for a true ``bit`` (+1 or -1) at ``eps_t``."""
    keep = 1.0 / (1.0 + math.exp(-eps_t))
    return keep if bit > 0 else 1.0 - keep


def law(p, eps_t, p_star=0.5, deltas=None, epsilon=EPS, work="poisson"):
    return exact_output_log_probabilities(p, [eps_t] * len(p), p_star, deltas, epsilon=epsilon,
                                          work=work)


def max_log_ratio_rr(T, eps_t, p_star, epsilon=EPS, work="poisson"):
    """Randomized response: every bit vector is a data set; any two may be neighbours."""
    laws = [law([rr_p(b, eps_t) for b in bits], eps_t, p_star, epsilon=epsilon, work=work)
            for bits in itertools.product([-1, 1], repeat=T)]
    return max(np.max(np.abs(a - b)) for a, b in itertools.combinations(laws, 2))


def max_log_ratio_corners(gaps, eps_t, p_star=0.5, epsilon=EPS, directions=None,
                          work="poisson"):
    """Noisy threshold queries: X at ``gaps``, X' with every gap moved by -1, 0 or +1."""
    base = law([lap_p(g, eps_t) for g in gaps], eps_t, p_star, epsilon=epsilon, work=work)
    directions = directions or itertools.product([-1, 0, 1], repeat=len(gaps))
    best = 0.0
    for d in directions:
        other = law([lap_p(g + s, eps_t) for g, s in zip(gaps, d, strict=True)], eps_t, p_star,
                    epsilon=epsilon, work=work)
        best = max(best, float(np.max(np.abs(base - other))))
    return best


def max_log_ratio_gaussian(gaps, eps_t, delta_t, p_star=0.5, epsilon=EPS):
    """Gaussian threshold queries (purified by GTM); gaps in units of the sensitivity."""
    sigma = GaussianThresholdQuery(lambda X, y: 0.0, 0.0, eps_t, delta_t).sigma

    def p(g):
        return float(stats.norm.sf(g / sigma))

    T = len(gaps)
    deltas = [delta_t] * T
    base = law([p(g) for g in gaps], eps_t, p_star, deltas, epsilon)
    best = 0.0
    for d in itertools.product([-1, 0, 1], repeat=T):
        moved = [p(g + s) for g, s in zip(gaps, d, strict=True)]
        other = law(moved, eps_t, p_star, deltas, epsilon)
        best = max(best, float(np.max(np.abs(base - other))))
    return best


def chisquare_pvalue(counts, expected):
    """Pearson's chi-square p-value of ``counts`` against the law ``expected`` (cells with
    an expected count below 5 pooled into one)."""
    n = counts.sum()
    keep = expected * n >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum()) * n
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
