"""The small-input shortcuts of the kernel family give the previous paths' values bit for bit.

Small products stay on the calling thread, small prefetches run in turn, small coefficient
chunks are filled from their masks once per aggregate fit, ``limit_blas`` sets the BLAS
counts without threadpoolctl's full ``info()``: each shortcut is compared here with the
path it replaces (forced by lowering its threshold), on ties and extreme rows too.
"""

import inspect
import math
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import skdptest.kernel._route_aggregate as aggregate_mod
import skdptest.kernel._route_exact as exact_mod
import skdptest.kernel._route_mmd_cyclic as cyclic_mod
import skdptest.kernel._testbase as testbase_mod
from skdptest import DPHSICTest, DPMMDTest, PrivacyLeakWarning, _threads
from skdptest.kernel._bandwidth import bandwidth_grid
from skdptest.kernel._kernels import resolve_kernel
from tests.kernel._reference import hsic_traces_one_permutation_at_a_time


def _data(n, d=2, seed=0):
    """Rows with ties (repeated rows) and extremes (huge norms: recomputed Gram rows,
    exponents below the floor)."""
    X = np.random.default_rng(seed).normal(size=(max(n, 6), d))
    X[1] = X[0]
    X[2] = X[0]
    X[3] *= 1e7
    X[4] *= 1e150
    X[5] = 0.0
    return X[:n]


def _forced(monkeypatch):
    """The previous paths: every threshold of the shortcuts at 0."""
    monkeypatch.setattr(exact_mod, "_TWO_THREADS_MIN_FLOPS", 0)
    monkeypatch.setattr(exact_mod, "_TWO_THREADS_MIN", 0)
    monkeypatch.setattr(aggregate_mod, "_TWO_THREADS_MIN", 0)
    monkeypatch.setattr(aggregate_mod, "_FILL_ONCE_BYTES", 0)
    monkeypatch.setattr(cyclic_mod, "_TWO_THREADS_MIN", 0)


@pytest.mark.parametrize("n, c", [(1, 3), (7, 1), (37, 401), (40, 2001), (61, 97)])
@pytest.mark.parametrize("unit", [True, False])
def test_small_forms_on_one_thread_and_from_filled_rows_equal_the_threaded_mask_forms(
        n, c, unit, monkeypatch):
    K = np.ascontiguousarray(resolve_kernel("rbf", None, None, _data(n))(_data(n)))
    if not unit:
        K[np.diag_indices(n)] = np.linspace(0.5, 1.5, n)
    masks = np.random.default_rng(1).random((c, n)) < 0.4
    rows = exact_mod._MaskRows(masks, 1 / 40, -1 / 60)
    col_sq = 1 / 40 + 1 / 60 if unit else None
    with threadpool_limits(2, "blas"):
        small = exact_mod.triangular_quadratic_forms(K, rows, col_sq)
        filled = exact_mod.triangular_quadratic_forms(K, rows.dense().T, col_sq)
        monkeypatch.setattr(exact_mod, "_TWO_THREADS_MIN_FLOPS", 0)  # threaded as before
        threaded = exact_mod.triangular_quadratic_forms(K, rows, col_sq)
        filled_threaded = exact_mod.triangular_quadratic_forms(K, rows.dense().T, col_sq)
    np.testing.assert_array_equal(small, threaded)
    np.testing.assert_array_equal(filled, threaded)
    np.testing.assert_array_equal(filled_threaded, threaded)
    assert np.all(np.isfinite(small))


def test_empty_and_single_row_forms():
    K = np.ones((3, 3))
    empty = exact_mod._MaskRows(np.zeros((0, 3), dtype=bool), 0.5, -1.0)
    assert exact_mod.triangular_quadratic_forms(K, empty, 1.5).shape == (0,)
    assert exact_mod.triangular_quadratic_forms(K, np.empty((3, 0)), 1.5).shape == (0,)
    one = exact_mod._MaskRows(np.array([[True, False, True]]), 0.5, -1.0)
    np.testing.assert_array_equal(exact_mod.triangular_quadratic_forms(K, one, 1.5),
                                  exact_mod.triangular_quadratic_forms(K, one.dense().T, 1.5))


def _aggregate(X, codes, B, seed):
    kernel = resolve_kernel("rbf", None, None, X)
    rng = np.random.default_rng(seed)
    out = aggregate_mod.mmd_aggregate_statistics(
        X, codes, B, rng, kernel, bandwidth_grid("rbf", X.shape[1]), kernel_name="rbf")
    return out, rng.bit_generator.state


@pytest.mark.parametrize("sizes, B", [([20, 27], 199), ([3, 2], 9), ([9, 10, 12], 30),
                                      ([30, 30], 499)])
def test_aggregate_small_paths_equal_the_previous_ones(sizes, B, monkeypatch):
    X = _data(sum(sizes), seed=2)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    new, state = _aggregate(X, codes, B, 3)
    _forced(monkeypatch)
    old, old_state = _aggregate(X, codes, B, 3)
    np.testing.assert_array_equal(new, old)
    assert state == old_state


@pytest.mark.parametrize("sizes", [[20, 27], [9, 10, 12]])
def test_exact_and_cyclic_small_paths_equal_the_previous_ones(sizes, monkeypatch):
    X = _data(sum(sizes), seed=4)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    kernel = resolve_kernel("rbf", None, None, X)
    gammas = bandwidth_grid("rbf", 2)

    def both():
        rng = np.random.default_rng(5)
        exact = exact_mod.mmd_permutation_statistics(X, codes, 99, rng, kernel)
        cyclic = cyclic_mod.mmd_cyclic_statistics(X, codes, rng, kernel, gammas, "rbf")
        return exact, cyclic, rng.bit_generator.state

    new = both()
    _forced(monkeypatch)
    old = both()
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])
    assert new[2] == old[2]


