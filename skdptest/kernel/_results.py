"""Result of the DP permutation kernel tests (frozen, keyword-only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _permutation
from .._params import InvalidParameterError
from .._permutation import DiscreteNoise, dp_permutation_pvalue, privacy_xi
from .._recorder import NoisedQuantity, NoisePlan
from .._results import PValueAliasMixin, TestResult

__all__ = ["PermutationTestResult", "make_permutation_result", "noise_plan", "plan_noise"]


@dataclass(frozen=True, kw_only=True)
class PermutationTestResult(PValueAliasMixin, TestResult):
    """Result of a DP permutation test (dpMMD, dpHSIC).

    Only the p-value, the decision and public quantities are released: the
    noisy observed statistic is *not* a field. (It shares its noise with the
    p-value, so releasing both would reveal the statistic far more precisely
    than the permutation theorem covers; that theorem covers the p-value and
    the decision only.)

    Attributes
    ----------
    reject : bool
        Whether ``pvalue <= alpha`` (a function of the p-value).
    alpha : float
        Level of the test.
    epsilon : float
        ε spent by the whole fit: the permutation release plus, with
        ``kernel_params={"gamma": "median"}``, the private bandwidth(s).
    delta : float
        δ spent (the permutation release's δ; the bandwidths are pure ε-DP).
    n_samples : int
        Number of rows: pooled rows (dpMMD) or pairs (dpHSIC); public.
    method : str
        Name of the procedure: ``"dpMMD"``, ``"dpMMD k-sample"``, ``"dpHSIC"``
        or ``"dpHSIC cyclic"``.
    pvalue : float
        ``(1 + #{b >= 1 : T~_b >= T~_0}) / (B + 1)``, the rank of the noisy
        observed statistic among the B + 1 noisy statistics: the private
        release, (ε, δ)-DP by the DP permutation theorem (Kim & Schrab,
        Theorem 2) and valid at finite samples under exchangeability. Its
        deprecated alias ``p_value`` warns.
    n_permutations : int
        Number B of permuted statistics (public: a parameter, or n - 1 for the
        cyclic dpHSIC).
    statistic : str
        Which statistic was privatised (public): ``"sqrt"`` (the plug-in
        MMD_b or sqrt(HSIC_b), for kernels known to be positive definite) or
        ``"squared"`` (MMD_b^2 or HSIC_b, used for callable kernels, whose
        sensitivity holds for any kernel with values in [-κ, κ]).
    sensitivity : float
        Global sensitivity Δ of each statistic under the neighbouring relation
        (public: a function of the group sizes or n and the kernel bounds),
        before the floating-point allowance ``abs_error`` is added.
    abs_error : float
        Certified bound η on the floating-point error of each computed
        statistic (public: a function of n, the sizes and the kernel bounds);
        the noise is calibrated to ``sensitivity + 2 * abs_error``.
    noise : DiscreteNoise
        The public description of the noise (from
        :func:`skdptest._permutation.permutation_noise`): power-of-two grid g
        on which the statistics are floored, integer sensitivity
        ``ceil((Δ + 2η) / g)``, exact discrete Laplace rate, equivalent scale.
    noise_scale : float
        ``noise.scale = grid / rate``: the equivalent Laplace scale of the
        noise on each statistic, in the units of the statistic (about
        ``2 (Δ + 2η) / ξ``, ``ξ`` the permutation share's
        ``ε + log(1 / (1 - δ))``; never less).
    gamma : float or None
        The bandwidth of ``kernel`` chosen by the private median heuristic
        (``kernel_params={"gamma": "median"}``): an ε-DP release of its own
        (exponential mechanism, 5 % of ``epsilon``); None otherwise.
    y_gamma : float or None
        The same for dpHSIC's ``y_kernel``; None for dpMMD.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPMMDTest, PermutationTestResult
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(0, 1, (50, 2)), rng.normal(1, 1, (50, 2))]
    >>> y = np.repeat([0, 1], 50)
    >>> result = DPMMDTest(n_permutations=99, random_state=0).fit(X, y).result_
    >>> isinstance(result, PermutationTestResult), result.n_permutations
    (True, 99)
    >>> 0.0 < result.pvalue <= 1.0
    True
    """

    pvalue: float
    n_permutations: int
    statistic: str
    sensitivity: float
    abs_error: float
    noise: DiscreteNoise
    noise_scale: float
    gamma: float | None = None
    y_gamma: float | None = None


def plan_noise(sensitivity, abs_error, noise_epsilon, delta):
    """The public noise of a permutation release, computed before the charge.

    Raises
    ------
    InvalidParameterError
        If the permutation share of ε is too small for the exact sampler (the
        release would otherwise fail after the budget is charged).
    """
    try:  # through the module: the release reads this noise, never recomputes it
        return _permutation.permutation_noise(sensitivity, noise_epsilon, delta,
                                              abs_error=abs_error)
    except ValueError as exc:
        raise InvalidParameterError(
            f"epsilon is too small for the exact discrete Laplace sampler of the "
            f"permutation release ({exc})"
        ) from exc


def noise_plan(plan, delta, bandwidth_epsilons=()):
    """What a permutation release noises (the grey-box audit declaration).

    The private bandwidths first (exponential mechanisms, one ε share each), then the
    B + 1 statistics floored on the grid g: each moves by at most Δ_int steps of g,
    and the permutation theorem needs discrete Laplace noise of rate <= ξ / (2 Δ_int).
    """
    out = [NoisedQuantity("bandwidth", "choice", 1.0, eps) for eps in bandwidth_epsilons]
    out.append(NoisedQuantity("permutation statistics", "discrete_laplace",
                              plan.noise.integer_sensitivity,
                              privacy_xi(plan.noise_epsilon, delta), factor=2.0,
                              unit=plan.noise.grid))
    return NoisePlan(tuple(out))


def make_permutation_result(statistics, sensitivity, abs_error, *, epsilon, delta, alpha,
                            n_samples, rng, method, statistic, noise_epsilon,
                            bounds=None, refine=None, gamma=None, y_gamma=None,
                            noise=None):
    """Privatise the B + 1 statistics and pack a :class:`PermutationTestResult`.

    ``epsilon`` is what the whole fit spent; ``noise_epsilon`` the part of it
    given to the permutation release. ``abs_error`` is a certified bound on the
    floating-point error of each computed statistic, passed to the core
    :func:`~skdptest._permutation.dp_permutation_pvalue` (noise calibrated to
    ``sensitivity + 2 abs_error``); ``noise``, the plan's :func:`plan_noise` of the same
    quantities, is used as it is (not derived again). Only the p-value and the public noise
    description come back: the noisy observed statistic is never formed
    outside the core and never released.

    Raises
    ------
    ValueError
        If a statistic is not finite (a comparison with NaN would decide the
        rank arbitrarily); raised after the charge, as the last guard behind
        the checks of the plan.
    """
    statistics = np.asarray(statistics, dtype=np.float64)
    if not np.all(np.isfinite(statistics)):
        raise ValueError(
            "the kernel statistics are not finite (a kernel returned NaN or inf values "
            "on this data); no p-value is released. Check the kernel's parameters."
        )
    pvalue, noise = dp_permutation_pvalue(statistics, sensitivity, noise_epsilon, delta, rng,
                                          bounds=bounds, refine=refine, abs_error=abs_error,
                                          noise=noise)
    return PermutationTestResult(
        pvalue=float(pvalue),
        reject=bool(pvalue <= alpha),
        alpha=float(alpha),
        epsilon=float(epsilon),
        delta=float(delta),
        n_samples=int(n_samples),
        n_permutations=int(statistics.size - 1),
        statistic=statistic,
        sensitivity=float(sensitivity),
        abs_error=float(abs_error),
        noise=noise,
        noise_scale=float(noise.scale),
        method=method,
        gamma=gamma,
        y_gamma=y_gamma,
    )
