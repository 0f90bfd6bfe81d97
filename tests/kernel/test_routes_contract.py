"""The kernel family's routes: one base, route objects with plan / statistics, the ε
split computed once in the plan, and seeded releases equal to an independent path
(the route's statistics function called directly, then the core's documented noise)."""

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import skdptest.kernel
import skdptest.kernel._results as results_mod
from skdptest import DPHSICTest, DPMMDTest
from skdptest._permutation import dp_permutation_pvalue, permutation_noise
from skdptest.kernel._features import (
    draw_frequencies,
    feature_hsic_statistics,
    feature_mmd_statistics,
    make_features,
)
from skdptest.kernel._hsic_aggregate import hsic_cyclic_statistics
from skdptest.kernel._hsic_bounds import hsic_abs_error, hsic_sensitivity
from skdptest.kernel._hsic_exact import _hsic_statistics
from skdptest.kernel._hsic_routes import (
    HSICAggregateRoute,
    HSICCyclicRoute,
    HSICExactRoute,
    HSICKernelRoute,
)
from skdptest.kernel._kernelbase import KernelPlan, KernelTestBase, split_epsilon
from skdptest.kernel._kernels import MEDIAN_EPSILON_SHARE, resolve_kernel
from skdptest.kernel._route_dask import HSICDaskFeaturesRoute, MMDDaskFeaturesRoute
from skdptest.kernel._route_exact import mmd_abs_error, mmd_permutation_statistics
from skdptest.kernel._route_features import HSICFeaturesRoute, MMDFeaturesRoute
from skdptest.kernel._route_hsic_blocked import HSICBlockedRoute
from skdptest.kernel._route_mmd_aggregate import MMDAggregateRoute
from skdptest.kernel._route_mmd_cyclic import MMDCyclicRoute
from skdptest.kernel._route_mmd_exact import MMDExactRoute

ROUTES = [MMDExactRoute, MMDAggregateRoute, MMDCyclicRoute, MMDFeaturesRoute, MMDDaskFeaturesRoute,
          HSICExactRoute, HSICCyclicRoute, HSICAggregateRoute, HSICBlockedRoute,
          HSICFeaturesRoute, HSICDaskFeaturesRoute]


def _mmd_data(seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(30, 2)), rng.normal(0.5, size=(34, 2))])
    return X, np.repeat([0, 1], [30, 34])


def _hsic_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 2))
    return X, (X[:, :1] + rng.normal(size=(60, 1)))


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed seeds and ignored-parameter notes
        return est.fit(X, y)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.__name__)
def test_every_route_has_plan_and_statistics(route):
    assert callable(getattr(route, "plan", None))
    assert callable(getattr(route, "statistics", None))


def test_both_estimators_share_the_kernel_base():
    assert issubclass(DPMMDTest, KernelTestBase) and issubclass(DPHSICTest, KernelTestBase)
    # the release and its noise declaration are the base's, not re-implemented
    for est in (DPMMDTest, DPHSICTest):
        assert est._release is KernelTestBase._release
        assert est._noise_plan is KernelTestBase._noise_plan


@pytest.mark.parametrize("est, X, y, route, method", [
    (DPMMDTest(kernel_params={"gamma": 0.5}), *_mmd_data(), MMDExactRoute, "dpMMD"),
    (DPMMDTest(cyclic=False), *_mmd_data(), MMDAggregateRoute, "dpMMD aggregate"),
    (DPMMDTest(cyclic=True), *_mmd_data(), MMDCyclicRoute, "dpMMD cyclic aggregate"),
    (DPMMDTest(method="features", n_components=8), *_mmd_data(), MMDFeaturesRoute,
     "dpMMD features"),
    (DPHSICTest(cyclic=False, kernel_params={"gamma": 1.0}, y_kernel_params={"gamma": 1.0}),
     *_hsic_data(), HSICExactRoute, "dpHSIC"),
    (DPHSICTest(cyclic=True, kernel_params={"gamma": 1.0}, y_kernel_params={"gamma": 1.0}),
     *_hsic_data(), HSICCyclicRoute, "dpHSIC cyclic"),
    (DPHSICTest(), *_hsic_data(), HSICAggregateRoute, "dpHSIC cyclic aggregate"),
    (DPHSICTest(method="features", n_components=8), *_hsic_data(), HSICFeaturesRoute,
     "dpHSIC features"),
])
def test_the_plan_picks_the_route_and_the_release_names_it(est, X, y, route, method):
    plan = est._prepare(X, y, reset=True).plan
    assert isinstance(plan, KernelPlan) and type(plan.route) is route
    assert plan.method == method
    assert _fit(est.set_params(n_permutations=19, random_state=0), X, y).result_.method == method


