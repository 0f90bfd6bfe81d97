"""Parameter constraints (skdptest/_params.py) and the shared checks of _validation.py on
numbers outside float64's range (issue 18, item 8)."""

import math
import numbers
from fractions import Fraction

import numpy as np
import pytest

from skdptest import InvalidParameterError
from skdptest._params import Interval, check_value
from skdptest._validation import check_int, check_real

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
