"""Compatibility shim: the DP permutation p-value now lives in :mod:`skdptest._permutation`.

The names the kernel estimators imported from here keep working on top of the core until
they are migrated: :func:`dp_permutation_pvalue` keeps the old three-value return
``(statistic, p_value, scale)`` with ``statistic = nan`` (the noisy observed statistic is
no longer released) and ``scale`` the equivalent Laplace scale of the discrete noise.
"""

from __future__ import annotations

from .._permutation import dp_permutation_pvalue as _core_pvalue
from .._permutation import permutation_noise, privacy_xi
from .._validation import check_alpha, check_delta, check_epsilon, check_int

__all__ = [
    "check_permutation_params",
    "dp_permutation_pvalue",
    "laplace_scale",
    "make_result",
    "privacy_xi",
]


def laplace_scale(sensitivity, epsilon, delta):
    """Equivalent scale (statistic units) of the discrete noise: ``grid / rate``, about
    ``2 Delta / xi``."""
    return permutation_noise(sensitivity, epsilon, delta).scale


def dp_permutation_pvalue(statistics, sensitivity, epsilon, delta, rng, *, bounds=None,
                          refine=None):
    """Legacy form of :func:`skdptest._permutation.dp_permutation_pvalue`: returns
    ``(nan, p_value, scale)``."""
    pvalue, noise = _core_pvalue(statistics, sensitivity, epsilon, delta, rng, bounds=bounds,
                                 refine=refine)
    return float("nan"), pvalue, noise.scale


def make_result(statistics, sensitivity, *, epsilon, delta, alpha, n_samples, rng, method,
                noise_epsilon=None, bounds=None, refine=None):
    """Run the core release and pack the legacy ``PermutationTestResult`` (with
    ``statistic = nan``: only the p-value is released). To be replaced by the kernel
    family's own result."""
    from .._results import PermutationTestResult  # legacy class, looked up at call time

    if noise_epsilon is None:
        noise_epsilon = epsilon
    pvalue, noise = _core_pvalue(statistics, sensitivity, noise_epsilon, delta, rng,
                                 bounds=bounds, refine=refine)
    return PermutationTestResult(
        statistic=float("nan"),
        p_value=pvalue,
        reject=bool(pvalue <= alpha),
        alpha=float(alpha),
        epsilon=float(epsilon),
        delta=float(delta),
        n_samples=int(n_samples),
        n_permutations=int(len(statistics) - 1),
        sensitivity=float(sensitivity),
        noise_scale=float(noise.scale),
        method=method,
    )


def check_permutation_params(est):
    """Validate the parameters shared by the DP permutation tests."""
    check_epsilon(est.epsilon)
    check_delta(est.delta)
    check_alpha(est.alpha)
    check_int(est.n_permutations, "n_permutations", low=1)
