"""What a dpMMD/dpHSIC fit shows besides its release (issue 18, items 2-5 and 8).

- Extreme rows (+-1e308, 1e154, subnormals) on one neighbour: every route fits without a
  warning or an exception, releases a p-value in [0, 1], and each of its B + 1
  statistics moves by at most the declared sensitivity (same seed: same draws), so no
  inf or NaN inside a statistic breaks the bound.
- Refusals that read the data say what kind of problem was found, never how many rows:
  7 and 8 bad rows give the same message.
- Parameters a fit ignores or overrides raise ``PrivacyLeakWarning`` at the user's line.
- Dates are refused with the library's message.
"""

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import skdptest.kernel._distributed as dist_mod
import skdptest.kernel._kernelbase as base_mod
import skdptest.kernel._route_exact as exact_mod
from skdptest import (
    DPHSICTest,
    DPMMDTest,
    FixedRandomStateWarning,
    PrivacyBudget,
    PrivacyLeakWarning,
)
from tests.kernel._reference import _fixed

N = 16
B = 5
EXTREMES = [1e308, -1e308, 1e154, -1e154, 1e200, 5e-324, 3e-308]
_RNG = np.random.default_rng(0)
X0, Y0 = _RNG.normal(size=(N, 2)), _RNG.normal(size=(N, 2))
G2, G3 = np.arange(N) % 2, np.arange(N) % 3


def _mmd(groups=G2, **kw):
    kw.setdefault("n_permutations", B)
    return lambda X, Y: (DPMMDTest(random_state=0, **kw), X, groups)


def _hsic(**kw):
    if kw.get("cyclic") is not True and kw.get("method") != "features" and (
            "kernel_params" in kw or kw.get("cyclic") is False):
        kw.setdefault("n_permutations", B)
    if kw.get("method") == "features":
        kw.setdefault("n_permutations", B)
    return lambda X, Y: (DPHSICTest(random_state=0, **kw), X, Y)


G = {"gamma": 0.5}
FEATURES = {"method": "features", "n_components": 4, "kernel_params": G}
# name -> (estimator, X, y) maker; "median" routes release a bandwidth first (its own
# exponential mechanism): their statistics are compared only when it is the same
ROUTES = {
    "mmd exact": _mmd(kernel_params=G),
    "mmd aggregate": _mmd(cyclic=False),
    "mmd cyclic aggregate": lambda X, Y: (DPMMDTest(random_state=0, cyclic=True), X, G2),
    "mmd median": _mmd(kernel_params={"gamma": "median"}),
    "mmd laplacian median": _mmd(kernel="laplacian", kernel_params={"gamma": "median"}),
    "mmd k-sample": _mmd(G3, kernel_params=G),
    "mmd k-sample aggregate": _mmd(G3),
    "mmd chi2": lambda X, Y: (DPMMDTest(kernel="chi2", n_permutations=B, random_state=0),
                              np.abs(X), G2),  # chi2 takes nonnegative features
    "mmd Matern": _mmd(kernel=Matern(nu=1.5)),
    "mmd ExpSineSquared": _mmd(kernel=ExpSineSquared()),
    "mmd GP sum": _mmd(kernel=C(2.0) * RBF() + WhiteKernel(0.1)),
    "mmd features fourier": _mmd(**FEATURES),
    "mmd features squared": _mmd(**FEATURES, feature_map="squared"),
    "mmd features median": _mmd(**{**FEATURES, "kernel_params": {"gamma": "median"}}),
    "hsic default (cyclic aggregate)": _hsic(),
    "hsic aggregate cyclic=False": _hsic(cyclic=False),
    "hsic exact blocked": _hsic(kernel_params=G, y_kernel_params=G),
    "hsic cyclic": _hsic(kernel_params=G, y_kernel_params=G, cyclic=True),
    "hsic median": _hsic(kernel_params={"gamma": "median"}, y_kernel_params=G),
    "hsic median cyclic": _hsic(kernel_params={"gamma": "median"}, y_kernel_params=G,
                                cyclic=True),
    "hsic Matern": _hsic(kernel=Matern(nu=2.5), y_kernel=ExpSineSquared(), cyclic=False),
    "hsic features fourier": _hsic(**FEATURES, y_kernel_params=G),
    "hsic features squared": _hsic(**FEATURES, y_kernel_params=G, feature_map="squared"),
}


