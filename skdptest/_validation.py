"""Parameter checks shared by all estimators.

Every check names the parameter in its message and raises ``TypeError`` for a
wrong type and ``ValueError`` for a wrong value (``check_real`` and ``check_int``:
:class:`~skdptest.InvalidParameterError`, which is both), before any budget is
charged.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from ._budget import PrivacyBudget
from ._params import InvalidParameterError, _shown

__all__ = [
    "check_budget",
    "check_generator",
    "check_int",
    "check_real",
    "is_dask",
]


def check_real(value, name, *, low=None, high=None, low_open=False, high_open=False,
               allow_inf=False):
    """Return ``value`` as a float after checking type, finiteness and range.

    ``low``/``high`` are inclusive unless ``low_open``/``high_open``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidParameterError(f"{name} must be a real number, got {type(value).__name__}.")
    try:
        value = float(value)
    except OverflowError:  # an int or Fraction above float64's range
        raise InvalidParameterError(f"{name} must be finite, got a number outside the range of "
                         "float64.") from None
    if math.isnan(value) or (not allow_inf and math.isinf(value)):
        raise InvalidParameterError(f"{name} must be finite, got {value}.")
    if low is not None and (value < low or (low_open and value == low)):
        op = ">" if low_open else ">="
        raise InvalidParameterError(f"{name} must be {op} {low}, got {value}.")
    if high is not None and (value > high or (high_open and value == high)):
        op = "<" if high_open else "<="
        raise InvalidParameterError(f"{name} must be {op} {high}, got {value}.")
    return value


def check_int(value, name, *, low=None):
    """Return ``value`` as an int after checking its type and lower bound."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParameterError(f"{name} must be an integer, got {type(value).__name__}.")
    value = int(value)
    if low is not None and value < low:
        raise InvalidParameterError(f"{name} must be >= {low}, got {_shown(value)}.")
    return value


def check_epsilon(value, name="epsilon"):
    """ε must be finite and > 0."""
    return check_real(value, name, low=0.0, low_open=True)


def check_delta(value, name="delta"):
    """δ must lie in [0, 1)."""
    return check_real(value, name, low=0.0, high=1.0, high_open=True)


def check_alpha(value, name="alpha"):
    """A level must lie in (0, 1)."""
    return check_real(value, name, low=0.0, high=1.0, low_open=True, high_open=True)


def is_dask(X):
    """Whether ``X`` is a dask collection (array, dataframe or series), without importing
    dask (the families that take dask input share this test)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "__dask_graph__")


def check_budget(budget):
    """``budget`` must be ``None`` or a :class:`PrivacyBudget`."""
    if budget is not None and not isinstance(budget, PrivacyBudget):
        raise TypeError(
            f"budget must be None or a PrivacyBudget, got {type(budget).__name__}."
        )
    return budget


def check_generator(random_state, stream=0):
    """Resolve ``random_state`` to a :class:`numpy.random.Generator`.

    ``None`` draws a fresh seed from the operating system's entropy
    (:class:`numpy.random.SeedSequence`), never from numpy's global state: after
    ``np.random.seed(0)`` elsewhere, two releases must still get independent,
    unpredictable noise. An int seed (or a ``RandomState``) makes the noise
    reproducible, and therefore predictable by anyone who knows the seed: use it
    for tests and experiments only, never for real releases. A ``Generator`` is
    returned as is. ``stream`` separates the noise of ``fit`` (0) from that of
    ``score`` (1) under one seed.
    """
    if random_state is None:
        return np.random.default_rng(np.random.SeedSequence())
    if isinstance(random_state, np.random.Generator):
        return random_state
    rs = check_random_state(random_state)
    words = [int(w) for w in rs.randint(0, 2**32, size=4, dtype=np.uint64)]
    return np.random.default_rng(words + [int(stream)])
