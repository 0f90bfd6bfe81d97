"""Property-based tests of the release boundary of the five public estimators.

Project issue "Privacy and validity at the release boundary", item 9: for every input
an estimator is given, EITHER

- the call raises ``ValueError``/``TypeError`` whose message names the offending
  argument or says what is wrong with the data, the budget ledger is unchanged (empty
  after a refused ``fit``) and the estimator's state equals the state before the call
  (a fresh estimator's, for ``fit``: no ``n_features_in_``, no ``result_``, no private
  stash);

OR

- the call succeeds, charges the budget exactly once, and every float released (each
  float field of the frozen result, the p-value, the value of ``score``) is finite,
  with the p-value in (0, 1].

Hypothesis draws the data (values with NaN, ±inf and huge magnitudes anywhere, odd
shapes and dtypes, later chunks of another width, group labels) and the
hyperparameters (absurd ε, α, ``n_permutations``, ``random_state``). Sizes are small
and the number of rows of the e-value tests is fixed (their public plan is computed
once per (n, ε) and cached), so the file runs in well under a minute; the wider float
searches over ε and α of the e-value tests, whose plans cost about a second per new
value, are behind ``-m slow``.

The bugs this file found have been fixed (no xfail markers remain).
"""

import contextlib
import dataclasses
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from skdptest import (
    DPHSICTest,
    DPMMDTest,
    GeneralizedThresholdMechanism,
    InvalidParameterError,
    PrivacyBudget,
    PrivacyLeakWarning,
    PrivateEProcess,
    PrivateEValueTest,
)
from skdptest.evalue._evalue import MAX_EPSILON

#: Rows of the valid-path data: fixed, so that each e-value plan is computed once.
N_ROWS = 30

#: Deterministic hypothesis runs: no example database written into the tree, no
#: deadline (the first fit of an e-value test plans its release, about a second).
#: No shrinking: it would only spend the time budget of the default suite (the
#: falsifying example is still shown).
#: Examples per property: half in the default suite; ``SKDPTEST_HYPOTHESIS=ci`` restores
#: the full counts, with which CI's slow job reruns this file
#: (test_properties_with_the_full_example_counts).
FULL = os.environ.get("SKDPTEST_HYPOTHESIS") == "ci"
FAST = settings(max_examples=12 if FULL else 6, deadline=None, derandomize=True,
                database=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow])
FEW = settings(FAST, max_examples=4 if FULL else 2)
#: The stream properties draw from a handful of chunk kinds (and are cheap): always 4.
FOUR = settings(FAST, max_examples=4)
SLOW = settings(FAST, max_examples=60)


# -- the estimators under test -------------------------------------------------------------
def _hsic_y(n):
    # the paired variable: a fixed function of n only (the data drawn vary X)
    return np.random.default_rng(1).normal(size=n)


@dataclass(frozen=True)
class Spec:
    """How to build one estimator cheaply and the data it takes.

    Attributes
    ----------
    cls : type
        The estimator class.
    kwargs : dict
        Small, fast keyword arguments of the valid path.
    make_y : callable or None
        ``n -> y`` of a valid fit (group labels, paired variable), or None.
    alpha_name : str
        The parameter playing the role of the level α.
    widths : tuple of int
        Numbers of columns drawn for valid data (1 only for the e-value tests, whose
        laws have one dimension).
    one_d_is_column : bool
        Whether 1-D ``X`` is read as one column (the e-value tests, whose laws are
        univariate) instead of refused as ambiguous.
    max_epsilon : float
        The ε above which the release is computed at this cap, with a
        ``PrivacyLeakWarning`` saying so (the e-value tests), or infinity.
    """

    cls: type
    kwargs: dict
    make_y: Any
    alpha_name: str
    widths: tuple
    one_d_is_column: bool = False
    max_epsilon: float = math.inf


#: The e-value tests' laws of one row, given explicitly: the default pair for one column
#: (N(0, 1) against N(1, 1)), without the warning that no laws were given.
UNIT_SHIFT = dict(null=stats.multivariate_normal(np.zeros(1), np.eye(1)),
                  alternative=stats.multivariate_normal(np.ones(1), np.eye(1)))

