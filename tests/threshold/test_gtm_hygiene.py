"""After GTM's charge nothing but the accepted index depends on the data (issue 18,
item 2): neighbours with one row at ±1e308, 1e154 or a subnormal, under warnings as
errors, give no warning and no exception, or one pre-charge refusal with nothing spent."""

import warnings

import numpy as np
import pytest
from scipy import stats

from skdptest import (
    FixedRandomStateWarning,
    GeneralizedThresholdMechanism,
    PrivacyBudget,
    PrivateEValueTest,
)
from skdptest.threshold import (
    EstimatorMechanism,
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    RandomizedResponse,
)

EXTREMES = [1e308, -1e308, 1e154, 5e-324]


def _mean(X, y):  # unclipped on purpose: two rows at 1e308 overflow it to inf
    return float(np.sum(X[:, 0]) / X.shape[0])


MECHANISMS = {
    "default": lambda: None,
    "laplace-mean": lambda: [NoisyThresholdQuery(_mean, c, 0.05, sensitivity=0.1)
                             for c in (-1.0, 0.0, 1.0)],
    "gauss-mean": lambda: [GaussianThresholdQuery(_mean, c, 0.05, 1e-6, sensitivity=0.1)
                           for c in (-1.0, 0.0, 1.0)],
    "nan-mean": lambda: [NoisyThresholdQuery(lambda X, y: _mean(X, y) * 0.0, 0.5, 0.05)],
    "rr": lambda: [RandomizedResponse(lambda X, y: X[:, 0].mean() > 0, 0.05)],
    "estimator": lambda: [EstimatorMechanism(PrivateEValueTest(
        stats.norm(0, 1), stats.norm(0.5, 1), epsilon=0.05, bet=0.5))],
    "estimator-domain": lambda: [EstimatorMechanism(PrivateEValueTest(
        stats.bernoulli(0.3), stats.bernoulli(0.6), epsilon=0.05))],
}


def _fit(mechanisms, X):
    budget = PrivacyBudget(1e6)
    est = GeneralizedThresholdMechanism(mechanisms, epsilon=1.0, budget=budget, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        try:
            return est.fit(X).result_, None
        except ValueError as exc:
            assert len(budget.ledger) == 0, "refused after the charge"
            return None, str(exc)


# a search over a wrapped e-value test fits it thousands of times: slow suite, fewer sets
_SLOW = {"estimator"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW
                                  else n for n in MECHANISMS])
def test_extreme_neighbours_search_quietly_or_are_refused_alike(name):
    mechanisms = MECHANISMS[name]()
    rng = np.random.default_rng(0)
    X = rng.binomial(1, 0.5, size=(40, 1)).astype(float)
    # a row already at 1e308 in the base set: a second one overflows the unclipped mean
    X_hot = X.copy()
    X_hot[1, 0] = 1e308
    messages = set()
    bases, values = ((X,), [1e308, 5e-324]) if name in _SLOW else ((X, X_hot), EXTREMES)
    for base in bases:
        for v in values:
            Y = base.copy()
            Y[0, 0] = v
            result, refusal = _fit(mechanisms, Y)
            if refusal is None:
                assert result.accepted is None or 0 <= result.accepted < result.n_mechanisms
            else:
                messages.add(refusal)
    if name == "estimator-domain":  # outside the null's support: refused before the charge
        assert len(messages) == 1 and "outside the support" in messages.pop()
    else:
        assert not messages


def test_wrapped_estimator_refusal_comes_before_the_charge():
    budget = PrivacyBudget(10.0)
    mech = EstimatorMechanism(PrivateEValueTest(stats.bernoulli(0.3), stats.bernoulli(0.6),
                                                epsilon=0.05))
    est = GeneralizedThresholdMechanism([mech], budget=budget)
    with pytest.raises(ValueError, match="outside the support"):
        est.fit(np.full((20, 1), 0.5))
    assert budget.ledger == [] and not hasattr(est, "result_")


def test_wrapped_estimator_budget_and_seed_are_reported_as_overridden():
    from skdptest import PrivacyLeakWarning

    with pytest.warns(PrivacyLeakWarning, match="budget is ignored"):
        EstimatorMechanism(PrivateEValueTest(epsilon=0.1, budget=PrivacyBudget(1.0)))
    with pytest.warns(PrivacyLeakWarning, match="random_state is replaced"):
        EstimatorMechanism(PrivateEValueTest(epsilon=0.1, random_state=3))
