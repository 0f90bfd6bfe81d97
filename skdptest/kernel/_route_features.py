"""The random-features routes of dpMMD and dpHSIC (``method="features"``): plan, statistics.

The feature kernels are positive definite with a certified diameter ``D_f`` of the
computed rows (:func:`._features.feature_shape`: ``2R`` for "fourier", ``sqrt(2) R^2 +
2 eta`` for "squared"), so the sqrt-MMD sensitivity ``D_f / n_min`` and the sqrt-HSIC
sensitivity ``2 (n - 1) D_f^2 / n^2`` hold for all B + 1 statistics. The frequencies
are drawn from the generator, never from the data. Dask input: :mod:`._route_dask`.
"""

from __future__ import annotations

from .._params import InvalidParameterError
from ._bandwidth import Progress
from ._features import (
    check_feature_kernel,
    draw_frequencies,
    feature_hsic_abs_error,
    feature_hsic_memory_bytes,
    feature_hsic_statistics,
    feature_mmd_abs_error,
    feature_mmd_memory_bytes,
    feature_mmd_statistics,
    feature_shape,
    make_features,
    max_exact_rows,
    spectral_gamma,
)
from ._hsic_bounds import hsic_sensitivity
from ._hsic_routes import HSICPlan
from ._kernelbase import RouteStatistics, private_bandwidths, split_epsilon
from ._kernels import uses_private_median
from ._results import plan_noise
from ._route_aggregate import mmd_work
from ._route_exact import mmd_sensitivity
from ._route_mmd_exact import MMDPlan
from ._testbase import check_memory, plan_time, predicted_note, with_median_and_data

__all__ = ["HSICFeaturesRoute", "MMDFeaturesRoute"]


class MMDFeaturesRoute:
    """dpMMD on random features (``plan(params, X, groups)``, groups as its ``y``)."""

    name = "features"

    def memory(self, params, X, n, n_dims, n_groups):
        D, kind = params["n_components"], params["feature_map"]
        return with_median_and_data(
            feature_mmd_memory_bytes(n, X.shape[1], D, n_groups, params["n_permutations"],
                                     kind=kind), params, n, X.shape[1])

    def plan(self, params, X, groups):
        classes, codes, sizes = groups
        gamma = check_feature_kernel(params["kernel"], params["kernel_params"], X.shape[1])
        n, n_groups = int(codes.size), int(sizes.size)
        kind, D = params["feature_map"], params["n_components"]
        max_rows = max_exact_rows(kind)
        if n > max_rows:
            raise InvalidParameterError(
                f"method='features' with feature_map={kind!r} accepts at most {max_rows} "
                f"rows (exact integer sums); got N = {n}.")
        n_dims, _, diameter = feature_shape(D, kind)
        memory = self.memory(params, X, n, n_dims, n_groups)
        check_memory(memory, params["max_memory"],
                     f"DPMMDTest(method='features', n_components={D}, feature_map={kind!r}) "
                     f"with N = {n} rows ({n_dims} features per row)")
        median = uses_private_median(params["kernel"], params["kernel_params"])
        noise_epsilon, shares = split_epsilon(params["epsilon"], (median,))
        sensitivity = mmd_sensitivity(sizes, diameter)
        abs_error = feature_mmd_abs_error(D, n_groups, kind)
        noise = plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"])
        progress, predicted = plan_time(
            mmd_work(n, X.shape[1], n_groups, params["n_permutations"], feature_dims=n_dims,
                     median=median), params,
            f"DPMMDTest(method='features', n_components={D}) with N = {n} rows and "
            f"n_permutations = {params['n_permutations']}")
        return MMDPlan(
            route=self, statistic="sqrt", sensitivity=sensitivity, abs_error=abs_error,
            noise_epsilon=noise_epsilon, bandwidth_epsilons=shares, noise=noise,
            memory_bytes=memory, progress=progress, predicted_seconds=predicted,
            n_permutations=params["n_permutations"], n_jobs=params["n_jobs"],
            method=("dpMMD" if n_groups == 2 else "dpMMD k-sample")
            + (" features" if kind == "fourier" else " squared features"),
            classes=classes, codes=codes, sizes=sizes, kernel_name=params["kernel"],
            features=(params["kernel"], gamma, D, kind))

    def feature_statistics(self, plan, X, omega, rng):
        kind = plan.features[3]
        return feature_mmd_statistics(make_features(X, omega, kind), plan.codes,
                                      plan.n_permutations, rng, kind=kind)

    def statistics(self, plan, X, y, rng):
        # order of the draws: private bandwidth (if asked), frequencies, relabellings,
        # noise; the frequencies never see the data
        name, gamma, D, kind = plan.features
        progress = Progress(plan.progress, 1, "statistics")
        progress.message(f"dpMMD features: {plan.n_permutations + 1} statistics on "
                         f"N = {X.shape[0]} rows" + predicted_note(plan))
        released = None
        if plan.median[0]:
            gamma = released = float(private_bandwidths(plan, [(name, X)], rng)[0])
        omega = draw_frequencies(name, spectral_gamma(gamma, kind), X.shape[1], D, rng)
        stats = self.feature_statistics(plan, X, omega, rng)
        return RouteStatistics(stats, gammas=(released,))


class HSICFeaturesRoute:
    """dpHSIC on random features on both sides (random permutations only)."""

    name = "features"

    def plan(self, params, X, y):
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
        noise_epsilon, shares = split_epsilon(params["epsilon"], median)
        sensitivity = hsic_sensitivity(n, diameter, diameter)
        abs_error = feature_hsic_abs_error(n, D, D, kind)
        self.check_input(X, y)
        return HSICPlan(
            route=self, statistic="sqrt", sensitivity=sensitivity, abs_error=abs_error,
            noise_epsilon=noise_epsilon, bandwidth_epsilons=shares,
            noise=plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"]),
            memory_bytes=memory, n_permutations=B, n_jobs=params["n_jobs"],
            method="dpHSIC features" if kind == "fourier" else "dpHSIC squared features",
            kernels=(None, None),
            features=((params["kernel"], gamma_x), (params["y_kernel"], gamma_y), D, kind))

    def check_input(self, X, y):
        """Refusals of the input that only this route can make (dask: finiteness)."""

    def feature_rows(self, X, omega, kind):
        return make_features(X, omega, kind)

    def statistics(self, plan, X, y, rng):
        # order of the draws: private bandwidths (x then y, if asked), frequencies (x then
        # y, never from the data), permutations, noise
        (name_x, gamma_x), (name_y, gamma_y), D, kind = plan.features
        released = [None if g is None else float(g) for g in
                    private_bandwidths(plan, [(name_x, X), (name_y, y)], rng)]
        gamma_x = gamma_x if released[0] is None else released[0]
        gamma_y = gamma_y if released[1] is None else released[1]
        omega_x = draw_frequencies(name_x, spectral_gamma(gamma_x, kind), X.shape[1], D, rng)
        omega_y = draw_frequencies(name_y, spectral_gamma(gamma_y, kind), y.shape[1], D, rng)
        F, G = self.feature_rows(X, omega_x, kind), self.feature_rows(y, omega_y, kind)
        stats = feature_hsic_statistics(F, G, plan.n_permutations, rng)
        return RouteStatistics(stats, gammas=tuple(released))
