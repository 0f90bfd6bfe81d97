# TEMPORARY: the pre-v2 contract, kept only until every family is migrated to _base.py.
"""The estimator contract shared by every private test.

Order of operations in :meth:`BasePrivateTest.fit` (and ``score``), which the
privacy guarantee and the "budget is money" rule rely on:

1. validate the hyperparameters (``_check_params``);
2. validate the data (``validate_data`` and ``_check_data``);
3. charge the budget (raises :class:`BudgetExceededError`, nothing computed);
4. resolve the random generator;
5. compute the private release and store it in ``result_``.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_budget, check_generator

__all__ = ["BasePrivateTest"]


class BasePrivateTest(BaseEstimator):
    """Base class of the private tests (not public API).

    Subclasses implement

    - ``_check_params(self)``: validate hyperparameters, raise on bad values;
    - ``_privacy_cost(self)``: ``(epsilon, delta)`` charged per release;
    - ``_fit_private(self, X, y, rng)``: return the frozen result;
    - ``_score_private(self, X, y, rng)``: return the private evidence figure;

    and may override ``_validate_input`` and ``_check_data``. A subclass whose
    fit needs ``y`` sets the class attribute ``_requires_y = True``.
    """

    _requires_y = False

    # -- hooks -----------------------------------------------------------------
    def _check_params(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _privacy_cost(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_private(self, X, y, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _score_private(self, X, y, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _validate_input(self, X, y, reset):
        if self._requires_y:
            return validate_data(self, X, y, reset=reset, dtype="numeric")
        X = validate_data(self, X, reset=reset, dtype="numeric")
        return X, y

    def _check_data(self, X, y):
        """Data checks beyond ``validate_data`` (support, group sizes...)."""

    # -- contract --------------------------------------------------------------
    def _charge(self, what):
        budget = check_budget(self.budget)
        if budget is not None:
            epsilon, delta = self._privacy_cost()
            budget.spend(epsilon, delta, label=f"{type(self).__name__}.{what}")

    def _prepare(self, X, y, reset):
        self._check_params()
        check_budget(self.budget)
        X, y = self._validate_input(X, y, reset=reset)
        self._check_data(X, y)
        return X, y

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
        if hasattr(self, "result_"):
            del self.result_
        X, y = self._prepare(X, y, reset=True)
        self._charge("fit")
        rng = check_generator(self.random_state)
        self.result_ = self._fit_private(X, y, rng)
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
        X, y = self._prepare(X, y, reset=False)
        self._charge("score")
        rng = check_generator(self.random_state, stream=1)
        return float(self._score_private(X, y, rng))

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
            The private result.
        """
        if X is not None:
            self.fit(X, y)
        check_is_fitted(self)
        return self.result_

    def decision(self, X=None, y=None):
        """Decision at level ``alpha`` (``True`` rejects H0); fits first if ``X`` is given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), default=None
            Data to fit on first.
        y : array-like, default=None
            As in :meth:`fit`.

        Returns
        -------
        reject : bool
        """
        return bool(self.test(X, y).reject)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "result_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        return tags
