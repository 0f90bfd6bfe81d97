"""Kernel resolution and bounds."""

import math

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct, Matern
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances, rbf_kernel

from skdptest.kernel._distances import euclidean, l1_distances, squared_euclidean
from skdptest.kernel._kernels import (
    MEDIAN_GRID,
    check_kernel_spec,
    median_selection_probabilities,
    private_median_gamma,
    resolve_kernel,
)

X = np.random.default_rng(0).uniform(size=(30, 3))


@pytest.mark.parametrize("name", ["rbf", "laplacian", "chi2"])
def test_nonnegative_named_kernels(name):
    k = resolve_kernel(name, None, None, X)
    assert k.kappa == 1.0 and k.nonnegative
    assert k.diameter == pytest.approx(math.sqrt(2))
    K = k(X)
    assert K.shape == (30, 30) and K.min() >= 0 and K.max() <= 1 + 1e-12


def test_default_gamma_is_one_over_n_features():
    k = resolve_kernel("rbf", None, None, X)
    np.testing.assert_allclose(k(X), rbf_kernel(X, gamma=1 / 3), rtol=1e-14)
    k = resolve_kernel("rbf", {"gamma": 2.0}, None, X)
    np.testing.assert_allclose(k(X), rbf_kernel(X, gamma=2.0), rtol=1e-14)


def test_cosine_is_signed():
    k = resolve_kernel("cosine", None, None, X)
    assert not k.nonnegative and k.diameter == pytest.approx(2.0)


@pytest.mark.parametrize("name", ["linear", "poly", "polynomial"])
def test_unbounded_kernels_are_refused_without_bound(name):
    with pytest.raises(ValueError, match="give kernel_bound"):
        check_kernel_spec(name, None, None)


def test_user_bound_is_used_and_checked():
    k = resolve_kernel("linear", None, 3.0, X)  # ||x||^2 <= 3 on [0, 1]^3
    assert k.kappa == 3.0 and k.diameter == pytest.approx(2 * math.sqrt(3))
    with pytest.raises(ValueError, match="kernel_bound=0.1 is violated"):
        resolve_kernel("linear", None, 0.1, X)


@pytest.mark.parametrize("name", ["sigmoid", "additive_chi2"])
def test_not_positive_definite_refused(name):
    with pytest.raises(ValueError, match="not a positive definite kernel"):
        check_kernel_spec(name, None, None)


def test_bad_specs():
    with pytest.raises(ValueError, match="is not a kernel name"):
        check_kernel_spec("gauss", None, None)
    with pytest.raises(TypeError, match="kernel must be a kernel name"):
        check_kernel_spec(3, None, None)
    with pytest.raises(TypeError, match="kernel_params must be None or a dict"):
        check_kernel_spec("rbf", [1], None)
    with pytest.raises(ValueError, match=r"kernel_params has keys \['degree'\]"):
        check_kernel_spec("rbf", {"degree": 2}, None)
    with pytest.raises(ValueError, match=r"kernel_params\['gamma'\] must be finite and > 0"):
        check_kernel_spec("rbf", {"gamma": -1.0}, None)
    with pytest.raises(TypeError, match=r"kernel_params\['gamma'\] must be a real"):
        check_kernel_spec("rbf", {"gamma": "mean"}, None)
    with pytest.raises(ValueError, match="'median' is available for"):
        check_kernel_spec("poly", {"gamma": "median"}, 1.0)
    with pytest.raises(ValueError, match="kernel_bound must be finite and > 0"):
        check_kernel_spec("rbf", None, 0.0)
    with pytest.raises(TypeError, match="kernel_bound must be None or a real"):
        check_kernel_spec("rbf", None, "1")
    with pytest.raises(ValueError, match="y_kernel_bound must be finite"):
        check_kernel_spec("rbf", None, -2, name="y_kernel")


def test_chi2_needs_nonnegative_features():
    with pytest.raises(ValueError, match="chi2' needs nonnegative features"):
        resolve_kernel("chi2", None, None, X - 0.5)


