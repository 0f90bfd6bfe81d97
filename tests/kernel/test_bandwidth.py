"""The bandwidth aggregate: privacy (brute-force sensitivity), validity, n_jobs, verbose."""

import math

import numpy as np
import pytest
from scipy import stats

import skdptest.kernel._route_exact as exact_mod
from skdptest import DPHSICTest, DPMMDTest
from skdptest._params import InvalidParameterError
from skdptest.kernel._bandwidth import (
    AGGREGATE_FLOOR,
    bandwidth_grid,
    uses_aggregate,
)
from skdptest.kernel._hsic import hsic_aggregate_statistics, hsic_sensitivity
from skdptest.kernel._kernels import resolve_kernel
from skdptest.kernel._mmd import (
    mmd_aggregate_statistics,
    mmd_permutation_statistics,
    mmd_sensitivity,
)


def _mmd_stats(X, codes, B, seed, n_jobs=None):
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", X.shape[1])
    return mmd_aggregate_statistics(X, codes, B, np.random.default_rng(seed), kernel, gammas,
                                    n_jobs=n_jobs, kernel_name="rbf")


def _hsic_stats(X, Y, B, seed, cyclic, n_jobs=None):
    kx = resolve_kernel("rbf", None, None, X)
    ky = resolve_kernel("rbf", None, None, Y, name="y_kernel")
    return hsic_aggregate_statistics(X, Y, B, np.random.default_rng(seed), kx, ky,
                                     list(bandwidth_grid("rbf", X.shape[1])),
                                     list(bandwidth_grid("rbf", Y.shape[1])), cyclic=cyclic,
                                     n_jobs=n_jobs)


def test_default_is_the_aggregate_and_explicit_gamma_is_todays_test():
    assert uses_aggregate("rbf", None) and uses_aggregate("laplacian", {})
    assert uses_aggregate("rbf", {"gamma": "aggregate"})
    assert not uses_aggregate("rbf", {"gamma": None})
    assert not uses_aggregate("rbf", {"gamma": 0.5})
    assert not uses_aggregate("rbf", {"gamma": "median"})
    assert not uses_aggregate("chi2", None)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), np.repeat([0, 1], 20)
    agg = DPMMDTest(n_permutations=50, random_state=0).fit(X, y)
    assert agg.result_.method == "dpMMD aggregate"
    np.testing.assert_array_equal(agg.gamma_grid_, bandwidth_grid("rbf", 2))
    fixed = DPMMDTest(kernel_params={"gamma": 0.5}, n_permutations=50, random_state=0).fit(X, y)
    assert fixed.result_.method == "dpMMD" and fixed.gamma_grid_ is None
    assert fixed.result_.sensitivity == mmd_sensitivity([20, 20], math.sqrt(2.0))
    # the single-bandwidth release is unchanged: the same statistics as the function
    kernel = resolve_kernel("rbf", {"gamma": 0.5}, None, X)
    stats_ = mmd_permutation_statistics(X, y, 50, np.random.default_rng(0), kernel)
    assert stats_.shape == (51,)
    hs = DPHSICTest(kernel_params={"gamma": 0.5}, y_kernel_params={"gamma": 1.0},
                    n_permutations=50, random_state=0).fit(X, X[:, 0])
    assert hs.result_.method == "dpHSIC" and hs.result_.n_permutations == 50


def test_grid_is_public_powers_of_two():
    g = bandwidth_grid("rbf", 3)
    assert g.size == 19 and np.all(np.diff(g) > 0)
    assert np.all(np.log2(g * 3) == np.round(np.log2(g * 3)))
    assert bandwidth_grid("laplacian", 1).size == 19


def test_aggregate_sensitivity_formula():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(400, 2)), np.repeat([0, 1], 200)
    res = DPMMDTest(n_permutations=20, cyclic=False, random_state=0).fit(X, y).result_
    base = math.sqrt(2.0) / 200
    # centring share: Delta_c / (2 sqrt f) with rho = 4, G - 1 = 1, w = kappa = 1
    extra = (4 * 3.0 / 400**2) / (2 * math.sqrt(AGGREGATE_FLOOR * 4 / 400))
    assert res.sensitivity == pytest.approx(base + extra, rel=1e-12)
    assert extra < 0.2 * base
    # a halved-noise mutant would give scale ~ (Delta + 2 eta) / xi: the release keeps 2x
    assert res.noise_scale >= 2 * (res.sensitivity + 2 * res.abs_error) / 1.0