@pytest.fixture
def spy(monkeypatch):
    """Records (statistics, sensitivity, abs_error, gamma) passed to the release."""
    seen = []

    def wrap(orig):
        def recorder(stats, sensitivity, abs_error, **kw):
            seen.append((np.array(stats, dtype=float), sensitivity, abs_error,
                         (kw.get("gamma"), kw.get("y_gamma"))))
            return orig(stats, sensitivity, abs_error, **kw)
        return recorder

    # the kernel tests' shared release (both estimators)
    monkeypatch.setattr(base_mod, "make_permutation_result",
                        wrap(base_mod.make_permutation_result))
    return seen


def _fit_quietly(make, X, Y):
    est, A, b = make(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FixedRandomStateWarning)  # the seed is the test's
        est.fit(A, b)
    p = est.result_.pvalue
    assert np.isfinite(p) and 0.0 <= p <= 1.0
    return est


# the bandwidth aggregates (19 or 19 x 19 bandwidths per fit) get fewer neighbours
_SLOW = {"mmd aggregate", "mmd k-sample aggregate", "hsic default (cyclic aggregate)",
         "hsic aggregate cyclic=False"}


def _neighbours(name):
    values, columns = EXTREMES, ("x",) if name.startswith("mmd") else ("x", "y", "both")
    if name in _SLOW:
        values, columns = [1e308, -1e154, 5e-324], columns[-1:]
    elif name.startswith("hsic"):
        values = [1e308, -1e308, 1e154, 5e-324]
    for value in values:
        for col in columns:
            X, Y = X0.copy(), Y0.copy()
            if col in ("x", "both"):
                X[3] = value
            if col in ("y", "both"):
                Y[3] = value
            yield value, col, X, Y


@pytest.mark.parametrize("name", list(ROUTES))
def test_extreme_rows_give_a_quiet_bounded_release(name, spy):
    make = ROUTES[name]
    _fit_quietly(make, X0, Y0)
    base, sensitivity, abs_error, gamma = spy[-1]
    assert np.all(np.isfinite(base))
    compared = 0
    for value, col, X, Y in _neighbours(name):
        _fit_quietly(make, X, Y)
        stats, _, _, gamma_n = spy[-1]
        assert np.all(np.isfinite(stats)), (value, col)
        if gamma_n == gamma and stats.shape == base.shape:  # the same draws: same kernel
            compared += 1
            move = np.max(np.abs(stats - base))
            assert move <= sensitivity + 2 * abs_error, (value, col, move, sensitivity)
    assert compared > 0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_extreme_rows_both_hsic_backends(backend, monkeypatch, spy):
    pytest.importorskip(backend)
    monkeypatch.setenv("SKDPTEST_HSIC_BACKEND", backend)
    make = ROUTES["hsic exact blocked"]
    _fit_quietly(make, X0, Y0)
    base, sensitivity, abs_error, _ = spy[-1]
    for _, _, X, Y in _neighbours("hsic"):
        _fit_quietly(make, X, Y)
        assert np.max(np.abs(spy[-1][0] - base)) <= sensitivity + 2 * abs_error


@pytest.mark.parametrize("name", ["mmd fourier", "mmd squared", "hsic fourier"])
def test_extreme_rows_on_dask(name, spy):
    da = pytest.importorskip("dask.array")
    kind = name.split()[1]
    if name.startswith("mmd"):
        est = DPMMDTest(method="features", feature_map=kind, n_components=4, kernel_params=G,
                        n_permutations=B, random_state=0)
    else:
        est = DPHSICTest(method="features", feature_map=kind, n_components=4,
                         kernel_params=G, y_kernel_params=G, n_permutations=B,
                         random_state=0)
    stats = []
    for X in [X0] + [X for _, _, X, _ in _neighbours("mmd aggregate")]:
        y = G2 if name.startswith("mmd") else Y0
        _fit_quietly(lambda A, b, est=est: (est, A, b), da.from_array(X, chunks=6),
                     da.from_array(y, chunks=6))
        stats.append(spy[-1][0])
    sensitivity, abs_error = spy[-1][1], spy[-1][2]
    assert all(np.max(np.abs(s - stats[0])) <= sensitivity + 2 * abs_error
               for s in stats[1:])


