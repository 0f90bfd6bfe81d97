"""The input-hygiene fuzz campaign (issue 18, items 3 and 8), kept in the suite.

Hypothesis draws bad inputs of every class the campaign found failing and feeds them to
every public estimator (``skdptest.__all__``'s ``BaseEstimator`` subclasses, with the
small arguments and data of ``tests/test_common.py``'s ``CASES``):

- numpy masked arrays (a mask must never be dropped silently);
- non-numeric dtypes (strings, bytes, dates, durations, complex numbers), object arrays
  holding strings, dicts, ``None``, dates, complex numbers or integers above float64's
  range, categorical and mixed-type pandas frames, nested or ragged lists;
- NaN and infinity;
- wrong shapes: 0-D, 3-D, empty;
- integers above float64's range for every real parameter (and outside int64 for the
  integer ones);
- ledger paths that cannot name a file.

Every bad input must raise ``ValueError``/``TypeError`` with a message, before the
budget is charged (the ledger stays empty) and without leaving fitted state; never
``OverflowError``, ``MemoryError``, ``ZeroDivisionError`` or a release. Data refusals
must not depend on how many rows are bad (7 or 8 bad rows: the same message).

The default run is derandomised and small (about 10 s); ``-m slow`` runs the long
campaign.
"""

import datetime
import numbers
from functools import partial

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from skdptest import InvalidParameterError, PrivacyBudget
from skdptest._params import Interval, check_value

# By full name: the module pytest collected (not a second copy of it).
from tests.test_common import CASES, ESTIMATOR_CLASSES

#: Deterministic runs, no example database in the tree, no deadline (an e-value test
#: plans its release on first use), no shrinking (a failure shows its input anyway).
FAST = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
LONG = settings(FAST, max_examples=400)

#: Every public estimator (all of them go through ``skdptest._base.validate_input``).
each = pytest.mark.parametrize("cls", ESTIMATOR_CLASSES,
                               ids=[cls.__name__ for cls in ESTIMATOR_CLASSES])


#: One ledger for the whole campaign: every call must leave its count unchanged (a
#: fresh SQLite ledger per example would cost more than the refusals under test).
BUDGET = PrivacyBudget(epsilon=1e6)


def _case(cls, **params):
    """A fresh estimator charging the shared ledger, and its valid (X, y)."""
    kwargs, make = CASES[cls.__name__]
    est = cls(**{**kwargs, **params, "budget": BUDGET, "random_state": 0})
    return est, BUDGET, make()


def assert_refused_before_charge(est, budget, call):
    """``call()`` raises ValueError/TypeError with a message, nothing is charged and the
    estimator's state is unchanged; returns the exception. Any other exception
    (Overflow, Memory, ZeroDivision...) propagates and fails the test; so does a
    release."""
    before, spent = dict(vars(est)), len(budget)
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    message = str(info.value)
    assert message.strip(), f"{type(info.value).__name__} without a message"
    assert len(budget) == spent, f"charged before refusing: {message}"
    assert set(vars(est)) == set(before), f"state left behind by a refusal: {message}"
    return info.value


def _failures(cls, cases, check):
    """Run ``check(case)`` for each case; return ``case: error`` lines of the failures
    (one test per estimator lists every kind that fails, not only the first)."""
    out = []
    for case in cases:
        try:
            check(case)
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - listed below
            out.append(f"{case}: {type(exc).__name__}: {str(exc)[:300]}")
    return out


# -- bad data -------------------------------------------------------------------------------
def _where(X, rows, col=0):
    """Boolean mask of the cells (row, col) of ``X`` for the given rows."""
    mask = np.zeros(X.shape, dtype=bool)
    mask[np.asarray(rows, dtype=int), col] = True
    return mask


def _object_with(X, rows, value):
    out = X.astype(object)
    for r in rows:
        out[r, 0] = value
    return out


def _nested(X, rows):
    out = X.tolist()
    for r in rows:
        out[r][0] = [out[r][0], 1.0]
    return out


