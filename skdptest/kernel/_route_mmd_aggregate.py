"""The route object of dpMMD's default bandwidth aggregate (plan, statistics).

The maximum over a public grid of centred statistics (see :mod:`._bandwidth`): the
sensitivity grows by the centring's share only, the certified error by its rounding.
The computation is :func:`._route_aggregate.mmd_aggregate_statistics`.
"""

from __future__ import annotations

from ._bandwidth import (
    Progress,
    aggregate_sensitivity,
    bandwidth_grid,
    centre_abs_error,
    mmd_centre_constants,
    trace_abs_error,
)
from ._kernelbase import RouteStatistics
from ._route_aggregate import mmd_aggregate_memory_bytes, mmd_aggregate_statistics
from ._route_mmd_exact import MMDExactRoute
from ._testbase import predicted_note

__all__ = ["MMDAggregateRoute"]


class MMDAggregateRoute(MMDExactRoute):
    """dpMMD's bandwidth aggregate: 19 bandwidths, one DP p-value (``" aggregate"``)."""

    name = "aggregate"

    def memory(self, params, n, n_groups):
        return mmd_aggregate_memory_bytes(n, n_groups, params["n_permutations"],
                                          params["n_jobs"])

    def adjust(self, params, X, sizes, kernel, sensitivity, abs_error, method):
        gammas = bandwidth_grid(params["kernel"], X.shape[1])
        constants = mmd_centre_constants(sizes, kernel.kappa, kernel.nonnegative)
        sensitivity = aggregate_sensitivity(sensitivity, constants)
        abs_error += centre_abs_error(constants, trace_abs_error(int(sizes.sum()),
                                                                 kernel.kappa),
                                      2.0 * kernel.diameter)
        return gammas, sensitivity, abs_error, method + " aggregate"

    def statistics(self, plan, X, y, rng):
        progress = Progress(plan.progress, len(plan.gammas), "bandwidths")
        progress.message(
            f"dpMMD aggregate: {len(plan.gammas)} bandwidths x "
            f"{plan.n_permutations + 1} statistics on N = {X.shape[0]} rows"
            + predicted_note(plan)
            + ("" if plan.n_jobs not in (None, 1) else
               "; n_jobs=-1 computes the bandwidths on all cores"))
        stats = mmd_aggregate_statistics(X, plan.codes, plan.n_permutations, rng,
                                         plan.kernel, plan.gammas, n_jobs=plan.n_jobs,
                                         progress=progress, kernel_name=plan.kernel_name)
        return RouteStatistics(stats)
