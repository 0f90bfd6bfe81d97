"""skdptest._special.logsumexp: bit-identical to scipy 1.17 and accurate to a few ulps."""

import math

import mpmath
import numpy as np
import pytest
import scipy
from scipy import special

from skdptest._special import logsumexp

# The max-separated algorithm (log1p(s) + log(m) + max) entered scipy with PR #21597
# (scipy 1.15); its operation order, with the direct fallback where not finite, was read
# and verified in scipy 1.17's special/_logsumexp.py only. Other versions may order the
# float operations differently, so bit equality is asserted on 1.17 alone (the accuracy
# tests below always run).
_SCIPY = tuple(int(p) for p in scipy.__version__.split(".")[:2])
same_algorithm = pytest.mark.skipif(
    _SCIPY != (1, 17),
    reason=f"bit equality verified against scipy 1.17's algorithm, not {scipy.__version__}",
)

SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, 5.0, -745.0, 709.0, 1e308, -1e308])


def _identical(got, want):
    """Same type, shape, dtype and bits (NaN equal to NaN)."""
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.array_equal(got, want, equal_nan=True), (got, want)


def _scipy(a, axis=None, b=None):
    with np.errstate(all="ignore"):
        return special.logsumexp(a, axis=axis, b=b)


def _ours(a, axis=None, b=None):
    with np.errstate(all="ignore"):
        return logsumexp(a, axis=axis, b=b)


def _random_case(rng):
    """An array of 0 to 3 dims, maybe transposed, with specials and ties; an axis; weights."""
    shape = tuple(int(k) for k in rng.integers(0, 6, size=rng.integers(0, 4)))
    a = rng.normal(scale=rng.choice([1.0, 100.0, 1000.0]), size=shape)
    if a.size and rng.random() < 0.5:
        flat = a.reshape(-1)
        k = rng.integers(0, flat.size + 1)
        flat[rng.integers(0, flat.size, size=k)] = rng.choice(SPECIALS, size=k)
    if a.size and rng.random() < 0.2:
        a = np.round(a)  # ties, several maxima
    b = None
    if rng.random() < 0.4:
        b = rng.choice([0.0, 1.0, -1.0, 2.5, 1e-300], size=shape)
    if a.ndim == 2 and rng.random() < 0.3:
        a = a.T  # a non-contiguous layout sums in another order
        b = None if b is None else b.T
    axis = None if a.ndim == 0 or rng.random() < 0.3 else int(rng.integers(-a.ndim, a.ndim))
    return a, axis, b


@same_algorithm
def test_bit_identical_to_scipy_on_random_arrays():
    rng = np.random.default_rng(20261202)
    compared = 0
    # 400 random shapes, layouts, ties, specials and weights; the edge cases below
    # pin each special branch on its own
    for _ in range(400):
        a, axis, b = _random_case(rng)
        if a.size == 0 and a.ndim > 1 and axis is None:
            continue  # scipy 1.17 raises IndexError here (see the empty-input test)
        _identical(_ours(a, axis, b), _scipy(a, axis, b))
        compared += 1
    assert compared > 370


EDGE_CASES = [
    ([], None, None),
    (np.zeros((0, 3)), 0, None),
    (np.zeros((0, 3)), 1, None),
    (np.zeros((2, 0)), -1, None),
    ([-np.inf, -np.inf], None, None),
    ([[-np.inf, -np.inf], [0.0, -np.inf]], 1, None),
    ([np.inf, 1.0], None, None),
    ([np.inf, np.inf], None, None),
    ([np.inf, -np.inf], None, None),
    ([np.nan, 1.0], None, None),
    ([np.nan, np.inf], None, None),
    ([np.nan, -np.inf], None, None),
    ([3.0, 3.0, 3.0], None, None),  # ties: every maximum separated out
    ([710.0, 710.0], None, None),  # exp overflows, the stable form does not
    ([1e308, 1e308], None, None),  # the result itself overflows: the direct form's inf
    ([-1e308, -1e308], None, None),
    ([-800.0, -801.0], None, None),  # exp underflows
    ([0.0, -40.0], None, None),  # log1p of a tiny s
    ([1.0], None, None),
    (2.5, None, None),  # 0-d input
    ([1, 2, 3], None, None),  # integers promote to float64
    (np.array([1.0, 2.0], dtype=np.float32), None, None),
    (np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32), 0, None),
    ([np.inf, 1.0], None, [0.0, 1.0]),  # a zero weight removes inf
    ([np.nan, 1.0], None, [0.0, 2.0]),  # and nan
    ([1.0, 2.0], None, [0.0, 0.0]),  # every weight zero: -inf
    ([1.0, 2.0], None, [1.0, -1.0]),  # negative sum: nan
    ([2.0, 1.0], None, [1.0, -1.0]),
    ([1.0, 1.0], None, [1.0, -1.0]),  # exact cancellation: -inf
    ([1.0, 2.0], None, [-1.0, -1.0]),
    ([5.0, 4.0], None, [1e-320, 1.0]),  # s / m overflows
    ([[1.0, 2.0], [3.0, 4.0]], 1, [2.0, 0.5]),  # broadcast weights
    ([[1.0, 2.0], [3.0, 4.0]], None, [[1.0], [3.0]]),
    ([1.0, 2.0], None, 3.0),
]