def test_blocked_route_is_chosen_by_max_memory():
    X, y = _hsic_data()
    full = DPHSICTest()._prepare(X, y, reset=True).plan
    small = DPHSICTest(max_memory=full.memory_bytes - 1)._prepare(X, y, reset=True).plan
    assert type(small.route) is HSICBlockedRoute and small.blocked is not None
    assert small.method == "dpHSIC cyclic aggregate blocked"


@pytest.mark.parametrize("epsilon", [1.0, 0.3, 7.25])
def test_epsilon_split_is_computed_once_in_the_plan(epsilon):
    assert split_epsilon(epsilon, (False, False)) == (epsilon, (None, None))
    share = MEDIAN_EPSILON_SHARE * epsilon
    noise_eps, shares = split_epsilon(epsilon, (True, True))
    assert shares == (share, share) and noise_eps == (epsilon - share) - share
    X, y = _hsic_data()
    plan = DPHSICTest(epsilon=epsilon, kernel_params={"gamma": "median"},
                      y_kernel_params={"gamma": 1.0})._prepare(X, y, reset=True).plan
    assert plan.bandwidth_epsilons == (share, None) and plan.noise_epsilon == epsilon - share
    assert plan.noise == permutation_noise(plan.sensitivity, epsilon - share, 0.0,
                                           abs_error=plan.abs_error)


def test_release_reads_the_planned_noise(monkeypatch):
    # the core's dp_permutation_pvalue gets the plan's noise object: no second derivation
    X, y = _mmd_data()
    est = DPMMDTest(kernel_params={"gamma": 0.5}, n_permutations=19, random_state=0)
    planned = est._prepare(X, y, reset=True).plan.noise
    seen = []
    real = results_mod.dp_permutation_pvalue

    def spy(*args, noise=None, **kwargs):
        seen.append(noise)
        return real(*args, noise=noise, **kwargs)

    monkeypatch.setattr(results_mod, "dp_permutation_pvalue", spy)
    _fit(est, X, y)
    assert seen == [planned] and est.result_.noise == planned


# -- seeded releases against an independent path ------------------------------------------

def _core(stats, sensitivity, abs_error, epsilon, rng, delta=0.0, **kw):
    """The documented release: the core p-value with its own noise (not the plan's)."""
    return dp_permutation_pvalue(stats, sensitivity, epsilon, delta, rng, abs_error=abs_error,
                                 **kw)


@pytest.mark.parametrize("seed, delta", [(0, 0.0), (5, 1e-3)])
def test_mmd_exact_release_equals_direct_statistics_and_noise(seed, delta):
    X, y = _mmd_data(seed)
    est = DPMMDTest(kernel_params={"gamma": 0.5}, n_permutations=39, delta=delta,
                    random_state=np.random.default_rng(seed))
    res = _fit(est, X, y).result_
    rng = np.random.default_rng(seed)
    kernel = resolve_kernel("rbf", {"gamma": 0.5}, None, X)
    stats = mmd_permutation_statistics(X, y, 39, rng, kernel)
    sizes = np.array([30, 34])
    sens, eta = math.sqrt(2) / 30, mmd_abs_error(sizes, 1.0, math.sqrt(2))
    ref = _core(stats, sens, eta, 1.0, rng, delta)
    assert (res.sensitivity, res.abs_error) == (sens, eta)
    assert res.pvalue == ref.pvalue and res.noise == ref.noise


def test_mmd_median_release_spends_its_share_first():
    from skdptest.kernel._kernels import private_median_gamma

    X, y = _mmd_data(2)
    est = DPMMDTest(kernel_params={"gamma": "median"}, n_permutations=39,
                    random_state=np.random.default_rng(2))
    res = _fit(est, X, y).result_
    rng = np.random.default_rng(2)
    gamma = private_median_gamma(X, "rbf", 0.05, rng)
    kernel = resolve_kernel("rbf", {"gamma": 1.0}, None, X).with_gamma(gamma)
    stats = mmd_permutation_statistics(X, y, 39, rng, kernel)
    ref = _core(stats, res.sensitivity, res.abs_error, 0.95, rng)
    assert res.gamma == float(gamma) and res.pvalue == ref.pvalue and res.noise == ref.noise


