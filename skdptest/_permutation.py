"""The differentially private permutation p-value (Kim & Schrab, 2023), integer-exact.

Setting. ``T_0`` is a statistic on the observed data and ``T_1 .. T_B`` the same statistic
on B data-independent relabellings (permutations) of it. Under the neighbouring relation of
the caller (for the kernel tests: replacing one row), each ``T_b`` moves by at most the
global sensitivity Δ: a permutation is a fixed relabelling, so the bound for ``T_0`` holds
for every ``T_b``.

Release. Only the p-value (and any decision computed from it) is released; the noisy
observed statistic is not (with it, T_0 would be revealed to about scale / √B by
averaging over the B + 1 noisy values).

1. Effective sensitivity Δ' = Δ + 2 η, where η (``abs_error``) is a certified bound on the
   floating-point error |T̂_b − T_b| of every computed statistic: computed statistics of
   neighbouring data then differ by at most Δ'.
2. A power-of-two grid g (so T̂/g is exact in floating point) and the integers
   S_b = floor(T̂_b / g). If two reals differ by at most Δ', their floors on the grid
   differ by at most Δ_int = ceil(Δ'/g) (the difference of the floors is an integer
   < Δ'/g + 1), computed exactly in rational arithmetic.
3. Independent noises K_0, ..., K_B from the exact discrete Laplace law of rate
   r = quantise_rate(ξ / (2 Δ_int)) (rounded down, so never less noise than asked),
   ξ = ε + log(1 / (1 − δ)) (also bounded from below exactly before the rounding).
4. p = (1 + #{b >= 1 : S_b + K_b >= S_0 + K_0}) / (B + 1), comparisons of int64 values.

Privacy. Theorem 2 of [1] proves (ε, δ)-DP of this construction with Laplace noise of
scale 2Δ/ξ on real statistics that move by at most Δ. The property of the noise law that
the argument uses is the shift bound f(z) <= exp(ξ |s| / (2Δ)) f(z + s) of independent
noises, for the shifts |s| <= Δ that neighbouring data cause (the release is a function of
the ranks of the noisy values only). Here the statistics are integers that move by at most
Δ_int, all shifts are integers, and the discrete Laplace pmf of rate r <= ξ / (2 Δ_int) has
exactly that bound on the integers: P(k) <= exp(r |s|) P(k + s) <= exp(ξ |s| / (2 Δ_int))
P(k + s). (This transfer of [1]'s argument to the discrete law has not been re-derived
here line by line; the exact checks in ``tests/test_permutation.py`` back it: they compute
the law of the p-value exactly on small cases, check the ratio on neighbours, and catch
the mutant with rate ξ / Δ_int.) The release is a deterministic function of the integers
S_b + K_b, so no floating-point effect enters after step 2.

Validity. Under the null, exchangeability of (T_0, ..., T_B) carries over to the S_b (the
same map is applied to each) and to S_b + K_b (i.i.d. noise), so the rank of S_0 + K_0
among them, ties counted against the observed value (a tie counts as an exceedance), gives
P(p <= α) <= α at every finite sample size. Counting ties as exceedances can only make
p larger than the tie-broken-at-random rank p-value, which is exactly valid.

References
----------
.. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests: Applications to
   Kernel Methods", arXiv:2310.19043, 2023.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from ._noise import RATE_BITS, discrete_laplace, floor_to_grid, power_of_two_grid, quantise_rate
from ._recorder import observe
from ._validation import check_delta, check_epsilon, check_real

__all__ = [
    "DiscreteNoise",
    "PermutationPValue",
    "dp_permutation_pvalue",
    "permutation_noise",
    "privacy_xi",
]

# |S_b| and |K_b| are kept below 2**62 so that S_b + K_b cannot overflow int64.
_SAFE = 2**62


def privacy_xi(epsilon, delta):
    """ξ = ε + log(1 / (1 − δ)), the noise parameter of the DP permutation test.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ in [0, 1).

    Returns
    -------
    float
        ξ (equals ε when δ = 0).
    """
    return float(epsilon) - math.log1p(-float(delta))


def _xi_lower(epsilon, delta):
    """An exact rational lower bound of ξ: ε exactly, plus log(1/(1 − δ)) stepped down 4 ulps
    (covers the error of log1p), so rounding can never make the noise smaller."""
    xi = Fraction(epsilon)
    if delta > 0:
        extra = -math.log1p(-delta)
        for _ in range(4):
            extra = math.nextafter(extra, 0.0)
        xi += Fraction(extra)
    return xi


@dataclass(frozen=True)
class DiscreteNoise:
    """The public description of the noise of a DP permutation release.

    Attributes
    ----------
    grid : float
        The power-of-two grid step g: statistics are released through floor(T / g).
    sensitivity : float
        The effective sensitivity Δ' = Δ + 2 ``abs_error`` (statistic units).
    integer_sensitivity : int
        Δ_int = ceil(Δ' / g), the sensitivity of the floored statistics.
    rate : float
        The discrete Laplace rate, a multiple of 2**-RATE_BITS, at most ξ / (2 Δ_int).
    scale : float
        ``grid / rate``: the noise's equivalent Laplace scale in statistic units (for
        reporting; about 2 Δ' / ξ).
    """

    grid: float
    sensitivity: float
    integer_sensitivity: int
    rate: float
    scale: float


class PermutationPValue(NamedTuple):
    """What :func:`dp_permutation_pvalue` returns: the private p-value and the public
    description of its noise (never the noisy observed statistic)."""

    pvalue: float
    noise: DiscreteNoise


def permutation_noise(sensitivity, epsilon, delta=0.0, *, abs_error=0.0):
    """The grid and discrete Laplace rate of the DP permutation p-value.

    The grid balances its two roundings: Δ_int ≈ K with K = sqrt(ξ 2**(RATE_BITS − 1))
    makes the ceiling's relative excess (about 1/K) and the rate quantisation's (about
    2**-RATE_BITS · 2K / ξ) equal, both about 0.14 % at ξ = 1.

    Parameters
    ----------
    sensitivity : float
        Global sensitivity Δ of each statistic, finite and > 0.
    epsilon : float
        ε > 0 of the release.
    delta : float, default=0.0
        δ in [0, 1) of the release.
    abs_error : float, default=0.0
        Certified bound η >= 0 on |computed − exact| of every statistic; the effective
        sensitivity is Δ + 2η.

    Returns
    -------
    DiscreteNoise
        The public noise parameters.

    Raises
    ------
    ValueError
        If a parameter is out of range, or ξ is so small that the rate falls below
        2**-RATE_BITS.
    """
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    abs_error = check_real(abs_error, "abs_error", low=0.0)
    return _noise_of(float(sensitivity), float(epsilon), float(delta), float(abs_error))


@functools.lru_cache(maxsize=256)
def _noise_of(sensitivity, epsilon, delta, abs_error):
    """:func:`permutation_noise` of validated floats, kept per public parameter set (the
    rational arithmetic costs ~30 us; fits of the same sizes and ε repeat it)."""
    exact_sens = Fraction(sensitivity) + 2 * Fraction(abs_error)
    xi = privacy_xi(epsilon, delta)
    target = max(1.0, math.sqrt(xi * 2.0 ** (RATE_BITS - 1)))
    grid = power_of_two_grid(float(exact_sens), 1.0 / target)
    dint = math.ceil(exact_sens / Fraction(grid))
    k = math.floor(_xi_lower(epsilon, delta) * (1 << RATE_BITS) / (2 * dint))
    if k < 1:
        raise ValueError(
            f"epsilon={epsilon} (xi={xi}) is too small for the exact sampler: the rate "
            f"xi / (2 * {dint}) is below 2**-{RATE_BITS}."
        )
    rate = quantise_rate(k / (1 << RATE_BITS))
    return DiscreteNoise(grid=grid, sensitivity=float(exact_sens), integer_sensitivity=dint,
                         rate=rate, scale=grid / rate)


def _check_bounded(values, name):
    if np.any(np.abs(values) >= _SAFE):
        raise ValueError(f"{name} / grid is too large for exact int64 arithmetic.")
    return values


def dp_permutation_pvalue(statistics, sensitivity, epsilon, delta, rng, *, bounds=None,
                          refine=None, abs_error=0.0, noise=None):
    """The (ε, δ)-DP permutation p-value of B + 1 statistics, integer-exact.

    Parameters
    ----------
    statistics : array-like of shape (B + 1,)
        ``statistics[0]`` is the computed statistic on the observed data, the others on
        permuted data (finite). Not private: never returned.
    sensitivity : float
        Global sensitivity Δ of each (exact) statistic, public, finite and > 0.
    epsilon : float
        ε > 0 of the release.
    delta : float
        δ in [0, 1) of the release.
    rng : numpy.random.Generator
        Source of the noise: exactly B + 1 discrete Laplace draws, in one call.
    bounds : tuple (lower, upper) of array-likes of shape (B + 1,), default=None
        Certified finite enclosures ``lower[b] <= refine([b]) <= upper[b]`` of the computed
        permuted statistics. With ``bounds``, ``statistics[1:]`` are not used (they may be
        approximations) but ``statistics[0]`` must be the computed observed statistic.
    refine : callable, default=None
        Required with ``bounds``: ``refine(idx)`` returns the computed statistics at the
        indices ``idx`` (a 1-D int64 array of values in 1..B), the values the release
        without bounds would use.
    abs_error : float, default=0.0
        Certified bound η >= 0 on |computed − exact| for every statistic on every data set
        (floating-point error of the computation). The noise is calibrated to Δ + 2η, the
        largest difference of computed statistics on neighbouring data.
    noise : DiscreteNoise, default=None
        ``permutation_noise(sensitivity, epsilon, delta, abs_error=abs_error)`` when the
        caller planned it already (then used as it is, not validated again); None
        computes it here.

    Returns
    -------
    PermutationPValue
        ``(pvalue, noise)``: the private p-value (1 + #{b >= 1 : S_b + K_b >= S_0 + K_0}) /
        (B + 1) and the public :class:`DiscreteNoise`.

    Raises
    ------
    ValueError
        For statistics that are not 1-D with at least two finite values, out-of-range
        privacy parameters, malformed ``bounds`` or a ``refine`` result that has the wrong
        shape or falls outside ``bounds``.
    TypeError
        If ``rng`` is not a ``numpy.random.Generator`` or ``refine`` is not callable.

    Notes
    -----
    With ``bounds`` the release is bit for bit the release from the refined statistics.
    The noise is drawn identically (the same single call for all B + 1 values, before any
    refinement). The floor is monotone, so floor(lower_b / g) <= S_b <= floor(upper_b / g),
    and with N_0 = S_0 + K_0: floor(lower_b / g) + K_b >= N_0 implies S_b + K_b >= N_0,
    and floor(upper_b / g) + K_b < N_0 implies S_b + K_b < N_0 (exact integer
    arithmetic). Every other index is refined and compared exactly as without bounds. So
    each of the B indicators, hence their count and the p-value, are the same.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
    statistics = np.asarray(statistics, dtype=np.float64)
    if statistics.ndim != 1 or statistics.size < 2:
        raise ValueError("statistics must be 1-D with at least 2 values (B >= 1).")
    if (bounds is None) != (refine is None):
        raise ValueError("bounds and refine must be given together.")
    if noise is None:
        noise = permutation_noise(sensitivity, epsilon, delta, abs_error=abs_error)
    g = noise.grid
    draws = discrete_laplace(rng, noise.rate, size=statistics.size)
    _check_bounded(draws, "noise")
    if bounds is None:
        if not np.all(np.isfinite(statistics)):
            raise ValueError("statistics must be finite.")
        floored = _check_bounded(floor_to_grid(statistics, g), "statistics")
        observe("permutation statistics", floored, g)  # grey-box audit (else a no-op)
        noisy = floored + draws
        exceed = np.count_nonzero(noisy[1:] >= noisy[0])
        return PermutationPValue(float((1 + exceed) / statistics.size), noise)

    if not callable(refine):
        raise TypeError("refine must be callable.")
    if not (isinstance(bounds, tuple | list) and len(bounds) == 2):
        raise ValueError("bounds must be a pair (lower, upper).")
    lower, upper = (np.asarray(a, dtype=np.float64) for a in bounds)
    if lower.shape != statistics.shape or upper.shape != statistics.shape:
        raise ValueError("bounds must be two arrays of the shape of statistics.")
    if not (np.all(np.isfinite(lower[1:])) and np.all(np.isfinite(upper[1:]))):
        raise ValueError("bounds must be finite.")
    if np.any(lower[1:] > upper[1:]):
        raise ValueError("bounds must satisfy lower <= upper.")
    if not math.isfinite(statistics[0]):
        raise ValueError("statistics must be finite.")
    floored0 = int(_check_bounded(floor_to_grid(statistics[0], g), "statistics"))
    # grey-box audit (a no-op otherwise): only the observed statistic is computed exactly
    observe("permutation statistics", floored0, g)
    noisy0 = floored0 + int(draws[0])
    lo = _check_bounded(floor_to_grid(lower[1:], g), "bounds") + draws[1:]
    hi = _check_bounded(floor_to_grid(upper[1:], g), "bounds") + draws[1:]
    exceeds = lo >= noisy0
    undecided = ~exceeds & (hi >= noisy0)
    idx = np.flatnonzero(undecided) + 1
    if idx.size:
        exact = np.asarray(refine(idx), dtype=np.float64)
        if exact.shape != idx.shape:
            raise ValueError(f"refine returned shape {exact.shape} for {idx.size} indices.")
        if not np.all(np.isfinite(exact)):
            raise ValueError("refine returned non-finite statistics.")
        if np.any(exact < lower[idx]) or np.any(exact > upper[idx]):
            raise ValueError("refine returned statistics outside bounds: the bounds are "
                             "not certified.")
        exceeds[idx - 1] = floor_to_grid(exact, g) + draws[idx] >= noisy0
    exceed = np.count_nonzero(exceeds)
    return PermutationPValue(float((1 + exceed) / statistics.size), noise)
