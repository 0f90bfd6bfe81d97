"""The kernel tests' shared base: constraints, the ε split, the release and its result.

:class:`KernelTestBase` is what dpMMD and dpHSIC share. A subclass's ``_plan``
validates its input, picks a *route* (from parameters and public sizes only) and
returns ``route.plan(params, X, y)``: a frozen plan (a :class:`KernelPlan`) that holds the
route, the sensitivity, the certified rounding bound, the ε split (each private
bandwidth's share and the permutation release's, computed once, here) and the public
noise. The release runs ``plan.route.statistics(plan, X, y, rng)`` (the B + 1 statistics
and the released bandwidths) and the shared noise, p-value and result assembly, which
reads the planned noise (ε and δ are validated once, in the plan).

A route is any object with ``plan(params, X, y)`` and ``statistics(plan, X, y, rng)``;
the routes live one per module (:mod:`._route_exact`, :mod:`._route_mmd_aggregate`,
:mod:`._route_features`, :mod:`._route_dask`, :mod:`._hsic_routes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from .._base import BasePrivateTest
from .._budget import PrivacyBudget
from .._params import InstanceOf, Interval, InvalidParameterError, NoneValue, Options, RandomState
from ._distributed import refuse_dask
from ._features import MAX_COMPONENTS
from ._kernels import MEDIAN_EPSILON_SHARE, check_kernel_spec, private_median_gamma
from ._results import make_permutation_result, noise_plan
from ._testbase import MAX_PERMUTATIONS, warn_ignored

__all__ = [
    "BOUND_CONSTRAINT",
    "COMMON_CONSTRAINTS",
    "KernelPlan",
    "KernelTestBase",
    "RouteStatistics",
    "private_bandwidths",
    "split_epsilon",
]

# A public bound on a kernel (kernel_bound, y_kernel_bound).
BOUND_CONSTRAINT = [NoneValue(), Interval(Real, 0, None, closed="neither")]

# The parameters every kernel test shares (each estimator adds its kernels').
COMMON_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="left")],
    "alpha": [Interval(Real, 0, 1, closed="neither")],
    "n_permutations": [Interval(Integral, 1, MAX_PERMUTATIONS)],
    "max_memory": [Interval(Integral, 1, None)],
    "n_jobs": [NoneValue(), Interval(Integral, None, None)],
    "verbose": [NoneValue(), Interval(Integral, 0, 1)],
    "max_time": [NoneValue(), Interval(Real, 0, None, closed="neither")],
    "method": [Options("exact", "features")],
    "n_components": [Interval(Integral, 1, MAX_COMPONENTS)],
    "feature_map": [Options("fourier", "squared")],
    "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
    "random_state": [RandomState()],
}


def split_epsilon(epsilon, private_sides):
    """The ε split of a fit, computed once in the plan.

    ``private_sides``: for each kernel (x, then y), whether it takes a private median
    bandwidth. Returns ``(noise_epsilon, bandwidth_epsilons)``: the permutation
    release's share (ε minus ``MEDIAN_EPSILON_SHARE`` ε per private bandwidth,
    subtracted in order) and, per side, that bandwidth's ε (None for a fixed kernel).
    """
    noise_epsilon = epsilon
    shares = []
    for used in private_sides:
        if used:  # the bandwidth's share (an exponential mechanism) comes first
            noise_epsilon -= MEDIAN_EPSILON_SHARE * epsilon
        shares.append(MEDIAN_EPSILON_SHARE * epsilon if used else None)
    return noise_epsilon, tuple(shares)


@dataclass(frozen=True, kw_only=True)
class KernelPlan:
    """The public plan of one kernel-test release (parameters and public sizes only).

    Route-specific fields live in the subclasses (:class:`._mmd_plan.MMDPlan`,
    :class:`._hsic_routes.HSICPlan`).
    """

    # the route object that computes the statistics (plan / statistics)
    route: Any
    # result_.method
    method: str
    # "sqrt" or "squared" (result_.statistic)
    statistic: str
    sensitivity: float
    abs_error: float
    # ε of the permutation release and of each private bandwidth (None: fixed kernel)
    noise_epsilon: float
    bandwidth_epsilons: tuple
    # the public discrete Laplace noise (_results.plan_noise), read by the release
    noise: Any
    memory_bytes: int
    # progress on stderr, and the predicted seconds (None: not predicted)
    progress: bool = False
    predicted_seconds: Any = None
    n_permutations: int = 0
    n_jobs: Any = None

    @property
    def median(self):
        """Per side, whether a private median bandwidth is drawn."""
        return tuple(eps is not None for eps in self.bandwidth_epsilons)

    @property
    def squared(self):
        return self.statistic == "squared"


@dataclass(frozen=True)
class RouteStatistics:
    """What a route's ``statistics`` returns: the B + 1 computed statistics (observed
    first), certified enclosures with their ``refine`` (or None) and the released
    private bandwidths (x, y; None where fixed)."""

    values: Any
    bounds: Any = None
    refine: Any = None
    gammas: tuple = (None, None)


def private_bandwidths(plan, sides, rng):
    """Draw the private median bandwidths a plan asks for, in order (x, then y).

    ``sides``: ``(kernel name, data)`` per side. Returns the raw draws (None where the
    kernel is fixed). Each is an ε-DP exponential mechanism on one marginal alone
    (invariant under relabelling and re-pairing), at the plan's share.
    """
    out = []
    for eps, (name, data) in zip(plan.bandwidth_epsilons, sides, strict=False):
        out.append(None if eps is None else private_median_gamma(data, name, eps, rng))
    return out


class KernelTestBase(BasePrivateTest):
    """The base of the kernel tests (dpMMD, dpHSIC): shared checks and the release.

    Subclasses set ``_parameter_constraints`` (``COMMON_CONSTRAINTS`` plus their
    kernels), ``_kernel_sides`` (the ``(kernel, kernel_params, kernel_bound)`` names
    of each kernel) and implement ``_plan`` (which returns ``route.plan(...)``).
    """

    _requires_y = True
    _kernel_sides = (("kernel", "kernel_params", "kernel_bound"),)

    def _check_params(self, params):
        for k, (kernel, kernel_params, bound) in enumerate(self._kernel_sides):
            extra = {} if k == 0 else {"name": kernel}
            check_kernel_spec(params[kernel], params[kernel_params], params[bound], **extra)
        if params["n_jobs"] == 0:
            raise InvalidParameterError("n_jobs must be None, a positive int or a negative "
                                        "int (joblib's convention), got 0.")
        return params

    def _refuse_dask(self, params):
        """Refuse (before the charge) dask input on a route that cannot take it."""
        refuse_dask(type(self).__name__, params["method"],
                    tuple((kp, params[kp]) for _, kp, _ in self._kernel_sides))

    def _warn_ignored(self, params, ignored):
        """:func:`._testbase.warn_ignored` for this estimator (the routes' hook)."""
        warn_ignored(self, params, ignored)

    def _warn_method_ignores(self, params):
        """Warn for the parameters that ``method`` ignores (in the plan, before the
        charge): the kernel bounds and ``n_jobs`` with random features, the feature
        parameters without them."""
        if params["method"] == "features":
            self._warn_ignored(params, [
                (bound, "method='features' uses the feature kernel, bounded by 1 (leave "
                 f"{bound}=None).") for _, _, bound in self._kernel_sides] + [
                ("n_jobs", "method='features' runs on the BLAS threads in force (leave "
                 "n_jobs=None).")])
        else:
            self._warn_ignored(params, [
                (name, "it applies to method='features' only (leave it at its default or "
                 "set method='features').") for name in ("n_components", "feature_map")])

    def _release(self, prep, rng):
        plan = prep.plan
        stats = plan.route.statistics(plan, prep.X, prep.y, rng)
        return self._result(prep, plan, stats, rng)

    def _result(self, prep, plan, stats, rng):
        """Noise, p-value and result: the planned noise on the route's statistics."""
        params = prep.params
        gammas = [None if g is None else float(g) for g in stats.gammas]
        extra = {"y_gamma": gammas[1]} if len(self._kernel_sides) > 1 else {}
        return make_permutation_result(
            stats.values, plan.sensitivity, plan.abs_error, epsilon=params["epsilon"],
            delta=params["delta"], alpha=params["alpha"], n_samples=prep.X.shape[0],
            rng=rng, noise_epsilon=plan.noise_epsilon, method=plan.method,
            statistic=plan.statistic, bounds=stats.bounds, refine=stats.refine,
            gamma=gammas[0], noise=plan.noise, **extra)

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md)."""
        shares = [eps for eps in prep.plan.bandwidth_epsilons if eps is not None]
        return noise_plan(prep.plan, prep.params["delta"], shares)

    def _score_value(self, result):
        return -math.log(result.pvalue)
