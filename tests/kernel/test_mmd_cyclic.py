"""dpMMD's bandwidth aggregate over the cyclic group (``cyclic=True``, issue 20 item 2),
for two groups and (the k-sample statistic) three or more.

Statistics against their definition (the permutation route's statistic on the shifted
labels of the randomly ordered rows), the certified FFT error against exact rational
arithmetic, privacy (brute-force neighbours, the grey-box audit and its halved-noise
mutant), validity (exact enumeration at tiny N by default, Monte Carlo in the slow
suite, each with a mutant it catches), threads, route choice and memory plan.
"""

import math
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from skdptest import DPMMDTest, FixedRandomStateWarning, PrivacyLeakWarning
from skdptest._params import InvalidParameterError
from skdptest.kernel import _results as results_mod
from skdptest.kernel._bandwidth import bandwidth_grid, mmd_centre
from skdptest.kernel._cyclic import (
    cyclic_form_abs_error,
    cyclic_forms,
    diagonal_spectra,
    half_diagonal_weights,
)
from skdptest.kernel._kernels import resolve_kernel
from skdptest.kernel._route_exact import _trace_hkh, mmd_abs_error, mmd_permutation_statistics
from skdptest.kernel._route_mmd_aggregate import MMDAggregateRoute
from skdptest.kernel._route_mmd_cyclic import (
    MMDCyclicRoute,
    _label_spectra,
    label_coefficients,
    mmd_cyclic_abs_error,
    mmd_cyclic_statistics,
)
from skdptest.kernel._route_mmd_exact import MMDExactRoute
from tests._mutants import halve_permutation_noise

_U = 2.0**-53


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        return est.fit(X, y)


def _two_groups(m, n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m + n, d)) * 3.0, np.repeat([0, 1], [m, n])


def _explicit(X, codes, seed, name):
    """The cyclic aggregate by its definition: the rows in the order ``seed`` draws, the
    labels shifted by s, the permutation route's statistic of each, minus the centring."""
    order = np.random.default_rng(seed).permutation(codes.size)
    Xo, co = X[order], codes[order]
    sizes = np.bincount(codes)
    ksample = sizes.size > 2
    kernel = resolve_kernel(name, None, None, X)
    rows = []
    for g in bandwidth_grid(name, X.shape[1]):
        k = kernel.with_gamma(g)
        h = mmd_centre(_trace_hkh(Xo, k), sizes, k.kappa, k.nonnegative)[0]
        # label of position i after shift s: co[(i + s) % N]
        rows.append([mmd_permutation_statistics(Xo, np.roll(co, -s), 1,
                                                np.random.default_rng(0), k,
                                                ksample=ksample)[0] - h
                     for s in range(codes.size)])
    return np.max(np.array(rows), axis=0)


# each kernel once, an even balanced and an odd unbalanced N (the FFT's half diagonals
# differ by the parity of N; the kernel only fills the Gram matrix): ("rbf", 4, 9) and
# ("laplacian", 7, 7) repeated these paths with the other kernel
@pytest.mark.parametrize("name, m, n", [("rbf", 6, 6), ("laplacian", 5, 8)])
def test_statistics_equal_the_explicit_definition(name, m, n):
    X, y = _two_groups(m, n, seed=m + n)
    est = DPMMDTest(kernel=name, cyclic=True, random_state=3)
    plan = est._prepare(X, y, reset=True).plan
    assert type(plan.route) is MMDCyclicRoute and plan.n_permutations == m + n - 1
    got = mmd_cyclic_statistics(X, y, np.random.default_rng(3), plan.kernel, plan.gammas, name)
    ref = _explicit(X, y, 3, name)
    # both are within their certified bounds of the exact values
    tol = plan.abs_error + mmd_abs_error([m, n], 1.0, math.sqrt(2))
    assert got.shape == (m + n,)
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    # the release runs these statistics (same generator: the same order)
    stats = plan.route.statistics(plan, X, y, np.random.default_rng(3)).values
    np.testing.assert_array_equal(stats, got)


