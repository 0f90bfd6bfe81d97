"""dpHSIC's route, memory plan and time prediction, from public sizes and parameters.

One function of the plan, before the budget is charged: which computation a release
runs (the blocked exact path, one bandwidth pair by FFT, the aggregate in memory or by
diagonal blocks), its planned peak memory (an upper bound, compared with
``max_memory``: a refusal names the routes that fit) and its predicted running time
(compared with ``max_time``).
"""

from __future__ import annotations

from dataclasses import dataclass

from joblib import effective_n_jobs

from ._distributed import check_finite, is_dask
from ._features import (
    check_feature_kernel,
    feature_hsic_abs_error,
    feature_hsic_memory_bytes,
    feature_shape,
)
from ._hsic_aggregate import hsic_aggregate_memory_bytes
from ._hsic_blocked import BLOCKED_KERNELS, choose_diagonal_block
from ._hsic_bounds import hsic_sensitivity
from ._hsic_exact import hsic_memory_bytes
from ._hsic_time import check_time, predict_seconds
from ._hsic_traces import _resolve_backend
from ._kernels import (
    MEDIAN_EPSILON_SHARE,
    kernel_eval_bytes,
    median_memory_bytes,
    uses_private_median,
)
from ._results import plan_noise
from ._testbase import check_memory, fitting_routes

__all__ = ["IN_MEMORY_AGGREGATE_MAX", "HSICPlan", "features_plan", "plan_route"]

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


def features_plan(params, X, y):
    """The public plan of ``method="features"`` (before the charge)."""
    # Random features on both sides (see _features): each feature kernel is positive
    # definite, with the certified diameter D_f of the computed rows (feature_shape:
    # 2R for "fourier", sqrt(2) R^2 + 2 eta for "squared"), so the sqrt-HSIC
    # sensitivity 2 (n - 1) D_f^2 / n^2 holds for all B + 1 statistics (the Notes'
    # argument, for the feature kernels).
    n = X.shape[0]
    gamma_x = check_feature_kernel(params["kernel"], params["kernel_params"], X.shape[1])
    gamma_y = check_feature_kernel(params["y_kernel"], params["y_kernel_params"],
                                   y.shape[1])
    D, B, kind = params["n_components"], params["n_permutations"], params["feature_map"]
    n_dims, _, diameter = feature_shape(D, kind)
    memory = feature_hsic_memory_bytes(n, D, D, B, kind=kind)
    check_memory(memory, params["max_memory"],
                 f"DPHSICTest(method='features', n_components={D}, feature_map={kind!r}) "
                 f"with n = {n} pairs ({n_dims} features per row and side)")
    median = (uses_private_median(params["kernel"], params["kernel_params"]),
              uses_private_median(params["y_kernel"], params["y_kernel_params"]))
    noise_epsilon = params["epsilon"]
    for used in median:
        if used:
            noise_epsilon -= MEDIAN_EPSILON_SHARE * params["epsilon"]
    sensitivity = hsic_sensitivity(n, diameter, diameter)
    abs_error = feature_hsic_abs_error(n, D, D, kind)
    if is_dask(X):  # NaN / infinity refused on the workers, before the charge
        check_finite(X, y)
    return HSICPlan(
        kernels=(None, None), median=median, squared=False, sensitivity=sensitivity,
        abs_error=abs_error, noise_epsilon=noise_epsilon,
        noise=plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"]),
        memory_bytes=memory,
        features=((params["kernel"], gamma_x), (params["y_kernel"], gamma_y), D, kind),
    )


@dataclass(frozen=True)
class HSICPlan:
    """Public plan of one dpHSIC release (parameters, n and the kernels' bounds)."""

    kernels: tuple
    median: tuple
    squared: bool
    sensitivity: float
    abs_error: float
    noise_epsilon: float
    noise: object
    memory_bytes: int
    cyclic: bool = False
    grids: tuple | None = None
    # diagonals per block of the blocked cyclic aggregate (_hsic_blocked), else None
    blocked: int | None = None
    # predicted running time, seconds (public sizes; progress and max_time)
    predicted_seconds: float = 0.0
    # ((kernel, gamma or None), (y_kernel, gamma or None), n_components) with
    # method="features", else None
    features: tuple | None = None