SPECS = {
    "PrivateEValueTest": Spec(PrivateEValueTest, UNIT_SHIFT, None, "alpha", (1,), True,
                              MAX_EPSILON),
    "PrivateEProcess": Spec(PrivateEProcess, UNIT_SHIFT, None, "alpha", (1,), True,
                            MAX_EPSILON),
    "DPMMDTest": Spec(DPMMDTest, {"n_permutations": 20}, lambda n: np.arange(n) % 2,
                      "alpha", (1, 2)),
    # random permutations: with the default cyclic aggregate n_permutations is ignored
    "DPHSICTest": Spec(DPHSICTest, {"n_permutations": 20, "cyclic": False}, _hsic_y,
                       "alpha", (1, 2)),
    "GeneralizedThresholdMechanism": Spec(GeneralizedThresholdMechanism, {}, None,
                                          "failure_probability", (1, 2)),
}
NAMES = list(SPECS)
CHEAP = ["DPMMDTest", "DPHSICTest", "GeneralizedThresholdMechanism"]


def _make(name, **params):
    """A fresh estimator of ``name`` with its own (huge) budget; returns (est, budget).

    The budget allows the largest finite ε, so that a valid ε = 1e308 reaches the
    release instead of being refused by the ledger.
    """
    spec = SPECS[name]
    budget = PrivacyBudget(epsilon=sys.float_info.max)
    kwargs = {"random_state": 0, **spec.kwargs, **params, "budget": budget}
    return spec.cls(**kwargs), budget


def _y(name, n):
    make_y = SPECS[name].make_y
    return None if make_y is None else make_y(n)


# -- the property --------------------------------------------------------------------------
def _snapshot(est):
    return dict(vars(est))


def _assert_state_is(est, before):
    """The estimator's attributes are exactly those of ``before`` (same objects)."""
    after = vars(est)
    assert set(after) == set(before), (
        f"state changed by a refused call: added {sorted(set(after) - set(before))}, "
        f"removed {sorted(set(before) - set(after))}"
    )
    changed = [k for k in before if after[k] is not before[k]]
    assert not changed, f"attributes rebound by a refused call: {changed}"


def _assert_finite_release(result):
    """Every float field of a frozen result is finite; a p-value is in (0, 1]."""
    assert dataclasses.is_dataclass(result)
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if isinstance(v, (float, np.floating)):
                assert math.isfinite(v), f"{type(result).__name__}.{field.name} = {value!r}"
    if hasattr(result, "pvalue"):  # the threshold search releases an index, no p-value
        assert 0.0 < result.pvalue <= 1.0, f"pvalue = {result.pvalue!r}"
    assert isinstance(result.reject, bool)


def check_call(est, budget, call, match):
    """Run ``call()`` and check the either/or property of the module docstring.

    Parameters
    ----------
    est : estimator
        The estimator ``call`` acts on.
    budget : PrivacyBudget
        Its ledger.
    call : callable
        ``fit``, ``score`` or ``partial_fit`` on the input under test.
    match : str
        Regex a refusal's message must match (it names the argument or says what is
        wrong with the data).

    Returns
    -------
    outcome : "refused" or "released"
    """
    before, n_spent = _snapshot(est), len(budget)
    try:
        out = call()
    except (ValueError, TypeError) as exc:
        assert re.search(match, str(exc)), f"unclear refusal {type(exc).__name__}: {exc}"
        assert len(budget) == n_spent, f"a refused call was charged: {exc}"
        _assert_state_is(est, before)
        return "refused"
    assert len(budget) == n_spent + 1, f"charged {len(budget) - n_spent} times"
    if isinstance(out, float):  # score
        assert math.isfinite(out), f"score = {out!r}"
    else:
        _assert_finite_release(est.result_)
    return "released"


def check_fit(name, X, y=None, match=".", *, score=True, **params):
    """``check_call`` on ``fit`` of a fresh estimator (then ``score`` on the same data)."""
    est, budget = _make(name, **params)
    outcome = check_call(est, budget, lambda: est.fit(X, y), match)
    if outcome == "released" and score:
        check_call(est, budget, lambda: est.score(X, y), match)
    return outcome