def test_gp_kernels():
    k = resolve_kernel(ConstantKernel(2.0) * RBF(0.5), None, None, X)
    assert k.kappa == pytest.approx(2.0) and k.nonnegative
    np.testing.assert_allclose(k(X), 2.0 * rbf_kernel(X, gamma=2.0), rtol=1e-12)
    k = resolve_kernel(Matern(), {"length_scale": 3.0}, None, X)
    assert k.kappa == pytest.approx(1.0)
    with pytest.raises(ValueError, match="is not stationary"):
        check_kernel_spec(DotProduct(), None, None)
    k = resolve_kernel(DotProduct(sigma_0=0.0), None, 3.0, X)
    assert not k.nonnegative
    with pytest.raises(ValueError, match="does not take"):
        check_kernel_spec(RBF(), {"gamma": 1.0}, None)


def test_callable_kernel():
    def gauss(A, B, scale=1.0):
        return np.exp(-((A[:, None, :] - B[None]) ** 2).sum(-1) / scale)

    with pytest.raises(ValueError, match="callable kernel needs an explicit kernel_bound"):
        check_kernel_spec(gauss, None, None)
    with pytest.raises(ValueError, match="callable kernel does not take"):
        check_kernel_spec(gauss, {"gamma": 1}, 1.0)
    k = resolve_kernel(gauss, {"scale": 3.0}, 1.0, X)
    np.testing.assert_allclose(k(X), rbf_kernel(X, gamma=1 / 3), rtol=1e-12)
    assert k.diameter == pytest.approx(2.0)  # only positive definiteness is assumed

    def bad(A, B):
        return np.ones((len(A), len(B) + 1))

    with pytest.raises(ValueError, match="expected"):
        resolve_kernel(bad, None, 1.0, X)


def test_private_median_finds_the_median_at_large_epsilon():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 2)) * 3.0
    D = euclidean_distances(Z)[np.triu_indices(300, k=1)]
    gamma = private_median_gamma(Z, "rbf", 1e5, np.random.default_rng(1))
    step = np.log(MEDIAN_GRID[1] / MEDIAN_GRID[0])
    assert abs(np.log(1 / math.sqrt(gamma)) - np.log(np.median(D))) <= step
    D1 = manhattan_distances(Z)[np.triu_indices(300, k=1)]
    gamma = private_median_gamma(Z, "laplacian", 1e5, np.random.default_rng(1))
    assert abs(np.log(1 / gamma) - np.log(np.median(D1))) <= step


def test_private_median_is_epsilon_dp_on_neighbours():
    # Probability ratios of the exponential mechanism over replace-one
    # neighbours never exceed e^epsilon (including a far-away outlier).
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(40, 2))
    eps = 0.8
    _, p = median_selection_probabilities(Z, "rbf", eps)
    worst = 0.0
    for cand in (np.full(2, 1e3), np.zeros(2), rng.normal(size=2) * 5, Z[3]):
        for i in (0, 7, 39):
            Z2 = Z.copy()
            Z2[i] = cand
            _, p2 = median_selection_probabilities(Z2, "rbf", eps)
            worst = max(worst, np.max(np.abs(np.log(p) - np.log(p2))))
    assert worst <= eps + 1e-9
    assert worst > eps / 4  # the neighbours used are not trivial


def test_private_median_audit_catches_halved_noise():
    # Two clusters (six rows at 0, three at distance r): moving one row of the big
    # cluster far away brings the ratio to 0.81 epsilon; the same neighbours with the
    # exponential mechanism's noise halved (logits doubled) exceed epsilon.
    r, far, eps = 1319.74469733, 4959.234091978235, 1.0
    Z = np.zeros((9, 2))
    Z[5:8, 0] = r
    Z2 = Z.copy()
    Z2[0, 0] = far

    def worst(scale):
        _, p = median_selection_probabilities(Z, "rbf", scale * eps)
        _, p2 = median_selection_probabilities(Z2, "rbf", scale * eps)
        return float(np.max(np.abs(np.log(p) - np.log(p2))))

    assert 0.75 * eps < worst(1.0) <= eps + 1e-9
    assert worst(2.0) > eps


