"""Release boundary of dpMMD/dpHSIC: what leaves, what is refused before the charge,
callable kernels (any-kernel sensitivity), float safety, and the two-sample form."""

import math
import warnings
from dataclasses import fields
from fractions import Fraction

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.metrics.pairwise import rbf_kernel

import skdptest.kernel._hsic as hsic_mod
import skdptest.kernel._mmd as mmd_mod
from skdptest import (
    DPHSICTest,
    DPMMDTest,
    FixedRandomStateWarning,
    PermutationTestResult,
    PrivacyBudget,
)
from skdptest.kernel._kernels import resolve_kernel, stable_rbf
from skdptest.kernel._results import make_permutation_result
from tests.kernel._reference import _fixed


def two_samples(seed=0, m=30, n=40, shift=0.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, 2)), rng.normal(shift, size=(n, 2))


def stacked(seed=0, m=30, n=40):
    X1, X2 = two_samples(seed, m, n)
    return np.vstack([X1, X2]), np.repeat([0, 1], [m, n])


def refused(est, X, y, exc, match):
    """Fit must raise ``exc`` matching ``match`` with nothing charged and no fitted state."""
    budget = PrivacyBudget(10.0)
    est.set_params(budget=budget)
    with pytest.raises(exc, match=match):
        est.fit(X, y)
    assert len(budget.ledger) == 0 and budget.spent[0] == 0
    assert not hasattr(est, "result_")


# -- only the p-value leaves -------------------------------------------------------------

def test_result_has_no_noisy_statistic_and_pvalue_alias_warns():
    X, y = stacked()
    res = DPMMDTest(random_state=0, n_permutations=99).test(X, y)
    assert isinstance(res, PermutationTestResult)
    floats = {f.name for f in fields(res) if isinstance(getattr(res, f.name), float)}
    assert floats == {"alpha", "epsilon", "delta", "pvalue", "sensitivity", "abs_error",
                      "noise_scale"}
    assert res.statistic == "sqrt"
    with pytest.warns(FutureWarning, match="use pvalue"):
        assert res.p_value == res.pvalue
    with pytest.raises(TypeError, match="cannot be unpacked"):
        tuple(res)


# -- refusals before the charge -----------------------------------------------------------

@pytest.mark.parametrize("params, match", [
    ({"n_permutations": 10**30}, "n_permutations"),
    ({"n_permutations": 10**6 + 1}, "n_permutations"),
    ({"kernel": RBF(length_scale=0.0)}, "length_scale must be finite and > 0"),
    ({"kernel": ConstantKernel(1e308) * RBF()}, "k\\(x, x\\) = 1e\\+308"),
    ({"kernel": ConstantKernel(-1.0) * RBF()}, "constant_value must be finite and >= 0"),
    ({"kernel_bound": math.inf}, "kernel_bound"),
    ({"kernel": "linear", "kernel_bound": 1e300}, "above the largest accepted bound"),
    ({"epsilon": 1e-9}, "too small for the exact discrete Laplace sampler"),
    ({"max_memory": 0}, "max_memory"),
    ({"max_memory": 1000}, r"N = 70 rows.*needs about .* GiB .*max_memory=1000 bytes"),
])
def test_mmd_refuses_before_the_charge(params, match):
    X, y = stacked()
    refused(DPMMDTest(n_permutations=99).set_params(**params), X, y, ValueError, match)


@pytest.mark.parametrize("params, match", [
    ({"n_permutations": 10**30}, "n_permutations"),
    ({"y_kernel": RBF(length_scale=[1.0, 0.0])}, "length_scale"),
    ({"y_kernel_bound": math.nan}, "y_kernel_bound"),
    ({"epsilon": 1e-9}, "too small"),
    ({"cyclic": "yes"}, "cyclic"),
])
def test_hsic_refuses_before_the_charge(params, match):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    refused(DPHSICTest(n_permutations=99, cyclic=False).set_params(**params), X, y, ValueError,
            match)