def test_dask_worker_features_are_quiet_outside_the_clients_error_state():
    # a distributed worker does not run in the client's context: the worker function
    # enters the quiet error state itself (cos(inf), overflowed angles)
    omega = np.full((2, 3), 2.0)
    X = np.array([[1e308, 1e308], [0.5, -0.5]])
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        F = dist_mod._worker_features(X, omega, "fourier")
    assert np.all(np.isfinite(F))


# -- refusals carry no count ----------------------------------------------------------------

def _bad_rows(k, value):
    X = np.random.default_rng(5).normal(size=(40, 2))
    X[:k, 0] = value
    return X


def _nonnegative_bad_rows(k):
    X = np.abs(np.random.default_rng(5).normal(size=(40, 2)))
    X[:k, 0] = -1.0
    return X


REFUSALS = {
    "NaN": (lambda k: _bad_rows(k, np.nan), {}),
    "infinity": (lambda k: _bad_rows(k, np.inf), {}),
    "chi2 negative": (lambda k: _nonnegative_bad_rows(k), {"kernel": "chi2"}),
    "kernel_bound": (lambda k: _bad_rows(k, 1e3) * 0.01,
                     {"kernel": "linear", "kernel_bound": 1.0}),
    "kernel_bound overflow": (lambda k: _bad_rows(k, 1e300) * 0.01,
                              {"kernel": "linear", "kernel_bound": 1.0}),
}


