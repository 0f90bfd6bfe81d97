"""The contract in skdptest/_base.py: seeding, frozen streams, what pickles carry."""

import copy
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from skdptest import (
    InvalidParameterError,
    PrivacyBudget,
    PrivateEProcess,
    PrivateEValueTest,
    _base,
)
from skdptest._base import InvalidDataError, check_input, validate_input
from skdptest._validation import check_generator


def _stream(**kw):
    return PrivateEProcess(stats.bernoulli(0.3), stats.bernoulli(0.6), schedule=[10],
                           alpha=1e-12, **kw)


def test_random_state_none_ignores_numpy_global_state():
    # Replaying np.random.seed must not replay the noise of random_state=None.
    draws = []
    for _ in range(2):
        np.random.seed(0)  # noqa: NPY002 - the global state is what is tested
        draws.append(check_generator(None).integers(0, 2**63, size=4))
    assert not np.array_equal(draws[0], draws[1])


#: Laws of one row, given explicitly (the defaults warn that none were given).
LAWS = (stats.norm(0, 1), stats.norm(0.5, 1))


def test_random_state_none_releases_differ_after_the_same_global_seed():
    X = np.random.default_rng(0).normal(size=(200, 1))
    releases = set()
    for _ in range(3):
        np.random.seed(0)  # noqa: NPY002 - the global state is what is tested
        releases.add(PrivateEValueTest(*LAWS).fit(X).result_.log_e_value)
    assert len(releases) == 3


def test_int_seed_is_reproducible_and_score_uses_a_separate_stream():
    X = np.random.default_rng(0).normal(size=(200, 1))
    a = PrivateEValueTest(*LAWS, random_state=3).fit(X)
    b = PrivateEValueTest(*LAWS, random_state=3).fit(X)
    assert a.result_.log_e_value == b.result_.log_e_value
    assert a.score(X) != a.result_.log_e_value  # the score draws its own noise


@pytest.mark.parametrize("change", [dict(epsilon=100.0), dict(alpha=0.5),
                                    dict(schedule=[1]), dict(random_state=5)])
def test_changing_a_parameter_mid_stream_raises(change):
    budget = PrivacyBudget(1000.0)
    proc = _stream(budget=budget, random_state=0).partial_fit(np.zeros((15, 1)))
    before = proc.result_
    proc.set_params(**change)
    with pytest.raises(InvalidParameterError, match="changed while a stream is running"):
        proc.partial_fit(np.zeros((15, 1)))
    assert proc.result_ is before and len(budget) == 1
    proc.fit(np.zeros((15, 1)))  # a new stream, charged again, with the new value
    assert len(budget) == 2


def test_budget_may_change_mid_stream_without_effect_on_the_noise():
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))
    proc.set_params(budget=PrivacyBudget(1.0)).partial_fit(np.zeros((15, 1)))
    assert proc.result_.n_samples == 30


@pytest.mark.parametrize("copier", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_a_copy_never_carries_the_running_stream(copier):
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))  # 5 rows pending
    twin = copier(proc)
    assert "_stream" not in vars(twin) and "_stream" in vars(proc)
    assert twin.result_ == proc.result_
    with pytest.raises(RuntimeError, match="copied or unpickled while its stream"):
        twin.partial_fit(np.zeros((15, 1)))
    twin.fit(np.zeros((15, 1)))  # a new stream is fine
    proc.partial_fit(np.zeros((15, 1)))  # the original goes on
    assert proc.result_.n_samples == 30


def test_stream_state_holds_no_generator_outside_the_live_stream():
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))
    state = pickle.loads(pickle.dumps(proc)).__dict__
    assert not any(isinstance(v, np.random.Generator) for v in state.values())
    assert not any(isinstance(v, np.ndarray) and v.size == 5 for v in state.values())


# -- the core input validation (check_input / validate_input) -----------------------------
@pytest.mark.parametrize(("X", "match"), [
    (np.ma.masked_array([[1.0], [2.0]]), r"^X is a masked array \(numpy.ma\): its mask would"),
    (np.array([["a"], ["bcdefgh"]]), r"^X must be numeric .*\(strings\)\. Encode"),
    (np.array([[1 + 0j]]), r"^Complex data not supported: X must hold real numbers"),
    (np.array([["2020-01-01"]], dtype="datetime64[D]"), r"\(dates \(datetime64\)\)"),
    (np.array([[None], [1.0]], dtype=object), r"^X contains missing or infinite values"),
    (np.array([[{}], [1.0]], dtype=object), r"argument must be .* string.* number"),
    ([[1.0, [2.0]], [1.0, 2.0]], r"rectangular \(n_samples, n_features\) array of numbers"),
    (None, r"^X must be an array-like of numbers, got None"),
])
def test_check_input_refuses_with_the_kind_of_problem_only(X, match):
    with pytest.raises(InvalidDataError, match=match) as info:
        check_input(X)
    assert "bcdefgh" not in str(info.value) and "<U7" not in str(info.value)


