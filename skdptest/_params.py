"""Declarative parameter validation.

Each estimator lists its hyperparameters in a class attribute
``_parameter_constraints``: a dict mapping a parameter name to a list of
constraint objects (the value is valid when one of them accepts it). Validation
returns the *normalised* values (``float`` for reals, ``int`` for integers, the
chosen option string...), so estimator code never re-converts ``self.x``.

Every refusal raises :class:`InvalidParameterError`, a subclass of both
``ValueError`` and ``TypeError`` (callers catching either keep working), whose
message names the parameter and lists what is accepted.

Each constraint also yields a few values it refuses (``invalid_examples``); the
common tests feed them to every estimator and check that the fit raises before
any budget is charged and leaves no fitted state.
"""

from __future__ import annotations

import math
import numbers
from types import MappingProxyType

import numpy as np

__all__ = [
    "Boolean",
    "Callable",
    "HasMethods",
    "InstanceOf",
    "Interval",
    "InvalidParameterError",
    "NoneValue",
    "Options",
    "RandomState",
    "validate_parameters",
]


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter or argument has the wrong type or an invalid value.

    Raised before any budget is charged; the message names the parameter and lists
    what is accepted. A subclass of both ``ValueError`` and ``TypeError``, so code
    catching either keeps working.

    Examples
    --------
    >>> from skdptest import DPBinomialTest, InvalidParameterError
    >>> try:
    ...     DPBinomialTest(epsilon=-1.0).fit([[1.0], [0.0]])
    ... except InvalidParameterError as error:
    ...     print(error)
    epsilon must be a real number in (0, inf); got -1.0.
    >>> issubclass(InvalidParameterError, ValueError), issubclass(InvalidParameterError,
    ...                                                            TypeError)
    (True, True)
    """


class _Reject(Exception):
    """Internal: a constraint does not accept the value (``reason``: why, if not obvious)."""

    def __init__(self, reason=None):
        super().__init__(reason)
        self.reason = reason


#: Integers a numpy integer array can hold (``Interval(Integral, ...)`` refuses others:
#: every integer parameter ends up as an array size, an index or a numpy scalar).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Constraint:
    """A set of accepted values; ``normalise`` returns the canonical value."""

    def normalise(self, value):  # pragma: no cover - abstract
        raise NotImplementedError

    def invalid_examples(self):
        """Values this constraint refuses (used by the common tests)."""
        return []

    def __repr__(self):
        return str(self)


class NoneValue(_Constraint):
    """Accepts ``None``."""

    def normalise(self, value):
        if value is not None:
            raise _Reject
        return None

    def __str__(self):
        return "None"


class Boolean(_Constraint):
    """Accepts ``True``/``False`` (also numpy bools); returns a Python bool."""

    def normalise(self, value):
        if not isinstance(value, (bool, np.bool_)):
            raise _Reject
        return bool(value)

    def invalid_examples(self):
        return ["yes", 2]

    def __str__(self):
        return "a bool"


class Interval(_Constraint):
    """Real or integer numbers in an interval.

    Parameters
    ----------
    kind : {numbers.Real, numbers.Integral}
        ``Real`` accepts ints and floats (returns a float); ``Integral``
        accepts integers only (returns an int). Bools are never numbers here.
    low, high : float or None
        Bounds (None: unbounded on that side).
    closed : {"both", "left", "right", "neither"}, default="both"
        Which bounds belong to the interval.
    allow_inf : bool, default=False
        Whether ±inf is accepted when inside the bounds (NaN never is).
    """

    def __init__(self, kind, low, high, *, closed="both", allow_inf=False):
        if kind not in (numbers.Real, numbers.Integral):
            raise ValueError("kind must be numbers.Real or numbers.Integral.")
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be both, left, right or neither, got {closed!r}.")
        self.kind, self.low, self.high = kind, low, high
        self.closed, self.allow_inf = closed, allow_inf

    def _low_closed(self):
        return self.closed in ("both", "left")

    def _high_closed(self):
        return self.closed in ("both", "right")

    def contains(self, x):
        """Whether the number ``x`` lies in the interval (no type check)."""
        if self.low is not None and (x < self.low or (x == self.low and not self._low_closed())):
            return False
        return not (self.high is not None
                    and (x > self.high or (x == self.high and not self._high_closed())))

    def normalise(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, self.kind):
            raise _Reject
        if self.kind is numbers.Integral:
            value = int(value)
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise _Reject("outside the range of a 64-bit integer")
        else:
            value = _to_float(value)
        if isinstance(value, float) and (math.isnan(value)
                                         or (math.isinf(value) and not self.allow_inf)):
            raise _Reject
        if not self.contains(value):
            raise _Reject
        return value

    def invalid_examples(self):
        out = ["1", None]
        step = 1 if self.kind is numbers.Integral else 0.5
        if self.low is not None:
            out.append(self.low if not self._low_closed() else self.low - step)
        if self.high is not None:
            out.append(self.high if not self._high_closed() else self.high + step)
        if self.kind is numbers.Real:
            out += [math.nan, 10**400]  # an int above float64's range: no OverflowError
            if not self.allow_inf:
                out.append(math.inf)
        else:
            out += [1.5, 2**63]
        return out

    def __str__(self):
        kind = "an int" if self.kind is numbers.Integral else "a real number"
        if self.low is None and self.high is None:
            return kind
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        left = "[" if self.low is not None and self._low_closed() else "("
        right = "]" if self.high is not None and self._high_closed() else ")"
        return f"{kind} in {left}{lo}, {hi}{right}"


def _to_float(value):
    """``float(value)``, refusing reals outside float64's range instead of raising
    ``OverflowError`` (a Python int or ``Fraction`` above ~1.8e308) or rounding them to
    infinity silently (a numpy ``longdouble``)."""
    if type(value) in _EXACT_FLOATS:
        # The common case: already a float64, no conversion to check (and no errstate,
        # which costs more than the rest of a parameter's validation).
        return float(value)
    if type(value) is int:  # float() of an int is finite or raises OverflowError
        try:
            return float(value)
        except OverflowError:
            raise _Reject("outside the range of float64") from None
    try:
        with np.errstate(over="ignore"):  # longdouble -> float64 overflow is checked below
            out = float(value)
    except OverflowError:
        raise _Reject("outside the range of float64") from None
    if math.isinf(out) and not _is_infinite(value):
        raise _Reject("outside the range of float64")
    return out


#: Types whose ``float()`` is the value itself: nothing can overflow or round.
_EXACT_FLOATS = (float, np.float64)


def _is_infinite(value):
    try:
        return bool(np.isinf(value))
    except (TypeError, OverflowError):  # a Python int or Fraction is never infinite
        return False


class Options(_Constraint):
    """One of a fixed set of values (strings are compared exactly)."""

    def __init__(self, *options):
        self.options = tuple(options)

    def normalise(self, value):
        if isinstance(value, str) and value in self.options:
            return value
        raise _Reject

    def invalid_examples(self):
        return ["not-an-option"]

    def __str__(self):
        return "one of " + ", ".join(repr(o) for o in self.options)


class InstanceOf(_Constraint):
    """An instance of one of the given types, returned unchanged."""

    def __init__(self, *types, description=None):
        self.types = types
        self.description = description

    def normalise(self, value):
        if isinstance(value, (bool, np.bool_)) and bool not in self.types:
            raise _Reject
        if not isinstance(value, self.types):
            raise _Reject
        return value

    def invalid_examples(self):
        return [object()]

    def __str__(self):
        if self.description:
            return self.description
        return "an instance of " + " or ".join(t.__name__ for t in self.types)


class HasMethods(_Constraint):
    """An object with all the given methods (duck typing), returned unchanged."""

    def __init__(self, *methods, description=None):
        self.methods = methods
        self.description = description

    def normalise(self, value):
        if isinstance(value, (str, bytes)) or not all(
                callable(getattr(value, m, None)) for m in self.methods):
            raise _Reject
        return value

    def invalid_examples(self):
        return ["not-an-object", 1.0]

    def __str__(self):
        return self.description or "an object with methods " + ", ".join(self.methods)


class Callable(_Constraint):
    """Any callable, returned unchanged."""

    def normalise(self, value):
        if not callable(value):
            raise _Reject
        return value

    def __str__(self):
        return "a callable"


class RandomState(_Constraint):
    """``None`` (fresh OS entropy), an int seed in [0, 2**32 - 1], or a numpy
    ``Generator``/``RandomState`` (returned unchanged)."""

    _seed = Interval(numbers.Integral, 0, 2**32 - 1)

    def normalise(self, value):
        if value is None or isinstance(value, (np.random.Generator, np.random.RandomState)):
            return value
        return self._seed.normalise(value)

    def invalid_examples(self):
        return [-1, 2**32, 1.5, "seed"]

    def __str__(self):
        return "None, an int in [0, 2**32 - 1], a numpy Generator or RandomState"


def check_value(value, constraints, name):
    """Normalise one value against a list of constraints (first acceptance wins).

    Raises
    ------
    InvalidParameterError
        Naming ``name``, listing the accepted forms and showing the value.
    """
    reasons = []
    for constraint in constraints:
        try:
            return constraint.normalise(value)
        except _Reject as exc:
            if exc.reason and exc.reason not in reasons:
                reasons.append(exc.reason)
    accepted = " or ".join(str(c) for c in constraints)
    why = f" ({'; '.join(reasons)})" if reasons else ""
    raise InvalidParameterError(f"{name} must be {accepted}; got {_shown(value)}{why}.")


#: Longest repr shown in a refusal (a huge string or int is summarised instead).
_MAX_SHOWN = 80


def _shown(value):
    """The value as a refusal message shows it: its repr when short, else a summary.

    ``repr`` of an int of more than 4300 digits raises ``ValueError`` (Python's integer
    string conversion limit), so large ints are summarised by their number of digits.
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
            and abs(int(value)) >= 10**_MAX_SHOWN:
        digits = math.floor(abs(int(value)).bit_length() * math.log10(2)) + 1
        return f"an int of about {digits} digits"
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= _MAX_SHOWN else f"a str of length {len(value)}"
    if isinstance(value, (int, float, type(None))):
        return repr(value)
    return f"an object of type {type(value).__name__}"


def validate_parameters(constraints, values):
    """Validate a mapping of parameter values against a constraint table.

    Parameters
    ----------
    constraints : dict of str to list of constraint
        The estimator's ``_parameter_constraints``.
    values : dict of str to object
        Parameter values (``get_params(deep=False)``); names missing from the
        table are passed through unchanged.

    Returns
    -------
    params : mappingproxy
        A read-only mapping of the normalised values.
    """
    out = dict(values)
    for name, cons in constraints.items():
        out[name] = check_value(values[name], cons, name)
    return MappingProxyType(out)
