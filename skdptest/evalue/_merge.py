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

__all__ = [
    "choose_bet",
    "choose_clip",
    "expected_log_release",
    "merged_sensitivity",
    "plan_release",
    "release",
]


def _log_merge(log_e, bet):
    """log(1 − λ + λ E) computed stably from log E (λ = 1: no merging)."""
    if bet == 1.0:
        return np.asarray(log_e, dtype=float)
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


def choose_clip(laws, n, epsilon, stat_at):
    """The clip range r < ε maximising the expected release of E*_r without merging.

    ``stat_at(r)`` is the optimal statistic clipped at log-range r. Without a bet
    (λ = 1) the release is Σ log E*_r + Laplace(r'/ε) + log(1 − (r'/ε)²), r' <= r the
    actual range, with expectation n E_Q[log E*_r] + log(1 − (r'/ε)²). Merging with
    λ < 1 never beats this family: log(1 − λ + λE*) is a per-row log e-value of some
    range R' and E*_{R'} has the largest E_Q[log E] among those. Both terms are
    concave in r (R_r is an infimum of functions affine in r); a grid plus a bounded
    search finds the maximum. Returns (r, expected release).
    """

    def neg(r):
        return -expected_log_release(laws, stat_at(r), 1.0, n, epsilon)

    rs = np.linspace(0.02, 0.98, 25) * epsilon
    vals = [neg(r) for r in rs]
    i = int(np.argmin(vals))
    lo, hi = rs[max(i - 1, 0)], rs[min(i + 1, len(rs) - 1)]
    if i == len(rs) - 1:
        hi = epsilon * (1 - 1e-6)
    res = optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-5 * epsilon})
    r, v = (float(res.x), -float(res.fun)) if res.fun <= vals[i] else (float(rs[i]), -vals[i])
    return r, v


def plan_release(laws, stat, n, epsilon, stat_at=None):
    """(statistic, bet, clip range or None) with the largest expected release.

    The bet of ``stat`` is planned by ``choose_bet``; when ``stat_at`` (E* at a given
    clip range) is given, the unmerged release of E*_r at the best r < ε is planned
    too and kept if its expected release is larger. Public: laws and n only.
    """
    bet = choose_bet(laws, stat, n, epsilon)
    if stat_at is None:
        return stat, bet, None
    merged = expected_log_release(laws, stat, bet, n, epsilon)
    r, value = choose_clip(laws, n, epsilon, stat_at)
    if value <= merged:
        return stat, bet, None
    return stat_at(r), 1.0, r


def release(log_e_rows, stat, bet, epsilon, rng):
    """The private log e-value Λ̃ of one batch, and its noise scale (public)."""
    lam = float(np.sum(_log_merge(log_e_rows, bet)))
    b = noise_scale(stat, bet, epsilon)
    if b == 0.0:  # the statistic is constant: nothing about the data is released
        return lam, 0.0
    return lam + float(laplace(rng, b)) - laplace_log_mgf(b), b
