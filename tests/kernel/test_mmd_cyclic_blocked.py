"""dpMMD's blocked cyclic aggregate (no N x N array): its forms against the explicit
definition, against the held route, thread invariance, the route choice, memory within
its plan, neighbours within the sensitivity, the grey-box audit and extreme rows."""

import math
import warnings
from itertools import combinations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from threadpoolctl import threadpool_limits

import skdptest.kernel._mmd as mmd_mod
from skdptest import DPMMDTest, FixedRandomStateWarning
from skdptest.kernel._bandwidth import bandwidth_grid
from skdptest.kernel._cyclic import cyclic_form_abs_error
from skdptest.kernel._kernels import resolve_kernel
from skdptest.kernel._route_mmd_cyclic import (
    MMDCyclicRoute,
    label_coefficients,
    mmd_cyclic_statistics,
)
from skdptest.kernel._route_mmd_cyclic_blocked import (
    MMDCyclicBlockedRoute,
    blocked_block_size,
    mmd_cyclic_blocked_memory_bytes,
    mmd_cyclic_blocked_statistics,
)
from tests._mutants import halve_permutation_noise


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        return est.fit(X, y)


@pytest.fixture
def blocked(monkeypatch):
    """Every cyclic dpMMD fit by blocks (the held route is taken wherever it fits)."""
    monkeypatch.setattr(mmd_mod, "held_cyclic_fits", lambda *args: False)


def _explicit_forms(X, codes, seed, name, gammas):
    """``T_s = sum_ij K_ij C[l_{i+s}, l_{j+s}]`` by the definition: scipy's distances of
    the rows in the order ``seed`` draws, every shift's label matrix summed directly."""
    order = np.random.default_rng(seed).permutation(codes.size)
    Xo, co = X[order], codes[order]
    C = label_coefficients(np.bincount(codes))
    D = cdist(Xo, Xo, "sqeuclidean" if name == "rbf" else "cityblock")
    out = np.empty((len(gammas), codes.size))
    for g, gamma in enumerate(gammas):
        K = np.exp(-gamma * D)
        for s in range(codes.size):
            shifted = np.roll(co, -s)
            out[g, s] = np.sum(K * C[shifted[:, None], shifted[None, :]])
    return out


@pytest.mark.parametrize("name, sizes, block", [
    ("rbf", [6, 7], None), ("laplacian", [8, 8], 3), ("rbf", [3, 4, 5], 2),
    ("laplacian", [5, 2, 4, 6], None)])
def test_forms_equal_the_explicit_definition(name, sizes, block):
    rng = np.random.default_rng(len(sizes))
    codes = np.repeat(np.arange(len(sizes)), sizes)
    X = rng.normal(size=(codes.size, 3)) * 2.0
    kernel = resolve_kernel(name, None, None, X)
    gammas = bandwidth_grid(name, 3)
    got = mmd_cyclic_blocked_statistics(X, codes, np.random.default_rng(5), kernel, gammas,
                                        name, forms=True, block=block)
    ref = _explicit_forms(X, codes, 5, name, gammas)
    # the FFT's certified error (kappa = 1; ||L||_F <= sum_ij |L_ij| <= 4) plus the
    # two distance evaluations' rounding (a few ulps of values at most 1)
    n = codes.size
    bound = cyclic_form_abs_error(n, n * 4.0, 4.0, coefficient_rounding=4 * 2.0**-53)
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound + 1e-13)


@pytest.mark.parametrize("name, sizes", [("rbf", [150, 131]), ("laplacian", [90, 60, 51])])
def test_statistics_equal_the_held_routes_within_their_certified_errors(name, sizes):
    rng = np.random.default_rng(1)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    X = rng.standard_t(3, size=(codes.size, 2))
    plan = DPMMDTest(kernel=name, cyclic=True)._prepare(X, codes, reset=True).plan
    assert type(plan.route) is MMDCyclicRoute
    held = mmd_cyclic_statistics(X, codes, np.random.default_rng(2), plan.kernel,
                                 plan.gammas, name)
    for block in (None, 7):
        got = mmd_cyclic_blocked_statistics(X, codes, np.random.default_rng(2), plan.kernel,
                                            plan.gammas, name, block=block)
        np.testing.assert_allclose(got, held, rtol=0, atol=2 * plan.abs_error)
        assert np.max(np.abs(got - held)) < 1e-12  # and in fact far closer


def test_values_do_not_depend_on_n_jobs_or_blas_threads():
    rng = np.random.default_rng(4)
    X, codes = rng.normal(size=(201, 2)), np.arange(201) % 2
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", 2)

    def run(**kw):
        return mmd_cyclic_blocked_statistics(X, codes, np.random.default_rng(1), kernel,
                                             gammas, "rbf", block=9, **kw)

    ref = run()
    for n_jobs in (2, 3, -1):
        np.testing.assert_array_equal(run(n_jobs=n_jobs), ref)
    for threads in (1, 2, 3):
        with threadpool_limits(threads):
            np.testing.assert_array_equal(run(), ref)


def test_the_blocked_route_takes_over_where_the_held_one_does_not_fit():
    from tests.kernel.test_mmd_cyclic import _route

    assert _route(8000) is MMDCyclicRoute
    assert _route(8000, max_memory=2**30) is MMDCyclicBlockedRoute
    assert _route(12000) is MMDCyclicBlockedRoute  # the default max_memory
    assert _route(12000, groups=5) is MMDCyclicBlockedRoute
    assert _route(100_000) is MMDCyclicBlockedRoute
    assert _route(12000, cyclic=False) is not MMDCyclicBlockedRoute
    assert _route(12000, n_permutations=998) is not MMDCyclicBlockedRoute
    assert _route(3000, cyclic=True, max_memory=2**28) is MMDCyclicBlockedRoute
    # the default at 10^5 rows plans well within the default limit
    X, y = np.zeros((100_000, 5)), np.arange(100_000) % 2
    plan = DPMMDTest(max_time=1e9)._prepare(X, y, reset=True).plan
    assert plan.memory_bytes < 2**30 and plan.method == "dpMMD cyclic aggregate blocked"


