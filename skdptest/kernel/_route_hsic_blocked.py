"""The route object of dpHSIC's blocked cyclic aggregate (statistics).

Chosen by the plan (:func:`._hsic_routes.plan_route`) when the in-memory cyclic
aggregate would exceed ``max_memory`` or 1 GiB: the same statistic, sensitivity and
noise by diagonal blocks (:func:`._hsic_blocked.blocked_aggregate_statistics`).
"""

from __future__ import annotations

from ._hsic_blocked import blocked_aggregate_statistics
from ._hsic_routes import HSICKernelRoute, bandwidth_kernels
from ._hsic_time import HSICProgress
from ._kernelbase import RouteStatistics

__all__ = ["HSICBlockedRoute"]


class HSICBlockedRoute(HSICKernelRoute):
    """The cyclic bandwidth aggregate by diagonal blocks (``" aggregate blocked"``)."""

    name = "aggregate blocked"

    def statistics(self, plan, X, y, rng):
        gammas, (kx, ky) = bandwidth_kernels(plan, X, y, rng)
        sides = []
        for k, (name, grid) in enumerate(zip(plan.kernel_names, plan.grids, strict=True)):
            if grid != (None,):
                sides.append((name, grid))
                continue
            gamma = gammas[k] if plan.median[k] else (plan.kernel_params[k] or {}).get(
                "gamma")
            if gamma is None:  # scikit-learn's default, 1 / n_features
                gamma = 1.0 / (X if k == 0 else y).shape[1]
            sides.append((name, (float(gamma),)))
        progress = HSICProgress(plan.verbose, plan.predicted_seconds, 1000,
                                "work units (per mille)")
        progress.begin(f"dpHSIC cyclic aggregate by diagonal blocks: "
                       f"{len(plan.grids[0]) * len(plan.grids[1])} bandwidth pairs on "
                       f"n = {X.shape[0]} pairs, {plan.blocked} diagonals per block")
        stats = blocked_aggregate_statistics(
            X, y, rng, sides[0], sides[1], (kx.kappa, ky.kappa),
            (kx.nonnegative, ky.nonnegative), block=plan.blocked, n_jobs=plan.n_jobs,
            progress=progress)
        return RouteStatistics(stats, gammas=tuple(gammas))