def test_check_input_for_labels_allows_strings_but_not_masks_or_missing_entries():
    labels = np.array([["a"], ["b"]])
    assert check_input(labels, numeric=False) is labels
    frame = pd.DataFrame({"a": pd.Categorical(["u", "v"]), "b": ["x", "y"]})
    assert check_input(frame, numeric=False) is frame
    for bad, match in [(np.ma.masked_array(labels), "masked array"),
                       (np.array([["a"], [None]], dtype=object), "missing"),
                       (np.array([[1j]]), "Complex data"),
                       (pd.Series(["x", None], dtype=object).to_frame(), "missing")]:
        with pytest.raises(InvalidDataError, match=match):
            check_input(bad, numeric=False)


@pytest.mark.parametrize(("X", "match"), [
    (np.array([0.5, 0.25]), r"^Expected 2D array, got 1D array instead: X must be of shape"),
    (np.float64(0.125), r"^Expected 2D array, got scalar array instead"),
    (np.array([[0.5], [np.inf]]), r"^X contains missing or infinite values \(NaN or infinity\)"),
    (np.array([[10**400], [1]], dtype=object), r"^X contains values outside the range of float"),
])
def test_validate_input_does_not_quote_the_data(X, match):
    est = PrivateEValueTest()
    with pytest.raises(InvalidDataError, match=match) as info:
        validate_input(est, X)
    assert "0.5" not in str(info.value) and "0.125" not in str(info.value)
    assert info.value.__cause__ is None  # no chained message of scikit-learn or numpy
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_masked_dask_arrays_are_refused_by_both_core_checks():
    da = pytest.importorskip("dask.array")
    from skdptest._dask import refuse_non_numeric_columns

    X = np.arange(8.0).reshape(-1, 1)
    masked = da.ma.masked_array(da.from_array(X, chunks=4), mask=da.from_array(X < 2, chunks=4))
    with pytest.raises(InvalidDataError, match=r"^X is a masked array \(numpy.ma\)"):
        check_input(masked)
    for value in (masked, np.ma.masked_array(X)):
        with pytest.raises(InvalidDataError, match=r"^X is a masked array"):
            refuse_non_numeric_columns(value, "X", numeric_categories=True)
    refuse_non_numeric_columns(da.from_array(X, chunks=4), "X", numeric_categories=True)


# -- validate_input's plain-array path (issue 20): the same as validate_data ---------------

def _plain_inputs():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(6, 3))
    out = {
        "float64": base, "fortran": np.asfortranarray(base), "strided": base[::2, ::2],
        "read-only": np.frombuffer(base.tobytes()).reshape(6, 3),
        "float32": base.astype(np.float32),
        "float16": base.astype(np.float16), "int64": (base * 10).astype(np.int64),
        "int8": (base * 10).astype(np.int8), "uint16": np.abs(base * 10).astype(np.uint16),
        "bool": base > 0, "one row": base[:1], "one column": base[:, :1],
        "huge finite": np.full((2, 3), 1e308),  # the sum overflows, the values are finite
        "float16 huge": np.full((2, 3), 6e4, dtype=np.float16),
    }
    return out


def _refused_or_other_inputs():
    base = np.ones((4, 3))
    nan, inf = base.copy(), base.copy()
    nan[1, 2], inf[0, 0] = np.nan, np.inf
    both = base.copy()
    both[0, 0], both[1, 1] = np.inf, -np.inf
    return {
        "nan": nan, "inf": inf, "inf and -inf": both, "no rows": np.ones((0, 3)),
        "no columns": np.ones((3, 0)), "3-D": np.ones((2, 2, 2)), "1-D": np.ones(3),
        "longdouble": base.astype(np.longdouble), "object floats": base.astype(object),
        "list": [[1.0, 2.0], [3.0, 4.0]], "frame": pd.DataFrame(base, columns=list("abc")),
        "complex": base.astype(complex), "strings": np.array([["1", "2"]]),
    }


_PRIORS = ["fresh", "named", "three features", "five features"]


