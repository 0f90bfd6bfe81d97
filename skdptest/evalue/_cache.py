"""Memoisation of public planning computations (laws, statistics, bets, null laws).

Plans are keyed by the *values* of the laws, not by the identity of the law objects:
``PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5, 1))`` written inline in a loop
(or cloned by :func:`sklearn.base.clone`, which deep-copies the laws) plans once.

A value key (:func:`law_token`) is a faithful, exact encoding of everything a frozen
scipy law computes with: the exact class of the frozen object and of its generator
(scipy's own classes only), and every data attribute of both -- the arguments and
keywords (keywords sorted), the support ends, tolerances, the arrays of an
``rv_discrete(values=...)`` law, a multivariate normal's mean, covariance and its
factorisation -- each float by its exact bits (``0.0`` and ``-0.0``, ``1`` and
``1.0`` are different keys). Two laws share a key only if these values are
identical, so they compute the same numbers; equal laws spelt differently
(``norm(0, 1)`` and ``norm(loc=0.0)``) get different keys and merely plan twice.

Laws that cannot be keyed by value fall back to their identity (anchored in the
entry, so an id is never reused while its entry lives): instances of other classes
(user subclasses of ``rv_continuous``, ``rv_histogram``, custom objects), laws with a
method replaced on the instance, attributes that are not plain data, and arrays of
more than ``_MAX_KEY_ELEMENTS`` elements (a huge covariance is keyed by identity
rather than copied into the key).

Mutation: scipy's frozen laws are meant to be immutable, but their ``kwds`` dict and
a multivariate normal's arrays can be changed in place. The key is recomputed from
the current values at every fit, and a computation keyed by value runs on a private
deep copy of the laws (:func:`snapshot`), so a law changed in place afterwards can
neither reach an entry made for its old values nor alter one. Laws keyed by identity
are used as given: changing them in place between fits is not supported.

The cache is a bounded LRU (``_PLANS_MAX`` entries) shared by the e-value estimators;
it holds only public computations (functions of the laws, n and ε).
"""

from __future__ import annotations

import copy
import threading
import types
from collections import OrderedDict
from numbers import Integral

import numpy as np

__all__ = ["law_token", "law_tokens", "snapshot"]

_PLANS = OrderedDict()  # public planning computations, reused across fits
_PLANS_MAX = 64
_LOCK = threading.Lock()  # the dict only; computations run outside it

#: Arrays with more elements than this are not copied into keys (identity instead).
_MAX_KEY_ELEMENTS = 1 << 16
_MAX_DEPTH = 6
# Attributes that do not change what a law computes: its docstring, and the random
# state used by ``rvs`` without ``random_state`` (the library always passes one).
_IGNORED = frozenset({"__doc__", "_random_state"})


class _Unkeyable(Exception):
    """Raised inside :func:`_encode` for a value without a faithful value key."""


def _own_method(value, owner):
    """The encoding of a method scipy stores on the instance ``owner`` (a bound method
    of ``owner``, possibly wrapped in or wrapping ``np.vectorize``, of a function
    defined by scipy), else raise :class:`_Unkeyable`."""
    if isinstance(value, np.vectorize):
        value = value.pyfunc
    if not isinstance(value, types.MethodType) or value.__self__ is not owner:
        raise _Unkeyable
    func = value.__func__
    if isinstance(func, np.vectorize):
        func = func.pyfunc
    module = getattr(func, "__module__", "")
    if not isinstance(func, types.FunctionType) or not (
            module is None or module.startswith("scipy.")):
        raise _Unkeyable
    return ("m", func.__qualname__)


def _encode(value, depth=0, owner=None):
    """An exact, hashable encoding of ``value`` (raises :class:`_Unkeyable`)."""
    kind = type(value)
    if kind is float:
        return ("f", value.hex())  # exact bits: -0.0 != 0.0, every NaN the same NaN
    if kind is int:
        return ("i", value)
    if kind is str or value is None:
        return value
    if kind is bool:
        return ("b", value)
    if depth > _MAX_DEPTH:
        raise _Unkeyable
    if kind is tuple or kind is list:
        return (kind.__name__, tuple([_encode(v, depth + 1) for v in value]))
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise _Unkeyable
        return ("d", tuple([(k, _encode(value[k], depth + 1)) for k in sorted(value)]))
    if kind is types.MethodType or kind is np.vectorize:
        # scipy keeps a few bound methods (and np.vectorize of them) on the instance
        return _own_method(value, owner)
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        if arr.dtype.hasobject or arr.size > _MAX_KEY_ELEMENTS:
            raise _Unkeyable
        tag = "n" if isinstance(value, np.ndarray) else "g"
        return (tag, arr.dtype.str, arr.shape, np.ascontiguousarray(arr).tobytes())
    if isinstance(value, np.random.RandomState | np.random.Generator):
        return ("rng",)  # a random state: it does not change what a law computes
    if isinstance(value, Integral | float):  # subclasses of int / float: not exact
        raise _Unkeyable
    return _encode_object(value, depth)


def _encode_object(obj, depth):
    """scipy.stats objects (frozen laws, their generators, covariance factorisations):
    their exact class and every data attribute; nothing replaced on the instance."""
    cls = type(obj)
    if not cls.__module__.startswith("scipy.stats.") or not hasattr(obj, "__dict__"):
        raise _Unkeyable
    attrs = vars(obj)
    items = []
    for name in sorted(attrs):
        if name in _IGNORED:
            continue
        if hasattr(cls, name):  # an attribute shadowing the class: a replaced method
            raise _Unkeyable
        items.append((name, _encode(attrs[name], depth + 1, owner=obj)))
    return ("o", cls, tuple(items))


def law_token(law):
    """The cache key of one law: ``("value", encoding)`` when it can be keyed by value
    (see the module docstring), else ``("id", id(law))``."""
    if law is None:
        return ("none",)
    try:
        return ("value", _encode_object(law, 0))
    except (_Unkeyable, RecursionError, TypeError, ValueError):
        return ("id", id(law))


def law_tokens(*laws):
    """(tokens, anchors): the keys of ``laws`` and the laws keyed by identity (to be
    stored with the entry, so that their ids are not reused while it lives)."""
    tokens = tuple(law_token(law) for law in laws)
    anchors = tuple(law for law, tok in zip(laws, tokens, strict=True) if tok[0] == "id")
    return tokens, anchors


def snapshot(law, token):
    """The law a computation keyed by ``token`` runs on: a private deep copy for value
    keys (a later in-place change of ``law`` cannot alter the entry), else ``law``."""
    return copy.deepcopy(law) if token[0] == "value" else law


def _cached(key, anchors, compute):
    """Memoise a public computation.

    ``key`` holds value tokens and/or ids; ``anchors`` are the objects whose ids it
    holds, stored with the value so that an id is never reused while its entry lives
    (a hit requires the very same objects).
    """
    with _LOCK:
        hit = _PLANS.get(key)
        if hit is not None and len(hit[0]) == len(anchors) and all(
                a is b for a, b in zip(hit[0], anchors, strict=True)):
            _PLANS.move_to_end(key)
            return hit[1]
    value = compute()
    with _LOCK:
        _PLANS[key] = (anchors, value)
        _PLANS.move_to_end(key)
        while len(_PLANS) > _PLANS_MAX:
            _PLANS.popitem(last=False)
    return value