def test_hsic_memory_limit_names_n_bytes_and_the_routes_that_fit():
    # The blocked exact path plans about 1.9 GiB at n = 20 000 (a float32 copy of L and
    # row blocks of K): refused below it before anything is computed or charged; the
    # refusal names the routes within max_memory (here only the features) and, when none
    # fits, every route's size. The default aggregate (19 x 19 bandwidths) needs ~63 GiB.
    X = np.zeros((20_000, 1))
    needed = hsic_mod.hsic_memory_bytes(20_000, 2000)
    assert needed <= 2 * 2**30
    refused(_fixed(DPHSICTest, max_memory=2**30), X, X[:, 0], ValueError,
            r"n = 20000 pairs and n_permutations = 2000 needs about [\d.]+ GiB of memory "
            r"\(\d+ bytes\).* Routes within max_memory: method='features' \(about 0\.3\d+ "
            r"GiB\)\. Raise max_memory")
    # the default (19 x 19 bandwidth aggregate) is no longer refused (issue 20): it runs
    # by diagonal blocks within 2 GiB; below its least plan it is refused, naming it
    plan = DPHSICTest()._prepare(X, X[:, 0], reset=True).plan
    assert plan.blocked is not None and plan.memory_bytes <= 2 * 2**30
    refused(DPHSICTest(max_memory=2**26), X, X[:, 0], ValueError,
            r"n = 20000 pairs needs about 0\.1\d+ GiB.*No other route fits within max_memory "
            r"either.*Raise max_memory")
    refused(_fixed(DPHSICTest, cyclic=True, max_memory=2**20), X, X[:, 0], ValueError,
            r"n = 20000 pairs needs about 9\.\d+ GiB.*No other route fits within max_memory "
            r"either \(.*blocked exact path.*: about 1\.89 GiB; .*cyclic=True.*: about "
            r"9\.\d+ GiB; method='features': about 0\.3\d+ GiB\)")
    refused(DPMMDTest(max_memory=2**20), X, np.arange(20_000) % 2, ValueError,
            r"N = 20000 rows.* No other route fits within max_memory either \(method="
            r"'features' \(random Fourier features, linear in N\): about 0\.2\d+ GiB\)")


def test_memory_estimates_grow_with_the_work():
    hsic = hsic_mod.hsic_memory_bytes
    assert hsic(1000, 2000) < hsic(1000, 4000) < hsic(4000, 4000)
    assert 4 * 4000**2 < hsic(4000, 2000) < 2 * 2**30  # one float32 n x n matrix
    small = mmd_mod.mmd_memory_bytes(1000, 2, 2000)
    assert 10**6 < small < 2 * 2**30
    assert mmd_mod.mmd_memory_bytes(10**6, 2, 2000) > small
    assert mmd_mod.mmd_memory_bytes(2000, 2, 10**6) > mmd_mod.mmd_memory_bytes(2000, 2, 2000)
    assert mmd_mod.mmd_memory_bytes(2000, 5, 2000) > mmd_mod.mmd_memory_bytes(2000, 2, 2000)


# -- two-sample inputs that cannot be misread ----------------------------------------------

@pytest.mark.filterwarnings("ignore:A column-vector y was passed")
def test_second_sample_as_y_is_refused_with_the_stacking_recipe():
    X1, X2 = two_samples(shift=3.0, m=100, n=100)
    with pytest.raises(ValueError, match=r"second sample.*np\.vstack\(\[X1, X2\]\)"):
        DPMMDTest().test(X1, X2)
    with pytest.raises(ValueError, match=r"continuous.*np\.repeat\(\[0, 1\]"):
        DPMMDTest().test(X1, X2[:, 0])
    refused(DPMMDTest(), X1, X2[:, :1], ValueError, "test_samples")


def test_groups_of_one_row_are_refused():
    X, _ = stacked()
    y = np.r_[np.zeros(69), 1]
    refused(DPMMDTest(), X, y, ValueError, r"at least 2 rows in every group.*np\.vstack")
    refused(DPMMDTest(), X, np.arange(70), ValueError, "at least 2 rows")
    # integral float labels are labels
    res = DPMMDTest(random_state=0, n_permutations=9, cyclic=False).test(
        X, np.repeat([0.0, 1.0], [30, 40]))
    assert res.n_samples == 70


