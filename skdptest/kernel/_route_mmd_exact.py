"""The route object of dpMMD with one kernel (plan, statistics) and the dpMMD plan.

The computation is :func:`._route_exact.mmd_permutation_statistics`; the aggregate's
route (:mod:`._route_mmd_aggregate`) subclasses this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._bandwidth import Progress
from ._features import feature_mmd_memory_bytes
from ._kernelbase import KernelPlan, RouteStatistics, private_bandwidths, split_epsilon
from ._kernels import kernel_eval_bytes, resolve_kernel, uses_private_median
from ._results import plan_noise
from ._route_aggregate import mmd_work
from ._route_exact import (
    mmd_abs_error,
    mmd_memory_bytes,
    mmd_permutation_statistics,
    mmd_sensitivity,
    mmd_squared_sensitivity,
)
from ._testbase import (
    check_memory,
    fitting_routes,
    plan_time,
    predicted_note,
    with_median_and_data,
)

__all__ = ["MMDExactRoute", "MMDPlan"]


@dataclass(frozen=True, kw_only=True)
class MMDPlan(KernelPlan):
    """Public plan of one dpMMD release (a function of the labels' counts, the shape
    of X and the parameters; never of private values)."""

    classes: Any = None
    codes: Any = None
    sizes: Any = None
    kernel_name: Any = None
    # the resolved kernel (exact and aggregate routes)
    kernel: Any = None
    # the public bandwidth grid of the aggregate, else None
    gammas: Any = None
    # (kernel name, gamma or None, n_components, feature map) with method="features"
    features: Any = None


class MMDExactRoute:
    """dpMMD with one kernel: all B + 1 statistics of :func:`mmd_permutation_statistics`.

    ``plan(params, X, groups)`` takes the public groups (``classes``, ``codes``,
    ``sizes``) as its ``y``.
    """

    name = "exact"

    def memory(self, params, n, n_groups):
        return mmd_memory_bytes(n, n_groups, params["n_permutations"],
                                eval_bytes=kernel_eval_bytes(params["kernel"]))

    def adjust(self, params, X, sizes, kernel, sensitivity, abs_error, method):
        """``(gammas, sensitivity, abs_error, method)``: the aggregate's changes."""
        return None, sensitivity, abs_error, method

    def n_statistics(self, params, n):
        """B + 1: the relabellings of the release (the cyclic route: all N shifts)."""
        return params["n_permutations"] + 1

    def work(self, n, n_features, n_groups, params, gammas, median):
        """The release's work (:func:`._route_aggregate.mmd_work`; public sizes only)."""
        return mmd_work(n, n_features, n_groups, params["n_permutations"],
                        n_bandwidths=None if gammas is None else len(gammas), median=median)

    def plan(self, params, X, groups):
        classes, codes, sizes = groups
        kernel = resolve_kernel(params["kernel"], params["kernel_params"],
                                params["kernel_bound"], X)
        squared = not kernel.positive_definite
        if squared:
            sensitivity = mmd_squared_sensitivity(sizes, kernel.kappa)
        else:
            sensitivity = mmd_sensitivity(sizes, kernel.diameter)
        n, n_groups = int(codes.size), int(sizes.size)
        memory = with_median_and_data(self.memory(params, n, n_groups), params, n,
                                      X.shape[1])
        hint = ""
        if memory > params["max_memory"]:  # the routes that fit (public sizes only)
            hint = fitting_routes([(
                "method='features' (random Fourier features, linear in N)",
                feature_mmd_memory_bytes(n, X.shape[1], 64, n_groups,
                                         params["n_permutations"])
                + 16 * n * (X.shape[1] + 1))], params["max_memory"])
        check_memory(memory, params["max_memory"],
                     f"DPMMDTest with N = {n} rows, {n_groups} groups and "
                     f"n_permutations = {params['n_permutations']}", hint)
        median = uses_private_median(params["kernel"], params["kernel_params"])
        noise_epsilon, shares = split_epsilon(params["epsilon"], (median,))
        abs_error = mmd_abs_error(sizes, kernel.kappa, kernel.diameter, squared=squared)
        method = "dpMMD" if n_groups == 2 else "dpMMD k-sample"
        gammas, sensitivity, abs_error, method = self.adjust(
            params, X, sizes, kernel, sensitivity, abs_error, method)
        noise = plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"])
        work = self.work(n, X.shape[1], n_groups, params, gammas, median)
        progress, predicted = plan_time(
            work, params, f"DPMMDTest ({method}) with N = {n} rows, {n_groups} groups and "
            f"n_permutations = {params['n_permutations']}")
        return MMDPlan(
            route=self, method=method, statistic="squared" if squared else "sqrt",
            sensitivity=sensitivity, abs_error=abs_error, noise_epsilon=noise_epsilon,
            bandwidth_epsilons=shares, noise=noise, memory_bytes=memory,
            progress=progress, predicted_seconds=predicted,
            n_permutations=self.n_statistics(params, n) - 1, n_jobs=params["n_jobs"],
            classes=classes, codes=codes, sizes=sizes, kernel_name=params["kernel"],
            kernel=kernel, gammas=gammas)

    def statistics(self, plan, X, y, rng):
        kernel, gamma = plan.kernel, None
        if plan.median[0]:
            # labels are not used: the bandwidth is invariant under relabelling
            gamma = private_bandwidths(plan, [(plan.kernel_name, X)], rng)[0]
            kernel = kernel.with_gamma(gamma)
        progress = Progress(plan.progress, 1, "statistics")
        progress.message(
            f"dpMMD: {plan.n_permutations + 1} statistics on N = {X.shape[0]} rows"
            + predicted_note(plan)
            + ("; method='features' is linear-time for large N" if X.shape[0] > 20_000
               else ""))
        stats = mmd_permutation_statistics(X, plan.codes, plan.n_permutations, rng,
                                           kernel, squared=plan.squared)
        progress.step()
        return RouteStatistics(stats, gammas=(gamma,))
