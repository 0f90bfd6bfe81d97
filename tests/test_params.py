"""Parameter constraints (skdptest/_params.py) and the shared checks of _validation.py on
numbers outside float64's range (issue 18, item 8)."""

import math
import numbers
from fractions import Fraction

import numpy as np
import pytest

from skdptest import InvalidParameterError, _params
from skdptest._params import Interval, check_value
from skdptest._validation import _real_interval, check_int, check_real

REAL = [Interval(numbers.Real, 0, None, closed="neither")]
REAL_INF = [Interval(numbers.Real, 0, None, allow_inf=True)]
INT = [Interval(numbers.Integral, 1, None)]


@pytest.mark.parametrize(("value", "constraints", "match"), [
    (10**400, REAL, r"^epsilon must be a real number in \(0, inf\); got an int of about 401 "
                    r"digits \(outside the range of float64\)\.$"),
    (-(10**400), REAL, r"got an int of about 401 digits \(outside the range of float64\)"),
    (10**5000, REAL, r"got an int of about 5001 digits"),  # repr would raise ValueError
    (10**400, REAL_INF, r"\(outside the range of float64\)"),  # not rounded to inf
    (Fraction(10**400, 7), REAL, r"got an object of type Fraction \(outside the range"),
    (np.longdouble(10) ** 400 if np.finfo(np.longdouble).max > 1e400 else 10**400, REAL,
     r"outside the range of float64"),
    (2**63, INT, r"^epsilon must be an int in \[1, inf\); got 9223372036854775808 \(outside "
                 r"the range of a 64-bit integer\)\.$"),
    (10**400, INT, r"got an int of about 401 digits \(outside the range of a 64-bit"),
    ("x" * 500, REAL, r"got a str of length 500\.$"),
], ids=["1e400", "-1e400", "1e5000", "1e400 allow_inf", "Fraction", "longdouble", "2**63",
        "1e400 int", "long str"])
def test_out_of_range_numbers_are_refused_naming_the_parameter(value, constraints, match):
    with pytest.raises(InvalidParameterError, match=match):
        check_value(value, constraints, "epsilon")


def test_values_at_the_edges_of_the_ranges_are_accepted():
    largest = np.finfo(np.float64).max
    assert check_value(int(largest), REAL, "epsilon") == largest
    assert check_value(2**63 - 1, INT, "n") == 2**63 - 1
    assert check_value(math.inf, REAL_INF, "bound") == math.inf
    assert check_value(np.longdouble(math.inf), REAL_INF, "bound") == math.inf
    assert check_value(Fraction(1, 3), REAL, "epsilon") == 1 / 3


def test_invalid_examples_include_numbers_outside_the_range():
    assert 10**400 in Interval(numbers.Real, 0, 1).invalid_examples()
    assert 2**63 in Interval(numbers.Integral, 0, None).invalid_examples()


@pytest.mark.parametrize(("call", "match"), [
    (lambda: check_real(10**400, "threshold"),
     r"^threshold must be a real number; got an int of about 401 digits \(outside the "
     r"range of float64\)\.$"),
    (lambda: check_real(Fraction(-(10**400)), "threshold"), r"outside the range of float64"),
    (lambda: check_real("1", "threshold"), r"^threshold must be a real number; got '1'\.$"),
    (lambda: check_int(-(10**5000), "n_runs", low=1),
     r"^n_runs must be an int in \[1, inf\); got an int of about 5001 digits"),
])
def test_shared_checks_refuse_with_invalid_parameter_error(call, match):
    with pytest.raises(InvalidParameterError, match=match):
        call()


# -- the fast paths of _to_float and check_real (issue 20): same values, same refusals ----

def _reference_to_float(value):
    """_to_float before its fast paths: every value through errstate and the inf check."""
    try:
        with np.errstate(over="ignore"):
            out = float(value)
    except OverflowError:
        raise _params._Reject("outside the range of float64") from None
    if math.isinf(out) and not _params._is_infinite(value):
        raise _params._Reject("outside the range of float64")
    return out


class _Float(float):
    """A float subclass (not on the fast path)."""


FLOATS = [0.0, -0.0, 1.5, -2.25, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
          math.inf, -math.inf, math.nan, 0.1]
VALUES = (FLOATS + [np.float64(v) for v in FLOATS] + [_Float(1.5), np.float32(0.1)]
          + [0, 1, -7, 2**53 + 1, 2**63, 2**1023, 2**1024, -(2**1024), 10**400, -(10**400)]
          + [np.int64(3), np.uint64(2**64 - 1), Fraction(1, 3), Fraction(10**400, 7),
             np.longdouble(2.5), True, np.bool_(False), "1", None, 1 + 2j])


def _outcome(call, value):
    """(type, bits) of the result, or (exception type, message)."""
    try:
        out = call(value)
    except Exception as exc:  # noqa: BLE001 - the refusal is what is compared
        return type(exc), str(exc)
    if isinstance(out, float):
        return type(out), np.float64(out).tobytes()  # -0.0 and NaN compared by bits
    return type(out), out


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_to_float_fast_paths_equal_the_reference(value):
    assert _outcome(_params._to_float, value) == _outcome(_reference_to_float, value)


CONSTRAINT_SETS = [REAL, REAL_INF, INT,
                   [Interval(numbers.Real, -1.0, 1.0, closed="left")],
                   [Interval(numbers.Real, None, None, allow_inf=True)],
                   [Interval(numbers.Real, 0, 1, closed="neither"),
                    Interval(numbers.Integral, 5, 9)]]


@pytest.mark.parametrize("constraints", CONSTRAINT_SETS, ids=str)
def test_check_value_equals_the_reference_normalisation(constraints, monkeypatch):
    fast = [_outcome(lambda v: check_value(v, constraints, "p"), v) for v in VALUES]
    monkeypatch.setattr(_params, "_to_float", _reference_to_float)
    assert fast == [_outcome(lambda v: check_value(v, constraints, "p"), v) for v in VALUES]


BOUNDS = [dict(low=0.0, low_open=True), dict(low=0.0, high=1.0, high_open=True),
          dict(low=0, high=1, low_open=True, high_open=True), dict(low=1.0, high=2.0),
          dict(allow_inf=True), dict(low=-3, allow_inf=True), dict(high=np.float64(0.5))]


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_check_real_equals_a_freshly_built_interval(bounds):
    closed = {(False, False): "both", (True, False): "right", (False, True): "left",
              (True, True): "neither"}[bounds.get("low_open", False),
                                       bounds.get("high_open", False)]
    fresh = [Interval(numbers.Real, bounds.get("low"), bounds.get("high"), closed=closed,
                      allow_inf=bounds.get("allow_inf", False))]
    for _ in range(2):  # built, then read from the cache
        assert ([_outcome(lambda v: check_real(v, "p", **bounds), v) for v in VALUES]
                == [_outcome(lambda v: check_value(v, fresh, "p"), v) for v in VALUES])


def test_check_real_keeps_int_and_float_bounds_apart():
    check_real(0.5, "p", low=0)
    check_real(0.5, "p", low=0.0)
    assert type(_real_interval(0, None, "both", False, int, type(None))[0].low) is int
    assert type(_real_interval(0.0, None, "both", False, float, type(None))[0].low) is float
    assert _real_interval.cache_info().maxsize == 256


def test_check_real_with_unhashable_bounds_builds_its_interval():
    with pytest.raises(InvalidParameterError, match=r"^p must be a real number in \[0, 1\]"):
        check_real(2.0, "p", low=np.array(0.0), high=np.array(1.0))
    assert check_real(0.5, "p", low=np.array(0.0), high=np.array(1.0)) == 0.5