def _ys(n):
    """Labels of n rows for the paired path: plain ones, and ones validate_data handles."""
    rng = np.random.default_rng(5)
    y = rng.normal(size=2 * n)
    bad = y[:n].copy()
    bad[0] = np.nan
    return {
        "float y": y[:n].copy(), "strided y": y[::2], "int y": (y[:n] * 5).astype(np.int64),
        "bool y": y[:n] > 0, "column y": y[:n, None], "nan y": bad, "short y": y[: n - 1],
        "list y": list(y[:n]), "object y": y[:n].astype(object), "None y": None,
        "2-column y": np.ones((n, 2)), "longdouble y": y[:n].astype(np.longdouble),
    }


def _described(out, X, y):
    """What an accepted validation returns, by value, dtype, layout and sharing."""
    if not isinstance(out, tuple):
        return ("accepted", out is X, out.dtype, out.shape)
    X_out, y_out = out
    return ("accepted", X_out is X, X_out.dtype, X_out.shape, y_out.dtype, y_out.shape,
            y_out.tolist(), y_out.flags.c_contiguous, type(y_out),
            isinstance(y, np.ndarray) and np.shares_memory(y_out, y))


def _validated(X, reset, prior, y="no_validation", **kwargs):
    """validate_input's outcome: result, attributes left, warnings (a fresh estimator)."""
    est = PrivateEValueTest()
    if prior == "named":
        validate_input(est, pd.DataFrame(np.ones((2, 3)), columns=list("xyz")))
    elif prior != "fresh":
        est.n_features_in_ = 3 if prior == "three features" else 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = _described(validate_input(est, X, y, reset=reset, **kwargs), X, y)
        except Exception as exc:  # noqa: BLE001 - the refusal is what is compared
            result = (type(exc), str(exc))
    state = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    return result, state, [(w.category, str(w.message)) for w in caught]


def _without_plain_path(monkeypatch):
    monkeypatch.setattr(_base, "_validate_plain", lambda *args: None)


@pytest.mark.parametrize("reset", [True, False])
@pytest.mark.parametrize("prior", _PRIORS)
def test_plain_array_path_equals_validate_data(reset, prior, monkeypatch):
    inputs = {**_plain_inputs(), **_refused_or_other_inputs()}
    fast = {name: _validated(X, reset, prior) for name, X in inputs.items()}
    _without_plain_path(monkeypatch)
    slow = {name: _validated(X, reset, prior) for name, X in inputs.items()}
    assert fast == slow


def test_plain_pair_path_equals_validate_data(monkeypatch):
    # X's own cases are those of the test above; here y's, with a plain and a refused X.
    xs = [_plain_inputs()["int8"], _refused_or_other_inputs()["nan"]]
    kwargs = [{}, {"y_numeric": True}]
    cases = [(X, y, kw, prior, reset) for X in xs for y in _ys(len(X)).values()
             for kw in kwargs for prior in ("fresh", "named") for reset in (True, False)]
    cases.append((xs[0], _ys(len(xs[0]))["float y"], {"multi_output": True}, "fresh", True))

    def outcomes():
        return [_validated(X, reset, prior, y, **kw) for X, y, kw, prior, reset in cases]

    fast = outcomes()
    _without_plain_path(monkeypatch)
    assert fast == outcomes()


def test_plain_arrays_take_the_plain_path():
    for name, X in _plain_inputs().items():
        expected = None if "huge" in name else X  # a non-finite sum goes to validate_data
        assert _base._validate_plain(PrivateEValueTest(), X, None, True) is expected, name
        y = np.arange(len(X), dtype=float)[::-1]
        out = _base._validate_plain(PrivateEValueTest(), X, y, True)
        if expected is None:
            assert out is None, name
        else:
            assert out[0] is X and np.array_equal(out[1], y) and out[1].flags.c_contiguous
    for name, X in _refused_or_other_inputs().items():
        if isinstance(X, np.ndarray):
            assert _base._validate_plain(PrivateEValueTest(), X, None, True) is None, name


def test_plain_path_leaves_an_accepted_fit_unchanged(monkeypatch):
    X = np.random.default_rng(4).normal(size=(40, 1))
    est = PrivateEValueTest(stats.norm(0, 1), stats.norm(1, 1), random_state=0)
    fast = est.fit(X).result_
    _without_plain_path(monkeypatch)
    slow = PrivateEValueTest(stats.norm(0, 1), stats.norm(1, 1), random_state=0).fit(X)
    assert fast == slow.result_
    assert est.n_features_in_ == slow.n_features_in_ == 1