def test_test_samples_equals_fit_on_the_stack_and_charges_once():
    X1, X2 = two_samples(seed=3, shift=0.5)
    budget = PrivacyBudget(5.0)
    est = _fixed(DPMMDTest, random_state=7, n_permutations=199, budget=budget)
    res = est.test_samples(X1, X2)
    assert len(budget.ledger) == 1 and budget.spent[0] == 1.0
    ref = _fixed(DPMMDTest, random_state=7, n_permutations=199).fit(
        np.vstack([X1, X2]), np.repeat([0, 1], [len(X1), len(X2)])).result_
    assert res == ref and est.result_ is res
    assert list(est.classes_) == [0, 1]
    X3 = np.random.default_rng(1).normal(size=(25, 2))
    res3 = _fixed(DPMMDTest, random_state=0, n_permutations=9).test_samples(X1, X2, X3)
    assert res3.method == "dpMMD k-sample" and res3.n_samples == 95
    with pytest.raises(ValueError, match="2-D samples.*reshape"):
        est.test_samples(X1[:, 0], X2[:, 0])
    with pytest.raises(ValueError, match="same number of features"):
        est.test_samples(X1, X2[:, :1])
    assert len(budget.ledger) == 1


# -- non-finite values -----------------------------------------------------------------------

def test_rbf_is_stable_for_huge_values():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    np.testing.assert_array_equal(stable_rbf(X, gamma=0.5), rbf_kernel(X, gamma=0.5))
    B = np.vstack([X[:10], X[10:] * 1e154])
    with np.errstate(all="ignore"):
        naive = rbf_kernel(B, gamma=0.5)
    assert not np.all(np.isfinite(naive))  # the expansion overflows to inf - inf
    K = stable_rbf(B, gamma=0.5)
    D = ((B[:, None, :] / 1e154 - B[None] / 1e154) ** 2).sum(-1)
    with np.errstate(over="ignore"):
        ref = np.exp(-0.5 * np.minimum(D * 1e308, 1e300))
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=0)
    y = np.repeat([0, 1], 10)
    res = DPMMDTest(random_state=0, n_permutations=19, cyclic=False).test(B, y)
    assert 0 < res.pvalue <= 1


def test_release_refuses_nan_statistics():
    with pytest.raises(ValueError, match="not finite.*no p-value is released"):
        make_permutation_result(np.array([np.nan, 0.1, 0.2]), 0.1, 0.0, epsilon=1.0,
                                delta=0.0, alpha=0.05, n_samples=10,
                                rng=np.random.default_rng(0), method="dpMMD",
                                statistic="sqrt", noise_epsilon=1.0)


# -- callable kernels: any-kernel sensitivity -------------------------------------------------

def wiggle(A, B):
    """A bounded kernel that is NOT positive definite (values in [-1.5, 1.5])."""
    return 1.5 * np.sin(3.0 * A[:, :1] @ B[:, :1].T + A[:, 1:2] - B[:, 1:2].T)


def nasty(A, B):
    """Unbounded, NaN and inf values: clipped to [-kappa, kappa], NaN to 0."""
    out = 10.0 * (A[:, :1] @ B[:, :1].T)
    out[out > 5] = np.inf
    out[(out < -5) & (out > -7)] = np.nan
    return out


def test_callable_values_are_clipped_and_symmetric():
    k = resolve_kernel(nasty, None, 1.0, np.zeros((1, 2)))
    assert not k.positive_definite
    A = np.random.default_rng(0).normal(size=(40, 2))
    K = k(A)
    assert np.all(np.abs(K) <= 1.0) and np.array_equal(K, K.T)
    assert np.all(np.isfinite(K))


def _max_move(stat, data, cands):
    base = stat(*data)
    worst = 0.0
    for i in range(len(data[0])):
        for c in cands:
            new = [d.copy() for d in data]
            for d, ci in zip(new, c, strict=True):
                d[i] = ci
            worst = max(worst, np.max(np.abs(stat(*new) - base)))
    return worst


@pytest.mark.parametrize("sizes", [(3, 5), (3, 4, 5)])
@pytest.mark.parametrize("func", [wiggle, nasty])
def test_mmd_any_kernel_sensitivity_brute_force(sizes, func):
    rng = np.random.default_rng(1)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    Z = rng.normal(size=(len(codes), 2))
    k = resolve_kernel(func, None, 1.5, Z)
    delta = mmd_mod.mmd_squared_sensitivity(sizes, 1.5)

    def stat(Z):
        return mmd_mod.mmd_permutation_statistics(Z, codes, 15, np.random.default_rng(3), k,
                                                  squared=True)

    cands = [(rng.normal(scale=3, size=2),) for _ in range(5)] + [(np.full(2, 40.0),)]
    worst = _max_move(stat, [Z], cands)
    assert worst <= delta * (1 + 1e-9)
    assert worst > delta / 8  # the candidates are not trivial