# -- data values: NaN, inf and huge magnitudes anywhere ---------------------------------------
HUGE = [1e150, 1e300, -1e308, -1e150, 1.7976931348623157e308]
VALUES = st.one_of(st.floats(-3.0, 3.0), st.sampled_from(HUGE),
                   st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def data_values(draw, name):
    d = draw(st.sampled_from(SPECS[name].widths))
    return draw(arrays(np.float64, (N_ROWS, d), elements=VALUES))


@pytest.mark.parametrize("name", NAMES)
def test_data_values(name):
    """NaN/inf anywhere is refused naming it; finite values (however huge) either
    release finite figures charged once or are refused with a clear message."""

    @FAST
    @given(X=data_values(name))
    def prop(X):
        if not np.all(np.isfinite(X)):
            assert check_fit(name, X, _y(name, N_ROWS), r"NaN|infinity") == "refused"
        else:
            check_fit(name, X, _y(name, N_ROWS), r"(?i)finite|too large|overflow|range")

    prop()


def test_hsic_paired_variable_values():
    """The paired variable of DPHSICTest gets the same treatment as X."""

    @FAST
    @given(y=arrays(np.float64, (N_ROWS,), elements=VALUES))
    def prop(y):
        X = np.random.default_rng(2).normal(size=(N_ROWS, 1))
        if not np.all(np.isfinite(y)):
            assert check_fit("DPHSICTest", X, y, r"NaN|infinity") == "refused"
        else:
            check_fit("DPHSICTest", X, y, r"(?i)finite|too large|overflow|range")

    prop()


# -- odd shapes and dtypes --------------------------------------------------------------------
def _normal(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d))


def _categorical(values):
    return pd.DataFrame({"a": pd.Categorical(values)})


