"""dpHSIC's kernel routes: the plan, the route choice, memory and time, the statistics.

The plan, before the budget is charged (:class:`HSICKernelRoutes`): the resolved
kernels, the sensitivity and rounding bound, the ε split, and which computation the
release runs (:func:`plan_route`: the blocked exact path, one bandwidth pair by FFT,
the aggregate in memory or by diagonal blocks, :mod:`._route_hsic_blocked`), its planned
peak memory (an upper bound, compared with ``max_memory``: a refusal names the routes
that fit) and its predicted running time (compared with ``max_time``). Each route is an
object whose ``statistics(plan, X, y, rng)`` returns the B + 1 statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from joblib import effective_n_jobs

from ._bandwidth import (
    aggregate_sensitivity,
    bandwidth_grid,
    centre_abs_error,
    hsic_centre_constants,
    trace_abs_error,
    uses_aggregate,
)
from ._features import feature_hsic_memory_bytes
from ._hsic_aggregate import (
    hsic_aggregate_memory_bytes,
    hsic_aggregate_statistics,
    hsic_cyclic_statistics,
)
from ._hsic_blocked import BLOCKED_KERNELS, choose_diagonal_block
from ._hsic_bounds import hsic_abs_error, hsic_sensitivity, hsic_squared_sensitivity
from ._hsic_exact import _hsic_statistics, hsic_memory_bytes
from ._hsic_time import HSICProgress, check_time, predict_seconds
from ._hsic_traces import _load_numba, _resolve_backend
from ._kernelbase import KernelPlan, RouteStatistics, private_bandwidths, split_epsilon
from ._kernels import (
    kernel_eval_bytes,
    median_memory_bytes,
    resolve_kernel,
    uses_private_median,
)
from ._results import plan_noise
from ._testbase import check_memory, cyclic_ignores_permutations, fitting_routes

__all__ = [
    "IN_MEMORY_AGGREGATE_MAX",
    "HSICAggregateRoute",
    "HSICCyclicRoute",
    "HSICExactRoute",
    "HSICKernelRoute",
    "HSICKernelRoutes",
    "HSICPlan",
    "bandwidth_kernels",
    "plan_route",
]

# The in-memory cyclic aggregate runs when its plan is at most this (and max_memory);
# above it (n > about 2600 with 19 x 19 bandwidths) the blocked one (_hsic_blocked),
# which is also faster there.
IN_MEMORY_AGGREGATE_MAX = 2**30


def plan_route(params, n, d_x, d_y, grids, aggregate, cyclic):
    """``(memory_bytes, block, predicted_seconds)`` of a dpHSIC release (exact method).

    ``grids`` the two public bandwidth grids (``[None]`` for a fixed kernel),
    ``aggregate`` and ``cyclic`` as resolved by the plan; ``block`` the diagonals per
    block of the blocked aggregate, None for the other routes. Refuses (before the
    charge, naming the parameters) a fit over ``max_memory`` or ``max_time``.
    """
    B = params["n_permutations"]
    # the private medians run first, on one marginal at a time; the validated data
    # may be a float64 copy of the input
    extra = 16 * n * (d_x + d_y)
    if uses_private_median(params["kernel"], params["kernel_params"]) or \
            uses_private_median(params["y_kernel"], params["y_kernel_params"]):
        floor = median_memory_bytes(n)
    else:
        floor = 0
    blocked = None
    workers = 1
    if aggregate:  # in-memory Gram matrices (or their spectra), see the function
        workers = min(effective_n_jobs(params["n_jobs"] or 1), len(grids[0]))
        memory = hsic_aggregate_memory_bytes(
            n, B, len(grids[0]), len(grids[1]), cyclic=cyclic, workers=workers,
            eval_bytes=max(kernel_eval_bytes(params["kernel"]),
                           kernel_eval_bytes(params["y_kernel"])))
        limit = min(params["max_memory"], IN_MEMORY_AGGREGATE_MAX)
        if cyclic and max(memory, floor) + extra > limit and all(
                params[name] in BLOCKED_KERNELS for name in ("kernel", "y_kernel")):
            # the automatic route: the same statistic by diagonal blocks, O(block n)
            # memory per bandwidth (see _hsic_blocked), when the in-memory one would
            # exceed max_memory or 1 GiB (public n, grids, n_jobs and max_memory
            # only); it is also the faster one there
            block, need = choose_diagonal_block(
                n, len(grids[0]), len(grids[1]), workers,
                params["max_memory"] - extra)
            if block is not None:
                blocked, memory = block, need
            else:  # the refusal states the least this default needs
                memory = min(memory, need)
    else:
        memory = hsic_memory_bytes(n, B, cyclic=cyclic, eval_bytes=max(
            kernel_eval_bytes(params["kernel"]), kernel_eval_bytes(params["y_kernel"])))
    memory = max(memory, floor) + extra
    hint = ""
    if memory > params["max_memory"]:  # the routes that fit (public sizes only)
        data = extra
        routes = [
            ("kernel_params={'gamma': g} and y_kernel_params={'gamma': g} (one "
             "bandwidth pair, the blocked exact path, cyclic=False)",
             hsic_memory_bytes(n, B) + data),
            ("one bandwidth pair with cyclic=True (all n cyclic shifts by FFT)",
             hsic_memory_bytes(n, B, cyclic=True) + data),
            ("method='features'", feature_hsic_memory_bytes(n, 64, 64, B) + data),
        ]
        if aggregate and cyclic:
            routes.insert(0, ("cyclic=False (the aggregate over random permutations)",
                              hsic_aggregate_memory_bytes(
                                  n, B, len(grids[0]), len(grids[1]), cyclic=False)
                              + data))
        hint = fitting_routes(routes, params["max_memory"])
    check_memory(memory, params["max_memory"],
                 f"DPHSICTest with n = {n} pairs"
                 + ("" if cyclic else f" and n_permutations = {B}"), hint)
    route = ("cyclic " if cyclic else "") + ("aggregate" if aggregate else "")
    route = (route.strip() or "exact") + (" blocked" if blocked else "")
    # (only the exact path may load numba: importing it costs ~0.4 s and 50-150 MB)
    numba = route == "exact" and _resolve_backend("auto", float(n) * n * (B + 1)) == "numba"
    predicted = predict_seconds(route, n, d_x, d_y, len(grids[0]), len(grids[1]), B,
                                backend_numba=numba, workers=workers)
    check_time(predicted, params["max_time"], f"DPHSICTest ({route}) with n = {n} pairs")
    return memory, blocked, predicted


@dataclass(frozen=True, kw_only=True)
class HSICPlan(KernelPlan):
    """Public plan of one dpHSIC release (parameters, n and the kernels' bounds)."""

    # the resolved kernels (x, y); (None, None) with method="features"
    kernels: tuple = (None, None)
    kernel_names: tuple = (None, None)
    kernel_params: tuple = (None, None)
    cyclic: bool = False
    grids: tuple | None = None
    # diagonals per block of the blocked cyclic aggregate (_hsic_blocked), else None
    blocked: int | None = None
    # predicted running time, seconds (public sizes; progress and max_time)
    predicted_seconds: Any = 0.0
    verbose: Any = None
    # ((kernel, gamma or None), (y_kernel, gamma or None), n_components, feature map)
    # with method="features", else None
    features: tuple | None = None


class HSICKernelRoute:
    """dpHSIC on the kernels themselves (``method="exact"``). The routes below share
    this plan, which picks one of them from parameters and public sizes
    (:func:`plan_route`) and puts it in ``plan.route``.

    ``warn(params, ignored)`` is the estimator's warning for ignored parameters
    (:func:`._testbase.warn_ignored`); None: no warning.
    """

    name = "kernel"

    def __init__(self, warn=None):
        self.warn = warn if warn is not None else (lambda params, ignored: None)

    def plan(self, params, X, y):
        n = X.shape[0]
        kx = resolve_kernel(params["kernel"], params["kernel_params"], params["kernel_bound"],
                            X)
        ky = resolve_kernel(params["y_kernel"], params["y_kernel_params"],
                            params["y_kernel_bound"], y, name="y_kernel")
        squared = not (kx.positive_definite and ky.positive_definite)
        if squared:
            sensitivity = hsic_squared_sensitivity(n, kx.kappa, ky.kappa)
        else:
            sensitivity = hsic_sensitivity(n, kx.diameter, ky.diameter)
        # the bandwidth aggregate (see _bandwidth) on each side without a gamma, when both
        # kernels are positive definite (the sqrt statistic); a callable on the other side
        # keeps the single data-independent bandwidth (gamma = 1 / n_features)
        grids = [[None], [None]]
        if not squared:
            for k, (name, data) in enumerate((("kernel", X), ("y_kernel", y))):
                if uses_aggregate(params[name], params[f"{name}_params"]):
                    grids[k] = list(bandwidth_grid(params[name], data.shape[1]))
        aggregate = grids != [[None], [None]]
        cyclic = params["cyclic"]
        if cyclic == "auto":  # the aggregate's many pairs are cheap by FFT only
            cyclic = aggregate
        if cyclic:
            self.warn(params, [cyclic_ignores_permutations(
                params, "the bandwidth aggregate (no 'gamma' in kernel_params or "
                "y_kernel_params)", n, "random permutations")])
        if not aggregate:
            self.warn(params, [
                ("n_jobs", "it parallelises the bandwidth aggregate only (kernel_params or "
                 "y_kernel_params without 'gamma'); one bandwidth pair runs on the BLAS "
                 "threads in force (leave n_jobs=None).")])
        memory, blocked, predicted = plan_route(params, n, X.shape[1], y.shape[1], grids,
                                                aggregate, cyclic)
        median = (uses_private_median(params["kernel"], params["kernel_params"]),
                  uses_private_median(params["y_kernel"], params["y_kernel_params"]))
        noise_epsilon, shares = split_epsilon(params["epsilon"], median)
        abs_error = hsic_abs_error(n, kx.kappa, ky.kappa, kx.diameter, ky.diameter,
                                   cyclic=cyclic, squared=squared)
        if aggregate:
            constants = hsic_centre_constants(n, (kx.kappa, ky.kappa),
                                              (kx.nonnegative, ky.nonnegative))
            sensitivity = aggregate_sensitivity(sensitivity, constants)
            errors = (trace_abs_error(n, kx.kappa), trace_abs_error(n, ky.kappa))
            abs_error += centre_abs_error(constants, errors, 2.0 * kx.diameter * ky.diameter)
        method = "dpHSIC cyclic" if cyclic else "dpHSIC"
        if aggregate and blocked is not None:
            from ._route_hsic_blocked import HSICBlockedRoute

            route, method = HSICBlockedRoute(), method + " aggregate blocked"
        elif aggregate:
            route, method = HSICAggregateRoute(), method + " aggregate"
        else:
            route = HSICCyclicRoute() if cyclic else HSICExactRoute()
        return HSICPlan(
            route=route, method=method, statistic="squared" if squared else "sqrt",
            sensitivity=sensitivity, abs_error=abs_error, noise_epsilon=noise_epsilon,
            bandwidth_epsilons=shares,
            noise=plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"]),
            memory_bytes=memory, n_permutations=params["n_permutations"],
            n_jobs=params["n_jobs"], kernels=(kx, ky),
            kernel_names=(params["kernel"], params["y_kernel"]),
            kernel_params=(params["kernel_params"], params["y_kernel_params"]),
            cyclic=bool(cyclic),
            grids=(tuple(grids[0]), tuple(grids[1])) if aggregate else None,
            blocked=blocked, predicted_seconds=predicted, verbose=params["verbose"])

    def statistics(self, plan, X, y, rng):
        """The statistics of the route the plan chose (each route overrides this)."""
        return plan.route.statistics(plan, X, y, rng)


def bandwidth_kernels(plan, X, y, rng):
    """The private median bandwidths (x, then y; floats, None where fixed) and the
    kernels with them."""
    sides = list(zip(plan.kernel_names, (X, y), strict=True))
    gammas = [None if g is None else float(g) for g in private_bandwidths(plan, sides, rng)]
    kernels = [k if g is None else k.with_gamma(g)
               for k, g in zip(plan.kernels, gammas, strict=True)]
    return gammas, kernels


HSICKernelRoutes = HSICKernelRoute  # the estimator's name for the shared plan


class HSICExactRoute(HSICKernelRoute):
    """One bandwidth pair, random permutations: the blocked exact path (certified
    float32 traces, :func:`._hsic_exact._hsic_statistics`)."""

    name = "exact"

    def statistics(self, plan, X, y, rng):
        gammas, (kx, ky) = bandwidth_kernels(plan, X, y, rng)
        progress = HSICProgress(plan.verbose, plan.predicted_seconds, 1, "statistics")
        hints = ["cyclic=True (FFT) is much faster"]
        if _load_numba() is None:
            hints.append("pip install 'skdptest[fast]' (numba) speeds this path up")
        progress.begin(f"dpHSIC: {plan.n_permutations + 1} statistics on n = "
                       f"{X.shape[0]} pairs; " + ", ".join(hints))
        stats, bounds, refine = _hsic_statistics(X, y, plan.n_permutations, rng, kx, ky,
                                                 squared=plan.squared)
        progress.step()
        return RouteStatistics(stats, bounds, refine, gammas=tuple(gammas))


class HSICCyclicRoute(HSICKernelRoute):
    """One bandwidth pair, all n cyclic shifts by FFT."""

    name = "cyclic"

    def statistics(self, plan, X, y, rng):
        gammas, (kx, ky) = bandwidth_kernels(plan, X, y, rng)
        progress = HSICProgress(plan.verbose, plan.predicted_seconds, 1, "statistics")
        progress.begin(f"dpHSIC cyclic: {X.shape[0]} shifts by FFT")
        stats = hsic_cyclic_statistics(X, y, rng, kx, ky, squared=plan.squared)
        progress.step()
        return RouteStatistics(stats, gammas=tuple(gammas))


class HSICAggregateRoute(HSICKernelRoute):
    """The bandwidth aggregate in memory (cyclic shifts or random permutations)."""

    name = "aggregate"

    def statistics(self, plan, X, y, rng):
        gammas, (kx, ky) = bandwidth_kernels(plan, X, y, rng)
        pairs = len(plan.grids[0]) * len(plan.grids[1])
        progress = HSICProgress(plan.verbose, plan.predicted_seconds, len(plan.grids[0]),
                                "x bandwidths")
        hints = []
        if not plan.cyclic:
            hints.append("cyclic=True (FFT) is much faster")
        if plan.n_jobs in (None, 1):
            hints.append("n_jobs=-1 uses all cores")
        progress.begin(f"dpHSIC aggregate: {pairs} bandwidth pairs on n = {X.shape[0]} "
                       "pairs" + ("; " + ", ".join(hints) if hints else ""))
        stats = hsic_aggregate_statistics(
            X, y, plan.n_permutations, rng, kx, ky, *plan.grids, cyclic=plan.cyclic,
            n_jobs=plan.n_jobs, progress=progress)
        return RouteStatistics(stats, gammas=tuple(gammas))