@pytest.mark.parametrize("name", ["rbf", "laplacian", "chi2"])
def test_named_exp_kernels_flush_underflow_to_zero_and_are_sklearn_above_it(name):
    # Exponents at or below EXP_FLOOR give exactly 0 (exp never computes a subnormal
    # or underflowing value, whose cost depends on the data); above, scikit-learn's
    # value bit for bit.
    from sklearn.metrics.pairwise import chi2_kernel, laplacian_kernel, rbf_kernel

    from skdptest.kernel import _kernels

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(60, 3)) * np.repeat([1.0, 40.0, 400.0], 20)[:, None]
    gamma = 2.0
    ours = _kernels._pairwise(name, {"gamma": gamma}, X)
    theirs = {"rbf": rbf_kernel, "laplacian": laplacian_kernel, "chi2": chi2_kernel}[name](
        X, gamma=gamma)
    floor = np.exp(_kernels.EXP_FLOOR)
    above = theirs > 1.001 * floor
    assert above.any() and (~above).any() and (theirs[~above] > 0).any()
    np.testing.assert_array_equal(ours[above], theirs[above])
    assert np.all(ours[~above] == 0.0)
    # no subnormal (nor any value below the floor) is ever produced
    assert not np.any((ours > 0) & (ours < floor))
    func = {"rbf": rbf_kernel, "laplacian": laplacian_kernel, "chi2": chi2_kernel}[name]
    cross, theirs_cross = _kernels._pairwise(name, {"gamma": gamma}, X[:7], X), func(
        X[:7], X, gamma=gamma)
    kept = theirs_cross > 1.001 * floor
    np.testing.assert_array_equal(cross[kept], theirs_cross[kept])
    assert np.all(cross[~kept] == 0.0)


def test_exp_of_exponents_edge_values():
    from skdptest.kernel._kernels import EXP_FLOOR, exp_of_exponents

    T = np.array([0.0, -1.0, EXP_FLOOR, np.nextafter(EXP_FLOOR, 0), -700.0, -np.inf, np.nan])
    out = exp_of_exponents(T.copy())
    assert out[0] == 1.0 and out[1] == np.exp(-1.0)
    assert out[2] == 0.0 and out[3] == np.exp(np.nextafter(EXP_FLOOR, 0)) > 0
    assert out[4] == 0.0 and out[5] == 0.0 and np.isnan(out[6])


def test_unchecked_distances_are_scikit_learns_bit_for_bit():
    # the tile kernels skip scikit-learn's per-call checks on finite float64 arrays;
    # the values must stay its values (the releases are bit-identical), and other
    # inputs must still go through it (its conversions, its refusals)
    rng = np.random.default_rng(4)
    A = rng.normal(size=(37, 5)) * np.array([1e-3, 1.0, 30.0, 1e5, 1e150])
    B = np.asfortranarray(rng.normal(size=(11, 5)) * 7.0)
    pairs = [(A, None), (A, A), (A, B), (A[:, :3], B[:, :3]), (A[::3], A[1::2]),
             (B[:, :1], B[2:, :1]),
             (A[:, :4].astype(np.float32), B[:, :4].astype(np.float32)), (A[:4].tolist(), None),
             (np.arange(12).reshape(4, 3), None)]
    for P, Q in pairs:
        for mine, theirs in [(squared_euclidean, lambda P, Q: euclidean_distances(
                P, Q, squared=True)), (euclidean, euclidean_distances),
                (l1_distances, manhattan_distances)]:
            got, ref = mine(P, Q), theirs(P, Q)
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(got, ref)
    for bad in (np.array([[np.nan, 1.0]]), np.empty((0, 2)), np.ones((2, 2, 1))):
        for f in (squared_euclidean, l1_distances):
            with pytest.raises(ValueError, match="NaN|0 sample|dim"):
                f(bad, None)
    with pytest.raises(ValueError, match="Incompatible dimension"):
        squared_euclidean(A, B[:, :2])
