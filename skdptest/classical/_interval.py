"""Confidence intervals of the everyday tests, from their release alone.

Both intervals are post-processing of a release that was already paid for: they are
functions of the released statistic and of public quantities (n, bounds, ε, the plan
of the release), so they cost no budget. Each covers its parameter with probability at
least the confidence level at every n, over the sampling **and** the noise together.

**Proportion** (:func:`tulap_interval`): the release is Z = X + N, X ~ Binomial(n, θ),
N ~ Tulap(0, e^{−ε}, 0). The one-sided p-values p₊(θ) = P_θ(Z' >= z) and
p₋(θ) = P_θ(Z' <= z) are those of the ε-DP UMP tests (Awan and Slavković 2018); both
are continuous and monotone in θ, so {θ : p₊(θ) > α/2 and p₋(θ) > α/2} is an interval
[θ_L, θ_U] (equal-tailed inversion, Awan and Slavković 2020). Z is continuous, so
P_θ(p₊(θ) <= α/2) = α/2 exactly and the coverage is exactly 1 − α for θ in (0, 1).

**Bounded mean** (:func:`mean_interval`): the release R = T + Z (grid steps h) with
h T <= S, S the log-wealth of the bet λ at the null μ0 (see ``_mean.py``). The release is
tied to μ0 (the rows are centred at μ0 before the bet), so the released test cannot be
re-run at another μ0 without touching the data again. Instead, each m in the bounds
gets two valid tests of "the mean is m" from the same release (d = m − μ0, rows
independent, average of their means m, values in the bounds):

- upper tail: E[e^{S}] <= U(d), U = (1 + λd)^n (bet on "greater"; AM-GM over the
  rows), (1 − λd)^n ("less"), ((1 + λd)^n + (1 − λd)^n)/2 (two-sided);
- lower tail: for κ > 0, (1 ± λy)^{−κ} is convex on [lo, hi], so its mean is at most
  its chord ℓ±(d) at the row's mean (the two-point law at the bounds is the worst),
  and E[e^{−κS}] <= ℓ±(d)^n by independence and AM-GM (ℓ is linear); two-sided:
  e^{−κS} <= 2^κ min(e^{−κS₊}, e^{−κS₋}). κ is chosen from public quantities
  (:func:`chord_exponent`). The floors in T cost at most s = (3n + 8)·2^{−30} + h
  nats: h T >= S − s.

Shifting the integer release (or its negative, on the grid κh) by the ceiling of the
log-bound in grid steps gives an integer with E[e^{grid·T'}] <= 1, whose valid p-value
is :func:`~._mean.wealth_pvalue`; it exceeds a
level exactly below that level's rejection threshold r*, which makes both ends closed
form in m. One-sided bets split α in two (one α/2 per tail); the two-sided bet's
upper tail only removes values near μ0 (a hole), so its interval uses the lower tail
alone at α. Valid at every n for every law on the bounds; conservative (a
Hoeffding-type width on the chord side).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from .._interval import ConfidenceInterval, check_confidence_level
from .._noise import quantise_rate
from ._mean import _MAX_RATE, rejection_threshold
from ._proportion import tulap_rate
from ._tulap import tulap_log_cdf

__all__ = [
    "mean_interval",
    "mean_interval_ends",
    "tulap_interval",
    "tulap_noise_variance",
]


def tulap_noise_variance(rate):
    """Var of Tulap(0, e^{−rate}, 0): 2b/(1 − b)² (discrete Laplace) + 1/12 (uniform)."""
    b = math.exp(-float(rate))
    return 2.0 * b / (-math.expm1(-float(rate))) ** 2 + 1.0 / 12.0


def _log_sum_exp(v):
    top = np.max(v)
    if not np.isfinite(top):
        return float(top)
    return float(top + math.log(np.sum(np.exp(v - top))))


def _tulap_end(z, n, rate, log_half, side):
    """θ where the one-sided p-value of ``side`` crosses α/2 (p₊ increases in θ, p₋
    decreases), clamped to [0, 1].

    log p₊(θ) = log Σ_x C(n, x) θ^x (1 − θ)^{n−x} F(x − z) (p₋: F(z − x)): the Tulap
    part does not depend on θ, so it is computed once and each step of the root search
    costs one pass over the n + 1 counts (the same sums as
    :func:`~._tulap.binomial_log_pvalue`, without its per-θ set-up)."""
    x = np.arange(n + 1, dtype=np.float64)
    log_noise = tulap_log_cdf(x - z if side == "greater" else z - x, rate)
    log_choose = special.gammaln(n + 1.0) - special.gammaln(x + 1.0) - special.gammaln(
        n - x + 1.0)
    fixed = log_choose + log_noise

    def f(theta):
        return _log_sum_exp(fixed + special.xlogy(x, theta)
                            + special.xlogy(n - x, 1.0 - theta)) - log_half

    if side == "greater":  # p₊ increasing: θ_L = inf{θ : p₊(θ) >= α/2}
        if f(0.0) >= 0.0:
            return 0.0
        if f(1.0) <= 0.0:
            return 1.0
    else:  # p₋ decreasing: θ_U = sup{θ : p₋(θ) >= α/2}
        if f(1.0) >= 0.0:
            return 1.0
        if f(0.0) <= 0.0:
            return 0.0
    return float(optimize.brentq(f, 0.0, 1.0, xtol=1e-14, rtol=4e-15, maxiter=200))


def tulap_interval(z, n, epsilon, confidence_level=0.95):
    """Exact confidence interval for θ from the Tulap release z = X + N.

    Parameters
    ----------
    z : float
        The release (``DPBinomialTest().result_.statistic``).
    n : int
        Number of trials (public).
    epsilon : float
        The ε of the release (its Tulap rate is :func:`~._proportion.tulap_rate`).
    confidence_level : float, default=0.95
        1 − α.

    Returns
    -------
    ConfidenceInterval
        [θ_L, θ_U] with P_θ(θ_L <= θ <= θ_U) = 1 − α for θ in (0, 1) (exact), over the
        binomial sampling and the Tulap noise together.
    """
    level = check_confidence_level(confidence_level)
    rate = tulap_rate(epsilon)
    log_half = math.log((1.0 - level) / 2.0)
    z, n = float(z), int(n)
    low = _tulap_end(z, n, rate, log_half, "greater")
    high = _tulap_end(z, n, rate, log_half, "less")
    return ConfidenceInterval(
        low=low, high=max(low, high), confidence_level=level, parameter="proportion",
        method="Tulap: equal-tailed inversion of the ε-DP UMP one-sided tests (exact)")


# --------------------------------------------------------------------------------------
# Bounded mean
# --------------------------------------------------------------------------------------

def _chord_ends(lam, lo, hi, kappa):
    """φ(lo), φ(hi) for φ(y) = (1 + λy)^{−κ} (convex on [lo, hi] for κ > 0)."""
    return (1.0 + lam * lo) ** -kappa, (1.0 + lam * hi) ** -kappa


def _chord_inverse(lam, lo, hi, kappa, value):
    """d where the chord of φ over [lo, hi] equals ``value`` (the chord is linear in d
    and not constant for λ ≠ 0: decreasing for λ > 0, increasing for λ < 0)."""
    f_lo, f_hi = _chord_ends(lam, lo, hi, kappa)
    return lo + (value - f_lo) * (hi - lo) / (f_hi - f_lo)


#: Exponents κ of the chord-side test: powers of two in [2^-4, 4] (the grid κh of its
#: p-value stays a power of two, at least 2^-14 nats).
_KAPPAS = tuple(2.0**k for k in range(-4, 3))


def chord_exponent(n, lam, lo, hi, tail_alpha):
    """κ of the lower-tail (chord) test, from public quantities only: it balances the
    Markov term log(1/α)/(κn) against the curvature loss ≈ κλ²V/2 (V = ((hi − lo)/2)²,
    the largest variance on the bounds), rounded to a power of two in [2^-4, 4]."""
    best = math.sqrt(2.0 * math.log(1.0 / tail_alpha) / (n * lam**2 * ((hi - lo) / 2.0)**2))
    return min(_KAPPAS, key=lambda k: abs(math.log2(k) - math.log2(best)))


def mean_interval_ends(release, *, n_terms, lo, hi, bet, grid, rate, alternative, level):
    """The ends (d_low, d_high) in the centred scale d = m − μ0, for an array of
    integer releases (vectorised; see the module docstring). Clamped to [lo, hi].

    Lower-tail (chord) test with exponent κ: E[e^{−κS}] <= 2^{[two-sided]κ} ℓ_κ(d)^n,
    ℓ_κ the chord of (1 ± λy)^{−κ}, and h T >= S − s, so −T is an integer with
    E[e^{κh(−T − c)}] <= 1 for c = (n log ℓ_κ + κ s (+ κ log 2)) / (κh): its p-value
    (grid κh) exceeds the level iff −r − ceil(c) < r*_κ, i.e.
    ℓ_κ(d) > exp(−κ (h (r + r*_κ) + s (+ log 2)) / n)."""
    r = np.asarray(release, dtype=np.float64)
    alpha = 1.0 - level
    n, lam, h = int(n_terms), float(bet), float(grid)
    slack = (3.0 * n + 8.0) * 2.0**-30 + h
    tail = alpha if alternative == "two-sided" else alpha / 2.0
    kappa = chord_exponent(n, lam, lo, hi, tail)
    r_chord = rejection_threshold(kappa * h, rate, tail)
    log_two = math.log(2.0) if alternative == "two-sided" else 0.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        bound = np.exp(-kappa * (h * (r + r_chord) + slack + log_two) / n)
        if alternative == "two-sided":
            d_high = _chord_inverse(lam, lo, hi, kappa, bound)  # ℓ₊ decreasing in d
            d_low = _chord_inverse(-lam, lo, hi, kappa, bound)  # ℓ₋ increasing in d
        else:
            sign = 1.0 if alternative == "greater" else -1.0
            chord_end = _chord_inverse(sign * lam, lo, hi, kappa, bound)
            # upper tail (AM-GM, κ = 1): n log(1 + sign λ d) > h (r − r*)
            r_star = rejection_threshold(h, rate, tail)
            upper_tail = sign * np.expm1(h * (r - r_star) / n) / lam
            if sign > 0:  # upper tail gives the lower end, the chord the upper end
                d_low, d_high = upper_tail, chord_end
            else:
                d_low, d_high = chord_end, upper_tail
    d_low = np.clip(np.nan_to_num(d_low, nan=lo, neginf=lo, posinf=hi), lo, hi)
    d_high = np.clip(np.nan_to_num(d_high, nan=hi, neginf=lo, posinf=hi), lo, hi)
    # an empty set (probability <= α at the truth) is reported as the crossed ends
    return np.minimum(d_low, d_high), np.maximum(d_low, d_high)


def mean_geometry(result):
    """(lo, hi, μ0, n_terms, rate, parameter) of a BoundedMeanResult, from its public
    fields and the release plan (a function of them)."""
    a, b = result.bounds
    if result.design == "two-sample":
        lo, hi, mu0 = a - b, b - a, 0.0
        n_terms = min(result.group_sizes)
        parameter = "difference of group means"
    elif result.design == "paired":
        mu0 = float(result.null_mean)
        lo, hi, n_terms = a - b - mu0, b - a - mu0, result.n_samples
        parameter = "mean of x - y"
    else:
        mu0 = float(result.null_mean)
        lo, hi, n_terms = a - mu0, b - mu0, result.n_samples
        parameter = "mean"
    steps = round(result.sensitivity / result.grid)
    rate = quantise_rate(min(result.epsilon / steps, _MAX_RATE))
    return lo, hi, mu0, int(n_terms), rate, parameter


def mean_interval(result, confidence_level=0.95):
    """Confidence interval for the mean (or mean difference) from a
    :class:`~skdptest.BoundedMeanResult` (see the module docstring)."""
    level = check_confidence_level(confidence_level)
    lo, hi, mu0, n_terms, rate, parameter = mean_geometry(result)
    release = round(result.statistic / result.grid)
    d_low, d_high = mean_interval_ends(
        release, n_terms=n_terms, lo=lo, hi=hi, bet=result.bet, grid=result.grid,
        rate=rate, alternative=result.alternative, level=level)
    return ConfidenceInterval(
        low=float(mu0 + d_low), high=float(mu0 + d_high), confidence_level=level,
        parameter=parameter,
        method="bounded mean: the release's bet as a test of every mean (AM-GM upper "
               "tail, convex-chord lower tail), valid for every law on the bounds")