def test_mmd_features_release_equals_direct_statistics_and_noise():
    X, y = _mmd_data(3)
    est = DPMMDTest(method="features", kernel_params={"gamma": 0.5}, n_components=16,
                    n_permutations=39, random_state=np.random.default_rng(3))
    res = _fit(est, X, y).result_
    rng = np.random.default_rng(3)
    omega = draw_frequencies("rbf", 0.5, 2, 16, rng)
    stats = feature_mmd_statistics(make_features(X, omega), y, 39, rng, kind="fourier")
    ref = _core(stats, res.sensitivity, res.abs_error, 1.0, rng)
    assert res.pvalue == ref.pvalue and res.noise == ref.noise


@pytest.mark.parametrize("cyclic", [False, True])
def test_hsic_single_pair_release_equals_direct_statistics_and_noise(cyclic):
    X, y = _hsic_data(4)
    est = DPHSICTest(kernel_params={"gamma": 1.0}, y_kernel_params={"gamma": 1.0},
                     cyclic=cyclic, n_permutations=39, random_state=np.random.default_rng(4))
    res = _fit(est, X, y).result_
    rng = np.random.default_rng(4)
    kx = resolve_kernel("rbf", {"gamma": 1.0}, None, X)
    ky = resolve_kernel("rbf", {"gamma": 1.0}, None, y)
    sens = hsic_sensitivity(60, math.sqrt(2), math.sqrt(2))
    eta = hsic_abs_error(60, 1.0, 1.0, math.sqrt(2), math.sqrt(2), cyclic=cyclic)
    if cyclic:
        ref = _core(hsic_cyclic_statistics(X, y, rng, kx, ky), sens, eta, 1.0, rng)
    else:
        stats, bounds, refine = _hsic_statistics(X, y, 39, rng, kx, ky)
        ref = _core(stats, sens, eta, 1.0, rng, bounds=bounds, refine=refine)
    assert (res.sensitivity, res.abs_error) == (sens, eta)
    assert res.pvalue == ref.pvalue and res.noise == ref.noise


def test_hsic_features_release_equals_direct_statistics_and_noise():
    X, y = _hsic_data(6)
    est = DPHSICTest(method="features", n_components=8, n_permutations=39,
                     random_state=np.random.default_rng(6))
    res = _fit(est, X, y).result_
    rng = np.random.default_rng(6)
    ox, oy = (draw_frequencies("rbf", 0.5, 2, 8, rng), draw_frequencies("rbf", 1.0, 1, 8, rng))
    stats = feature_hsic_statistics(make_features(X, ox), make_features(y, oy), 39, rng)
    ref = _core(stats, res.sensitivity, res.abs_error, 1.0, rng)
    assert res.pvalue == ref.pvalue and res.noise == ref.noise


def test_blocked_and_in_memory_aggregates_release_the_same():
    X, y = _hsic_data(7)
    full = _fit(DPHSICTest(random_state=7), X, y)
    limit = full._prepare(X, y, reset=False).plan.memory_bytes - 1
    small = _fit(DPHSICTest(random_state=7, max_memory=limit), X, y)
    assert small.result_.method.endswith("blocked")
    assert small.result_.pvalue == full.result_.pvalue
    assert small.result_.noise == full.result_.noise


def test_kernel_route_plan_alone_warns_nothing():
    # the route objects plan without an estimator (no warning hook)
    X, y = _hsic_data()
    params = DPHSICTest(cyclic=True, n_permutations=99)._validate_params()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = HSICKernelRoute().plan(params, X, y)
    assert type(plan.route) is HSICAggregateRoute


# -- structure (issue 20 item 1) ----------------------------------------------------------

_KERNEL_DIR = Path(skdptest.kernel.__file__).parent


def test_kernel_modules_stay_small_and_hsic_never_imports_mmd():
    for path in sorted(_KERNEL_DIR.glob("*.py")):
        text = path.read_text()
        # "no kernel module over ~600 lines" (docstrings included); 650 is the hard stop
        assert text.count("\n") <= 650, path.name
        if path.name.startswith("_hsic") or path.name == "_route_hsic_blocked.py":
            imported = {node.module for node in ast.walk(ast.parse(text))
                        if isinstance(node, ast.ImportFrom) and node.module}
            assert "_mmd" not in imported, path.name
