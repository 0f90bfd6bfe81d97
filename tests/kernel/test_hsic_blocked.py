"""The blocked exact dpHSIC path: canonical float64 values, certified float32 enclosures,
releases independent of the block size and of the backend, memory at n = 20 000."""

import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

import skdptest.kernel._hsic as hsic_mod
import skdptest.kernel._hsic_exact as exact_mod
import skdptest.kernel._hsic_traces as traces_mod
import skdptest.kernel._kernelbase as base_mod
from skdptest import DPHSICTest, PrivacyBudget
from skdptest.kernel._kernels import resolve_kernel
from tests.kernel._reference import _fixed

HAS_NUMBA = traces_mod._load_numba() is not None
BACKENDS = ["numpy"] + (["numba"] if HAS_NUMBA else [])


def data(n, seed=0, dep=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = dep * X[:, 0] + rng.normal(size=n)
    return X, y


def kernels(X, Y, y_kernel="rbf", y_params=None, y_bound=None):
    kx = resolve_kernel("rbf", {"gamma": 0.5}, None, X)
    ky = resolve_kernel(y_kernel, {"gamma": 1.0} if y_params is None else y_params, y_bound,
                        Y, name="y_kernel")
    return kx, ky


# -- the exact summation ---------------------------------------------------------------------

def test_exact_sum_equals_fsum_in_any_order_and_chunking(monkeypatch):
    rng = np.random.default_rng(0)
    v = rng.normal(size=5000) * 10.0 ** rng.uniform(-300, 300, size=5000)
    v = np.r_[v, -v[:2000], 5e-324, -1e-310, 0.0, -0.0, 1e300, 1e300, -1e300]
    ref = math.fsum(v)
    s = exact_mod._ExactSum()
    s.add(v)
    assert s.value() == ref
    monkeypatch.setattr(exact_mod, "_SUM_CHUNK", 37)  # many bincount chunks
    for seed in range(3):
        w = np.random.default_rng(seed).permutation(v)
        s = exact_mod._ExactSum()
        for part in np.array_split(w, 7):
            s.add(part)
        assert s.value() == ref
    # cancellation down to the last bit: a naive sum gets it wrong, the exact sum does not
    s = exact_mod._ExactSum()
    s.add([1.0, 1e-30, -1.0])
    assert s.value() == 1e-30 and sum([1.0, 1e-30, -1.0]) == 0.0
    s = exact_mod._ExactSum()
    s.add([1.0, np.nan])
    assert math.isnan(s.value())


# -- canonical values and certified enclosures ------------------------------------------------

def _canonical_matrices(X, Y, kx, ky):
    """K~ and L_s of the blocked path, assembled whole (small n only): lower triangles of
    the canonical row tiles, mirrored."""
    n = len(X)
    m, g = exact_mod._column_means(kx, X)
    Kt = exact_mod._centred_rows(kx, X, m, g, 0, n)
    L = exact_mod._gram_rows(ky, Y, 0, n)
    low = np.tril(np.ones((n, n), bool))
    Kt = np.where(low, Kt, Kt.T)
    L = np.where(low, L, L.T)
    return Kt, L


def _products(Kt, L, p):
    """The rounded products fl(w K~_ij L_s[p_i, p_j]), j <= i (w = 2 below the diagonal)."""
    G = L[np.ix_(p, p)]
    W = np.tril(np.full(Kt.shape, 2.0), -1) + np.eye(len(Kt))
    return ((Kt * W) * G)[W > 0]


@pytest.mark.parametrize("case", ["rbf", "tiny", "huge"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_enclosures_contain_the_canonical_and_the_exact_traces(case, backend):
    # canonical = math.fsum of the rounded products; the float32 enclosure contains it and
    # the exact real trace (Fraction arithmetic on the evaluated Gram values)
    n, B = 50, 12
    X, y = data(n, seed=3)
    Y = y[:, None]
    if case == "rbf":
        kx, ky = kernels(X, Y)
    elif case == "tiny":  # values down to float32 subnormals and below (t term)
        kx, ky = kernels(X, Y, lambda a, b: 1e-30 * np.exp(-40.0 * np.abs(a - b.T)), {},
                         1.0)
    else:  # |L| up to 2**110: the float32 copy is scaled by a power of two
        kx, ky = kernels(X, Y, lambda a, b: 2.0**110 * np.cos(a - b.T), {}, 2.0**111)
    squared = case != "rbf"
    perms = traces_mod.draw_permutations(n, B, np.random.default_rng(1))
    m, g = exact_mod._column_means(kx, X)
    t0, approx, eta = exact_mod._float32_pass(X, Y, perms, kx, ky, m, g, backend, 64)
    Kt, L = _canonical_matrices(X, Y, kx, ky)
    canon = np.array([math.fsum(_products(Kt, L, p)) for p in perms])
    assert t0 == canon[0]
    np.testing.assert_array_equal(
        exact_mod._exact_traces(X, Y, perms, range(B + 1), kx, ky, m, g, 64), canon)
    approx = np.r_[t0, approx]
    assert np.all(np.abs(approx - canon) <= eta)
    for b in (1, 5, B):  # exact reals: the enclosure is certified, not just empirical
        exact = sum(Fraction(k) * Fraction(v) for k, v in
                    zip(Kt.ravel(), L[np.ix_(perms[b], perms[b])].ravel(), strict=True))
        assert abs(Fraction(approx[b]) - exact) <= Fraction(eta)
    # the bound is at float32 resolution, not vacuous, and the float32 rounding is there
    s = np.abs(Kt).sum() * np.abs(L).max()
    assert eta <= 1e-6 * s
    assert np.max(np.abs(approx - canon)) > 0
    stats, bounds, refine = exact_mod._hsic_statistics(
        X, Y, B, np.random.default_rng(1), kx, ky, backend=backend, squared=squared)
    exact_stats = traces_mod._stat(canon, n, squared)
    assert stats[0] == exact_stats[0]
    assert np.all(bounds[0] <= exact_stats) and np.all(exact_stats <= bounds[1])
    np.testing.assert_array_equal(refine(np.array([B, 2, 1])), exact_stats[[B, 2, 1]])


def test_canonical_values_do_not_depend_on_the_block_size():
    X, y = data(200, seed=5)
    Y = y[:, None]
    kx, ky = kernels(X, Y)
    ref = hsic_mod.hsic_permutation_statistics(X, Y, 6, np.random.default_rng(2), kx, ky)
    for rows in (1, 64, 100, 130, 1000):  # rounded up to whole 64-row tiles
        s = hsic_mod.hsic_permutation_statistics(X, Y, 6, np.random.default_rng(2), kx, ky,
                                                 block_rows=rows)
        np.testing.assert_array_equal(s, ref)


def test_refinement_sweeps_do_not_change_the_values(monkeypatch):
    # many sweeps over L rows (one tile each) give the same exactly rounded sums
    X, y = data(150, seed=6)
    Y = y[:, None]
    kx, ky = kernels(X, Y)
    ref = hsic_mod.hsic_permutation_statistics(X, Y, 4, np.random.default_rng(3), kx, ky)
    monkeypatch.setattr(exact_mod, "_REFINE_MIN_BYTES", 1)
    s = hsic_mod.hsic_permutation_statistics(X, Y, 4, np.random.default_rng(3), kx, ky)
    np.testing.assert_array_equal(s, ref)


def test_white_kernel_diagonal_is_kept():
    # the canonical tiles take their diagonal from kernel(block) (Y=None), so a
    # WhiteKernel's noise is in the statistic as in the full Gram matrix
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    X, y = data(70, seed=7)
    gp = RBF(1.0) + WhiteKernel(0.5)
    kx = resolve_kernel(gp, None, None, X)
    rows = exact_mod._gram_rows(kx, X, 0, 70)
    np.testing.assert_allclose(np.diag(rows), 1.5, rtol=1e-15)
    np.testing.assert_allclose(rows, gp(X), rtol=1e-12, atol=1e-15)


# -- releases independent of the block size and backend --------------------------------------

def _release(monkeypatch, X, y, seed, B, block_rows, backend, safety=None, **params):
    monkeypatch.setattr(exact_mod, "_BLOCK_ROWS", block_rows)
    monkeypatch.setenv("SKDPTEST_HSIC_BACKEND", backend)
    monkeypatch.delenv("SKDPTEST_HSIC_PRECISION", raising=False)
    if safety is not None:
        monkeypatch.setattr(exact_mod, "_F32_BOUND_SAFETY", safety)
    refined = []
    make_result = base_mod.make_permutation_result

    def spy(*args, bounds=None, refine=None, **kwargs):
        def counted(idx):
            refined.extend(idx.tolist())
            return refine(idx)

        return make_result(*args, bounds=bounds, refine=counted, **kwargs)

    monkeypatch.setattr(base_mod, "make_permutation_result", spy)
    res = _fixed(DPHSICTest, cyclic=False, n_permutations=B, random_state=seed,
                 **params).test(X, y)
    monkeypatch.setattr(base_mod, "make_permutation_result", make_result)
    return res, refined


@pytest.mark.parametrize("safety", [None, 3e5])
def test_release_is_the_same_for_every_block_size_and_backend(monkeypatch, safety):
    # forced refinements (safety 3e5) included: each release equals the all-float64 one.
    # n = 120, B = 100 (was 190, 150): 28 refinements, and a mutant that skips them (the
    # undecided comparisons taken at either end of their enclosures) changes the release
    X, y = data(120, seed=8, dep=0.2)
    monkeypatch.setenv("SKDPTEST_HSIC_PRECISION", "float64")
    monkeypatch.setenv("SKDPTEST_HSIC_BACKEND", "numpy")
    ref = _fixed(DPHSICTest, cyclic=False, n_permutations=100, random_state=4).test(X, y)
    for backend in BACKENDS:
        # 64: two blocks of rows (the last one partial), 128: one; 32 is rounded up to
        # whole 64-row tiles, the same release as 64 (it was a third run of that case)
        for rows in (64, 128):
            res, refined = _release(monkeypatch, X, y, 4, 100, rows, backend, safety)
            assert res == ref
            if safety is not None:
                assert len(refined) >= 5


def test_refine_runs_without_the_float32_copy(monkeypatch):
    # the refinement closure holds no n x n array: the float32 L is freed before it runs
    X, y = data(120, seed=9)
    Y = y[:, None]
    kx, ky = kernels(X, Y)
    _, _, refine = exact_mod._hsic_statistics(X, Y, 5, np.random.default_rng(0), kx, ky,
                                             backend="numpy")
    held = [c.cell_contents for c in refine.__closure__]
    assert not any(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in held)
    assert all(not isinstance(v, np.ndarray) or v.size <= 6 * 120 for v in held)


# -- memory --------------------------------------------------------------------------------

def test_memory_estimate_admits_n_20000_under_2_gib():
    need = hsic_mod.hsic_memory_bytes(20_000, 2000)
    # the float32 L (1.6 GB) dominates; no float64 n x n matrix is planned
    assert 4 * 20_000**2 < need <= 2 * 2**30 < 8 * 20_000**2
    X = np.zeros((20_000, 1))
    est = _fixed(DPHSICTest, cyclic=False, max_memory=2 * 2**30)
    prep = est._prepare(X, X[:, 0], reset=True)  # the plan, nothing computed
    # the plan adds a float64 copy of the validated data (16 n (d_x + d_y) bytes)
    assert prep.plan.memory_bytes == need + 16 * 20_000 * 2 and not prep.plan.cyclic
    budget = PrivacyBudget(1.0)
    with pytest.raises(ValueError, match=r"n = 20000 pairs and n_permutations = 2000 needs "
                                         r"about 1\.\d+ GiB"):
        _fixed(DPHSICTest, cyclic=False, max_memory=2**30, budget=budget).fit(X, X[:, 0])
    assert budget.spent[0] == 0


def test_peak_memory_holds_no_float64_gram_matrix(monkeypatch):
    # measured (tracemalloc sees numpy's buffers): the float32 L (4 n^2) plus the block
    # temporaries (O(n): about 5600 n bytes, 5.5 n^2 at n = 1000), below the plan. A
    # float64 n x n matrix more (8 n^2) would pass 12 n^2 + those temporaries, and so would
    # a second float32 copy (4 n^2 more: 13.5 n^2). n = 1000 (was 2500, 0.2 s instead of
    # 1.1 s; at 2500 the temporaries are 2.3 n^2 and the bound was 7 n^2)
    monkeypatch.setenv("SKDPTEST_HSIC_BACKEND", "numpy")
    n, B = 1000, 4
    X, y = data(n, seed=10)
    Y = y[:, None]
    kx, ky = kernels(X, Y)
    tracemalloc.start()
    try:
        stats, _, _ = exact_mod._hsic_statistics(X, Y, B, np.random.default_rng(0), kx, ky)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(stats))
    assert 4 * n * n < peak < 12 * n * n and peak < hsic_mod.hsic_memory_bytes(n, B)
