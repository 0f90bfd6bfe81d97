"""Finite-n optimality of the exact two-point e-value: a certified upper bound on
E_Q[log E] over *every* ε-DP e-value, at a given n.

Setting: rows take two values, P(x = x1) = p, Q(x = x1) = q, neighbours replace one
row. The count S of x1 is sufficient, and averaging any ε-DP mechanism over the
arrangements of a given count gives a mechanism M(y | s) on {0..n} with the same output
laws under P and Q that is ε-DP in s (s and s + 1 are joined by a biregular one-flip
graph). For an output y write φ_y(s) = M(y | s): φ_y lies in the polyhedral cone

    C = {φ : e^{-ε} φ(s) <= φ(s + 1) <= e^{ε} φ(s)},

whose extreme rays are the walks φ(s) = exp(ε w(s)) with every step of w equal to ±1.
The e-power of the best e-value computed from y is KL(m_Q || m_P) = Σ_y F(φ_y), with
F(φ) = a log(a / b), a = Σ_s Q_s φ(s), b = Σ_s P_s φ(s), and Σ_y φ_y = 1.

F is convex and positively homogeneous, hence sublinear. A vector u with
F(φ) <= u·φ + δ a(φ) on every walk therefore bounds it on all of C, and then
KL <= Σ_y (u·φ_y + δ a_y) = Σ_s u_s + δ for every ε-DP mechanism (the LP dual).

The certificate takes u from complementary slackness with the two-sided geometric
mechanism (its output columns are the tents e^{-ε|s - t|}), so Σ_s u_s is that
mechanism's exact KL, and checks the inequality on all 2^n walks at once: with
F(φ) = sup_ρ [a (1 + ρ) - e^ρ b], for each ρ on a grid the best walk solves a
two-sided dynamic programme over s (each step multiplies φ by e^{±ε}). Between grid
points ρ_i and ρ_i + Δ the objective grows by at most Δ·a, and outside
[min log Q_s/P_s, max log Q_s/P_s] it is monotone, so a pass of the grid check with
margin η certifies δ = Δ + η. Arithmetic is in (sign, log-magnitude) pairs, so
binomial tails far below the float range are handled exactly.

The shipped exact release draws its noise at r = quantise_rate(ε) <= ε (a multiple of
2^-20). For r < ε the discrete Laplace law of rate r is that of rate ε plus independent
integer noise (the ratio of their characteristic functions is that of a symmetric law
with non-negative weights), so by data processing its e-power is at most ``geometric``
at ε, and ``upper`` (a bound over every ε-DP e-value) bounds it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._special import logsumexp

__all__ = ["TwoPointEPowerBound", "two_point_epower_bound"]


@dataclass(frozen=True)
class TwoPointEPowerBound:
    """Finite-n e-power of two-point laws, in nats.

    Attributes
    ----------
    geometric : float
        E_Q[log E] of the exact likelihood ratio of S + two-sided geometric(ε) noise.
    upper : float
        Certified upper bound on E_Q[log E] of every ε-DP e-value at this n
        (``geometric + delta`` when ``certified``).
    delta : float
        Grid step plus margin: the certificate's slack, in nats.
    certified : bool
        Whether the dual inequality held at every grid point (if False, ``upper`` is
        +inf: nothing is claimed).
    """

    geometric: float
    upper: float
    delta: float
    certified: bool


def _signed_sum(signs, logs):
    """Σ_i signs[i] · exp(logs[i]) as (sign, log|·|), stacked along axis 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        top = np.max(np.where(signs != 0, logs, -np.inf), axis=0)
        finite = np.isfinite(top)
        shift = np.where(finite, top, 0.0)
        val = np.sum(np.where(signs != 0, signs * np.exp(logs - shift), 0.0), axis=0)
        return np.sign(val), np.where(val != 0, shift + np.log(np.abs(val)), -np.inf)


def _step(sign, log, eps):
    """f(g) = e^{ε} g for g > 0, e^{-ε} g for g < 0: the best next step of a walk."""
    return sign, log + np.where(sign > 0, eps, -eps)


def _tent_moments(log_w, eps):
    """log Σ_s w_s e^{-ε|s - t|} for every t in 0..n."""
    s = np.arange(log_w.size)
    return logsumexp(log_w[None, :] - eps * np.abs(s[None, :] - s[:, None]), axis=1)


