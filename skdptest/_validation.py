"""Argument checks for the code outside an estimator's constraint table.

``check_real`` and ``check_int`` are thin users of :mod:`skdptest._params` (one
validator family): the same ``Interval`` normalisation, refusals and messages as an
estimator's ``_parameter_constraints`` (an :class:`~skdptest.InvalidParameterError`,
a ``ValueError`` and a ``TypeError``, naming the argument), for functions and
mechanisms that take plain arguments. ``check_budget`` and ``check_generator`` serve the
base class.
"""

from __future__ import annotations

import functools
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from ._budget import PrivacyBudget
from ._params import Interval, check_value

__all__ = [
    "check_alpha",
    "check_budget",
    "check_delta",
    "check_epsilon",
    "check_generator",
    "check_int",
    "check_real",
    "is_dask",
]

#: (low_open, high_open) -> the Interval's ``closed``.
_CLOSED = {(False, False): "both", (True, False): "right", (False, True): "left",
           (True, True): "neither"}


def check_real(value, name, *, low=None, high=None, low_open=False, high_open=False,
               allow_inf=False):
    """Return ``value`` as a float: ``Interval(Real, low, high)`` of :mod:`._params`.

    ``low``/``high`` are inclusive unless ``low_open``/``high_open``; NaN is always
    refused, ±inf unless ``allow_inf``.
    """
    closed = _CLOSED[bool(low_open), bool(high_open)]
    try:
        constraints = _real_interval(low, high, closed, bool(allow_inf), type(low), type(high))
    except TypeError:  # unhashable bounds: built for this call only
        constraints = (Interval(Real, low, high, closed=closed, allow_inf=allow_inf),)
    return check_value(value, constraints, name)


@functools.lru_cache(maxsize=256)
def _real_interval(low, high, closed, allow_inf, low_type, high_type):
    """The one-element constraint list of `check_real`, built once per set of bounds.

    The bounds' types are part of the key so that ``0`` and ``0.0`` (equal, same hash)
    keep their own ``Interval``, as before the cache. Only public bounds are keys.
    """
    return (Interval(Real, low, high, closed=closed, allow_inf=allow_inf),)


def check_int(value, name, *, low=None):
    """Return ``value`` as an int: ``Interval(Integral, low, None)`` of :mod:`._params`."""
    return check_value(value, [Interval(Integral, low, None)], name)


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
    if isinstance(random_state, Integral):
        # Seeding a RandomState costs ~0.4 ms and a suite derives the same few seeds
        # thousands of times; the words depend on the public seed alone.
        words = _int_seed_words(int(random_state))
    else:
        words = _seed_words(check_random_state(random_state))
    return np.random.default_rng([*words, int(stream)])


@functools.lru_cache(maxsize=256)
def _int_seed_words(seed):
    """The four seed words of the int ``seed`` (as `_seed_words` derives them), cached.

    Keyed by the public seed only, bounded, and per process; a refused seed (outside
    [0, 2**32)) raises ``check_random_state``'s error and is not cached.
    """
    return _seed_words(check_random_state(seed))


def _seed_words(rs):
    """Four 32-bit words drawn from the ``RandomState`` ``rs`` (which it advances)."""
    return tuple(int(w) for w in rs.randint(0, 2**32, size=4, dtype=np.uint64))
