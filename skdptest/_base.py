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
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._params import InvalidParameterError, validate_parameters
from ._validation import check_budget, check_generator
from ._warnings import quiet_numerics, warn_fixed_random_state

__all__ = ["BasePrivateTest", "BaseStreamingTest", "Prepared", "check_numeric",
           "non_numeric_error"]


def non_numeric_error(dtype, name="X"):
    """The one refusal of non-numeric data (categorical strings, dates, objects)."""
    return ValueError(
        f"{name} must be numeric (bool, integer or float): got the non-numeric dtype "
        f"{dtype}. Encode categories or dates as numbers first."
    )


def check_numeric(array, name):
    """Refuse arrays that are not real numbers (bool, int or float dtype).

    ``validate_data(dtype="numeric")`` lets some non-numeric data through (pandas
    categorical columns of strings stay ``object``, ``datetime64`` is kept), which
    would otherwise fail later with an obscure error, possibly after the charge.
    """
    if array.dtype.kind not in ("b", "i", "u", "f"):
        raise non_numeric_error(array.dtype, name)
    return array


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

    # -- hooks -----------------------------------------------------------------
    def _check_params(self, params):
        """Cross-parameter checks on the normalised values; return them."""
        return params

    def _validate_input(self, X, y, reset):
        if self._requires_y:
            X, y = validate_data(self, X, y, reset=reset, dtype="numeric")
        else:
            X = validate_data(self, X, reset=reset, dtype="numeric")
        return check_numeric(X, "X"), y

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
        params = validate_parameters(self._parameter_constraints, self.get_params(deep=False))
        return self._check_params(params)

    def _prepare(self, X, y, *, reset):
        params = self._validate_params()
        X, y = self._validate_input(X, y, reset=reset)
        return Prepared(params=params, X=X, y=y, plan=self._plan(params, X, y))

    def _charge(self, params, what):
        budget = check_budget(params["budget"])
        if budget is not None:
            epsilon, delta = self._privacy_cost(params)
            budget.spend(epsilon, delta, label=f"{type(self).__name__}.{what}")
        # A parameter, not the data, decides this warning: it may be raised after the charge.
        warn_fixed_random_state(type(self).__name__, params["random_state"])

    def _clear_fitted(self):
        """Remove every fitted attribute (names ending in ``_``)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def _prepare_and_charge(self, X, y, what):
        """Steps 1-2 of a fit; on failure no fitted attribute is left."""
        try:
            prep = self._prepare(X, y, reset=True)
            self._charge(prep.params, what)
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
