"""The privacy cost of a model search, priced before it runs.

A ``GridSearchCV``, ``RandomizedSearchCV`` or ``cross_validate`` over a private
estimator fits and scores every candidate on every fold and (for a search) refits
the best one: every fit and every ``score`` is a charged release whose ε is fixed
by the candidate's parameters. :func:`search_cost` lists those releases without
reading any data value (only the number of rows, and the groups of a group
splitter, decide the number of folds), so that :meth:`PrivacyBudget.reserve` can
set the whole cost aside before the first spend.
"""

from __future__ import annotations

from dataclasses import dataclass

from sklearn.base import clone, is_classifier
from sklearn.model_selection import (
    GridSearchCV,
    ParameterGrid,
    ParameterSampler,
    RandomizedSearchCV,
    check_cv,
)

from ._base import BasePrivateTest
from ._params import InvalidParameterError

__all__ = ["SearchCost", "search_cost"]


@dataclass(frozen=True)
class SearchCost:
    """The releases of a search, as returned by :func:`search_cost`.

    Attributes
    ----------
    spends : tuple of (float, float, str, int)
        ``(epsilon, delta, profile, count)`` of the fits and scores on the folds
        (one tuple per candidate and kind, in the search's order).
    refit : tuple of (float, float, str)
        ``(epsilon, delta, profile)`` of the refit of each candidate; one of them is
        spent (the best candidate's). Empty without a refit.
    n_candidates : int
        Number of candidates.
    n_folds : int
        Number of folds.
    n_releases : int
        Number of charged releases (fits, scores and the refit).
    epsilon : float
        Total ε under basic composition, with the largest refit.
    delta : float
        Total δ under basic composition, with the largest refit.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, search_cost
    >>> cost = search_cost(DPBinomialTest(epsilon=0.5), np.zeros((30, 1)), cv=3)
    >>> cost.spends, cost.refit, cost.epsilon
    (((0.5, 0.0, 'pure', 6),), (), 3.0)
    """

    spends: tuple
    refit: tuple
    n_candidates: int
    n_folds: int
    n_releases: int
    epsilon: float
    delta: float


def _private_step(estimator):
    """The private estimator a search fits and scores (the final step of pipelines)."""
    final = estimator
    while hasattr(final, "steps"):
        for _, step in final.steps[:-1]:
            if isinstance(step, BasePrivateTest):
                raise InvalidParameterError(
                    "search: a private estimator that is not the final step of a pipeline "
                    "cannot be priced."
                )
        final = final.steps[-1][1]
    if not isinstance(final, BasePrivateTest):
        raise InvalidParameterError(
            f"search: the estimator searched must be a skdptest estimator (or a pipeline "
            f"ending in one), got {type(final).__name__}."
        )
    return final


def _release_cost(estimator, params):
    est = clone(estimator)
    if params:
        est.set_params(**params)
    private = _private_step(est)
    epsilon, delta = private._privacy_cost(private._validate_params())
    return float(epsilon), float(delta), private._privacy_profile


def search_cost(search, X, y=None, *, groups=None, cv=None, return_train_score=None):
    """The exact privacy cost of a search over a private estimator, before it runs.

    Parameters
    ----------
    search : GridSearchCV, RandomizedSearchCV or estimator
        An unfitted search, or an estimator to price ``cross_validate(estimator, X,
        y, cv=cv)`` (no refit). Scoring must be the estimator's own ``score``
        (``scoring=None``); a ``RandomizedSearchCV`` needs an int ``random_state``
        (its candidates are otherwise drawn at fit time).
    X : array-like of shape (n_samples, n_features)
        The data the search will run on: only its number of rows is read.
    y : array-like, default=None
        Passed to the splitter's ``get_n_splits`` (not read by the usual splitters).
    groups : array-like, default=None
        Groups of a group splitter.
    cv : int, cross-validation generator or iterable, default=None
        The folds of ``cross_validate`` (when ``search`` is an estimator).
    return_train_score : bool, default=None
        Whether scores on the training folds are computed too (each is a charged
        release); ``None`` reads the search's own setting (``False`` for
        ``cross_validate``).

    Returns
    -------
    SearchCost
        Every release with its (ε, δ, profile); pass it to
        :meth:`PrivacyBudget.reserve`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skdptest import DPBinomialTest, search_cost
    >>> search = GridSearchCV(DPBinomialTest(epsilon=1.0), {"alpha": [0.05, 0.1]}, cv=5)
    >>> cost = search_cost(search, np.zeros((100, 1)))
    >>> cost.n_releases, cost.epsilon
    (21, 21.0)
    """
    if isinstance(search, (GridSearchCV, RandomizedSearchCV)):
        estimator, scoring, refit = search.estimator, search.scoring, search.refit
        folds = search.cv
        train = search.return_train_score if return_train_score is None else return_train_score
        if isinstance(search, GridSearchCV):
            candidates = list(ParameterGrid(search.param_grid))
        else:
            if not isinstance(search.random_state, int):
                raise InvalidParameterError(
                    "search: a RandomizedSearchCV can be priced only with an int random_state "
                    "(with None its candidates are drawn when it is fitted)."
                )
            candidates = list(ParameterSampler(search.param_distributions, search.n_iter,
                                               random_state=search.random_state))
    else:
        estimator, scoring, refit, folds = search, None, False, cv
        train = bool(return_train_score)
        candidates = [{}]
    if scoring is not None:
        raise InvalidParameterError(
            "search: only scoring=None (the private estimator's own score, a charged "
            "release) can be priced; the cost of another scorer is unknown."
        )
    n_folds = check_cv(folds, y, classifier=is_classifier(estimator)).get_n_splits(
        X, y, groups
    )
    per_fold = 2 + bool(train)  # fit, score on the test fold (and on the training fold)
    spends, refits = [], []
    for params in candidates:
        epsilon, delta, profile = _release_cost(estimator, params)
        spends.append((epsilon, delta, profile, per_fold * n_folds))
        if refit:
            refits.append((epsilon, delta, profile))
    total_eps = sum(e * n for e, _, _, n in spends) + max((r[0] for r in refits), default=0.0)
    total_delta = sum(d * n for _, d, _, n in spends) + max((r[1] for r in refits), default=0.0)
    return SearchCost(
        spends=tuple(spends),
        refit=tuple(refits),
        n_candidates=len(candidates),
        n_folds=int(n_folds),
        n_releases=sum(n for *_, n in spends) + bool(refits),
        epsilon=float(total_eps),
        delta=float(total_delta),
    )