def _mmd_neighbours():
    """A small pooled sample and neighbours replacing one row by extreme values."""
    rng = np.random.default_rng(3)
    codes = np.repeat([0, 1], [5, 7])
    # a spread sample, and point masses (where the MMD bound D / n_min is attained)
    for X in (rng.normal(size=(12, 1)) * 50.0, np.zeros((12, 1))):
        for i in (0, 6):
            for value in (-1e4, -30.0, 0.0, 7.0, 80.0, 1e4):
                Xn = X.copy()
                Xn[i] = value
                yield X, Xn, codes


def test_mmd_aggregate_brute_force_sensitivity():
    worst = 0.0
    est = DPMMDTest(n_permutations=40)
    last = None
    for X, Xn, codes in _mmd_neighbours():
        if X is not last:  # the plan and statistics of a sample, once for its 12 neighbours
            plan = est._prepare(X, codes, reset=True).plan
            a = _mmd_stats(X, codes, 40, 0)
            last = X
        b = _mmd_stats(Xn, codes, 40, 0)  # the same relabellings
        worst = max(worst, float(np.max(np.abs(a - b))))
    bound = plan.sensitivity + 2 * plan.abs_error
    assert worst <= bound
    # the bound is needed: a mechanism calibrated to half of it would be broken here
    assert worst > bound / 2


def test_hsic_aggregate_brute_force_sensitivity():
    rng = np.random.default_rng(4)
    n = 10
    X, Y = rng.normal(size=(n, 1)) * 30.0, rng.normal(size=(n, 1))
    est = DPHSICTest(n_permutations=30, cyclic=False)
    worst = 0.0
    for cyclic in (False, True):
        # cyclic=True uses the n - 1 shifts: n_permutations at its default (no warning)
        plan = est.set_params(cyclic=cyclic, n_permutations=2000 if cyclic else 30)._prepare(
            X, Y, reset=True).plan
        a = _hsic_stats(X, Y, 30, 0, cyclic)
        for value in (-1e3, 0.0, 5.0, 1e3):
            Xn, Yn = X.copy(), Y.copy()
            Xn[2], Yn[2] = value, -value / 30
            b = _hsic_stats(Xn, Yn, 30, 0, cyclic)
            worst = max(worst, float(np.max(np.abs(a - b))))
        assert worst <= plan.sensitivity + 2 * plan.abs_error
    assert plan.sensitivity >= hsic_sensitivity(n, math.sqrt(2), math.sqrt(2))


def test_centring_is_relabelling_invariant_so_validity_holds():
    # T is a fixed function of the data applied to every relabelling: the observed
    # statistic of relabelled data is the permuted statistic of the data.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2)) * 100.0
    codes = np.repeat([0, 1], 15)
    perm = rng.permutation(30)
    a = _mmd_stats(X, codes, 5, 0)
    b = _mmd_stats(X[perm], codes, 5, 0)
    # the observed statistic changes with the labels, but the centring does not:
    # compare against the explicit definition on both orders
    for data, stat in ((X, a), (X[perm], b)):
        kernel = resolve_kernel("rbf", None, None, data)
        grid = bandwidth_grid("rbf", 2)
        vals = []
        for g in grid:
            k = kernel.with_gamma(g)
            K = k(data)
            s = mmd_permutation_statistics(data, codes, 0, np.random.default_rng(0), k)[0]
            c = 4 * (np.trace(K) - K.sum() / 30) / (30 * 29)
            vals.append(s - math.sqrt(max(c, AGGREGATE_FLOOR * 4 / 30)))
        assert stat[0] == pytest.approx(max(vals), abs=1e-7)  # sqrt near 0


@pytest.mark.parametrize("sizes", [[14, 19], [8, 9, 10]])
def test_mmd_aggregate_shared_relabellings_match_per_bandwidth_copies(monkeypatch, sizes):
    # Distances held: the coefficients are drawn once and shared by every bandwidth;
    # with the held-kernel cap at 0 each bandwidth draws them from its own copy of rng
    # (symmetric blocks on the fly). Same relabellings, same values up to rounding,
    # same end state of rng.
    rng = np.random.default_rng(9)
    X = rng.normal(size=(sum(sizes), 2)) * 3.0
    codes = np.repeat(np.arange(len(sizes)), sizes)
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", 2)
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    shared = mmd_aggregate_statistics(X, codes, 25, g1, kernel, gammas, kernel_name="rbf")
    monkeypatch.setattr(exact_mod, "MAX_KERNEL_BYTES", 0)
    copies = mmd_aggregate_statistics(X, codes, 25, g2, kernel, gammas, kernel_name="rbf")
    np.testing.assert_allclose(shared, copies, rtol=0, atol=1e-7)  # sqrt near 0
    assert g1.bit_generator.state == g2.bit_generator.state