def test_half_diagonals_give_the_full_correlation():
    # diagonal N - d of a symmetric pair gives the same correlation as diagonal d
    rng = np.random.default_rng(1)
    for n in (7, 8):
        A = rng.normal(size=(n, n))
        K = A + A.T
        v = rng.normal(size=n)
        L = np.outer(v, v)
        full = np.fft.irfft(np.sum(np.conj(diagonal_spectra(K)) * diagonal_spectra(L),
                                   axis=0), n=n)
        half = cyclic_forms(K, diagonal_spectra(L, n // 2 + 1)
                            * half_diagonal_weights(n)[:, None])
        direct = [np.roll(v, -s) @ K @ np.roll(v, -s) for s in range(n)]
        np.testing.assert_allclose(half, full, atol=1e-12)
        np.testing.assert_allclose(half, direct, atol=1e-12)
        # a rank-one L as n "groups" with C = v v^T
        np.testing.assert_allclose(_label_spectra(np.arange(n), L),
                                   diagonal_spectra(L, n // 2 + 1)
                                   * half_diagonal_weights(n)[:, None], atol=1e-14)


def _exact_forms(K, v):
    n = len(v)
    Kf = [[Fraction(float(x)) for x in row] for row in K]
    out = []
    for s in range(n):
        w = [v[(i + s) % n] for i in range(n)]
        out.append(sum(w[i] * sum(Kf[i][j] * w[j] for j in range(n)) for i in range(n)))
    return out


@pytest.mark.parametrize("m, n", [(4, 5), (3, 9), (8, 8)])
def test_fft_error_is_within_the_certified_bound(m, n):
    # adversarial Gram matrices (|K| <= 1): all values near 1 (T_s ~ 0 from terms ~ 1: the
    # worst cancellation), two point masses (0/1 blocks) and random signs; exact
    # rational reference
    N = m + n
    rng = np.random.default_rng(N)
    codes = rng.permutation(np.repeat([0, 1], [m, n]))
    v = np.where(codes == 0, 1.0 / m, -1.0 / n)
    vx = [Fraction(1, m) if c == 0 else Fraction(-1, n) for c in codes]
    E = rng.uniform(size=(N, N)) * 2.0**-20
    blocks = (rng.uniform(size=N) < 0.5).astype(float)
    S = rng.choice([-1.0, 1.0], size=(N, N))
    bound = cyclic_form_abs_error(N, N * (1.0 / m + 1.0 / n), 4.0, 4 * _U)
    worst = 0.0
    C = label_coefficients([m, n])
    assert np.array_equal(C[codes[:, None], codes[None, :]], np.outer(v, v))
    for K in (1.0 - (E + E.T) / 2, np.equal.outer(blocks, blocks).astype(float),
              np.triu(S) + np.triu(S, 1).T):
        got = cyclic_forms(K, _label_spectra(codes, C))
        exact = _exact_forms(K, vx)
        err = max(abs(Fraction(float(g)) - e) for g, e in zip(got, exact, strict=True))
        worst = max(worst, float(err))
        assert err <= bound, (float(err), bound)
        # the sqrt statistic: within the route's eta of sqrt(max(exact, 0))
        eta = mmd_cyclic_abs_error([m, n], 1.0, 2.0)
        for g, e in zip(got, exact, strict=True):
            assert abs(math.sqrt(max(g, 0.0)) - math.sqrt(max(float(e), 0.0))) <= eta
    assert 0.0 < worst  # rounding happened: the check is not vacuous


def test_fft_error_at_a_prime_size_against_long_double():
    # N = 101 (prime: pocketfft's Bluestein path), near-one kernel (worst cancellation)
    m, n = 40, 61
    N = m + n
    rng = np.random.default_rng(5)
    E = rng.uniform(size=(N, N)) * 2.0**-10
    K = 1.0 - (E + E.T) / 2
    codes = rng.permutation(np.repeat([0, 1], [m, n]))
    got = cyclic_forms(K, _label_spectra(codes, label_coefficients([m, n])))
    Kl = K.astype(np.longdouble)
    vl = np.where(codes == 0, np.longdouble(1) / m, np.longdouble(-1) / n)
    ref = np.array([np.roll(vl, -s) @ Kl @ np.roll(vl, -s) for s in range(N)])
    ref_err = 4.0 * N * N * float(np.finfo(np.longdouble).eps)
    bound = cyclic_form_abs_error(N, N * (1.0 / m + 1.0 / n), 4.0, 4 * _U)
    err = float(np.max(np.abs(got.astype(np.longdouble) - ref)))
    assert err <= bound - ref_err, (err, bound)


# -- privacy ------------------------------------------------------------------------------

def _point_masses(m, n, far=1e5):
    X = np.r_[np.zeros(m), np.full(n, far)][:, None]
    return X, np.repeat([0, 1], [m, n])


def test_brute_force_neighbours_move_each_statistic_by_at_most_the_sensitivity():
    m, n = 6, 9
    X, y = _point_masses(m, n)
    _assert_neighbours_within_sensitivity(X, y)


def _assert_neighbours_within_sensitivity(X, y, route=MMDCyclicRoute):
    """Every row replaced by an extreme or a point mass moves every cyclic statistic by at
    most the sensitivity plus twice the certified error, and some by more than half the
    sensitivity (the bound is nearly attained: a halved one would fail)."""
    plan = DPMMDTest(cyclic=True)._prepare(X, y, reset=True).plan
    assert type(plan.route) is route
    bound = plan.sensitivity + 2 * plan.abs_error
    base = plan.route.statistics(plan, X, y, np.random.default_rng(0)).values
    largest = 0.0
    for row in range(len(y)):
        for value in (0.0, 1e5, -1e7):
            Xn = X.copy()
            Xn[row] = value
            other = plan.route.statistics(plan, Xn, y, np.random.default_rng(0)).values
            change = float(np.max(np.abs(other - base)))
            assert change <= bound, (row, value, change, bound)
            largest = max(largest, change)
    assert largest > 0.5 * plan.sensitivity


def _worst_pair():
    rng = np.random.default_rng(0)  # tests/test_audit.py's dpMMD neighbours
    m0 = rng.normal(size=(20, 1))
    m1 = m0.copy()
    m1[-1] = 50.0
    return m0, m1, np.repeat([0, 1], 10)


def _grey(factory, groups=2):
    from skdptest.audit import grey_box_audit

    X0, X1, g = _worst_pair()
    if groups != 2:
        g = np.arange(g.size) % groups
    return grey_box_audit(factory, X0, X1, y0=g, y1=g, random_state=0)


@pytest.mark.parametrize("cyclic, groups", [(True, 2), (False, 2), (True, 3)])
def test_grey_box_audit_passes_and_catches_halved_noise(monkeypatch, cyclic, groups):
    # (False: the permutation aggregate, which tests/test_audit.py's dpMMD case, N = 20
    # with n_permutations=19, no longer reaches under cyclic="auto"; 3 groups: the
    # k-sample statistic over the cyclic group)
    def factory(r):
        return DPMMDTest(cyclic=cyclic, n_permutations=2000 if cyclic else 19,
                         random_state=r)

    r = _grey(factory, groups)
    assert not r.flagged, r.findings
    assert any(q.measured_change for q in r.quantities), r.quantities
    halve_permutation_noise(monkeypatch)
    r = _grey(factory, groups)
    assert r.flagged and any("noise scale" in f for f in r.findings), r


# -- validity -----------------------------------------------------------------------------

def _rank_pvalues(stats, eta, drop_observed=False):
    exceed = int(np.sum(stats[1:] >= stats[0] - 2 * eta))
    if drop_observed:  # the mutant: the observed statistic left out of the reference set
        return exceed / (stats.size - 1)
    return (1 + exceed) / stats.size


def _enumerated_level(X, m, alpha, drop_observed=False, seed=0):
    """Exact rejection rate of the (non-private) cyclic rank test over all labellings
    with group sizes (m, N - m) of the pooled rows X (H0: each equally likely), for the
    random order that ``seed`` draws (the order is independent of the labels: the same
    for every labelling)."""
    from itertools import combinations

    N = X.shape[0]
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", X.shape[1])
    eta = MMDCyclicRoute().adjust({"kernel": "rbf"}, X, np.array([m, N - m]), kernel,
                                  1.0, 0.0, "")[2]
    rejections = total = 0
    for first in combinations(range(N), m):
        codes = np.ones(N, dtype=np.int64)
        codes[list(first)] = 0
        stats = mmd_cyclic_statistics(X, codes, np.random.default_rng(seed), kernel, gammas,
                                      "rbf")
        rejections += _rank_pvalues(stats, eta, drop_observed) <= alpha
        total += 1
    return rejections / total


@pytest.mark.parametrize("data", ["skewed", "tied"])
def test_type_one_error_by_exact_enumeration(data):
    # every labelling of the pooled rows is equally likely under H0: the exact level of
    # the rank test over the cyclic group (any random order) is at most alpha; the mutant
    # that leaves the observed statistic out of its reference set exceeds it
    rng = np.random.default_rng(2)
    X = (rng.lognormal(sigma=2.0, size=(5, 1)) if data == "skewed"
         else np.array([[0.0], [0.0], [1.0], [1.0], [7.0]]))
    for seed in (0, 1):
        assert _enumerated_level(X, 2, 0.25, seed=seed) <= 0.25
    if data == "skewed":  # (with ties the mutant's extra rejections may tie away)
        assert _enumerated_level(X, 2, 0.25, drop_observed=True) > 0.25


def _null_data(kind, m, n, rng, sizes=None):
    sizes = [m, n] if sizes is None else sizes
    N = int(np.sum(sizes))
    if kind == "lognormal":
        X = rng.lognormal(sigma=1.5, size=(N, 2))
    elif kind == "cauchy":
        X = rng.standard_cauchy(size=(N, 2))
    else:  # ties
        X = rng.integers(0, 3, size=(N, 1)).astype(float)
    return X, np.repeat(np.arange(len(sizes)), sizes)


def _level(kind, reps, alpha, seed, m=4, n=6, sizes=None):
    rng = np.random.default_rng(seed)
    est = DPMMDTest(cyclic=True, epsilon=4.0, alpha=alpha, random_state=rng)
    rejections = sum(bool(_fit(est, *_null_data(kind, m, n, rng, sizes)).result_.reject)
                     for _ in range(reps))
    return rejections / reps


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lognormal", "cauchy", "ties"])
def test_type_one_error_monte_carlo(kind):
    # the DP release over the cyclic group (N = 10, unequal sizes, B = 9): binomial
    # tolerance alpha + 2 SE at alpha = 0.25
    reps, alpha = 2000, 0.25
    rate = _level(kind, reps, alpha, seed=11)
    assert rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps), rate


@pytest.mark.slow
def test_type_one_error_monte_carlo_catches_the_dropped_observation(monkeypatch):
    # the same check with the observed statistic left out of the core's reference set
    # (p = exceedances / B instead of (1 + exceedances) / (B + 1)): level about 0.3
    honest = results_mod.dp_permutation_pvalue

    def mutant(stats, *args, **kwargs):
        res = honest(stats, *args, **kwargs)
        k = round(res.pvalue * stats.size) - 1
        return res._replace(pvalue=k / (stats.size - 1))

    monkeypatch.setattr(results_mod, "dp_permutation_pvalue", mutant)
    reps, alpha = 2000, 0.25
    rate = _level("lognormal", reps, alpha, seed=11)
    assert rate > alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps), rate
    # and for three groups (the k-sample statistic)
    rate = _level("lognormal", reps, alpha, seed=11, sizes=[3, 3, 4])
    assert rate > alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps), rate


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lognormal", "ties"])
def test_ksample_type_one_error_monte_carlo(kind):
    # the DP release over the cyclic group with three groups (3 / 3 / 4 rows, B = 9)
    reps, alpha = 2000, 0.25
    rate = _level(kind, reps, alpha, seed=12, sizes=[3, 3, 4])
    assert rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps), rate


