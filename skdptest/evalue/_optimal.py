"""Per-row e-statistics: the optimal clipped likelihood ratio E* and tsLR.

Both are functions of the log-likelihood ratio L = log(q/p)(x) with log-range at
most ε, so that merging them gives a statistic of replace-one sensitivity < ε.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize

from .._memo import remember
from .._validation import check_epsilon
from ._laws import make_laws

__all__ = ["OptimalRate", "optimal_rate"]

# Tolerance on a negative computed rate: the quantile-grid quadrature of E_Q[log E*]
# (4000 Gauss-Legendre panels, kinks at the clip levels) is accurate to ~1e-9.
_RATE_TOL = 1e-7


class OptimalRate(NamedTuple):
    """Optimal ε-DP e-power rate and the clipping constants of E*.

    Attributes
    ----------
    rate : float
        R_ε(Q‖P) = E_Q[log E*], in nats per row: the best achievable e-power per
        row of any ε-DP e-value, to first order in n.
    c1 : float
        Lower clip of the likelihood ratio.
    c2 : float
        Upper clip, ``c2 = e^ε c1`` (unless the likelihood ratio is flat).
    kl : float
        KL(Q‖P) in nats (``inf`` when Q is not absolutely continuous w.r.t. P),
        the non-private rate; ``rate <= kl``.

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest import optimal_rate
    >>> rate = optimal_rate(stats.norm(0, 1), stats.norm(0.5, 1), 1.0)
    >>> round(rate.kl, 6)
    0.125
    >>> 0 < rate.rate <= rate.kl
    True
    """

    rate: float
    c1: float
    c2: float
    kl: float


class EStatistic:
    """A per-row e-statistic ``E = exp(log_e(L))`` with E_P[E] <= 1.

    Attributes
    ----------
    log_lo, log_hi : float
        Bounds of log E over the null's support (the actual extremes where they
        are computable exactly, else the clip bounds); they set the sensitivity.
    breaks : tuple of float
        The values of L where log E has a kink (the clip levels of E*, the cap of
        tsLR); log E is analytic between them. Quadratures split their panels there
        (planning only).
    """

    def __init__(self, name, log_e, log_lo, log_hi, log_e_inplace=None, breaks=()):
        self.name, self._log_e, self._inplace = name, log_e, log_e_inplace
        self.log_lo, self.log_hi = float(log_lo), float(log_hi)
        self.breaks = tuple(float(b) for b in breaks)

    def log_e(self, L):
        return self._log_e(np.asarray(L, dtype=float))

    def log_e_inplace(self, L):
        """``log_e(L)`` written over ``L`` (a float64 array the caller owns): the same
        float operations in the same order, so the same values, with no temporary."""
        if self._inplace is None:
            L[...] = self.log_e(L)
            return L
        return self._inplace(L)


def _solve_clip(laws, epsilon):
    """log c1 = a solving f(a) = c1 P(L < a) + Q(a <= L <= a + ε) + c2 P(L > a + ε) = 1.

    f is continuous and non-decreasing from 0 to ∞ (constant = 1 on an interval in
    the flat case, where any solution gives the unclipped likelihood ratio).
    """

    @remember  # brentq starts by evaluating the bracket's ends again
    def f(a):
        return _mass(laws, a, epsilon)

    lo, hi = -1.0, 1.0
    while f(lo) >= 1.0:
        lo *= 2.0
        if lo < -1e4:  # pragma: no cover - impossible for proper laws
            raise ValueError("Could not bracket the normaliser of E*.")
    while f(hi) <= 1.0:
        hi *= 2.0
        if hi > 1e4:  # pragma: no cover
            raise ValueError("Could not bracket the normaliser of E*.")
    return optimize.brentq(lambda a: f(a) - 1.0, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)


def _mass(laws, a, epsilon):
    """E_P[clip(q/p, e^a, e^{a+ε})] from the tail probabilities (exact where they are)."""
    pa, qm, pb = laws.tails(a, a + epsilon)
    return math.exp(a) * pa + qm + math.exp(a + epsilon) * pb


def optimal_statistic(laws, epsilon, rates=True):
    """E*(x) = min(c2, max(c1, q/p(x))), renormalised so that E_P[E*] <= 1 exactly.

    Returns ``(EStatistic, OptimalRate)``. Refuses laws without an exact normaliser.
    ``rates=False`` returns ``(EStatistic, None)`` without the rate, its consistency
    check and KL: the same statistic, for the planner's candidate clip ranges (the
    chosen one is then built with ``rates=True``, check included).
    """
    if not laws.exact:
        why = getattr(laws, "why_inexact", None)
        raise ValueError(why or (
            "statistic='optimal' needs the exact normaliser of E*, which is available for "
            "finite discrete laws, Gaussian location families and certified univariate "
            "continuous laws; use statistic='tslr' (distribution-free, no normaliser) for "
            "these laws."
        ))
    a = _solve_clip(laws, epsilon)
    b = a + epsilon

    def clip(L):
        return np.clip(L, a, b)

    # An upper bound on E_P[E*] at the root, whatever tolerance the root finder
    # stopped at: the computed mass plus the model's certified bound on what its
    # computation leaves out (0 for exact sums and closed forms; the uncovered tails
    # and support-end slivers plus cdf rounding for univariate laws). Dividing by
    # max(bound, 1) keeps E_P[E*] <= 1.
    mass = _mass(laws, a, epsilon)
    shift = math.log(max(mass + laws.slack(a, b, mass), 1.0))
    lmin, lmax = laws.l_range()
    log_lo, log_hi = max(a, min(lmin, b)) - shift, min(b, max(lmax, a)) - shift

    def log_e(L):
        return clip(L) - shift

    def log_e_inplace(L):
        np.clip(L, a, b, out=L)
        return np.subtract(L, shift, out=L)

    stat = EStatistic("optimal", log_e, log_lo, log_hi, log_e_inplace, breaks=(a, b))
    if not rates:
        return stat, None
    if hasattr(laws, "clip_mean_q"):
        rate = laws.clip_mean_q(a, b) - shift
    else:
        rate = laws.expect(log_e, "Q", breaks=(a, b))
    # R_ε = min over Q' of KL(Q'‖P) + ε TV(Q', Q) >= 0. A clearly negative value means
    # the normaliser and the law disagree (the symptom of a missed crossing): refuse.
    # Within quadrature error it is the rounding of a rate that is 0 (P = Q).
    if not rate >= -_RATE_TOL:
        raise ValueError(
            f"The e-power of E* computed for these laws is negative ({rate:.3g}): its "
            "normaliser is inconsistent with the laws; use statistic='tslr'."
        )
    rate = max(rate, 0.0)
    kl = laws.expect(lambda L: L, "Q", breaks=(a, b))
    return stat, OptimalRate(rate, math.exp(a - shift), math.exp(b - shift), kl)


def tslr_statistic(laws, epsilon):
    """tsLR_η(x) = e^{-η} + (1 - e^{-η}) min(1 + e^η, q/p(x)) with η = ε/2.

    E_P[tsLR] <= 1 for any P, Q (E_P[q/p] <= 1); its values lie in [e^{-η}, e^η],
    so its log-range is 2η = ε.
    """
    eta = epsilon / 2.0
    base, slope, cap = math.exp(-eta), -math.expm1(-eta), 1.0 + math.exp(eta)

    def log_e(L):
        with np.errstate(over="ignore"):
            return np.log(base + slope * np.minimum(cap, np.exp(L)))

    def log_e_inplace(L):
        with np.errstate(over="ignore"):
            np.exp(L, out=L)
            np.minimum(cap, L, out=L)
            np.multiply(slope, L, out=L)
            np.add(base, L, out=L)
            return np.log(L, out=L)

    lmin, lmax = laws.l_range() if laws.exact else (-math.inf, math.inf)
    log_lo = float(log_e(np.array([lmin]))[0])
    log_hi = float(log_e(np.array([lmax]))[0])
    return EStatistic("tslr", log_e, log_lo, log_hi, log_e_inplace,
                      breaks=(math.log(cap),))


def optimal_rate(null, alternative, epsilon):
    """Optimal per-row e-power R_ε(Q‖P) of ε-DP e-values, and the constants of E*.

    R_ε = inf_{Q'} KL(Q'‖P) + ε TV(Q', Q), attained by the clipped likelihood
    ratio E* = min(c2, max(c1, q/p)) whose normalisation E_P[E*] = 1 fixes c1.

    Parameters
    ----------
    null : frozen scipy.stats distribution
        The null P: finite discrete, multivariate normal (equal covariances), or a
        univariate continuous law of a certified family (scipy's ``norm``, ``t``,
        ``cauchy``, ``laplace``, ``expon``, ``gamma``, ``chi2``, ``beta``,
        ``uniform``, ``truncnorm``; equal-scale location pairs of ``logistic``,
        ``gumbel_r``, ``gumbel_l``), for which E_P[E*] <= 1 is certified.
    alternative : frozen scipy.stats distribution
        The alternative Q, of the same kind.
    epsilon : float
        Privacy parameter ε > 0.

    Returns
    -------
    OptimalRate
        ``(rate, c1, c2, kl)``.

    Raises
    ------
    ValueError
        For laws without an exact normaliser (e.g. multivariate normals with
        different covariances, infinite discrete supports, univariate laws outside
        the certified families, whose likelihood-ratio crossings a grid could
        miss), naming ``null`` and ``alternative`` and pointing to
        ``statistic="tslr"``; and if the computed rate is negative (beyond
        quadrature error), the symptom of a normaliser inconsistent with the laws.

    References
    ----------
    .. [1] Jacobsen, Gonzalez, Brown, Fawaz, Ramdas. "Optimal Rates for
       Differentially Private Hypothesis Testing with E-values." arXiv:2605.28952.

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest import optimal_rate
    >>> r = optimal_rate(stats.bernoulli(0.3), stats.bernoulli(0.7), epsilon=1.0)
    >>> round(r.rate, 6), round(r.kl, 6)
    (0.284265, 0.338919)
    """
    epsilon = check_epsilon(epsilon)
    laws = make_laws(null, alternative)
    return optimal_statistic(laws, epsilon)[1]
