"""Merging per-row e-statistics and privatising the merged log e-value.

Λ_n = Σ_t log(1 − λ + λ E(x_t)) has replace-one sensitivity

    R_λ = log((1 − λ + λ E_max) / (1 − λ + λ E_min)) < log(E_max / E_min) <= ε,

so Λ̃ = Λ_n + Z + log(1 − b²), Z ~ Laplace(b = R_λ / ε), is ε-DP and exp(Λ̃) is an
e-value: E_P[exp(Λ̃)] = (1 − λ + λ E_P[E])^n E[e^Z] (1 − b²) <= 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from .._noise import laplace, laplace_log_mgf

__all__ = ["choose_bet", "expected_log_release", "merged_sensitivity", "release"]


def _log_merge(log_e, bet):
    """log(1 − λ + λ E) computed stably from log E."""
    return np.log1p(bet * np.expm1(log_e))


def merged_sensitivity(stat, bet):
    """R_λ: the largest change of Λ_n when one row is replaced."""
    hi = _log_merge(np.array([stat.log_hi]), bet)[0]
    lo = _log_merge(np.array([stat.log_lo]), bet)[0]
    return float(hi - lo)


def noise_scale(stat, bet, epsilon):
    """Laplace scale b = R_λ / ε (< 1 because R_λ < ε)."""
    return merged_sensitivity(stat, bet) / epsilon


def expected_log_release(laws, stat, bet, n, epsilon):
    """E_Q[Λ̃] = n E_Q[log(1 − λ + λ E)] + log(1 − b²) (E[Z] = 0)."""
    b = noise_scale(stat, bet, epsilon)
    if b >= 1:
        return -math.inf
    per_row = laws.expect(lambda L: _log_merge(stat.log_e(L), bet), "Q")
    return n * per_row - laplace_log_mgf(b)


def choose_bet(laws, stat, n, epsilon):
    """The bet λ maximising the expected released log e-value under Q.

    A public computation (it uses n and the laws only). Searched over
    u = −log(1 − λ), since the optimum sits near 1 − 1/(n R_ε).
    """

    def neg(u):
        return -expected_log_release(laws, stat, -math.expm1(-u), n, epsilon)

    us = np.linspace(0.02, math.log(max(n, 2)) + 6.0, 40)
    vals = [neg(u) for u in us]
    i = int(np.argmin(vals))
    lo, hi = us[max(i - 1, 0)], us[min(i + 1, len(us) - 1)]
    res = optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-6})
    u = res.x if res.fun <= vals[i] else us[i]
    return float(-math.expm1(-u))


def release(log_e_rows, stat, bet, epsilon, rng):
    """The private log e-value Λ̃ of one batch, and its noise scale (public)."""
    lam = float(np.sum(_log_merge(log_e_rows, bet)))
    b = noise_scale(stat, bet, epsilon)
    if b == 0.0:  # the statistic is constant: nothing about the data is released
        return lam, 0.0
    return lam + float(laplace(rng, b)) - laplace_log_mgf(b), b