@same_algorithm
@pytest.mark.parametrize("a, axis, b", EDGE_CASES)
def test_bit_identical_to_scipy_on_edge_cases(a, axis, b):
    _identical(_ours(a, axis, b), _scipy(a, axis, b))


def test_edge_case_values():
    assert logsumexp([]) == -np.inf
    assert logsumexp([-np.inf, -np.inf]) == -np.inf
    assert logsumexp([np.inf, 1.0]) == np.inf
    assert np.isnan(logsumexp([np.nan, 1.0]))
    assert logsumexp([np.inf, 1.0], b=[0.0, 1.0]) == 1.0
    assert np.isnan(logsumexp([1.0, 2.0], b=[1.0, -1.0]))
    assert logsumexp([3.0, 3.0]) == 3.0 + math.log(2.0)
    assert np.array_equal(logsumexp(np.zeros((2, 0)), axis=1), [-np.inf, -np.inf])
    # scipy 1.17 raises IndexError for empty input of two or more dims summed whole
    assert logsumexp(np.zeros((0, 3))) == -np.inf
    assert type(logsumexp([1.0, 2.0])) is np.float64


def test_warnings_as_scipy_silences_them():
    # scipy silences divide, invalid and overflow in the direct form and divide and
    # invalid in the stable one; with np.errstate raising, the same cases pass or raise.
    with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
        assert logsumexp([710.0, 710.0]) == 710.0 + math.log(2.0)  # exp(710) overflows
        assert logsumexp([-np.inf, -np.inf]) == -np.inf  # log(0), -inf - -inf
        assert np.isnan(logsumexp([np.nan, 1.0]))
        assert np.isnan(logsumexp([1.0, 2.0], b=[1.0, -1.0]))
        with pytest.raises(FloatingPointError, match="overflow"):
            logsumexp([5.0, 4.0], b=[1e-320, 1.0])  # scipy leaves s / m's overflow loud


def test_rejects_complex_input():
    with pytest.raises(TypeError, match="real input only"):
        logsumexp(np.array([1.0 + 1.0j]))
    with pytest.raises(TypeError, match="real input only"):
        logsumexp([1.0], b=np.array([1.0j]))


def _exact(a, b=None):
    """log(sum(b * exp(a))) at 60 digits, rounded once to float64 (finite, positive sums)."""
    with mpmath.workdps(60):
        weights = [1] * len(a) if b is None else b
        total = mpmath.fsum(mpmath.mpf(float(w)) * mpmath.exp(float(x))
                            for x, w in zip(a, weights, strict=True))
        return float(mpmath.log(total))


def _ulps(got, want, scale):
    """Error in units of the last place of scale (the larger of the result and the max)."""
    return abs(got - want) / np.spacing(scale)


def test_accuracy_against_mpmath():
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(400):
        n = int(rng.integers(1, 40))
        a = rng.normal(loc=rng.choice([0.0, -700.0, 700.0]), scale=rng.choice([0.1, 5.0, 300.0]),
                       size=n)
        if rng.random() < 0.3:
            a[rng.integers(0, n, size=2)] = a.max()  # ties at the max
        b = rng.uniform(0.1, 3.0, size=n) if rng.random() < 0.3 else None
        got = float(logsumexp(a, b=b))
        want = _exact(a, b)
        # The log is absolutely accurate to the max's ulps (Blanchard, Higham & Higham).
        scale = max(abs(want), abs(float(a.max())), 1.0)
        worst = max(worst, _ulps(got, want, scale))
    assert worst <= 4.0, worst


def test_accuracy_along_an_axis_against_fsum():
    rng = np.random.default_rng(8)
    a = rng.normal(scale=3.0, size=(30, 12))
    got = logsumexp(a, axis=1)
    for row, value in zip(a, got, strict=True):
        shift = row.max()
        want = shift + math.log(math.fsum(math.exp(x - shift) for x in row))
        assert _ulps(value, want, max(abs(want), 1.0)) <= 4.0