def test_mmd_any_kernel_sensitivity_attained_sign_kernel():
    # k(x, x') = kappa * sign-like values: moving one row of the smaller group from
    # +kappa to -kappa correlations attains 8 kappa / m - 2 kappa / m^2 up to O(1/n).
    def sign_kernel(A, B):
        return np.where(A[:, :1] * B[:, :1].T > 0, 1.0, -1.0) * np.where(
            (A[:, :1] > 0) == (B[:, :1] > 0).T, 1.0, 1.0)

    m, n = 3, 200
    Z = np.r_[np.ones(m), -np.ones(n)][:, None]
    codes = np.repeat([0, 1], [m, n])
    k = resolve_kernel(sign_kernel, None, 1.0, Z)
    q = mmd_mod.mmd_permutation_statistics(Z, codes, 1, np.random.default_rng(0), k,
                                           squared=True)[0]
    Z2 = Z.copy()
    Z2[0] = -1.0
    q2 = mmd_mod.mmd_permutation_statistics(Z2, codes, 1, np.random.default_rng(0), k,
                                            squared=True)[0]
    delta = mmd_mod.mmd_squared_sensitivity([m, n], 1.0)
    assert abs(q - q2) <= delta * (1 + 1e-9)
    assert abs(q - q2) >= 0.9 * delta  # nearly attained: a halved bound fails


# wiggle in the slow suite: nasty (default) drives the same squared statistic and bound
# with clipped values at +-kappa; wiggle's non-definite values are in the dpMMD cases above
@pytest.mark.parametrize("func", [pytest.param(wiggle, marks=pytest.mark.slow), nasty])
def test_hsic_any_kernel_sensitivity_brute_force(func):
    rng = np.random.default_rng(2)
    n = 8
    X, Y = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    kx = resolve_kernel(func, None, 1.5, X)
    ky = resolve_kernel("rbf", {"gamma": 2.0}, None, Y, name="y_kernel")
    delta = hsic_mod.hsic_squared_sensitivity(n, 1.5, 1.0)

    def stat(X, Y):
        return hsic_mod.hsic_permutation_statistics(X, Y, 20, np.random.default_rng(4), kx, ky,
                                                    squared=True)

    cands = [(rng.normal(scale=3, size=2), rng.normal(scale=3, size=2)) for _ in range(6)]
    worst = _max_move(stat, [X, Y], cands)
    assert worst <= delta * (1 + 1e-9)
    assert worst > delta / 40  # not trivial (the bound is a worst case over kernels)


def test_callable_kernels_use_the_squared_statistic_through_the_estimators():
    X, y = stacked(m=20, n=25)
    res = DPMMDTest(kernel=wiggle, kernel_bound=1.5, random_state=0,
                    n_permutations=49).test(X, y)
    assert res.statistic == "squared"
    assert res.sensitivity == pytest.approx(8 * 1.5 / 20 - 2 * 1.5 / 400)
    res = DPHSICTest(y_kernel=wiggle, y_kernel_bound=1.5, random_state=0,
                     n_permutations=49).test(X, np.c_[y, y])
    assert res.statistic == "squared"
    assert res.sensitivity == pytest.approx(16 * 1.0 * 1.5 / 45)


# -- certified float error ---------------------------------------------------------------------

def _exact_quadratic_forms(K, A):
    Kf = [[Fraction(float(v)) for v in row] for row in K]
    out = []
    for a in A:
        m, n = int(np.sum(a == 0)), int(np.sum(a == 1))
        v = [Fraction(1, m) if g == 0 else Fraction(-1, n) for g in a]
        out.append(sum(v[i] * v[j] * Kf[i][j] for i in range(len(v)) for j in range(len(v))))
    return out