#: kind -> (builder (n, seed) -> X, regex of an acceptable refusal, must refuse).
#: Builders return n rows so that the labels/paired variable match.
ODD = {
    "1-D input": (lambda n, s: _normal(n, 1, s)[:, 0], r"Expected 2D array", True),
    "empty": (lambda n, s: np.empty((0, 1)), r"0 sample|minimum of 1", True),
    "complex": (lambda n, s: _normal(n, 1, s) + 1j, r"Complex data", True),
    "csr matrix": (lambda n, s: sp.csr_matrix(_normal(n, 1, s)),
                   r"Sparse data|dense data is required", True),
    "coo array": (lambda n, s: sp.coo_array(_normal(n, 2, s)),
                  r"Sparse data|dense data is required", True),
    "object strings": (lambda n, s: np.array([["u"]] * n, dtype=object),
                       r"could not convert string|string", True),
    "categorical strings": (lambda n, s: _categorical(["u", "v"] * (n // 2) + ["u"] * (n % 2)),
                            r"(?i)could not convert string|categor|string|non-numeric",
                            True),
    # values that are numbers in disguise may be used as numbers, or refused clearly
    "numeric strings": (lambda n, s: _normal(n, 1, s).astype(str).astype(object),
                        r"(?i)string|dtype|numeric", False),
    "categorical numbers": (lambda n, s: _categorical(np.round(_normal(n, 1, s)[:, 0], 1)),
                            r"(?i)categor|dtype|numeric", False),
    "datetime64": (lambda n, s: (np.datetime64("2020-01-01")
                                 + np.arange(n).reshape(-1, 1) * s).astype("datetime64[D]"),
                   r"(?i)datetime|non-numeric|numeric", False),
    "masked array": (lambda n, s: np.ma.masked_array(_normal(n, 1, s),
                                                     mask=np.arange(n)[:, None] % 3 == 0),
                     r"(?i)mask", False),
    "int8": (lambda n, s: (_normal(n, 1, s) * 40).astype(np.int8), r"(?i)dtype", False),
    "one row": (lambda n, s: _normal(1, 1, s), r"(?i)at least|group|class|sample", False),
}



def _odd_cases():
    for name in NAMES:
        for kind in ODD:
            marks = []
            yield pytest.param(name, kind, marks=marks, id=f"{name}-{kind}")


@pytest.mark.parametrize(("name", "kind"), list(_odd_cases()))
def test_odd_inputs(name, kind):
    """Odd shapes and dtypes: refused clearly before any charge, or released finite."""
    build, match, must_refuse = ODD[kind]

    @FEW
    @given(n=st.sampled_from([4, N_ROWS]), seed=st.integers(0, 2**16))
    def prop(n, seed):
        X = build(n, seed)
        y = _y(name, X.shape[0])
        outcome = check_fit(name, X, y, match)
        if kind == "1-D input" and SPECS[name].one_d_is_column:
            # univariate laws read 1-D rows as one column: the column's release
            assert outcome == "released", "1-D rows of univariate laws were refused"
            one_d, column = _make(name)[0], _make(name)[0]
            assert one_d.fit(X, y).result_ == column.fit(X.reshape(-1, 1), y).result_
        elif must_refuse:
            assert outcome == "refused", f"{kind} input was released"

    prop()


# -- later calls on a different width ---------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_score_on_other_width(name):
    """``score`` after ``fit`` on another number of columns (or 1-D data, where it is not
    read as one column) is refused before the charge and leaves the fitted state
    untouched."""
    est, budget = _make(name)
    X = _normal(N_ROWS, 1, 0)
    est.fit(X, _y(name, N_ROWS))
    assert len(budget) == 1

    @FEW
    @given(width=st.integers(2, 4),
           one_d=st.just(False) if SPECS[name].one_d_is_column else st.booleans())
    def prop(width, one_d):
        Xs = _normal(N_ROWS, width, 1)
        if one_d:
            Xs = Xs[:, 0]
        check = check_call(est, budget, lambda: est.score(Xs, _y(name, N_ROWS)),
                           r"Expected 2D array" if one_d
                           else rf"X has {width} features.*expecting 1 feature")
        assert check == "refused"

    prop()
    assert len(budget) == 1


#: A bad chunk sent mid-stream: kind -> (builder, refusal regex). (A 1-D chunk is one
#: column of the univariate laws: test_partial_fit_one_d_chunk_is_a_column.)
BAD_CHUNKS = {
    "wider": (lambda k: _normal(k, 2, 5), r"X has 2 features.*expecting 1 feature"),
    "NaN": (lambda k: np.full((k, 1), np.nan), r"NaN"),
    "inf": (lambda k: np.full((k, 1), -np.inf), r"infinity"),
    "empty": (lambda k: np.empty((0, 1)), r"0 sample|minimum of 1"),
    "sparse": (lambda k: sp.csr_matrix(_normal(k, 1, 5)), r"Sparse data"),
    "strings": (lambda k: np.array([["u"]] * k, dtype=object), r"could not convert string"),
}


def test_partial_fit_bad_chunk_changes_nothing():
    """A refused ``partial_fit`` chunk (other width, NaN, sparse, ...) is not charged,
    rebinds nothing, and the stream continues exactly as if it had never been sent."""

    @FOUR
    @given(kind=st.sampled_from(sorted(BAD_CHUNKS)), k=st.integers(1, 8),
           first=st.integers(1, 12))
    def prop(kind, k, first):
        build, match = BAD_CHUNKS[kind]
        X = _normal(N_ROWS, 1, 3)
        est, budget = _make("PrivateEProcess")
        ref, _ = _make("PrivateEProcess")
        est.partial_fit(X[:first])
        ref.partial_fit(X[:first])
        assert len(budget) == 1
        stream = est._stream
        assert check_call(est, budget, lambda: est.partial_fit(build(k)), match) == "refused"
        assert est._stream is stream
        # the next valid chunk gives the release of a stream that never saw the bad one
        est.partial_fit(X[first:])
        ref.partial_fit(X[first:])
        assert len(budget) == 1
        assert est.result_ == ref.result_
        _assert_finite_release(est.result_)

    prop()


def test_partial_fit_one_d_chunk_is_a_column():
    """With univariate laws a 1-D chunk (first or later) is read as one column: the
    stream releases exactly what the same rows as an (n, 1) chunk release."""

    @FOUR
    @given(k=st.integers(1, 8), first=st.integers(1, 12))
    def prop(k, first):
        X = _normal(N_ROWS, 1, 3)
        est, budget = _make("PrivateEProcess")
        ref, _ = _make("PrivateEProcess")
        est.partial_fit(X[:first, 0])
        ref.partial_fit(X[:first])
        est.partial_fit(X[first:first + k, 0])
        ref.partial_fit(X[first:first + k])
        assert len(budget) == 1
        assert est.result_ == ref.result_
        _assert_finite_release(est.result_)

    prop()


def test_partial_fit_first_chunk_refused_leaves_fresh_state():
    """A refused first chunk starts no stream: nothing charged, no ``_stream``."""

    @FOUR
    @given(kind=st.sampled_from(sorted(set(BAD_CHUNKS) - {"wider"})))
    def prop(kind):
        build, match = BAD_CHUNKS[kind]
        est, budget = _make("PrivateEProcess")
        assert check_call(est, budget, lambda: est.partial_fit(build(4)), match) == "refused"
        assert len(budget) == 0

    prop()


# -- labels of the two-sample test ------------------------------------------------------------
@st.composite
def group_labels(draw):
    n = draw(st.integers(2, 12))
    return np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))


