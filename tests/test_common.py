"""sklearn's estimator checks over every public estimator, with no expected failures.

Each estimator is checked with its defaults and with a real (large) PrivacyBudget
attached, so the budget handle survives every clone, pickle and refit the checks do.
"""

import inspect

import pytest
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import skdptest
from skdptest import PrivacyBudget


def _public_estimators():
    for name in sorted(skdptest.__all__):
        obj = getattr(skdptest, name)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
            yield obj


ESTIMATOR_CLASSES = list(_public_estimators())


def _instances():
    budget = PrivacyBudget(epsilon=1e9)
    for cls in ESTIMATOR_CLASSES:
        yield cls()
        yield cls(budget=budget, random_state=0)


def test_every_family_is_checked():
    names = {cls.__name__ for cls in ESTIMATOR_CLASSES}
    assert "PrivateEValueTest" in names


@parametrize_with_checks(list(_instances()))
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=lambda c: c.__name__)
def test_budget_parameter_is_shared_by_clone(cls):
    from sklearn.base import clone

    budget = PrivacyBudget(epsilon=1.0)
    est = cls(budget=budget)
    assert clone(est).budget is budget