@pytest.mark.parametrize("make", [
    lambda: DPMMDTest(n_permutations=199, random_state=7),
    lambda: DPMMDTest(method="exact", kernel_params={"gamma": 0.5}, cyclic=False,
                      n_permutations=99, random_state=7),
    lambda: DPMMDTest(cyclic=True, random_state=7),
])
def test_default_fits_release_what_the_previous_paths_release(make, monkeypatch):
    X = _data(40, seed=8)
    y = np.repeat([0, 1], 20)
    new = make().fit(X, y).result_
    _forced(monkeypatch)
    old = make().fit(X, y).result_
    assert new == old


def _blas_counts():
    return [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info()
            if lib["user_api"] == "blas"]


def test_limit_blas_sets_every_blas_library_to_one_and_restores_each_count():
    libs = [lib["filepath"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    # a different count for each library, restored library by library
    with threadpool_limits({path: k + 2 for k, path in enumerate(libs)}):
        before = _blas_counts()
        with _threads.limit_blas():
            assert all(count == 1 for _, count in _blas_counts())
            with _threads.limit_blas():  # nested: still one, the outer restores
                assert all(count == 1 for _, count in _blas_counts())
            assert all(count == 1 for _, count in _blas_counts())
        assert _blas_counts() == before
        assert _threads.blas_threads() == min(count for _, count in before)
    with threadpool_limits(1, "blas"), _threads.limit_blas():  # already one: stays one
        assert all(count == 1 for _, count in _blas_counts())


@pytest.mark.parametrize("cls", [DPMMDTest, DPHSICTest])
def test_ignored_parameter_defaults_are_the_signatures(cls):
    expected = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}
    assert dict(testbase_mod._init_defaults(cls)) == expected
    # and a non-default ignored value still warns on every fit, not only the first
    X, y = _data(20), np.repeat([0, 1], 10)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if cls is DPMMDTest:
                cls(n_components=8, n_permutations=19).fit(X, y)
            else:
                cls(n_components=8, n_permutations=19).fit(X, X[:, :1])
        assert any(issubclass(w.category, PrivacyLeakWarning)
                   and "n_components=8 is ignored" in str(w.message) for w in seen)


def test_exact_sum_flush_is_fsum_on_empty_infinite_and_cancelling_input():
    # _flush reads the bins as Python floats: still the exactly rounded sum (math.fsum)
    from skdptest.kernel._hsic_exact import _ExactSum

    def exact(*parts):
        s = _ExactSum()
        for part in parts:
            s.add(np.asarray(part, dtype=np.float64))
        return s.value()

    assert exact([]) == 0.0
    v = np.array([1e308, 5e307, -1e308, 5e-324, -2.5e-308, 3.0, -3.0, 2.0**-1074])
    assert exact(v, -v[:3], v[3:]) == math.fsum(np.r_[v, -v[:3], v[3:]])
    assert math.isnan(exact([1.0, np.inf])) and math.isnan(exact([-np.inf, 2.0]))


@pytest.mark.parametrize("n, group, sweep", [(7, 2**17, None), (30, 2**17, None),
                                             (100, 1, 1), (100, 64 * 100 * 3, None)])
def test_hsic_traces_summed_for_many_permutations_at_once_equal_one_at_a_time(
        n, group, sweep, monkeypatch):
    from skdptest.kernel import _hsic_exact as E
    from skdptest.kernel._hsic_traces import draw_permutations

    X, Y = _data(n, seed=9), _data(n, d=1, seed=10)
    kx = resolve_kernel("rbf", None, None, X)
    ky = resolve_kernel("laplacian", None, None, Y, name="y_kernel")
    perms = draw_permutations(n, 11, np.random.default_rng(11))
    m, g = E._column_means(kx, X)
    monkeypatch.setattr(E, "_GROUP_ENTRIES", group)  # groups of 1, 3 (or more) or all
    if sweep is not None:  # L rows in sweeps of 64 rows
        monkeypatch.setattr(E, "_REFINE_MIN_BYTES", sweep)
    for idx in (range(12), np.array([11, 0, 5, 5]), np.array([], dtype=np.int64)):
        new = E._exact_traces(X, Y, perms, idx, kx, ky, m, g, 64)
        old = hsic_traces_one_permutation_at_a_time(X, Y, perms, idx, kx, ky, m, g, 64)
        assert new.dtype == old.dtype and new.shape == old.shape
        np.testing.assert_array_equal(new, old)


def test_exact_sums_of_many_groups_equal_one_exact_sum_each():
    from skdptest.kernel._hsic_exact import _ExactSum, _ExactSums

    rng = np.random.default_rng(12)
    v = rng.normal(size=3000) * 10.0 ** rng.uniform(-300, 300, size=3000)
    v[[5, 70]] = np.inf
    v[900] = np.nan
    v[[1, 2, 3]] = [5e-324, -0.0, 1e-310]
    which = rng.integers(0, 6, size=3000)
    which[which == 4] = 3  # groups 0 (before first), 5 and 7 get no value
    sums = _ExactSums(8)
    for part in np.array_split(np.arange(3000), 5):
        sums.add(1, which[part], v[part])
    expected = []
    for k in range(8):
        one = _ExactSum()
        one.add(v[which == k - 1])
        expected.append(one.value())
    np.testing.assert_array_equal(sums.values(), expected)
    assert expected[0] == expected[5] == expected[7] == 0.0
    assert np.isnan(expected).sum() >= 1 and np.isfinite(expected).sum() >= 4