#: kind -> builder (X, rows, draw) -> bad X of the same number of rows (``rows``: the
#: distinct row indices to spoil; ``draw``: a hypothesis data object for extra choices).
BAD_X = {
    "masked": lambda X, rows, d: np.ma.masked_array(X, mask=_where(X, rows)),
    "masked, nothing masked": lambda X, rows, d: np.ma.masked_array(X),
    "strings": lambda X, rows, d: X.astype(str),
    "bytes": lambda X, rows, d: X.astype(str).astype(bytes),
    "datetime64": lambda X, rows, d: (np.datetime64("2020-01-01")
                                      + np.round(X * 10).astype("timedelta64[D]")),
    "timedelta64": lambda X, rows, d: np.round(X * 10).astype("timedelta64[s]"),
    "complex": lambda X, rows, d: X + 1j * _where(X, rows),
    "complex, zero imaginary part": lambda X, rows, d: X.astype(complex),
    "object: str": lambda X, rows, d: _object_with(X, rows, "a"),
    "object: numeric str": lambda X, rows, d: _object_with(X, rows, "1.5"),
    "object: dict": lambda X, rows, d: _object_with(X, rows, {"a": 1}),
    "object: None": lambda X, rows, d: _object_with(X, rows, None),
    "object: complex": lambda X, rows, d: _object_with(X, rows, 1 + 2j),
    "object: date": lambda X, rows, d: _object_with(X, rows, datetime.date(2020, 1, 1)),
    "object: huge int": lambda X, rows, d: _object_with(
        X, rows, d.draw(st.integers(10**309, 10**400), label="huge")),
    "object: nested": lambda X, rows, d: _object_with(X, rows, [1.0, 2.0]),
    "nested lists": lambda X, rows, d: _nested(X, rows),
    "huge ints in lists": lambda X, rows, d: [
        [10**400 if i in set(rows) and j == 0 else v for j, v in enumerate(row)]
        for i, row in enumerate(X.tolist())],
    "categorical strings": lambda X, rows, d: pd.DataFrame(
        {f"c{j}": pd.Categorical(np.where(X[:, j] > 0, "u", "v")) for j in range(X.shape[1])}),
    "mixed-type frame": lambda X, rows, d: pd.DataFrame(X).assign(
        extra=np.where(np.arange(len(X)) % 2 == 0, "u", "v")),
    "object column": lambda X, rows, d: pd.DataFrame(_object_with(X, rows, "a")),
    "string column": lambda X, rows, d: pd.DataFrame(X).astype("string"),
    "datetime column": lambda X, rows, d: pd.DataFrame(X).assign(
        when=pd.Timestamp("2020-01-01") + pd.to_timedelta(np.arange(len(X)), unit="D")),
    "NaN": lambda X, rows, d: np.where(_where(X, rows), np.nan, X),
    "infinity": lambda X, rows, d: np.where(
        _where(X, rows), d.draw(st.sampled_from([np.inf, -np.inf]), label="inf"), X),
    "pandas NA": lambda X, rows, d: pd.DataFrame(X).astype("Float64").mask(
        pd.DataFrame(_where(X, rows))),
    "3-D": lambda X, rows, d: X[:, :, None],
    "0-D": lambda X, rows, d: np.float64(X[0, 0]),
    "empty": lambda X, rows, d: X[:0],
}

#: Kinds that are valid input for a test of declared categories (``input_tags.string``):
#: labels may be strings there, and the test refuses undeclared ones itself.
STRING_KINDS = {"strings", "bytes", "object: str", "object: numeric str",
                "categorical strings", "mixed-type frame", "object column", "string column"}


def _kinds(cls):
    takes_strings = cls().__sklearn_tags__().input_tags.string
    return sorted(k for k in BAD_X if not (takes_strings and k in STRING_KINDS))


#: Kinds that read values of the data (the rest are refused from types or shapes).
READS_DATA = ["masked", "complex", "object: str", "object: dict", "object: None",
              "object: complex", "object: date", "object: huge int", "object: nested",
              "nested lists", "huge ints in lists", "object column", "NaN", "infinity",
              "pandas NA"]


def _bad_y(y, kind, rows):
    if kind == "empty":
        return None if y is None else y[:0]
    return y


@st.composite
def bad_data(draw, X, kinds):
    kind = draw(st.sampled_from(kinds), label="kind")
    rows = draw(st.lists(st.integers(0, X.shape[0] - 1), min_size=1, max_size=8,
                         unique=True), label="rows")
    return kind, BAD_X[kind](X, rows, _Drawer(draw)), rows


class _Drawer:
    """Lets a builder draw extra values inside the composite strategy."""

    def __init__(self, draw):
        self._draw = draw

    def draw(self, strategy, label):
        return self._draw(strategy, label=label)


class _Fixed:
    """The builders' extra values in the fixed (non-hypothesis) cases."""

    VALUES = {"huge": 10**309, "inf": np.inf}

    def draw(self, strategy, label):
        return self.VALUES[label]


def _check_bad_data(cls, data):
    est, budget, (X, y) = _case(cls)
    kind, bad, rows = data.draw(bad_data(X, _kinds(cls)), label="bad X")
    y = _bad_y(y, kind, rows)
    assert_refused_before_charge(est, budget, lambda: est.fit(bad, y))


# Slow, beside its long version below: by default test_every_kind_of_bad_data_is_refused
# runs every kind of bad data on every estimator through the same check (a fixed row set,
# the values inf and 10**309), and test_refusals_do_not_count_the_bad_rows with 7 and 8 bad
# rows; hypothesis's other rows and values (-inf, other huge integers) run in the slow suite.
@pytest.mark.slow
@each
@FAST
@given(data=st.data())
def test_bad_data_is_refused_before_the_charge(cls, data):
    _check_bad_data(cls, data)


@pytest.mark.slow
@each
@LONG
@given(data=st.data())
def test_bad_data_is_refused_before_the_charge_long(cls, data):
    _check_bad_data(cls, data)


