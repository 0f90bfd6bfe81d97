"""Memory plans are upper bounds (issue 18, item 5): for every dpMMD/dpHSIC route the
peak of the numpy memory a fit allocates (tracemalloc, which sees numpy's allocations;
the input is allocated before) is at most the plan that ``max_memory`` is compared
with, at two sizes per route. The plans are not vacuous either: the quadratic routes
use a sizeable part of them.

Measured RSS at larger n (``benchmarks``-style, outside the suite) is in
doc/kernel_tests.md, "Memory plans".
"""

import tracemalloc
import warnings

import numpy as np
import pytest

import skdptest.kernel._route_exact as exact_mod
from skdptest import DPHSICTest, DPMMDTest, FixedRandomStateWarning

G = {"gamma": 0.5}
B = 19


def _data(n, groups=2):
    rng = np.random.default_rng(n)
    return rng.normal(size=(n, 3)), rng.normal(size=(n, 2)), np.arange(n) % groups


def _peak_and_plan(est, X, y):
    plan = est._prepare(X, y, reset=True).plan.memory_bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            est.fit(X, y)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    return peak, plan


# route -> (sizes, estimator maker, which y, least peak / plan expected)
ROUTES = {
    "mmd exact (held kernel)": ((300, 600), lambda: DPMMDTest(kernel_params=G,
                                                               n_permutations=B), "g", 0.3),
    "mmd aggregate": ((100, 200), lambda: DPMMDTest(n_permutations=B, cyclic=False), "g",
                      0.15),
    "mmd private median": ((300, 600), lambda: DPMMDTest(kernel_params={"gamma": "median"},
                                                          n_permutations=B), "g", 0.2),
    "mmd k-sample": ((300, 600), lambda: DPMMDTest(kernel_params=G, n_permutations=B),
                     "g3", 0.3),
    "mmd features fourier": ((300, 600), lambda: DPMMDTest(method="features",
                                                            n_permutations=B), "g", 0.3),
    "mmd features squared": ((300, 600), lambda: DPMMDTest(
        method="features", feature_map="squared", n_components=8, n_permutations=B), "g",
        0.3),
    "hsic default (cyclic aggregate)": ((100, 200), lambda: DPHSICTest(), "Y", 0.3),
    "hsic aggregate cyclic=False": ((60, 120), lambda: DPHSICTest(cyclic=False,
                                                                  n_permutations=B), "Y",
                                    0.2),
    "hsic cyclic": ((300, 600), lambda: DPHSICTest(kernel_params=G, y_kernel_params=G,
                                                   cyclic=True), "Y", 0.3),
    "hsic exact blocked": ((100, 200), lambda: DPHSICTest(kernel_params=G,
                                                          y_kernel_params=G,
                                                          n_permutations=B), "Y", 0.0),
    "hsic private median": ((150, 300), lambda: DPHSICTest(
        kernel_params={"gamma": "median"}, y_kernel_params=G, n_permutations=B), "Y", 0.0),
    "hsic features": ((300, 600), lambda: DPHSICTest(method="features", n_components=8,
                                                     n_permutations=B), "Y", 0.0),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_peak_memory_is_within_the_plan(route):
    sizes, make, which, least = ROUTES[route]
    for n in sizes:
        X, Y, g = _data(n, 3 if which == "g3" else 2)
        peak, plan = _peak_and_plan(make(), X, Y if which == "Y" else g)
        assert peak <= plan, (route, n, peak, plan)
        assert peak >= least * plan, (route, n, peak, plan)  # the plan is not vacuous


@pytest.mark.parametrize("n", [1500, 2500])
def test_blocked_mmd_path_is_within_the_plan(n, monkeypatch):
    # kernel blocks evaluated on the fly (the path of N > 5792 with the default limits)
    monkeypatch.setattr(exact_mod, "MAX_KERNEL_BYTES", 2**20)
    monkeypatch.setattr(exact_mod, "PREFETCH_KERNEL_BYTES", 2**20)
    X, _, g = _data(n)
    peak, plan = _peak_and_plan(DPMMDTest(kernel_params=G, n_permutations=B), X, g)
    assert 8 * n * n > plan  # the pooled kernel matrix is not planned, nor held
    assert 0.2 * plan <= peak <= plan


def test_default_hsic_plan_at_the_reported_sizes():
    # the measurements: default dpHSIC (cyclic aggregate, 19 x 19 bandwidths)
    # peaked at 1.38 GiB (n = 2000) and 5.09 GB (n = 4000); the y spectra (19 complex
    # n x (n/2 + 1) arrays) are now the bulk, planned with the x worker's arrays
    X = np.zeros((2000, 1))
    plan = DPHSICTest()._prepare(X, X[:, 0], reset=True).plan.memory_bytes
    spectra = 19 * 16 * 2000 * 1001
    assert spectra < plan < spectra + 4 * 8 * 2000**2
    # above 1 GiB of plan (n > about 2600) the same statistic runs by diagonal blocks
    # (issue 20: n = 4000 peaked at 5.09 GB): O(block n) per bandwidth
    X = np.zeros((4000, 1))
    plan = DPHSICTest()._prepare(X, X[:, 0], reset=True).plan
    assert plan.blocked is not None and plan.memory_bytes < 0.1 * 2**30
