"""Dask input for the random-feature kernel tests (skdptest/kernel/_distributed.py).

The dask release must be the numpy release, bit for bit (every field of the result),
whatever the chunking and the scheduler (a 2-worker LocalCluster, threads, synchronous);
workers return sums only (dpMMD) or feature rows only (dpHSIC); every refusal happens
before the budget is charged.
"""

import dataclasses

import numpy as np
import pytest

from skdptest import DPHSICTest, DPMMDTest, PrivacyBudget
from skdptest.kernel import _distributed
from skdptest.kernel._features import (
    FEATURE_RADIUS,
    _masked_sums,
    draw_frequencies,
    feature_map,
    feature_mmd_statistics,
)
from skdptest.kernel._mmd import mmd_sensitivity

dask = pytest.importorskip("dask", reason="dask is not installed (the test extra)")
da = pytest.importorskip("dask.array")

MMD = dict(method="features", kernel_params={"gamma": 0.3}, n_components=16,
           n_permutations=150)
HSIC = dict(method="features", kernel_params={"gamma": 0.4}, y_kernel_params={"gamma": 0.7},
            n_components=8, n_permutations=60)


@pytest.fixture(scope="class")
def client():
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _data(seed, n, d=3, groups=(0, 1), shift=0.4):
    rng = np.random.default_rng(seed)
    y = rng.choice(np.asarray(groups), size=n)
    X = rng.normal(size=(n, d)) + shift * (y == groups[0])[:, None]
    return X, y


def _assert_same_result(got, ref):
    """Every field equal (arrays elementwise), and the same result type."""
    assert type(got) is type(ref)
    for field in dataclasses.fields(ref):
        a, b = getattr(got, field.name), getattr(ref, field.name)
        if isinstance(b, np.ndarray):
            assert np.array_equal(a, b), field.name
        else:
            assert a == b or (a != a and b != b), field.name  # NaN == NaN here


# -- dpMMD ------------------------------------------------------------------------------

class TestOnACluster:
    """The releases on a 2-worker LocalCluster, which lives for this class only (its
    event loop and heartbeats use CPU while it runs: not through the whole module)."""

    def test_mmd_two_groups_on_a_cluster_is_the_numpy_release(self, client):
        X, y = _data(0, 1500)
        ref = DPMMDTest(**MMD, random_state=1).fit(X, y)
        # uneven row chunks, X split in columns too (rechunked to one column chunk)
        Xd = da.from_array(X, chunks=((400, 1, 599, 500), (2, 1)))
        got = DPMMDTest(**MMD, random_state=1).fit(Xd, da.from_array(y, chunks=700))
        _assert_same_result(got.result_, ref.result_)
        assert got.result_.method == "dpMMD features"
        assert np.array_equal(got.classes_, ref.classes_) and got.n_features_in_ == 3
        # the sensitivity is computed from the true group sizes (a wrong count would
        # change the noise: the equality above would fail too)
        sizes = np.bincount(y)
        assert got.result_.sensitivity == mmd_sensitivity(sizes, 2.0 * FEATURE_RADIUS)

    def test_mmd_ksample_on_a_cluster_is_the_numpy_release(self, client):
        X, y = _data(2, 1200, groups=("u", "v", "w", "x"))
        ref = DPMMDTest(**MMD, random_state=5).fit(X, y).result_
        got = DPMMDTest(**MMD, random_state=5).fit(da.from_array(X, chunks=(350, 3)), y).result_
        _assert_same_result(got, ref)
        assert got.method == "dpMMD k-sample features"

    # width 2 in the slow suite: width 1 (default) runs the same cluster code path; a 2-D
    # dask y equal to the numpy release is test_squared_feature_map_on_dask_is_the_numpy_
    # release's (synchronous), a 2-column one test_release_hygiene's extreme rows on dask
    @pytest.mark.parametrize("width", [1, pytest.param(2, marks=pytest.mark.slow)])
    def test_hsic_on_a_cluster_is_the_numpy_release(self, client, width):
        rng = np.random.default_rng(10 + width)
        X = rng.normal(size=(700, 2))
        Y = X[:, :1] * 0.5 + rng.normal(size=(700, width))
        y = Y[:, 0] if width == 1 else Y
        ref = DPHSICTest(**HSIC, random_state=6).fit(X, y).result_
        got = DPHSICTest(**HSIC, random_state=6).fit(
            da.from_array(X, chunks=(300, 1)), da.from_array(y, chunks=250)).result_
        _assert_same_result(got, ref)
        # y in memory with dask X, and one chunk
        got = DPHSICTest(**HSIC, random_state=6).fit(da.from_array(X), y).result_
        _assert_same_result(got, ref)


