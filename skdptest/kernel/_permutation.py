"""The differentially private permutation framework (Kim & Schrab, 2023).

Given the B + 1 values ``T_0`` (observed data) and ``T_1 .. T_B`` (permuted
data) of a statistic whose global sensitivity is ``Delta`` under replacing one
row (the same bound holds for every permuted statistic because a permutation
is a fixed, data-independent relabelling), add *independent* Laplace noise of
scale ``2 Delta / xi`` with ``xi = epsilon + log(1 / (1 - delta))`` to each
value and release

    p = (1 + #{b >= 1 : T~_b >= T~_0}) / (B + 1).

The release is (epsilon, delta)-DP (Theorem 2 of the reference): the p-value
is a function of the ranks of the noisy values and the noise does not grow
with B. Under exchangeability of the data under H0 the noisy values are
exchangeable too, so ``P(p <= alpha) <= alpha`` at every finite sample size.

References
----------
.. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
   Applications to Kernel Methods", arXiv:2310.19043, 2023.
"""

from __future__ import annotations

import math

import numpy as np

from .._noise import laplace
from .._results import PermutationTestResult
from .._validation import check_alpha, check_delta, check_epsilon, check_int

__all__ = [
    "check_permutation_params",
    "dp_permutation_pvalue",
    "laplace_scale",
    "make_result",
    "privacy_xi",
]


def privacy_xi(epsilon, delta):
    """xi = epsilon + log(1 / (1 - delta)) (equals epsilon when delta = 0)."""
    return float(epsilon) - math.log1p(-float(delta))


def laplace_scale(sensitivity, epsilon, delta):
    """Scale ``2 Delta / xi`` of the Laplace noise added to each statistic."""
    return 2.0 * float(sensitivity) / privacy_xi(epsilon, delta)


def dp_permutation_pvalue(statistics, sensitivity, epsilon, delta, rng, *, bounds=None,
                          refine=None):
    """Privatise B + 1 permutation statistics and return the DP p-value.

    Parameters
    ----------
    statistics : ndarray of shape (B + 1,)
        ``statistics[0]`` is the statistic on the observed data, the others on
        permuted data. Not private: never returned.
    sensitivity : float
        Global sensitivity Delta of each statistic (public).
    epsilon, delta : float
        Privacy parameters of the release.
    rng : numpy.random.Generator
        Source of the Laplace noise.
    bounds : tuple (lower, upper) of ndarrays of shape (B + 1,), default=None
        Certified enclosures of the permuted statistics: the value that
        ``refine`` returns for index b lies in ``[lower[b], upper[b]]``. With
        ``bounds``, ``statistics[1:]`` may be approximations (they are not
        used) but ``statistics[0]`` must be exact.
    refine : callable, default=None
        Needed with ``bounds``: ``refine(idx)`` returns the exact statistics at
        the indices ``idx`` (a 1-D integer array of values in 1..B).

    Returns
    -------
    noisy_statistic : float
        ``T_0`` plus its Laplace noise (private).
    p_value : float
        The private permutation p-value.
    scale : float
        The Laplace scale ``2 Delta / xi`` (public).

    Notes
    -----
    With ``bounds`` the release is the same function of the data and of the
    noise as without them, so it is bit for bit the release computed from the
    exact statistics: the noise is drawn identically (one call for all B + 1
    values), floating-point addition is monotone, so
    ``lower[b] + N_b >= T~_0`` implies ``T_b + N_b >= T~_0`` and
    ``upper[b] + N_b < T~_0`` implies ``T_b + N_b < T~_0``; only the comparisons
    that neither decides are recomputed exactly, through ``refine``.
    """
    statistics = np.asarray(statistics, dtype=np.float64)
    if statistics.ndim != 1 or statistics.size < 2:
        raise ValueError("statistics must be 1-D with at least 2 values (B >= 1).")
    if (bounds is None) != (refine is None):
        raise ValueError("bounds and refine must be given together.")
    scale = laplace_scale(sensitivity, epsilon, delta)
    noise = laplace(rng, scale, size=statistics.shape)
    if bounds is None:
        noisy = statistics + noise
        exceed = np.count_nonzero(noisy[1:] >= noisy[0])
        return float(noisy[0]), float((1.0 + exceed) / statistics.size), scale
    lower, upper = (np.asarray(a, dtype=np.float64) for a in bounds)
    if lower.shape != statistics.shape or upper.shape != statistics.shape:
        raise ValueError("bounds must be two arrays of the shape of statistics.")
    noisy0 = statistics[0] + noise[0]
    exceeds = lower[1:] + noise[1:] >= noisy0
    undecided = ~exceeds & ~(upper[1:] + noise[1:] < noisy0)
    idx = np.flatnonzero(undecided) + 1
    if idx.size:
        exact = np.asarray(refine(idx), dtype=np.float64)
        if exact.shape != idx.shape:
            raise ValueError(
                f"refine returned shape {exact.shape} for {idx.size} indices."
            )
        exceeds[idx - 1] = exact + noise[idx] >= noisy0
    exceed = np.count_nonzero(exceeds)
    return float(noisy0), float((1.0 + exceed) / statistics.size), scale


def make_result(statistics, sensitivity, *, epsilon, delta, alpha, n_samples, rng, method,
                noise_epsilon=None, bounds=None, refine=None):
    """Run :func:`dp_permutation_pvalue` and pack a :class:`PermutationTestResult`.

    ``epsilon`` is what the whole fit spent; ``noise_epsilon`` (default
    ``epsilon``) the part of it given to the permutation release. ``bounds``
    and ``refine`` (certified approximate statistics) are passed on to
    :func:`dp_permutation_pvalue`.
    """
    if noise_epsilon is None:
        noise_epsilon = epsilon
    noisy, p_value, scale = dp_permutation_pvalue(statistics, sensitivity, noise_epsilon, delta,
                                                  rng, bounds=bounds, refine=refine)
    return PermutationTestResult(
        statistic=noisy,
        p_value=p_value,
        reject=bool(p_value <= alpha),
        alpha=float(alpha),
        epsilon=float(epsilon),
        delta=float(delta),
        n_samples=int(n_samples),
        n_permutations=int(len(statistics) - 1),
        sensitivity=float(sensitivity),
        noise_scale=float(scale),
        method=method,
    )


def check_permutation_params(est):
    """Validate the parameters shared by the DP permutation tests."""
    check_epsilon(est.epsilon)
    check_delta(est.delta)
    check_alpha(est.alpha)
    check_int(est.n_permutations, "n_permutations", low=1)