# -- threads, route choice, refusals, memory ---------------------------------------------

def test_values_do_not_depend_on_n_jobs_or_blas_threads():
    X, y = _two_groups(30, 41, seed=4)
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", 2)
    ref = mmd_cyclic_statistics(X, y, np.random.default_rng(1), kernel, gammas, "rbf")
    for n_jobs in (2, 3, -1):
        got = mmd_cyclic_statistics(X, y, np.random.default_rng(1), kernel, gammas, "rbf",
                                    n_jobs=n_jobs)
        np.testing.assert_array_equal(got, ref)
    for threads in (1, 2, 3):
        with threadpool_limits(threads):
            got = mmd_cyclic_statistics(X, y, np.random.default_rng(1), kernel, gammas, "rbf")
        np.testing.assert_array_equal(got, ref)


def _route(n, groups=2, **kw):
    X = np.zeros((n, 1))
    y = np.arange(n) % groups
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return type(DPMMDTest(max_time=1e9, **kw)._prepare(X, y, reset=True).plan.route)


def test_auto_picks_the_route_from_public_sizes():
    assert _route(999) is MMDAggregateRoute  # min(N - 1, B) = 998 < 999
    assert _route(1000) is MMDCyclicRoute
    assert _route(1000, cyclic=False) is MMDAggregateRoute
    assert _route(1000, groups=3) is MMDCyclicRoute  # any number of groups
    assert _route(1000, groups=4, cyclic=False) is MMDAggregateRoute
    assert _route(999, groups=3) is MMDAggregateRoute
    assert _route(1000, kernel_params={"gamma": 1.0}) is MMDExactRoute
    # a request for fewer than 999 relabellings keeps them, at any N
    assert _route(1500, n_permutations=998) is MMDAggregateRoute
    assert _route(1500, n_permutations=999) is MMDCyclicRoute
    assert _route(1000, n_permutations=5000) is MMDCyclicRoute
    assert _route(30, cyclic=True) is MMDCyclicRoute
    # beyond the permutation route's held kernel (N > 5792) while the plan fits max_memory
    assert _route(8000) is MMDCyclicRoute
    # above its memory plan the cyclic aggregate runs by blocks (test_mmd_cyclic_blocked.py)
    assert _route(8000, max_memory=2**30) not in (MMDCyclicRoute, MMDAggregateRoute)