# one row per chunk (1, 3) in the slow suite: ((600, 1, 399), (3,)) keeps a one-row chunk
# (beside uneven ones) in the default suite, (137, 2) a column split
@pytest.mark.parametrize("chunks", [(1000, 3), pytest.param((1, 3), marks=pytest.mark.slow),
                                    (137, 2), ((600, 1, 399), (3,))])
def test_mmd_release_does_not_depend_on_the_chunking(synchronous, chunks):
    X, y = _data(3, 1000)
    ref = DPMMDTest(**MMD, random_state=2).fit(X, y).result_
    if chunks == (1, 3):  # one row per chunk: a few hundred tasks, keep it small
        X, y = X[:60], y[:60]
        ref = DPMMDTest(**MMD, random_state=2).fit(X, y).result_
    got = DPMMDTest(**MMD, random_state=2).fit(da.from_array(X, chunks=chunks), y).result_
    _assert_same_result(got, ref)


def test_squared_feature_map_on_dask_is_the_numpy_release(synchronous):
    X, y = _data(5, 700)
    kw = {**MMD, "n_components": 4, "feature_map": "squared"}
    ref = DPMMDTest(**kw, random_state=4).fit(X, y).result_
    assert ref.method == "dpMMD squared features"
    got = DPMMDTest(**kw, random_state=4).fit(da.from_array(X, chunks=(233, 3)), y).result_
    _assert_same_result(got, ref)
    hkw = {**HSIC, "n_components": 3, "feature_map": "squared"}
    href = DPHSICTest(**hkw, random_state=4).fit(X[:300], X[:300, :1]).result_
    hgot = DPHSICTest(**hkw, random_state=4).fit(da.from_array(X[:300], chunks=(97, 3)),
                                                 da.from_array(X[:300, :1], chunks=(97, 1)))
    _assert_same_result(hgot.result_, href)


def test_mmd_threaded_scheduler_without_a_cluster():
    X, y = _data(4, 900, groups=(0, 1, 2))
    ref = DPMMDTest(**MMD, random_state=3).fit(X, y).result_
    with dask.config.set(scheduler="threads"):
        got = DPMMDTest(**MMD, random_state=3).fit(da.from_array(X, chunks=250), y).result_
    _assert_same_result(got, ref)


def test_mmd_dataframe_inputs(synchronous):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data(5, 800, groups=("a", "b"))
    frame = pd.DataFrame(X, columns=["p", "q", "r"])
    ref = DPMMDTest(**MMD, random_state=4).fit(frame, y)
    for labels in (pd.Series(y), dd.from_pandas(pd.Series(y), npartitions=3),
                   dd.from_pandas(pd.Series(pd.Categorical(y)), npartitions=2)):
        got = DPMMDTest(**MMD, random_state=4).fit(dd.from_pandas(frame, npartitions=4),
                                                   labels)
        _assert_same_result(got.result_, ref.result_)
        assert list(got.feature_names_in_) == ["p", "q", "r"]
        assert list(got.classes_) == ["a", "b"]
    # integer columns are converted to float64 exactly as numpy input is
    Xi = np.rint(X * 10).astype(np.int64)
    ref = DPMMDTest(**MMD, random_state=4).fit(Xi, y).result_
    got = DPMMDTest(**MMD, random_state=4).fit(da.from_array(Xi, chunks=300), y).result_
    _assert_same_result(got, ref)


def test_mmd_test_samples_with_dask_samples(synchronous):
    X1, _ = _data(6, 300)
    X2, _ = _data(7, 250, shift=0.0)
    ref = DPMMDTest(**MMD, random_state=8).test_samples(X1, X2)
    got = DPMMDTest(**MMD, random_state=8).test_samples(da.from_array(X1, chunks=100),
                                                        da.from_array(X2, chunks=120))
    _assert_same_result(got, ref)
    budget = PrivacyBudget(epsilon=5.0)
    with pytest.raises(TypeError, match="method='features'"):
        DPMMDTest(budget=budget).test_samples(da.from_array(X1), da.from_array(X2))
    assert len(budget) == 0


def test_mmd_score_with_dask_input(synchronous):
    X, y = _data(8, 600)
    est = DPMMDTest(**MMD, random_state=0).fit(X, y)
    ref = est.score(X, y)
    assert est.score(da.from_array(X, chunks=200), y) == ref
    with pytest.raises(ValueError, match="expecting 3 features"):
        est.score(da.from_array(X[:, :2], chunks=200), y)


# -- dpHSIC -----------------------------------------------------------------------------

