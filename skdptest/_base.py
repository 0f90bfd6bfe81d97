"""The estimator contract shared by every private test.

``fit`` (and ``score``) run, in this order, which the privacy guarantee and the
"budget is money" rule rely on:

1. ``_prepare``: validate the hyperparameters against the class's
   ``_parameter_constraints`` (normalised values), validate the data
   (``validate_data``), and build the *public plan* (``_plan``: kernels, group
   codes, laws, mechanisms, memory checks...). Everything that can refuse the
   input runs here and returns a frozen :class:`Prepared`; nothing derived from
   the data is stored on the estimator.
2. charge the budget (raises :class:`~skdptest.BudgetExceededError`; nothing
   computed). If step 1 or 2 fails, no fitted attribute is left behind.
3. build the generator (``None``: OS entropy; anything else is replayable and
   raises :class:`~skdptest.FixedRandomStateWarning`).
4. ``_release(prep, rng)``: compute the private release, a frozen result, under
   numpy's error state "ignore" (no floating-point warning escapes).
5. set ``result_`` and the fitted attributes that ``_fitted_attributes``
   derives from ``prep`` and the result only.

Streaming tests (``partial_fit``) subclass :class:`BaseStreamingTest`, which
charges once per stream and freezes the stream's parameters at the charge.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import numbers
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._budget import PrivacySpent, _is_accounted_elsewhere, default_budget
from ._params import InvalidParameterError, validate_parameters
from ._validation import check_budget, check_generator, is_dask
from ._warnings import quiet_numerics, warn_fixed_random_state

__all__ = ["BasePrivateTest", "BaseStreamingTest", "InvalidDataError", "Prepared", "check_input",
           "check_numeric", "complex_error", "masked_error", "missing_values_error",
           "non_numeric_error", "validate_input"]


class InvalidDataError(ValueError, TypeError):
    """Data that a private test cannot use (non-numeric, masked, missing values...).

    A ``ValueError`` and a ``TypeError``, like
    :class:`~skdptest.InvalidParameterError`: callers catching either keep working.
    Raised before the budget is charged; the message names the kind of problem, never
    a value or a count read from the data.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, InvalidDataError
    >>> try:
    ...     DPBinomialTest().fit(np.array([[0.0], [np.nan]]))
    ... except InvalidDataError as error:
    ...     print(type(error).__name__)
    InvalidDataError
    """


#: What a refusal says a non-numeric array holds, by numpy dtype kind: the kind of
#: problem only (never a count, a value, or the itemsize of a string dtype, which is the
#: length of the longest string).
_KIND_WORDS = {
    "M": "dates (datetime64)",
    "m": "durations (timedelta64)",
    "U": "strings",
    "S": "bytes",
    "O": "objects that are not numbers",
    "V": "raw or structured records",
}


def _dtype_kind(dtype):
    """numpy kind of a numpy or pandas dtype (pandas extension dtypes: their numpy
    equivalent where they have one; categories: ``"category"``)."""
    if getattr(dtype, "name", "") == "category":
        return "category"
    if str(getattr(dtype, "name", "")).startswith(("string", "str")):
        return "U"
    if hasattr(dtype, "subtype") and hasattr(dtype, "fill_value"):  # pandas SparseDtype
        dtype = dtype.subtype
    return getattr(getattr(dtype, "numpy_dtype", dtype), "kind", "O")


def non_numeric_error(dtype, name="X"):
    """The one refusal of non-numeric data (strings, dates, objects, complex numbers).

    ``dtype`` is a numpy or pandas dtype, or a description (``str``) of what was found.
    The message names the kind of data only, never a value from it.
    """
    if isinstance(dtype, str):
        words = dtype
    else:
        kind = _dtype_kind(dtype)
        if kind == "c":
            return complex_error(name)
        words = "categories" if kind == "category" else _KIND_WORDS.get(kind, "non-numbers")
    return InvalidDataError(
        f"{name} must be numeric (bool, integer or float): it holds non-numeric values "
        f"({words}). Encode categories, strings or dates as numbers with public rules "
        "first."
    )


def complex_error(name="X"):
    """Refusal of complex numbers (not real, even with a zero imaginary part)."""
    return InvalidDataError(
        f"Complex data not supported: {name} must hold real numbers (bool, integer or "
        "float); complex numbers are not real, even with a zero imaginary part."
    )


def masked_error(name="X"):
    """Refusal of a numpy masked array: every validation would drop its mask silently."""
    return InvalidDataError(
        f"{name} is a masked array (numpy.ma): its mask would be ignored and the masked "
        "entries used as data. Fill or drop the masked entries with public rules first "
        "(e.g. X.filled(value) with a fixed value, or X.compressed()), then pass a plain "
        "array."
    )


def missing_values_error(name="X"):
    """The library's refusal of NaN, infinity or missing entries (pandas NA, None).

    It replaces scikit-learn's message, whose advice (an imputer fitted on the data)
    would break the privacy guarantee: a data-dependent imputation is a release.
    """
    return InvalidDataError(
        f"{name} contains missing or infinite values (NaN or infinity); impute or drop "
        "them with public rules before the test (data-dependent imputation, such as the "
        "column mean, is itself a release)."
    )


def _ragged_error(name):
    return InvalidDataError(
        f"{name} must be a rectangular (n_samples, n_features) array of numbers: it holds "
        "nested or ragged sequences."
    )


def _out_of_range_error(name):
    return InvalidDataError(
        f"{name} contains values outside the range of float64 (integers above about "
        "1.8e308); rescale them with public rules first."
    )


def _not_2d_error(ndim, name):
    got = "scalar" if ndim == 0 else f"{ndim}D"
    return InvalidDataError(
        f"Expected 2D array, got {got} array instead: {name} must be of shape (n_samples, "
        "n_features). Reshape one feature with X.reshape(-1, 1), one sample with "
        "X.reshape(1, -1)."
    )


def _object_problem(values, name, numeric=True):
    """Refusal for an object array holding anything but real numbers, or ``None``
    (``numeric=False``, labels: only nested sequences, complex numbers and missing
    entries are refused).

    Reads only the set of element types (a full pass, whatever is found: the time
    spent does not depend on where a bad element is).
    """
    types = set(map(type, values.ravel()))
    if not types:
        return None
    bad = [t for t in types if not issubclass(t, _REAL_TYPES)]
    if not bad:
        return None

    def has(*classes):
        return any(issubclass(t, classes) for t in bad)

    if has(list, tuple, np.ndarray):
        return _ragged_error(name)
    if has(complex, np.complexfloating):
        return complex_error(name)
    missing = any(t is type(None) or t.__name__ == "NAType" for t in bad)
    if not numeric:
        return missing_values_error(name) if missing else None
    if has(str):
        return non_numeric_error("strings", name)
    if has(bytes, bytearray):
        return non_numeric_error("bytes", name)
    if has(datetime.date, datetime.time, datetime.timedelta, np.datetime64,
           np.timedelta64) or any(t.__name__ in ("NaTType", "Period") for t in bad):
        return non_numeric_error("dates or times", name)
    if all(t is type(None) or t.__name__ == "NAType" for t in bad):
        return missing_values_error(name)
    # numpy's phrase for this case (scikit-learn's estimator checks look for it)
    return non_numeric_error(
        "objects that are not numbers: each argument must be a bool, int or float, not a "
        "string, a date or another object that is not a number", name)


_REAL_TYPES = (numbers.Real, np.bool_, decimal.Decimal)


def _is_pandas(X):
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "dtypes")


def _check_columns(X, name, numeric_categories, numeric=True):
    """Refuse a pandas (or dask) frame or series with a non-numeric column, by dtype;
    object columns (pandas only) by the types of their elements."""
    dtypes = X.dtypes
    columns = list(dtypes) if hasattr(dtypes, "__iter__") else [dtypes]
    for j, dtype in enumerate(columns):
        kind = _dtype_kind(dtype)
        if not numeric and kind != "O":
            if kind == "c":
                raise complex_error(name)
            continue
        if kind == "category":
            if not numeric_categories:
                raise non_numeric_error("categories", name)
            kind = _dtype_kind(dtype.categories.dtype)
            if kind == "O":  # categories of mixed objects
                problem = _object_problem(np.asarray(dtype.categories), name)
                if problem is not None:
                    raise problem
                continue
        if kind == "O" and not is_dask(X):
            column = X.iloc[:, j] if getattr(X, "ndim", 1) == 2 else X
            problem = _object_problem(np.asarray(column, dtype=object), name, numeric)
            if problem is not None:
                raise problem
        elif numeric and kind not in ("b", "i", "u", "f"):
            raise non_numeric_error(dtype, name)


def check_input(X, name="X", *, numeric_categories=True, numeric=True):
    """Refuse data that cannot be a private test's numbers, before any conversion.

    Run on the raw input, before :func:`~sklearn.utils.validation.validate_data` (which
    drops a masked array's mask silently, converts numeric strings, keeps dates, and
    answers other input with numpy's messages, some of which quote the data). Refused,
    each with a message that names the kind of problem and never a value or a count:

    - numpy masked arrays (also dask arrays of masked chunks);
    - non-numeric dtypes: strings, bytes, dates and durations, complex numbers (not
      real), objects other than real numbers (object arrays and pandas object columns
      are read by the types of their elements), categorical columns (of non-numbers, or
      any when ``numeric_categories=False``), mixed-type frames;
    - nested or ragged sequences;
    - ``None`` or pandas ``NA`` in an object array (missing values).

    Parameters
    ----------
    X : array-like, dataframe, sparse matrix or dask collection
        The raw input.
    name : str, default="X"
        The argument's name in messages.
    numeric_categories : bool, default=True
        Whether a categorical column whose categories are numbers is accepted.
    numeric : bool, default=True
        ``False`` for labels of declared categories (strings, dates, objects allowed):
        only masked arrays, nested sequences, complex numbers and missing entries of
        object arrays are refused.

    Returns
    -------
    X : object
        ``X`` itself, or the ndarray converted from a list or tuple.

    Raises
    ------
    ValueError
        As above. Shapes, NaN and infinity are left to ``validate_data``
        (:func:`validate_input` translates its messages).
    """
    if X is None:
        raise InvalidDataError(f"{name} must be an array-like of numbers, got None.")
    if isinstance(X, np.ma.MaskedArray) or isinstance(getattr(X, "_meta", None),
                                                      np.ma.MaskedArray):
        raise masked_error(name)
    if is_dask(X) or _is_pandas(X):
        array = None
        if hasattr(X, "dtypes"):  # frames and series: column dtypes (metadata for dask)
            _check_columns(X, name, numeric_categories, numeric)
        else:  # a dask array: its dtype (its chunks stay where they are)
            array = X
    elif sp.issparse(X):
        array = X
    else:
        try:
            array = np.asarray(X)
        except (ValueError, TypeError):  # ragged lists: "inhomogeneous shape"
            raise _ragged_error(name) from None
        if isinstance(X, (list, tuple)):
            X = array
    if array is not None:
        kind = array.dtype.kind
        if kind == "O" and isinstance(array, np.ndarray):
            problem = _object_problem(array, name, numeric)
            if problem is not None:
                raise problem
        elif kind == "c" or (numeric and kind not in ("b", "i", "u", "f")):
            raise non_numeric_error(array.dtype, name)  # dask or sparse objects too
    return X


def check_numeric(array, name):
    """Refuse arrays that are not real numbers (bool, int or float dtype).

    A backstop after ``validate_data(dtype="numeric")``, which lets some non-numeric
    data through (``datetime64`` is kept); :func:`check_input` refuses them first.
    """
    if array.dtype.kind not in ("b", "i", "u", "f"):
        raise non_numeric_error(array.dtype, name)
    return array


def _translated(exc, name):
    """The library's version of a ``validate_data`` refusal, or ``None`` to keep it.

    scikit-learn's NaN message recommends an imputer (a leak, see pitfalls.md), and its
    messages for 1-D, complex or string input quote the data."""
    text = str(exc)
    match = re.match(r"Input (\w+) contains (NaN|infinity)", text)
    if match:
        return missing_values_error(match.group(1))
    if text.startswith("Expected 2D array, got scalar"):
        return _not_2d_error(0, name)
    if text.startswith("Expected 2D array, got 1D"):
        return _not_2d_error(1, name)
    if text.startswith("Complex data not supported"):
        return complex_error(name)
    if "could not convert" in text or "not compatible with arrays of bytes/strings" in text:
        return non_numeric_error("strings", name)
    return None


def validate_input(estimator, X, y="no_validation", *, numeric_categories=True, numeric=True,
                   **kwargs):
    """``validate_data`` with the library's refusals: the one data validation path.

    Runs :func:`check_input` on ``X`` (and on ``y`` when ``y_numeric=True``; a masked
    ``y`` is always refused), refuses 0-D and 1-D ``X`` without quoting it, calls
    :func:`~sklearn.utils.validation.validate_data` (``dtype="numeric"`` unless given)
    and replaces its messages that leak or mislead: NaN and infinity get
    :func:`missing_values_error`, values above float64's range a ``ValueError``
    instead of ``OverflowError``. Families call it instead of ``validate_data``.

    Parameters
    ----------
    estimator : BaseEstimator
        As for ``validate_data`` (``n_features_in_``, feature names).
    X : array-like
        The raw input.
    y : array-like or "no_validation", default="no_validation"
        Labels or paired variable, validated with ``X`` when given.
    numeric_categories, numeric : bool, default=True
        Passed to :func:`check_input` (``numeric=False``: labels of declared
        categories; ``dtype`` then defaults to ``None`` and no numeric check follows).
    **kwargs : dict
        Passed to ``validate_data`` (``reset``, ``ensure_all_finite``, ...).

    Returns
    -------
    X or (X, y)
        As ``validate_data`` returns them; ``X`` is of a numeric dtype.
    """
    X = check_input(X, "X", numeric_categories=numeric_categories, numeric=numeric)
    with_y = not (isinstance(y, str) and y == "no_validation")
    if with_y:
        if isinstance(y, np.ma.MaskedArray):
            raise masked_error("y")
        if kwargs.get("y_numeric") and y is not None:
            y = check_input(y, "y", numeric_categories=numeric_categories)
    if kwargs.get("ensure_2d", True):
        ndim = getattr(X, "ndim", None)
        if ndim in (0, 1):
            raise _not_2d_error(ndim, "X")
    if numeric:
        kwargs.setdefault("dtype", "numeric")
    out = None
    if _plain_call(kwargs, with_y, y):
        out = _validate_plain(estimator, X, y if with_y else None, kwargs.get("reset", True))
    if out is None:
        out = _validate_data(estimator, X, y, with_y, kwargs)
    if numeric:
        check_numeric(out[0] if with_y else out, "X")
    return out


def _validate_data(estimator, X, y, with_y, kwargs):
    """scikit-learn's ``validate_data``, its leaking or misleading refusals replaced."""
    try:
        return validate_data(estimator, X, y, **kwargs) if with_y \
            else validate_data(estimator, X, **kwargs)
    except OverflowError:
        raise _out_of_range_error("X") from None
    except ValueError as exc:
        better = _translated(exc, "X")
        if better is None:
            raise
        raise better from None  # no chained message: it would carry the imputer advice


#: The ``validate_input`` keywords of the fit path's common cases: a plain ``X``, and a
#: plain ``X`` with a plain ``y`` (``y_numeric`` only converts object labels).
_PLAIN_KWARGS = frozenset({"reset", "dtype"})
_PLAIN_XY_KWARGS = frozenset({"reset", "dtype", "y_numeric"})


def _plain_call(kwargs, with_y, y):
    """Whether ``validate_data`` is called as on the fit path's common cases."""
    dtype = kwargs.get("dtype")
    if not (isinstance(dtype, str) and dtype == "numeric"):
        return False
    if with_y:
        return y is not None and kwargs.keys() <= _PLAIN_XY_KWARGS
    return kwargs.keys() <= _PLAIN_KWARGS


def _validate_plain(estimator, X, y, reset):
    """``validate_data(estimator, X[, y], reset=reset, dtype="numeric")`` for the common
    case, or ``None`` to leave the input to it.

    The common case is a non-empty, finite 2-D ``np.ndarray`` ``X`` of bools, integers
    or floats of at most 64 bits (and, when ``y`` is given, a 1-D one of as many rows)
    that ``validate_data`` would accept: it returns ``X`` itself (and ``y`` as a
    C-contiguous 1-D array, as ``column_or_1d`` does), (re)sets ``n_features_in_`` and
    removes ``feature_names_in_`` (a plain array has no names). That costs ~0.2 ms of
    dataframe probes per fit there. Anything else, every input it would refuse or warn
    about included, goes to ``validate_data``, so its checks, messages and warnings are
    unchanged (``tests/test_base.py`` compares both paths).
    """
    if not _plain_numbers(X, 2) or (y is not None and not (
            _plain_numbers(y, 1) and y.shape[0] == X.shape[0])):
        return None
    if sklearn.get_config()["array_api_dispatch"]:
        return None
    if reset:
        if hasattr(estimator, "feature_names_in_"):
            delattr(estimator, "feature_names_in_")
        estimator.n_features_in_ = X.shape[1]
    elif getattr(estimator, "feature_names_in_", None) is not None or (
            hasattr(estimator, "n_features_in_") and estimator.n_features_in_ != X.shape[1]):
        return None  # scikit-learn's warning or refusal
    return X if y is None else (X, np.asarray(np.reshape(y, (-1,)), order="C"))


def _plain_numbers(A, ndim):
    """Whether ``A`` is a non-empty, finite ``ndim``-D ndarray of bools, integers or
    floats of at most 64 bits (the arrays ``validate_data`` returns unchanged)."""
    if (type(A) is not np.ndarray or A.ndim != ndim or 0 in A.shape
            or A.dtype.kind not in "biuf" or A.dtype.itemsize > 8):
        return False
    if A.dtype.kind == "f":
        # A finite sum proves every element finite (scikit-learn's own first pass).
        with np.errstate(over="ignore", invalid="ignore"):
            return bool(np.isfinite(np.add.reduce(A, axis=None)))
    return True


def _is_frozen_law(value):
    return type(value).__name__.endswith("_frozen") and type(value).__module__.startswith(
        "scipy.stats")


class _LawRepr:
    """Prints a frozen scipy law as ``name(args, key=value)`` (for estimator reprs)."""

    def __init__(self, law):
        self.law = law

    def __repr__(self):
        law = self.law
        dist = getattr(law, "dist", None)
        if dist is not None and hasattr(law, "args"):
            parts = [f"{a!r}" for a in law.args]
            parts += [f"{k}={v!r}" for k, v in getattr(law, "kwds", {}).items()]
            return f"{getattr(dist, 'name', type(dist).__name__)}({', '.join(parts)})"
        name = type(law).__name__.removesuffix("_frozen")
        fields = [f"{k}={np.asarray(getattr(law, k)).tolist()!r}" for k in ("mean", "cov")
                  if hasattr(law, k)]
        return f"{name}({', '.join(fields)})"


@dataclass(frozen=True)
class Prepared:
    """Everything a release needs, validated before the budget is charged.

    Attributes
    ----------
    params : mappingproxy
        Normalised hyperparameters (read-only).
    X : ndarray
        Validated private data.
    y : ndarray or None
        Validated labels / paired variable.
    plan : object
        The family's public plan (a function of the parameters, the data's
        shape and public metadata; never of private values).
    """

    params: Any
    X: Any
    y: Any
    plan: Any = None

    @property
    def n_samples(self):
        return int(self.X.shape[0])


# The constructor's parameter names per estimator class (get_params(deep=False)'s keys,
# which depend on the class only), read once per class.
_PARAM_NAMES = {}


class BasePrivateTest(BaseEstimator):
    """Base class of the private tests (not public API).

    Subclasses define ``_parameter_constraints`` and implement

    - ``_release(self, prep, rng)``: return the frozen result;
    - ``_score_value(self, result)``: the private evidence figure of a result;

    and may override ``_check_params(params)`` (cross-parameter checks),
    ``_validate_input``, ``_plan(params, X, y)``, ``_privacy_cost(params)`` and
    ``_fitted_attributes(prep, result)``. A subclass whose fit needs ``y`` sets
    ``_requires_y = True``.
    """

    _parameter_constraints: dict = {}
    _requires_y = False
    # The privacy profile each charge declares to the ledger (skdptest/_accountants.py):
    # "pure" (any ε-DP release) unless the release is exactly one continuous Laplace
    # draw of scale sensitivity/ε or its post-processing ("laplace").
    _privacy_profile = "pure"

    # -- hooks -----------------------------------------------------------------
    def _check_params(self, params):
        """Cross-parameter checks on the normalised values; return them."""
        return params

    def _validate_input(self, X, y, reset):
        # The core path (``validate_input``): families that override this hook call it
        # too, so that every estimator refuses the same inputs with the same messages.
        if self._requires_y:
            return validate_input(self, X, y, reset=reset)
        return validate_input(self, X, reset=reset), y

    def _plan(self, params, X, y):
        """The public plan of a release; refuses data that the release cannot use."""
        return None

    def _privacy_cost(self, params):
        """(ε, δ) charged per release."""
        return params["epsilon"], params.get("delta", 0.0)

    def _fitted_attributes(self, prep, result):
        """Extra fitted attributes (``name_``), from ``prep`` and ``result`` only."""
        return {}

    def _release(self, prep, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _score_value(self, result):  # pragma: no cover - abstract
        """The evidence figure of a result (larger: more evidence against H0)."""
        raise NotImplementedError

    # -- contract --------------------------------------------------------------
    def _validate_params(self):
        # get_params(deep=False) without its inspect.signature call on every fit
        names = _PARAM_NAMES.get(type(self))
        if names is None:
            names = _PARAM_NAMES[type(self)] = tuple(self.get_params(deep=False))
        params = {name: getattr(self, name) for name in names}
        params = validate_parameters(self._parameter_constraints, params)
        return self._check_params(params)

    def _prepare(self, X, y, *, reset):
        params = self._validate_params()
        X, y = self._validate_input(X, y, reset=reset)
        return Prepared(params=params, X=X, y=y, plan=self._plan(params, X, y))

    def _charge(self, params, what):
        budget = check_budget(params["budget"])
        epsilon, delta = self._privacy_cost(params)
        profile = self._privacy_profile
        if budget is None and _is_accounted_elsewhere():
            ledger = None  # a draw of a search whose charge covers it
        else:
            # No release goes unrecorded: without a budget, the process-wide default
            # ledger (no limit) records the cost.
            budget = default_budget() if budget is None else budget
            budget.spend(epsilon, delta, label=f"{type(self).__name__}.{what}",
                         profile=profile)
            ledger = budget.path
        spent = PrivacySpent(epsilon=epsilon, delta=delta, profile=profile, ledger=ledger)
        # A parameter, not the data, decides this warning: it may be raised after the charge.
        warn_fixed_random_state(type(self).__name__, params["random_state"])
        return spent

    def _clear_fitted(self):
        """Remove every fitted attribute (names ending in ``_``)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def _prepare_and_charge(self, X, y, what):
        """Steps 1-2 of a fit; on failure no fitted attribute is left."""
        try:
            prep = self._prepare(X, y, reset=True)
            self.privacy_spent_ = self._charge(prep.params, what)
        except BaseException:
            self._clear_fitted()  # validate_data may have set n_features_in_
            raise
        return prep

    def fit(self, X, y=None):
        """Run the private test on ``X`` (and ``y``); charge the budget once.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data, one row per individual.
        y : array-like of shape (n_samples,) or None
            Group labels or paired variable, where the test uses one.

        Returns
        -------
        self : object
            The fitted estimator; the result is in ``result_``.
        """
        self._clear_fitted()
        prep = self._prepare_and_charge(X, y, "fit")
        rng = check_generator(prep.params["random_state"])
        with quiet_numerics():  # no floating-point warning may tell neighbours apart
            result = self._release(prep, rng)
        for name, value in self._fitted_attributes(prep, result).items():
            setattr(self, name, value)
        self.result_ = result
        return self

    def score(self, X, y=None):
        """Private evidence against the null on new data (charged like a fit).

        Larger means more evidence against H0. This is what
        :class:`~sklearn.model_selection.GridSearchCV` maximises.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data.
        y : array-like of shape (n_samples,) or None
            As in :meth:`fit`.

        Returns
        -------
        score : float
            The private evidence figure (see the subclass).
        """
        check_is_fitted(self)
        prep = self._prepare(X, y, reset=False)
        self._charge(prep.params, "score")
        rng = check_generator(prep.params["random_state"], stream=1)
        with quiet_numerics():
            return float(self._score_release(prep, rng))

    def _score_release(self, prep, rng):
        """The private evidence figure of a release on ``prep`` (used by ``score``)."""
        return self._score_value(self._release(prep, rng))

    def test(self, X=None, y=None):
        """Return the result of the last fit, fitting on ``X`` first if given.

        ``Pipeline`` does not forward this method: use ``pipe[-1].test()``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), default=None
            Data to fit on first; ``None`` returns the stored result.
        y : array-like, default=None
            As in :meth:`fit`.

        Returns
        -------
        result : frozen dataclass
            The private result (a subclass of ``TestResult``).
        """
        if X is not None:
            self.fit(X, y)
        check_is_fitted(self)
        return self.result_

    def decision(self, X=None, y=None):
        """Whether H0 is rejected (always a bool); fits first if ``X`` is given.

        Richer states (an e-process's ``"continue"``, a threshold search's
        accepted mechanism) are on the result: ``result_.decision``,
        ``result_.accepted``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), default=None
            Data to fit on first.
        y : array-like, default=None
            As in :meth:`fit`.

        Returns
        -------
        reject : bool
            ``bool(result_.reject)``.
        """
        return bool(self.test(X, y).reject)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "result_")

    def __repr__(self, N_CHAR_MAX=700):
        # Frozen scipy laws print as object addresses; show them as name(args) instead.
        laws = {name: _LawRepr(value) for name, value in self.get_params(deep=False).items()
                if _is_frozen_law(value)}
        if not laws:
            return super().__repr__(N_CHAR_MAX=N_CHAR_MAX)
        stand_in = copy.copy(self)
        vars(stand_in).update(laws)
        return BaseEstimator.__repr__(stand_in, N_CHAR_MAX=N_CHAR_MAX)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        return tags


class _Stream:
    """A running stream: frozen parameters and plan, generator, typed state.

    Held in the private ``_stream`` attribute while the stream runs; never
    pickled or deep-copied (the generator would let a copy replay every noise
    draw, and ``state`` may hold the rows of an incomplete batch).
    """

    __slots__ = ("params", "plan", "rng", "state")

    def __init__(self, params, plan, rng, state):
        self.params, self.plan, self.rng, self.state = params, plan, rng, state


def _same(a, b):
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # arrays, objects without a boolean equality
        return False


class BaseStreamingTest(BasePrivateTest):
    """Base of the tests fed by ``partial_fit``: one charge per stream.

    Subclasses implement ``_start_stream(prep)`` (the initial typed state),
    ``_advance(stream, X)`` (consume rows, return the new frozen result) and
    ``_score_value``; ``_release(prep, rng)`` is a fresh stream fed ``prep.X``
    (used by ``score``).

    The parameters are frozen when a stream is charged: a later ``set_params``
    that changes any of them (other than ``budget``) makes ``partial_fit``
    raise; ``fit`` starts a new, charged stream. Pickling or deep-copying an
    estimator drops its running stream (generator and pending rows): the copy
    keeps ``result_`` and must ``fit`` again to test more rows.
    """

    _unfrozen_params = ("budget",)

    def fit(self, X, y=None):
        """Start a new stream (charged ε) and feed it the rows of ``X`` in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in arrival order.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        for name in ("_stream", "_stream_closed"):
            if name in vars(self):
                delattr(self, name)
        self._clear_fitted()
        return self._feed(X, y, "fit")

    def partial_fit(self, X, y=None):
        """Append rows to the stream (the first call starts it and charges ε).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New rows in arrival order.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        if getattr(self, "_stream_closed", False):
            raise RuntimeError(
                f"This {type(self).__name__} was copied or unpickled while its stream was "
                "running; the copy does not carry the stream (its generator and pending "
                "rows stay private). Call fit to start a new, charged stream."
            )
        return self._feed(X, y, "partial_fit")

    def _feed(self, X, y, label):
        stream = vars(self).get("_stream")
        if stream is None:
            prep = self._prepare_and_charge(X, y, label)
            rng = check_generator(prep.params["random_state"])
            stream = _Stream(prep.params, prep.plan, rng, self._start_stream(prep))
            self._stream = stream
            X = prep.X
        else:
            self._check_frozen(stream)
            X, _ = self._validate_input(X, y, reset=False)
            self._check_stream_data(stream, X)
        with quiet_numerics():
            self.result_ = self._advance(stream, X)
        return self

    def _check_frozen(self, stream):
        params = self._validate_params()
        changed = [name for name in params if name not in self._unfrozen_params
                   and not _same(params[name], stream.params[name])]
        if changed:
            raise InvalidParameterError(
                f"{', '.join(changed)} changed while a stream is running; the noise and "
                "the schedule are fixed when the stream is charged. Restore the value, "
                "or call fit to start a new, charged stream."
            )

    def _check_stream_data(self, stream, X):
        """Refuse rows that the running stream cannot use (default: accept)."""

    def _release(self, prep, rng):
        stream = _Stream(prep.params, prep.plan, rng, self._start_stream(prep))
        return self._advance(stream, prep.X)

    def __getstate__(self):
        state = dict(super().__getstate__())  # object.__getstate__ returns __dict__ itself
        if state.pop("_stream", None) is not None:
            state["_stream_closed"] = True
        return state