@each
def test_every_kind_of_bad_data_is_refused(cls):
    """Each kind once per estimator, whatever hypothesis draws (a fixed bad row set)."""

    def check(kind):
        est, budget, (X, y) = _case(cls)
        rows = [0, 2, 3]
        bad = BAD_X[kind](X, rows, _Fixed())
        assert_refused_before_charge(est, budget, partial(est.fit, bad, _bad_y(y, kind, rows)))

    failures = _failures(cls, _kinds(cls), check)
    assert not failures, "\n".join(failures)


@each
def test_refusals_do_not_count_the_bad_rows(cls):
    """Data with 7 and with 8 bad rows get the same message (issue 18, item 3): a
    refusal says what kind of problem was found, never how many rows or which values."""

    def check(kind):
        messages = []
        for n_bad in (7, 8):
            est, budget, (X, y) = _case(cls)
            bad = BAD_X[kind](X, list(range(1, 2 * n_bad, 2)), _Fixed())
            error = assert_refused_before_charge(est, budget, partial(est.fit, bad, y))
            messages.append(str(error))
        assert messages[0] == messages[1], messages

    failures = _failures(cls, [k for k in _kinds(cls) if k in READS_DATA], check)
    assert not failures, "\n".join(failures)


@each
def test_masked_y_is_refused(cls):
    est, budget, (X, y) = _case(cls)
    if y is None:
        pytest.skip("no y")
    masked = np.ma.masked_array(y, mask=np.arange(len(y)) % 5 == 0)
    error = assert_refused_before_charge(est, budget, lambda: est.fit(X, masked))
    assert "masked array" in str(error)


@each
def test_missing_values_message_is_the_librarys(cls):
    """No imputer advice (a fitted imputer is a release, pitfalls.md): the library's own
    words, on every estimator."""
    est, budget, (X, y) = _case(cls)
    bad = np.where(_where(X, [0]), np.nan, X)
    message = str(assert_refused_before_charge(est, budget, partial(est.fit, bad, y)))
    assert "imputer" not in message.lower(), message


# -- huge numbers for parameters ------------------------------------------------------------
def _intervals(cls):
    """(name, kind, constraints) of each parameter with an Interval constraint."""
    for name, constraints in cls._parameter_constraints.items():
        kinds = {c.kind for c in constraints if isinstance(c, Interval)}
        for kind in sorted(kinds, key=str):
            yield name, kind, constraints


def _accepted(value, constraints):
    try:
        check_value(value, constraints, "x")
    except InvalidParameterError:
        return False
    return True


def _huge(kind):
    if kind is numbers.Real:
        big = st.integers(2**1024, 10**5000)  # above float64's largest (~1.8e308)
    else:
        big = st.integers(2**63, 10**5000)  # outside int64
    return st.one_of(big, big.map(lambda v: -v))


def _check_huge_parameters(cls, data):
    name, kind, constraints = data.draw(st.sampled_from(list(_intervals(cls))), label="name")
    value = data.draw(_huge(kind), label=name)
    if _accepted(value, constraints):  # e.g. an Options or InstanceOf alternative
        return
    est, budget, (X, y) = _case(cls)
    est.set_params(**{name: value})
    error = assert_refused_before_charge(est, budget, partial(est.fit, X, y))
    assert isinstance(error, InvalidParameterError), repr(error)
    assert str(error).startswith(f"{name} must be"), str(error)


@each
@settings(FAST, max_examples=10)
@given(data=st.data())
def test_huge_integers_for_numeric_parameters_are_refused(cls, data):
    _check_huge_parameters(cls, data)


@pytest.mark.slow
@each
@settings(LONG, max_examples=100)
@given(data=st.data())
def test_huge_integers_for_numeric_parameters_are_refused_long(cls, data):
    _check_huge_parameters(cls, data)


@given(epsilon=_huge(numbers.Real), delta=_huge(numbers.Real))
@FAST
def test_huge_integers_for_budget_amounts_are_refused(epsilon, delta):
    with pytest.raises(InvalidParameterError, match=r"^epsilon must be .*outside the range"):
        PrivacyBudget(epsilon=epsilon)
    with pytest.raises(InvalidParameterError, match=r"^delta must be .*outside the range"):
        PrivacyBudget(epsilon=1.0, delta=delta)
    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match=r"^epsilon must be "):
        budget.spend(epsilon)
    assert len(budget) == 0


# -- ledger paths ---------------------------------------------------------------------------
_NAME = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1,
                max_size=12)
BAD_PATHS = st.one_of(
    st.tuples(_NAME, _NAME).map(lambda p: f"{p[0]}\0{p[1]}"),
    _NAME.map(lambda p: p + "\0"),
    st.just(""),
    _NAME.map(lambda p: p + "\ud800"),
    st.binary(min_size=1, max_size=8),
    st.integers(),
)


@given(path=BAD_PATHS)
@FAST
def test_invalid_ledger_paths_create_nothing(tmp_path_factory, path):
    folder = tmp_path_factory.mktemp("ledger")
    target = path if not isinstance(path, str) else str(folder / path) if path else path
    with pytest.raises(InvalidParameterError, match=r"^path "):
        PrivacyBudget(epsilon=1.0, path=target)
    assert list(folder.iterdir()) == []