def test_hsic_gathers_feature_rows_only(synchronous, monkeypatch):
    seen = []
    original = _distributed.dask_feature_rows

    def spy(X, omega, kind="fourier"):
        out = original(X, omega, kind)
        seen.append((out.shape, out.dtype))
        return out

    monkeypatch.setattr("skdptest.kernel._route_dask.dask_feature_rows", spy)
    rng = np.random.default_rng(12)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    DPHSICTest(**HSIC, random_state=1).fit(da.from_array(X, chunks=70), y)
    # the float32 feature rows (2D columns) of each side, never the d raw columns
    assert seen == [((300, 16), np.float32), ((300, 16), np.float32)]


# -- what the workers return --------------------------------------------------------------

def test_chunk_functions_return_sums_only():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(1000, 3))
    F = feature_map(X, draw_frequencies("rbf", 0.5, 3, 8, rng))
    masks = rng.random((5, 1000)) < 0.4
    packed = np.packbits(masks, axis=1)
    assert packed.nbytes == 5 * 125  # 1 bit per row on the wire
    out = _distributed.chunk_masked_sums(F, packed, 1000)
    assert out.shape == (5, 16) and out.dtype == np.float64  # (masks, 2D): no rows
    assert np.array_equal(out, masks.astype(np.float64) @ F.astype(np.float64))
    y = rng.choice(np.array(["a", "b", "c"]), size=1000)
    g = _distributed.chunk_group_sums(F, y, np.array(["a", "b", "c"]))
    assert g.shape == (3, 16)
    assert np.array_equal(g, np.stack([F[y == k].astype(np.float64).sum(0) for k in "abc"]))


def test_workers_return_only_sums_and_features_are_computed_once(synchronous, monkeypatch):
    calls, returned = [], []
    feature = _distributed.make_features

    def counting_map(X, omega, kind="fourier"):
        if len(X):  # dask may probe the function on an empty block
            calls.append(len(X))
        return feature(X, omega, kind)

    def spy(name):
        original = getattr(_distributed, name)

        def wrapped(*args):
            out = original(*args)
            returned.append((name, out.shape))
            return out
        return wrapped

    monkeypatch.setattr(_distributed, "make_features", counting_map)
    for name in ("chunk_masked_sums", "chunk_group_sums"):
        monkeypatch.setattr(_distributed, name, spy(name))
    X, y = _data(14, 2000)
    omega = draw_frequencies("rbf", 0.3, 3, 8, np.random.default_rng(0))
    Xd, yd = _distributed.validate_dask_input(DPMMDTest(), da.from_array(X, chunks=500), y,
                                              True, labels=True)
    labels = _distributed.dask_labels(Xd, yd)
    mmb = 2000 * 13  # 13 relabellings per chunk of masks: 8 chunks for B + 1 = 100
    got = _distributed.dask_feature_mmd_statistics(Xd, labels, omega, 99,
                                                   np.random.default_rng(1),
                                                   max_mask_bytes=mmb)
    # the numpy release's path: one float32 product of the 12-bit rows (the workers
    # split them in two): the same exact sums
    ref = feature_mmd_statistics(feature_map(X, omega), np.searchsorted([0, 1], y), 99,
                                 np.random.default_rng(1), max_mask_bytes=mmb,
                                 kind="fourier")
    assert np.array_equal(got, ref)
    assert sorted(calls) == [500] * 4  # persisted: once per chunk, not once per mask chunk
    masked = [shape for name, shape in returned if name == "chunk_masked_sums"]
    assert len(masked) == 4 * 8
    assert all(shape[0] <= 13 and shape[1] == 16 for shape in masked)  # never 500 rows
    assert [s for n, s in returned if n == "chunk_group_sums"] == [(2, 16)] * 4


def test_dask_statistics_use_the_masked_sums_of_the_numpy_path():
    # the same masks give the same exact sums, whether F is whole or in packed chunks
    rng = np.random.default_rng(15)
    F = feature_map(rng.normal(size=(77, 2)), draw_frequencies("laplacian", 1.0, 2, 4, rng))
    masks = rng.random((3, 77)) < 0.5
    parts = [_distributed.chunk_masked_sums(F[a:b], np.packbits(masks[:, a:b], axis=1), b - a)
             for a, b in ((0, 30), (30, 31), (31, 77))]
    assert np.array_equal(_distributed._exact_sum(parts), _masked_sums(F, masks, 4096))


# -- refusals, all before the charge ------------------------------------------------------

def _refused(est_cls, kwargs, X, y, exc, match):
    budget = PrivacyBudget(epsilon=50.0)
    est = est_cls(**kwargs, budget=budget, random_state=0)
    with pytest.raises(exc, match=match):
        est.fit(X, y)
    assert len(budget) == 0 and budget.spent == (0.0, 0.0)
    assert not hasattr(est, "result_") and not hasattr(est, "n_features_in_")