def test_auto_warns_only_when_it_overrides_a_requested_n_permutations():
    X = np.zeros((1000, 1))
    y = np.arange(1000) % 2
    with pytest.warns(PrivacyLeakWarning,
                      match=r"n_permutations=5000 is ignored: cyclic='auto'"):
        DPMMDTest(n_permutations=5000)._prepare(X, y, reset=True)
    for kw in ({}, {"n_permutations": 500}, {"n_permutations": 2000}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            DPMMDTest(**kw)._prepare(X, y, reset=True)


def test_cyclic_true_is_refused_where_it_does_not_apply_and_warns_for_n_permutations():
    X, y = _two_groups(10, 10)
    with pytest.raises(InvalidParameterError, match="cyclic=True needs the bandwidth"):
        DPMMDTest(cyclic=True, kernel_params={"gamma": 1.0}).fit(X, y)
    with pytest.raises(InvalidParameterError, match="cyclic=True needs the bandwidth"):
        DPMMDTest(cyclic=True, method="features").fit(X, y)
    with pytest.raises(InvalidParameterError,
                       match=r"method='exact'; any number of groups\); use cyclic='auto'"):
        DPMMDTest(cyclic=True, kernel_params={"gamma": "median"}).fit(X, np.arange(20) % 3)
    # three groups are taken (the k-sample statistic over the cyclic group)
    est = _fit(DPMMDTest(cyclic=True, random_state=0), X, np.arange(20) % 3)
    assert est.result_.method == "dpMMD k-sample cyclic aggregate"
    assert est.result_.n_permutations == 19
    with pytest.raises(InvalidParameterError, match="cyclic"):
        DPMMDTest(cyclic="yes").fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="n_permutations=99 is ignored: cyclic=True"):
        est = _fit(DPMMDTest(cyclic=True, n_permutations=99, random_state=0), X, y)
    assert est.result_.method == "dpMMD cyclic aggregate"
    assert est.result_.n_permutations == 19