def test_mmd_group_labels():
    """Fewer than two groups, or a group of one row, is refused naming the problem;
    otherwise the release is finite and charged once (an oracle on the labels)."""

    @FAST
    @given(y=group_labels(), as_str=st.booleans())
    def prop(y, as_str):
        X = _normal(y.size, 1, 7)
        labels = np.array([f"g{v}" for v in y]) if as_str else y
        _, sizes = np.unique(y, return_counts=True)
        if sizes.size < 2:
            match = r"at least 2 groups.*1 class"
        elif sizes.min() < 2:
            match = r"at least 2 rows in every group"
        else:
            match = "(?!)"  # a valid grouping must be released
        outcome = check_fit("DPMMDTest", X, labels, match)
        assert outcome == ("released" if match == "(?!)" else "refused")

    prop()


@pytest.mark.parametrize(("y", "match"), [
    (np.linspace(0.0, 1.0, N_ROWS), r"discrete group labels.*continuous"),
    (np.where(np.arange(N_ROWS) == 3, np.nan, np.arange(N_ROWS) % 2), r"NaN"),
    (np.arange(N_ROWS - 1) % 2, r"inconsistent numbers of samples"),
    (np.zeros(N_ROWS, dtype=int), r"at least 2 groups.*1 class"),
    (np.column_stack([np.arange(N_ROWS) % 2] * 2), r"shape \(n_samples,\)"),
], ids=["continuous", "NaN", "short", "one group", "2-D"])
def test_mmd_bad_labels(y, match):
    X = _normal(N_ROWS, 1, 8)
    assert check_fit("DPMMDTest", X, y, match) == "refused"


@pytest.mark.parametrize(("y", "match"), [
    (None, r"(?i)\by\b.*(required|None)|requires y"),
    (np.arange(N_ROWS - 1, dtype=float), r"inconsistent numbers of samples"),
    (np.array(["u"] * N_ROWS, dtype=object), r"could not convert string|numeric"),
    (np.full(N_ROWS, np.inf), r"infinity"),
], ids=["missing", "short", "strings", "inf"])
def test_hsic_bad_paired_variable(y, match):
    X = _normal(N_ROWS, 1, 9)
    assert check_fit("DPHSICTest", X, y, match) == "refused"


# -- absurd hyperparameters ------------------------------------------------------------------
INVALID = {
    "epsilon": [0, -1, math.nan, math.inf, -math.inf, "1", True, None, np.array([1.0])],
    "alpha": [0, 1, -0.5, 1.5, math.nan, math.inf, "0.05", True],
    "n_permutations": [0, -1, 10**30, 1.5, "20", True],
    "random_state": [-1, 2**40, 2**32, "x", 1.5, True],
}
#: valid but extreme: must be released finite or refused clearly, never crash
EXTREME = {
    "epsilon": [1e308, 1e6, 1e-300, 5e-324],
    "alpha": [1e-300, 1e-297, 1 - 1e-16],
    "random_state": [2**32 - 1, np.int64(7), np.random.default_rng(3)],
}


def _param_name(name, param):
    return SPECS[name].alpha_name if param == "alpha" else param


def _params_of(name):
    return [p for p in INVALID if _param_name(name, p) in SPECS[name].cls().get_params()]


@pytest.mark.parametrize(
    ("name", "param"), [(n, p) for n in NAMES for p in _params_of(n)],
    ids=[f"{n}-{p}" for n in NAMES for p in _params_of(n)])