def test_refusals_before_the_charge(synchronous):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data(16, 400)
    Xd = da.from_array(X, chunks=150)
    exact = dict(MMD, method="exact")
    _refused(DPMMDTest, exact, Xd, y, TypeError, r"method='features'")
    _refused(DPHSICTest, dict(HSIC, method="exact"), Xd, X[:, 0], TypeError,
             r"method='features'")
    _refused(DPMMDTest, dict(MMD, kernel_params={"gamma": "median"}), Xd, y, ValueError,
             r"kernel_params=\{'gamma': 'median'\}.*dask")
    _refused(DPHSICTest, dict(HSIC, y_kernel_params={"gamma": "median"}), Xd, X[:, 0],
             ValueError, r"y_kernel_params=.*dask")
    frame = pd.DataFrame({"a": X[:, 0], "b": ["x", "y"] * 200})
    _refused(DPMMDTest, MMD, dd.from_pandas(frame, npartitions=2), y, ValueError,
             "X must be numeric")
    _refused(DPMMDTest, MMD, da.from_array(X.astype(str), chunks=150), y, ValueError,
             "X must be numeric")
    Xn = X.copy()
    Xn[333, 1] = np.nan  # in the last chunk: found by the worker that holds it
    _refused(DPMMDTest, MMD, da.from_array(Xn, chunks=150), y, ValueError, "X contains NaN")
    _refused(DPHSICTest, HSIC, da.from_array(Xn, chunks=150), X[:, 0], ValueError,
             "X contains NaN")
    yi = X[:, 0].copy()
    yi[7] = np.inf
    _refused(DPHSICTest, HSIC, Xd, da.from_array(yi, chunks=100), ValueError,
             "y contains infinity")
    _refused(DPMMDTest, MMD, Xd, da.from_array(np.where(y == 0, 0.0, np.nan), chunks=100),
             ValueError, "y contains NaN")
    _refused(DPMMDTest, MMD, Xd, y[:399], ValueError,
             r"inconsistent numbers of samples: \[400, 399\]")
    _refused(DPHSICTest, HSIC, Xd, da.from_array(X[:, 0])[:-1], ValueError,
             r"inconsistent numbers of samples")
    _refused(DPHSICTest, HSIC, Xd, da.from_array(y.astype(str), chunks=100), ValueError,
             "y must be numeric")
    _refused(DPMMDTest, MMD, Xd, X[:, 0], ValueError, "continuous")
    _refused(DPMMDTest, MMD, Xd, np.zeros(400, dtype=int), ValueError, "at least 2 groups")
    _refused(DPMMDTest, MMD, Xd, np.r_[np.zeros(399, dtype=int), 1], ValueError,
             "at least 2 rows in every group")
    _refused(DPMMDTest, MMD, da.from_array(X[:, 0], chunks=100), y, ValueError,
             "Expected 2D array")
    _refused(DPMMDTest, dict(MMD, max_memory=10**5), Xd, y, ValueError, "max_memory")


def test_memory_plan_is_the_clients_share():
    # no 8 N D feature matrix on the client: far below the numpy path at large N
    from skdptest.kernel._features import feature_mmd_memory_bytes

    n, D, B = 10**6, 64, 2000
    client_bytes = _distributed.dask_mmd_memory_bytes(n, 100, 2 * D, 2, B)
    assert 256 * 2**20 < client_bytes < feature_mmd_memory_bytes(n, 10, D, 2, B)
    # one chunk of masks (256 MiB) is on the client, the 8 N D bytes of features are not:
    # 16 times more components cost the client a few MiB (the returned sums), not 7.7 GB
    wide = _distributed.dask_mmd_memory_bytes(n, 100, 32 * D, 2, B)
    assert wide - client_bytes < 8 * n * 15 * D / 50
    est = DPMMDTest(**dict(MMD, n_components=D, n_permutations=B))
    with dask.config.set(scheduler="synchronous"):
        X = da.zeros((n, 10), chunks=(10**4, 10))
        y = da.from_array(np.repeat([0, 1], n // 2), chunks=10**4)
        plan = est.set_params(max_memory=2**40)._prepare(X, y, reset=True).plan
    assert plan.memory_bytes == _distributed.dask_mmd_memory_bytes(n, 100, 2 * D, 2, B)


@pytest.mark.slow
def test_large_release_on_process_workers_is_the_numpy_release():
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    X, y = _data(17, 200_000, d=5)
    kwargs = dict(MMD, n_components=32, n_permutations=300)
    ref = DPMMDTest(**kwargs, random_state=9).fit(X, y).result_
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        got = DPMMDTest(**kwargs, random_state=9).fit(
            da.from_array(X, chunks=(30_000, 5)), da.from_array(y, chunks=50_000)).result_
    _assert_same_result(got, ref)