@pytest.mark.parametrize("n, n_jobs", [(300, None), (600, 2)])
def test_peak_memory_is_within_the_plan(n, n_jobs):
    X, y = _two_groups(n // 2, n - n // 2, d=3, seed=n)
    _assert_peak_within_plan(DPMMDTest(cyclic=True, random_state=0, n_jobs=n_jobs), X, y)


def _assert_peak_within_plan(est, X, y):
    plan = est._prepare(X, y, reset=True).plan.memory_bytes
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _fit(est, X, y)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert 0.2 * plan <= peak <= plan, (peak, plan)  # the plan is not vacuous


def test_release_equals_direct_statistics_and_noise():
    # the route contract (tests/kernel/test_routes_contract.py): a seeded release is the
    # statistics function plus the core's documented noise, with the aggregate's
    # sensitivity and the cyclic rounding bound computed independently here
    from skdptest._permutation import dp_permutation_pvalue
    from skdptest.kernel._bandwidth import (
        aggregate_sensitivity,
        centre_abs_error,
        mmd_centre_constants,
        trace_abs_error,
    )

    X, y = _two_groups(30, 34, seed=8)
    res = _fit(DPMMDTest(cyclic=True, random_state=np.random.default_rng(5)), X, y).result_
    rng = np.random.default_rng(5)
    kernel = resolve_kernel("rbf", None, None, X)
    stats = mmd_cyclic_statistics(X, y, rng, kernel, bandwidth_grid("rbf", 2), "rbf")
    constants = mmd_centre_constants(np.array([30, 34]), 1.0, True)
    sens = aggregate_sensitivity(math.sqrt(2) / 30, constants)
    eta = (mmd_cyclic_abs_error([30, 34], 1.0, math.sqrt(2))
           + centre_abs_error(constants, trace_abs_error(64, 1.0), 2 * math.sqrt(2)))
    ref = dp_permutation_pvalue(stats, sens, 1.0, 0.0, rng, abs_error=eta)
    assert (res.sensitivity, res.abs_error) == (sens, eta)
    assert res.pvalue == ref.pvalue and res.noise == ref.noise
    assert res.method == "dpMMD cyclic aggregate" and res.n_permutations == 63


def test_max_time_and_progress_use_the_cyclic_work_model(capsys):
    from skdptest.kernel._route_mmd_cyclic import mmd_cyclic_work

    X, y = _two_groups(20, 20)
    with pytest.raises(InvalidParameterError, match="max_time"):
        DPMMDTest(cyclic=True, max_time=1e-9).fit(X, y)
    _fit(DPMMDTest(cyclic=True, verbose=1, random_state=0), X, y)
    err = capsys.readouterr().err
    assert "dpMMD cyclic aggregate: 19 bandwidths x 40 cyclic shifts" in err
    assert "bandwidths 19/19 done" in err
    # the model is a public function of the sizes: N^2 log N transforms, not N^2 (B + 1)
    small, large = mmd_cyclic_work(1000, 2, 19), mmd_cyclic_work(2000, 2, 19)
    assert 4 < large["tri"] / small["tri"] < 4.5


# -- three or more groups: the k-sample statistic over the cyclic group -------------------

def _groups(sizes, d=2, seed=0):
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    return rng.normal(size=(codes.size, d)) * 3.0 + codes[:, None], codes


@pytest.mark.parametrize("name, sizes", [("rbf", [2, 3, 4]), ("laplacian", [2, 4, 2, 3])])
def test_ksample_statistics_equal_the_explicit_definition(name, sizes):
    # the permutation route's k-sample statistic (ksample=True) on the shifted labels
    X, y = _groups(sizes, seed=len(sizes))
    y = np.random.default_rng(9).permutation(y)  # groups interleaved
    N = int(np.sum(sizes))
    est = DPMMDTest(kernel=name, cyclic=True, random_state=3)
    plan = est._prepare(X, y, reset=True).plan
    assert type(plan.route) is MMDCyclicRoute and plan.n_permutations == N - 1
    assert plan.method == "dpMMD k-sample cyclic aggregate"
    got = mmd_cyclic_statistics(X, y, np.random.default_rng(3), plan.kernel, plan.gammas, name)
    ref = _explicit(X, y, 3, name)
    tol = plan.abs_error + mmd_abs_error(sizes, 1.0, math.sqrt(2))
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    assert np.ptp(ref) > 100 * tol  # the shifts differ: the comparison is not vacuous
    stats = plan.route.statistics(plan, X, y, np.random.default_rng(3)).values
    np.testing.assert_array_equal(stats, got)


def test_ksample_label_coefficients_are_the_statistic():
    # sum_ij K_ij C[l_i, l_j] is the k-sample statistic sum_g 1_g'K1_g/(N n_g) - 1'K1/N^2
    sizes = [2, 3, 4]
    codes = np.random.default_rng(1).permutation(np.repeat([0, 1, 2], sizes))
    A = np.random.default_rng(2).normal(size=(9, 9))
    K = A + A.T
    C = label_coefficients(sizes)
    direct = sum(K[codes == g][:, codes == g].sum() / (9 * n_g)
                 for g, n_g in enumerate(sizes)) - K.sum() / 81
    assert abs(np.sum(K * C[codes[:, None], codes[None, :]]) - direct) < 1e-13
    exact = [[Fraction(9 - n_g, 81 * n_g) if g == h else Fraction(-1, 81)
              for h in range(3)] for g, n_g in enumerate(sizes)]
    for g in range(3):
        for h in range(3):
            assert abs(Fraction(float(C[g, h])) - exact[g][h]) <= 3 * _U * abs(exact[g][h])


def _exact_label_forms(K, codes, exact_C):
    n = len(codes)
    Kf = [[Fraction(float(x)) for x in row] for row in K]
    out = []
    for s in range(n):
        c = [codes[(i + s) % n] for i in range(n)]
        out.append(sum(Kf[i][j] * exact_C[c[i]][c[j]] for i in range(n) for j in range(n)))
    return out


@pytest.mark.parametrize("sizes", [[2, 3, 4], [2, 2, 3, 5]])
def test_ksample_fft_error_is_within_the_certified_bound(sizes):
    from skdptest.kernel._route_mmd_cyclic import _label_norms

    N, G = int(np.sum(sizes)), len(sizes)
    rng = np.random.default_rng(N)
    codes = rng.permutation(np.repeat(np.arange(G), sizes))
    exact_C = [[Fraction(N - n_g, N * N * n_g) if g == h else Fraction(-1, N * N)
                for h in range(G)] for g, n_g in enumerate(sizes)]
    # the bound's label norms against their exact values
    L = [[exact_C[a][b] for b in codes] for a in codes]
    form, frob = _label_norms(sizes)
    assert sum(abs(x) for row in L for x in row) <= Fraction(form)
    assert sum(x * x for row in L for x in row) <= Fraction(frob) ** 2
    E = rng.uniform(size=(N, N)) * 2.0**-20
    blocks = (rng.uniform(size=N) < 0.5).astype(float)
    S = rng.choice([-1.0, 1.0], size=(N, N))
    bound = cyclic_form_abs_error(N, N * frob, form, 4 * _U)
    eta = mmd_cyclic_abs_error(sizes, 1.0, 2.0)
    worst = 0.0
    for K in (1.0 - (E + E.T) / 2, np.equal.outer(blocks, blocks).astype(float),
              np.triu(S) + np.triu(S, 1).T):
        got = cyclic_forms(K, _label_spectra(codes, label_coefficients(sizes)))
        exact = _exact_label_forms(K, codes, exact_C)
        err = max(abs(Fraction(float(g)) - e) for g, e in zip(got, exact, strict=True))
        worst = max(worst, float(err))
        assert err <= bound, (float(err), bound)
        for g, e in zip(got, exact, strict=True):
            assert abs(math.sqrt(max(g, 0.0)) - math.sqrt(max(float(e), 0.0))) <= eta
    assert 0.0 < worst


def test_ksample_brute_force_neighbours_move_each_statistic_by_at_most_the_sensitivity():
    sizes = [4, 5, 6]
    X = np.repeat([0.0, 1e5, 2e5], sizes)[:, None]
    y = np.repeat([0, 1, 2], sizes)
    _assert_neighbours_within_sensitivity(X, y)


def _enumerated_ksample_level(X, sizes, alpha, drop_observed=False, seed=0):
    """:func:`_enumerated_level` over all labellings with the group sizes ``sizes``."""
    from itertools import permutations

    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", X.shape[1])
    eta = MMDCyclicRoute().adjust({"kernel": "rbf"}, X, np.array(sizes), kernel,
                                  1.0, 0.0, "")[2]
    labellings = sorted(set(permutations(np.repeat(np.arange(len(sizes)), sizes))))
    rejections = 0
    for codes in labellings:
        stats = mmd_cyclic_statistics(X, np.array(codes), np.random.default_rng(seed),
                                      kernel, gammas, "rbf")
        rejections += _rank_pvalues(stats, eta, drop_observed) <= alpha
    return rejections / len(labellings)


def test_ksample_type_one_error_by_exact_enumeration():
    # N = 5 in groups of 1, 2, 2 (30 labellings, skewed values): the exact level of the
    # rank test over the cyclic group is at most alpha for every order; the mutant that
    # drops the observed statistic from its reference set exceeds it
    X = np.random.default_rng(2).lognormal(sigma=2.0, size=(5, 1))
    for seed in (0, 1):
        assert _enumerated_ksample_level(X, [1, 2, 2], 0.25, seed=seed) <= 0.25
    assert _enumerated_ksample_level(X, [1, 2, 2], 0.25, drop_observed=True) > 0.25


def test_ksample_peak_memory_is_within_the_plan():
    sizes = [100, 120, 80]
    X, y = _groups(sizes, d=3, seed=7)
    _assert_peak_within_plan(DPMMDTest(cyclic=True, random_state=0), X, y)


def test_ksample_release_equals_direct_statistics_and_noise():
    from skdptest._permutation import dp_permutation_pvalue
    from skdptest.kernel._bandwidth import (
        aggregate_sensitivity,
        centre_abs_error,
        mmd_centre_constants,
        trace_abs_error,
    )

    sizes = [20, 25, 19]
    X, y = _groups(sizes, seed=8)
    res = _fit(DPMMDTest(cyclic=True, random_state=np.random.default_rng(5)), X, y).result_
    rng = np.random.default_rng(5)
    kernel = resolve_kernel("rbf", None, None, X)
    stats = mmd_cyclic_statistics(X, y, rng, kernel, bandwidth_grid("rbf", 2), "rbf")
    constants = mmd_centre_constants(np.array(sizes), 1.0, True)
    # the k-sample sensitivity D / N sqrt((N - n_min) / n_min) (see DPMMDTest, Notes)
    sens = aggregate_sensitivity(math.sqrt(2) / 64 * math.sqrt(45 / 19), constants)
    eta = (mmd_cyclic_abs_error(sizes, 1.0, math.sqrt(2))
           + centre_abs_error(constants, trace_abs_error(64, 1.0), 2 * math.sqrt(2)))
    ref = dp_permutation_pvalue(stats, sens, 1.0, 0.0, rng, abs_error=eta)
    assert res.sensitivity == pytest.approx(sens, rel=1e-15) and res.abs_error == eta
    assert res.pvalue == ref.pvalue
    assert res.method == "dpMMD k-sample cyclic aggregate" and res.n_permutations == 63