def test_invalid_parameters(name, param):
    """Every invalid value is refused with InvalidParameterError naming the parameter,
    nothing charged, no state left."""
    pname = _param_name(name, param)

    @settings(FAST, max_examples=2 * len(INVALID[param]))
    @given(value=st.sampled_from(INVALID[param]))
    def prop(value):
        est, budget = _make(name, **{pname: value})
        fresh = _snapshot(est)
        with pytest.raises(InvalidParameterError, match=rf"\b{pname}\b"):
            est.fit(_normal(N_ROWS, 1, 0), _y(name, N_ROWS))
        assert len(budget) == 0
        _assert_state_is(est, fresh)

    prop()


def _extreme_mark(name, param, value):
    # A numpy integer or a Generator seed takes the base class's path (only _base.py reads
    # random_state): by default for one estimator of each base class, as in
    # test_randomness.py's fixed-seed cases; the largest int seed for every estimator.
    if (param == "random_state" and not isinstance(value, int)
            and name not in ("PrivateEValueTest", "PrivateEProcess")):
        return pytest.mark.slow
    return None


def _extreme_cases():
    for name in NAMES:
        for param, values in EXTREME.items():
            for i, value in enumerate(values):
                mark = _extreme_mark(name, param, value)
                yield pytest.param(name, param, i, marks=[mark] if mark else [],
                                   # no object address in an id: xdist workers must agree
                                   id=re.sub(r" at 0x[0-9A-Fa-f]+", "",
                                             f"{name}-{param}={value!r}")[:80])


@pytest.mark.parametrize(("name", "param", "index"), list(_extreme_cases()))
def test_extreme_valid_parameters(name, param, index):
    """Valid but extreme values (ε = 1e308 or 5e-324, α = 1e-300, the largest seed):
    a finite release charged once, or a clear refusal naming the parameter before the
    charge. Never an OverflowError/ZeroDivisionError, never a charge without release."""
    value = EXTREME[param][index]
    pname = _param_name(name, param)
    capped = param == "epsilon" and value > SPECS[name].max_epsilon
    # a capped ε is released at the cap, and the user is told so (at fit and at score)
    with (pytest.warns(PrivacyLeakWarning, match=rf"epsilon={re.escape(repr(value))} is above")
          if capped else contextlib.nullcontext()):
        check_fit(name, _normal(N_ROWS, 1, 0) + 3.0, _y(name, N_ROWS), rf"\b{pname}\b",
                  **{pname: value})


@pytest.mark.parametrize("name", CHEAP)
def test_any_float_epsilon(name):
    """Any float ε (hypothesis over the whole float line): refused naming ``epsilon``
    or released finite and charged once."""

    @FAST
    @given(eps=st.floats(allow_nan=True, allow_infinity=True))
    def prop(eps):
        check_fit(name, _normal(N_ROWS, 1, 0) + 3.0, _y(name, N_ROWS), r"\bepsilon\b",
                  score=False, epsilon=eps)

    prop()


@pytest.mark.parametrize("name", CHEAP)
def test_any_float_alpha(name):
    """Any float level: refused naming it, or released finite and charged once."""
    pname = SPECS[name].alpha_name

    @FAST
    @given(alpha=st.floats(allow_nan=True, allow_infinity=True))
    def prop(alpha):
        check_fit(name, _normal(N_ROWS, 1, 0) + 3.0, _y(name, N_ROWS), rf"\b{pname}\b",
                  score=False, **{pname: alpha})

    prop()


@pytest.mark.parametrize("name", ["DPMMDTest", "DPHSICTest"])
def test_any_integer_n_permutations(name):
    """Any int (huge or negative) or other number of permutations: refused naming
    ``n_permutations``, or (small positive ints) released finite and charged once."""

    @FAST
    @given(b=st.one_of(st.integers(-2**70, 2**70), st.integers(1, 30), st.floats()))
    def prop(b):
        check_fit(name, _normal(N_ROWS, 1, 0), _y(name, N_ROWS), r"\bn_permutations\b",
                  score=False, n_permutations=b)

    prop()