def test_mmd_abs_error_covers_the_float64_computation():
    rng = np.random.default_rng(5)
    Z = rng.normal(size=(14, 2))
    codes = np.repeat([0, 1], [6, 8])
    k = resolve_kernel("rbf", None, None, Z)
    s = mmd_mod.mmd_permutation_statistics(Z, codes, 6, np.random.default_rng(1), k)
    q = mmd_mod.mmd_permutation_statistics(Z, codes, 6, np.random.default_rng(1), k,
                                           squared=True)
    A = mmd_mod.draw_assignments(codes, 6, np.random.default_rng(1))
    exact = _exact_quadratic_forms(k(Z), A)
    eta = mmd_mod.mmd_abs_error([6, 8], 1.0, math.sqrt(2))
    eta_q = mmd_mod.mmd_abs_error([6, 8], 1.0, math.sqrt(2), squared=True)
    for sb, qb, e in zip(s, q, exact, strict=True):
        assert abs(Fraction(float(qb)) - e) <= Fraction(eta_q)
        assert abs(sb - math.sqrt(max(float(e), 0.0))) <= eta
    assert eta_q < 1e-12 and eta < 2e-6


def test_hsic_abs_error_covers_the_float64_computation():
    rng = np.random.default_rng(6)
    n = 10
    X, Y = rng.normal(size=(n, 2)), rng.normal(size=(n, 1))
    kx = resolve_kernel("rbf", None, None, X)
    ky = resolve_kernel("rbf", None, None, Y, name="y_kernel")
    perms = hsic_mod.draw_permutations(n, 5, np.random.default_rng(2))
    s = hsic_mod.hsic_permutation_statistics(X, Y, 5, np.random.default_rng(2), kx, ky)
    c = hsic_mod.hsic_cyclic_statistics(X, Y, np.random.default_rng(2), kx, ky)
    K = [[Fraction(float(v)) for v in row] for row in kx(X)]
    L = ky(Y)
    H = [[Fraction(int(i == j)) - Fraction(1, n) for j in range(n)] for i in range(n)]

    def mat(A, B):
        return [[sum(A[i][t] * B[t][j] for t in range(n)) for j in range(n)] for i in range(n)]

    Kc = mat(mat(H, K), H)

    def exact(p):
        return sum(Kc[i][j] * Fraction(float(L[p[i], p[j]])) for i in range(n)
                   for j in range(n))

    eta = hsic_mod.hsic_abs_error(n, 1.0, 1.0, math.sqrt(2), math.sqrt(2))
    for sb, p in zip(s, perms, strict=True):
        assert abs(sb - math.sqrt(max(float(exact(p)), 0.0)) / n) <= eta
    order = np.random.default_rng(2).permutation(n)
    Ko = [[K[a][b] for b in order] for a in order]
    Kc = mat(mat(H, Ko), H)
    L = L[np.ix_(order, order)]
    eta_c = hsic_mod.hsic_abs_error(n, 1.0, 1.0, math.sqrt(2), math.sqrt(2), cyclic=True)
    for shift, cb in enumerate(c):
        p = (np.arange(n) + shift) % n
        assert abs(cb - math.sqrt(max(float(exact(p)), 0.0)) / n) <= eta_c


def test_no_warnings_from_a_default_fit():
    X, y = stacked()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FixedRandomStateWarning)  # the seed is the test's
        DPMMDTest(random_state=0, n_permutations=9, cyclic=False).fit(X, y)
        DPMMDTest(random_state=0, cyclic=True).fit(X, y)  # the default from N = 1000


# -- long work shows itself -----------------------------------------------------------------

def test_verbose_single_bandwidth_paths_report_work_and_faster_paths(capsys):
    rng = np.random.default_rng(0)
    X, groups = rng.normal(size=(40, 2)), np.arange(40) % 2
    _fixed(DPMMDTest, verbose=1, n_permutations=20, random_state=0).fit(X, groups)
    _fixed(DPHSICTest, verbose=1, n_permutations=20, random_state=0).fit(X, X[:, 0])
    err = capsys.readouterr().err
    assert "dpMMD: 21 statistics on N = 40 rows" in err
    assert "dpHSIC: 21 statistics on n = 40 pairs; cyclic=True (FFT) is much faster" in err
    assert err.count("statistics 1/1 done") == 2
    _fixed(DPMMDTest, n_permutations=20, random_state=0).fit(X, groups)
    assert capsys.readouterr().err == ""  # silent by default