@pytest.mark.parametrize("cls", [DPMMDTest, DPHSICTest])
@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusals_that_read_the_data_carry_no_count(cls, name):
    make, kw = REFUSALS[name]
    if cls is DPHSICTest:
        kw = {**kw, **{f"y_{k}": v for k, v in kw.items()}}
    messages = []
    for k in (7, 8):
        X = make(k)
        y = np.arange(40) % 2 if cls is DPMMDTest else X
        budget = PrivacyBudget(5.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a refusal raises nothing else (no overflow)
            with pytest.raises(ValueError) as info:
                cls(budget=budget, n_permutations=B, cyclic=False, **kw).fit(X, y) \
                    if cls is DPHSICTest else cls(budget=budget, n_permutations=B,
                                                  **kw).fit(X, y)
        assert budget.spent[0] == 0
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert not any(ch in messages[0] for ch in "78"), messages[0]


@pytest.mark.parametrize("name", ["NaN", "infinity"])
def test_dask_refusals_carry_no_count(name):
    da = pytest.importorskip("dask.array")
    make = REFUSALS[name][0]
    messages = []
    for k in (7, 8):
        X = da.from_array(make(k), chunks=10)
        with pytest.raises(ValueError) as info:
            DPMMDTest(method="features", n_permutations=B).fit(X, np.arange(40) % 2)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# -- dates ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [DPMMDTest, DPHSICTest])
def test_dates_are_refused_with_the_librarys_message(cls):
    pd = pytest.importorskip("pandas")
    n = 20
    dates = (np.datetime64("2020-01-01") + np.arange(n)).reshape(-1, 1)
    frame = pd.DataFrame({"t": pd.date_range("2020", periods=n), "a": np.arange(n)})
    labels = np.arange(n) % 2
    for X in (dates, frame):
        budget = PrivacyBudget(1.0)
        with pytest.raises(ValueError, match=r"X must be numeric.*dates"):
            cls(budget=budget).fit(X, labels if cls is DPMMDTest else labels * 1.0)
        assert budget.spent[0] == 0
    if cls is DPHSICTest:  # the paired variable too
        with pytest.raises(ValueError, match=r"y must be numeric.*dates"):
            cls().fit(np.ones((n, 1)), frame)


# -- ignored or overridden parameters warn --------------------------------------------------

@pytest.mark.parametrize("cls, params, match", [
    (DPHSICTest, {"n_permutations": 500},
     r"n_permutations=500 is ignored: cyclic='auto' with the bandwidth aggregate .* all "
     r"n - 1 = 29 cyclic shifts .* Set cyclic=False"),
    (DPHSICTest, {"n_permutations": 500, "cyclic": True, "kernel_params": G},
     r"n_permutations=500 is ignored: cyclic=True, which uses all n - 1 = 29"),
    (DPHSICTest, {"n_jobs": 2, "kernel_params": G, "y_kernel_params": G, "cyclic": False},
     r"n_jobs=2 is ignored: it parallelises the bandwidth aggregate only"),
    (DPHSICTest, {"n_components": 32},
     r"n_components=32 is ignored: it applies to method='features' only"),
    (DPHSICTest, {"method": "features", "kernel_bound": 2.0},
     r"kernel_bound=2.0 is ignored: method='features' uses the feature kernel"),
    (DPMMDTest, {"feature_map": "squared", "cyclic": False},
     r"feature_map='squared' is ignored: it applies to method='features' only"),
    (DPMMDTest, {"n_jobs": -1, "kernel_params": G},
     r"n_jobs=-1 is ignored: it parallelises the bandwidth aggregate only"),
    (DPMMDTest, {"method": "features", "n_jobs": 2},
     r"n_jobs=2 is ignored: method='features' runs on the BLAS threads"),
])
def test_ignored_parameters_warn_at_the_users_line(cls, params, match):
    X = _RNG.normal(size=(30, 2))
    y = np.arange(30) % 2 if cls is DPMMDTest else X[:, 0]
    if cls is DPMMDTest:
        params = {"n_permutations": 19, **params}
    with pytest.warns(PrivacyLeakWarning, match=match) as record:
        cls(random_state=0, **params).fit(X, y)
    leaks = [w for w in record if w.category is PrivacyLeakWarning]
    assert len(leaks) == 1
    assert leaks[0].filename == __file__  # walked out of the package's frames


def test_defaults_and_honoured_parameters_do_not_warn():
    X = _RNG.normal(size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        DPHSICTest(random_state=0).fit(X, X[:, 0])
        DPHSICTest(random_state=0, cyclic=False, n_permutations=5, n_jobs=2,
                   kernel_params=G).fit(X, X[:, 0])
        _fixed(DPHSICTest, random_state=0, n_permutations=19).fit(X, X[:, 0])
        DPMMDTest(random_state=0, n_permutations=19, n_jobs=2, cyclic=False).fit(
            X, np.arange(30) % 2)
        DPMMDTest(random_state=0, cyclic=True, n_jobs=2).fit(X, np.arange(30) % 2)
        DPMMDTest(random_state=0, method="features", n_components=8,
                  feature_map="squared", n_permutations=19).fit(X, np.arange(30) % 2)


def test_aggregate_bandwidth_threads_inherit_the_quiet_error_state():
    # joblib's threads (n_jobs) do not inherit the caller's context by themselves
    from skdptest.kernel._bandwidth import map_in_threads

    def log_of_zero(i):
        return float(np.log(np.zeros(1))[0]) + i

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            assert map_in_threads(log_of_zero, [0, 1, 2, 3], 2) == [-np.inf] * 4
        with pytest.raises(RuntimeWarning, match="divide by zero"):  # the state is the caller's
            map_in_threads(log_of_zero, [0, 1], 2)


def test_extreme_rows_on_the_blocked_mmd_path(monkeypatch, spy):
    # kernel blocks evaluated on the fly (the path of large N), forced at N = 16
    monkeypatch.setattr(exact_mod, "MAX_KERNEL_BYTES", 64)
    monkeypatch.setattr(exact_mod, "PREFETCH_KERNEL_BYTES", 64)
    monkeypatch.setattr(exact_mod, "BLOCK_ROWS", 5)
    make = ROUTES["mmd exact"]
    _fit_quietly(make, X0, Y0)
    base, sensitivity, abs_error, _ = spy[-1]
    for _, _, X, Y in _neighbours("mmd exact"):
        _fit_quietly(make, X, Y)
        assert np.max(np.abs(spy[-1][0] - base)) <= sensitivity + 2 * abs_error