@pytest.mark.parametrize("name", NAMES)
def test_any_integer_random_state(name):
    """Any integer seed: refused naming ``random_state`` outside [0, 2**32 - 1],
    released finite and charged once inside."""

    @FEW
    @given(seed=st.one_of(st.integers(-2**70, 2**70), st.integers(0, 2**32 - 1)))
    def prop(seed):
        outcome = check_fit(name, _normal(N_ROWS, 1, 0) + 3.0, _y(name, N_ROWS),
                            r"\brandom_state\b", score=False, random_state=seed)
        assert outcome == ("released" if 0 <= seed < 2**32 else "refused")

    prop()


@pytest.mark.slow
@pytest.mark.parametrize("param", ["epsilon", "alpha"])
@pytest.mark.parametrize("name", ["PrivateEValueTest", "PrivateEProcess"])
def test_any_float_evalue(name, param):
    """The float-line searches over ε and α for the e-value tests (a plan per value: slow)."""

    @SLOW
    @given(value=st.floats(allow_nan=True, allow_infinity=True))
    def prop(value):
        # a finite ε above the cap is released at the cap, and the user is told so
        capped = param == "epsilon" and math.isfinite(value) \
            and value > SPECS[name].max_epsilon
        with (pytest.warns(PrivacyLeakWarning, match=r"is above")
              if capped else contextlib.nullcontext()):
            check_fit(name, _normal(N_ROWS, 1, 0), None, rf"\b{param}\b", score=False,
                      **{param: value})

    prop()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_data_values_many(name):
    """``test_data_values`` with more examples and more rows."""

    @SLOW
    @given(X=arrays(np.float64, (st.sampled_from([N_ROWS, 40])), elements=VALUES))
    def prop(X):
        X = X.reshape(-1, 1)
        match = r"NaN|infinity" if not np.all(np.isfinite(X)) \
            else r"(?i)finite|too large|overflow|range"
        outcome = check_fit(name, X, _y(name, X.shape[0]), match)
        if not np.all(np.isfinite(X)):
            assert outcome == "refused"

    prop()


@pytest.mark.slow
def test_properties_with_the_full_example_counts():
    """This file's default tests with the full example counts (twice the default suite's)."""
    env = {**os.environ, "SKDPTEST_HYPOTHESIS": "ci"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         __file__],
        cwd=os.path.dirname(os.path.dirname(__file__)), env=env, capture_output=True,
        text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]


# -- the checks can fail -------------------------------------------------------------------
def _mutant(monkeypatch, how):
    """Break DPMMDTest in one way the property must catch."""
    cls = DPMMDTest
    if how == "charged twice":
        charge = cls._charge

        def twice(self, params, what):
            charge(self, params, what)
            charge(self, params, what)

        monkeypatch.setattr(cls, "_charge", twice)
    elif how == "non-finite release":
        release = cls._release
        monkeypatch.setattr(cls, "_release", lambda self, prep, rng: dataclasses.replace(
            release(self, prep, rng), noise_scale=math.nan))
    elif how == "refused after the charge":
        def late(self, prep, rng):
            raise ValueError("X has NaN values")

        monkeypatch.setattr(cls, "_release", late)
    elif how == "state left behind":
        def refuse(self, params, X, y):  # after validate_data set n_features_in_
            raise ValueError("X has NaN values")

        monkeypatch.setattr(cls, "_clear_fitted", lambda self: None)
        monkeypatch.setattr(cls, "_plan", refuse)
    elif how == "unclear message":
        def unclear(self, params, X, y):
            raise ValueError("something went wrong")

        monkeypatch.setattr(cls, "_plan", unclear)


@pytest.mark.parametrize(("how", "message"), [
    ("charged twice", "charged 2 times"),
    ("non-finite release", "noise_scale = nan"),
    ("refused after the charge", "a refused call was charged"),
    ("state left behind", "state changed by a refused call"),
    ("unclear message", "unclear refusal"),
])
def test_property_catches_mutants(monkeypatch, how, message):
    """Each way of breaking the boundary contract makes ``check_fit`` fail."""
    _mutant(monkeypatch, how)
    X = _normal(N_ROWS, 1, 0)
    with pytest.raises(AssertionError, match=message):
        check_fit("DPMMDTest", X, _y("DPMMDTest", N_ROWS), r"NaN|infinity")