@pytest.mark.parametrize("cyclic", [False, True])
def test_n_jobs_gives_bit_identical_statistics(cyclic):
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(40, 1))
    codes = np.repeat([0, 1], 20)
    np.testing.assert_array_equal(_hsic_stats(X, Y, 20, 1, cyclic, 1),
                                  _hsic_stats(X, Y, 20, 1, cyclic, 2))
    if cyclic:  # the dpMMD checks below do not read `cyclic`: once, in the other case
        return
    np.testing.assert_array_equal(_mmd_stats(X, codes, 30, 1, 1), _mmd_stats(X, codes, 30, 1, 2))
    r1 = DPMMDTest(n_permutations=30, cyclic=False, random_state=2, n_jobs=1).test(X, codes)
    r2 = DPMMDTest(n_permutations=30, cyclic=False, random_state=2, n_jobs=2).test(X, codes)
    assert r1 == r2


def test_verbose_progress_on_stderr(capsys):
    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(30, 1)), np.repeat([0, 1], 15)
    DPMMDTest(n_permutations=10, cyclic=False, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    DPMMDTest(n_permutations=10, cyclic=False, random_state=0, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "bandwidths 19/19 done" in err and "ETA" in err and "n_jobs=-1" in err
    DPHSICTest(cyclic=False, n_permutations=5, random_state=0, verbose=1).fit(X, X[:, 0])
    assert "cyclic=True (FFT) is much faster" in capsys.readouterr().err


@pytest.mark.parametrize("cls", [DPMMDTest, DPHSICTest])
def test_refusals_name_the_parameter(cls):
    X, y = np.zeros((6, 1)), np.repeat([0, 1], 3)
    with pytest.raises(InvalidParameterError, match="n_jobs"):
        cls(n_jobs=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="verbose"):
        cls(verbose=2).fit(X, y)
    with pytest.raises(InvalidParameterError, match="aggregate"):
        cls(kernel="chi2", kernel_params={"gamma": "aggregate"}).fit(X, y)


def test_hsic_cyclic_auto():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, 1))
    res = DPHSICTest(random_state=0).fit(X, X[:, 0]).result_
    assert res.method == "dpHSIC cyclic aggregate" and res.n_permutations == 29
    res = DPHSICTest(kernel_params={"gamma": 1.0}, y_kernel_params={"gamma": 1.0},
                     n_permutations=20, random_state=0).fit(X, X[:, 0]).result_
    assert res.method == "dpHSIC" and res.n_permutations == 20


def test_raw_scale_power_where_the_fixed_bandwidth_fails():
    # a location shift on a column in the thousands: gamma = 1 / d sees nothing
    rng = np.random.default_rng(9)
    X = np.vstack([rng.normal(size=(60, 1)), rng.normal(1.5, size=(60, 1))]) * 1000.0
    y = np.repeat([0, 1], 60)
    agg = DPMMDTest(n_permutations=200, random_state=0).test(X, y)
    fixed = DPMMDTest(kernel_params={"gamma": None}, n_permutations=200,
                      random_state=0).test(X, y)
    assert agg.pvalue <= 0.01 < fixed.pvalue


ALPHA, REPS = 0.05, 300
LIMIT = int(stats.binom.ppf(0.999, REPS, ALPHA))


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1e-2, 1.0, 1e4])
def test_aggregate_type_one_error_raw_scales(scale):
    rng = np.random.default_rng(int(math.log10(scale)) + 10)
    y = np.repeat([0, 1], [25, 35])
    mmd = DPMMDTest(epsilon=1.0, n_permutations=99)
    hsic = DPHSICTest(epsilon=1.0, cyclic=False, n_permutations=49)
    rej_m = rej_h = 0
    for rep in range(REPS):
        Z = rng.standard_t(df=3, size=(60, 2)) * scale
        rej_m += mmd.set_params(random_state=rep).decision(Z, y)
        if rep < REPS // 3:  # the permutation path costs 361 pairs: fewer repetitions
            rej_h += hsic.set_params(random_state=rep).decision(Z[:30], Z[30:, :1] ** 2)
    assert rej_m <= LIMIT
    assert rej_h <= int(stats.binom.ppf(0.999, REPS // 3, ALPHA))