def _dual(log_p, log_q, eps):
    """u = Φ^{-1} F with Φ_ts = e^{-ε|s - t|} (its inverse is tridiagonal), as
    (sign, log|u|). F_t = a_t log(a_t / b_t) is the KL contribution of tent t."""
    la, lb = _tent_moments(log_q, eps), _tent_moments(log_p, eps)
    d = la - lb
    f_sign, f_log = np.sign(d), la + np.log(np.abs(np.where(d == 0, 1.0, d)))
    f_sign = np.where(d == 0, 0.0, f_sign)
    r = math.exp(-eps)
    diag = np.full(la.size, 1.0 + r * r)
    diag[[0, -1]] = 1.0
    # (Φ^{-1} F)_s ∝ diag_s F_s − r (F_{s−1} + F_{s+1}), with F = 0 outside 0..n
    sp, lp = np.pad(f_sign, 1), np.pad(f_log, 1, constant_values=-np.inf)
    signs = np.stack([f_sign, -sp[:-2], -sp[2:]])
    logs = np.stack([f_log + np.log(diag), lp[:-2] + math.log(r), lp[2:] + math.log(r)])
    u_sign, u_log = _signed_sum(signs, logs)
    return u_sign, u_log - math.log1p(-r * r)


def _walk_max_sign(log_p, log_q, u, rho, margin, eps):
    """Sign of max over walks φ (normalised at their start) of Σ_s φ(s) c_s with
    c_s = Q_s (1 + ρ − margin) − e^ρ P_s − u_s, for a vector of ρ. Returns a bool
    array: True where some walk makes the sum positive."""
    u_sign, u_log = u
    n1 = log_p.size
    lift = 1.0 + rho - margin

    def c(s):
        signs = np.stack([np.sign(lift), -np.ones_like(rho), np.full_like(rho, -u_sign[s])])
        with np.errstate(divide="ignore"):  # lift = 0: a zero term (sign 0)
            log_lift = np.log(np.abs(lift))
        logs = np.stack([log_q[s] + log_lift, rho + log_p[s], np.full_like(rho, u_log[s])])
        return _signed_sum(signs, logs)

    cs = [c(s) for s in range(n1)]
    right = [None] * (n1 + 1)
    right[n1] = (np.zeros_like(rho), np.full_like(rho, -np.inf))
    for s in range(n1 - 1, -1, -1):
        g = _step(*right[s + 1], eps)
        right[s] = _signed_sum(np.stack([cs[s][0], g[0]]), np.stack([cs[s][1], g[1]]))
    bad = np.zeros(rho.shape, dtype=bool)
    left = (np.zeros_like(rho), np.full_like(rho, -np.inf))
    for s in range(n1):
        gl, gr = _step(*left, eps), _step(*right[s + 1], eps)
        h = _signed_sum(np.stack([cs[s][0], gl[0], gr[0]]), np.stack([cs[s][1], gl[1], gr[1]]))
        bad |= h[0] > 0
        left = _signed_sum(np.stack([cs[s][0], gl[0]]), np.stack([cs[s][1], gl[1]]))
    return bad


def two_point_epower_bound(n, p, q, epsilon, step=0.02, margin=1e-9, chunk=2048):
    """Certified upper bound on E_Q[log E] over all ε-DP e-values for n two-point rows.

    Parameters
    ----------
    n : int
        Number of rows.
    p, q : float
        Probability of the first support point under P (null) and Q (alternative).
    epsilon : float
        Privacy parameter (replace-one neighbours).
    step : float, default=0.02
        Grid step Δ in log r; it enters the bound additively.
    margin : float, default=1e-9
        Margin η of the grid check; it enters the bound additively.
    chunk : int, default=2048
        Grid points processed together (memory ~ 40·n·chunk bytes).

    Returns
    -------
    TwoPointEPowerBound
    """
    s = np.arange(n + 1)
    log_p, log_q = stats.binom.logpmf(s, n, p), stats.binom.logpmf(s, n, q)
    u = _dual(log_p, log_q, epsilon)
    with np.errstate(under="ignore"):
        geometric = math.fsum(u[0] * np.exp(u[1]))
    llr = log_q - log_p
    rho = np.arange(llr.min(), llr.max() + step, step)
    certified = not any(
        _walk_max_sign(log_p, log_q, u, rho[i:i + chunk], margin, epsilon).any()
        for i in range(0, rho.size, chunk)
    )
    delta = step + margin
    return TwoPointEPowerBound(geometric, geometric + delta if certified else math.inf,
                               delta, certified)