def test_method_and_relabelling_count_are_reported(blocked):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    est = _fit(DPMMDTest(cyclic=True, random_state=0), X, np.arange(40) % 2)
    assert est.result_.method == "dpMMD cyclic aggregate blocked"
    assert est.result_.n_permutations == 39
    est = _fit(DPMMDTest(cyclic=True, random_state=0), X, np.arange(40) % 3)
    assert est.result_.method == "dpMMD k-sample cyclic aggregate blocked"


@pytest.mark.parametrize("n, n_jobs", [(600, None), (700, 2)])
def test_peak_memory_is_within_the_plan(blocked, n, n_jobs):
    rng = np.random.default_rng(n)
    X, y = rng.normal(size=(n, 3)), np.arange(n) % 2
    est = DPMMDTest(cyclic=True, random_state=0, n_jobs=n_jobs)
    plan = est._prepare(X, y, reset=True).plan
    assert type(plan.route) is MMDCyclicBlockedRoute
    from tests.kernel.test_mmd_cyclic import _assert_peak_within_plan

    _assert_peak_within_plan(est, X, y)  # within the plan, and at least 0.2 of it
    # no array of N^2 entries: the plan grows at most linearly beyond the block cap
    small, large = (mmd_cyclic_blocked_memory_bytes(k, threads=2) for k in (10**4, 4 * 10**4))
    assert large < 4 * small
    assert all(blocked_block_size(k) * k <= max(2**21, 8 * k) for k in (n, 10**4, 10**6))


def _point_masses(sizes, far=1e5):
    X = np.repeat([0.0, far, 3.0, -far][:len(sizes)], sizes)[:, None]
    return X, np.repeat(np.arange(len(sizes)), sizes)


@pytest.mark.parametrize("sizes", [[6, 9], [4, 5, 6]])
def test_brute_force_neighbours_move_each_statistic_by_at_most_the_sensitivity(
        blocked, sizes):
    # every row replaced by an extreme or a point mass: within the sensitivity plus twice
    # the certified error, and above half the sensitivity (a halved one would fail)
    from tests.kernel.test_mmd_cyclic import _assert_neighbours_within_sensitivity

    _assert_neighbours_within_sensitivity(*_point_masses(sizes), route=MMDCyclicBlockedRoute)


@pytest.mark.parametrize("groups", [2, 3])
def test_grey_box_audit_passes_and_catches_halved_noise(blocked, monkeypatch, groups):
    from skdptest.audit import grey_box_audit

    rng = np.random.default_rng(0)  # tests/test_audit.py's dpMMD neighbours
    X0 = rng.normal(size=(20, 1))
    X1 = X0.copy()
    X1[-1] = 50.0
    g = np.arange(20) % groups

    def audit():
        return grey_box_audit(lambda r: DPMMDTest(cyclic=True, random_state=r), X0, X1,
                              y0=g, y1=g, random_state=0)

    r = audit()
    assert not r.flagged, r.findings
    assert any(q.measured_change for q in r.quantities), r.quantities
    halve_permutation_noise(monkeypatch)
    r = audit()
    assert r.flagged and any("noise scale" in f for f in r.findings), r


def test_type_one_error_by_exact_enumeration_and_the_dropped_observation_mutant():
    # every labelling of the pooled rows equally likely under H0 (skewed rows): the exact
    # level of the rank test over the cyclic group is at most alpha; leaving the observed
    # statistic out of its reference set exceeds it
    X = np.random.default_rng(2).lognormal(sigma=2.0, size=(5, 1))
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", 1)
    levels = {False: [], True: []}
    for first in combinations(range(5), 2):
        codes = np.ones(5, dtype=np.int64)
        codes[list(first)] = 0
        stats = mmd_cyclic_blocked_statistics(X, codes, np.random.default_rng(0), kernel,
                                              gammas, "rbf", block=2)
        exceed = int(np.sum(stats[1:] >= stats[0] - 1e-9))
        levels[False].append((1 + exceed) / 5 <= 0.25)
        levels[True].append(exceed / 4 <= 0.25)
    assert np.mean(levels[False]) <= 0.25 < np.mean(levels[True])


def test_extreme_rows_give_finite_statistics_without_warnings(blocked):
    X = np.random.default_rng(3).normal(size=(24, 2))
    y = np.arange(24) % 2
    for value in (1e308, -1e308, 1e154, 5e-324):
        Xn = X.copy()
        Xn[0] = value
        Xn[1, 0] = -value
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            est = DPMMDTest(cyclic=True, random_state=0).fit(Xn, y)
        assert 0.0 <= est.result_.pvalue <= 1.0
        assert math.isfinite(est.result_.noise_scale)


@pytest.mark.slow
@pytest.mark.parametrize("kind, sizes", [("lognormal", None), ("ties", [3, 3, 4])])
def test_type_one_error_monte_carlo(blocked, kind, sizes):
    # the DP release by blocks (N = 10, B = 9, alpha = 0.25): within alpha + 2 SE, as the
    # held route's (whose dropped-observation mutant this check catches at about 0.3)
    from tests.kernel.test_mmd_cyclic import _level

    reps, alpha = 2000, 0.25
    rate = _level(kind, reps, alpha, seed=12, sizes=sizes)
    assert rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps), rate
