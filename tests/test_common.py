"""Checks every public estimator must pass (the contract in doc/contributing.md).

- sklearn's estimator checks, with no expected failures, without a budget (and with one
  for an estimator of each base class);
- each ``fit``/``score`` charges the budget exactly once, with its label;
- every invalid value derived from the ``_parameter_constraints`` tables raises
  ``InvalidParameterError`` naming the parameter before anything is charged, and
  leaves no fitted or private state behind;
- results are frozen ``TestResult`` subclasses with the base fields; ``decision()``
  is a bool;
- a ``GridSearchCV`` over ``epsilon`` records 2 x candidates x folds + 1 spends (also
  from loky workers, for an estimator of each base class);
- a fitted estimator pickles without private state.

A new estimator gets all of this by adding one entry to ``CASES``.
"""

import dataclasses
import inspect
import pickle

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils.estimator_checks import parametrize_with_checks

import skdptest
from skdptest import InvalidParameterError, PrivacyBudget, TestResult
from skdptest._params import check_value


def _public_estimators():
    for name in sorted(skdptest.__all__):
        obj = getattr(skdptest, name)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
            yield obj


ESTIMATOR_CLASSES = list(_public_estimators())


def _normal(n, d, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _two_groups(n=60, d=2, seed=0):
    X = _normal(n, d, seed)
    return X, np.arange(n) % 2  # alternating labels: every CV fold holds both groups


def _paired(n=60, seed=0):
    X = _normal(n, 1, seed)
    return X, X[:, 0] + _normal(n, 1, seed + 1)[:, 0]


#: The e-value tests' default laws for one column, given explicitly (the same release;
#: without them every fit warns that no laws were given).
UNIT_SHIFT = dict(null=stats.multivariate_normal(np.zeros(1), np.eye(1)),
                  alternative=stats.multivariate_normal(np.ones(1), np.eye(1)))

#: For each public estimator: small, fast keyword arguments and a data maker.
CASES = {
    "PrivateEValueTest": (UNIT_SHIFT, lambda: (_normal(60, 1), None)),
    # 60 rows: batches of 15, 7, 10 and 16 rows (each new batch size plans its release)
    "PrivateEProcess": (UNIT_SHIFT, lambda: (_normal(60, 1), None)),
    # 24 rows: batches ending at 10, 15 and 22 rows, 2 rows pending (each release inverts
    # the e-process over every batch so far: a fit at 48 rows costs 1.8 times one at 24)
    "PrivateConfidenceSequence": (dict(), lambda: (
        (np.arange(24.0) % 3 == 0).astype(float).reshape(-1, 1), None)),
    "DPMMDTest": (dict(n_permutations=50, cyclic=False), _two_groups),  # B relabellings
    "DPHSICTest": (dict(), _paired),  # the cyclic aggregate: n - 1 shifts
    "GeneralizedThresholdMechanism": (dict(), lambda: (_normal(200, 1) + 3.0, None)),
    "DPMannWhitneyTest": (dict(n_resamples=99), lambda: _two_groups(60, 1)),
    "DPKruskalWallisTest": (dict(n_resamples=99), lambda: (_normal(60, 1), np.arange(60) % 3)),
    "DPWilcoxonTest": (dict(n_resamples=99), _paired),
    "DPBinomialTest": (dict(null_proportion=0.3),
                       lambda: ((np.arange(60.0) % 3 == 0).astype(float).reshape(-1, 1), None)),
    "DPSubsampleAggregateTest": (dict(n_subsets=5, inner_alpha=0.2),
                                 lambda: (_normal(60, 1), None)),
    "DPBoundedMeanTest": (dict(bounds=(-5.0, 5.0)),
                          lambda: (np.clip(_normal(60, 1), -5, 5), None)),
    "DPKolmogorovSmirnovTest": (dict(n_resamples=99), lambda: _two_groups(60, 1)),
    "DPChiSquareTest": (dict(categories=[0, 1, 2], n_resamples=99),
                        lambda: (np.arange(60.0).reshape(-1, 1) % 3, None)),
    "DPContingencyTest": (dict(categories=([0, 1], [0, 1, 2]), n_resamples=99),
                          lambda: (np.c_[np.arange(60.0) % 2, np.arange(60.0) % 3], None)),
}


def _make(cls, **kwargs):
    base, data = CASES[cls.__name__]
    return cls(**{**base, **kwargs}), data()


ids = [cls.__name__ for cls in ESTIMATOR_CLASSES]
each = pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=ids)


def test_every_public_estimator_has_a_case():
    assert {cls.__name__ for cls in ESTIMATOR_CLASSES} == set(CASES)


#: Estimators also checked with an explicit budget and seed: one of each base class's
#: charge (BasePrivateTest; BaseStreamingTest, its stream charged once). Only the base
#: class reads ``budget`` (``_base.py``), so the other estimators would repeat the same
#: path (about 7 s of the default suite).
WITH_BUDGET = {"DPWilcoxonTest", "PrivateEProcess"}


#: The number of relabellings in scikit-learn's checks (about 30 fits per estimator). On
#: their data (under 1000 rows) the defaults (2000, or 999 for the KS test) take the same
#: route as these: dpMMD's "auto" keeps B random relabellings below N = 1000, and the rank
#: tests' resampled null is the same loop, shorter. A dpMMD fit with 2000 relabellings of
#: its 19 bandwidths costs 6 times one with 50.
FEW_RELABELLINGS = {"DPMMDTest": dict(n_permutations=50),
                    **{name: dict(n_resamples=99) for name in (
                        "DPMannWhitneyTest", "DPKruskalWallisTest", "DPWilcoxonTest",
                        "DPKolmogorovSmirnovTest")}}


def _instances():
    """An instance of each estimator scikit-learn's checks can test: those taking 2-D X
    (the checks skip, with a warning, an estimator whose tags declare 1-D input only, such
    as the classical tests of counts; their contract is checked by the tests below), with
    default parameters but for ``FEW_RELABELLINGS``; and, for ``WITH_BUDGET``, one with a
    budget and a fixed seed."""
    budget = PrivacyBudget(epsilon=1e9)
    for cls in ESTIMATOR_CLASSES:
        if not cls().__sklearn_tags__().input_tags.two_d_array:
            continue
        few = FEW_RELABELLINGS.get(cls.__name__, {})
        yield cls(**few)
        if cls.__name__ in WITH_BUDGET:
            yield cls(**few, budget=budget, random_state=0)


# scikit-learn's checks fit default-constructed estimators on data of their own widths:
# the e-value tests then warn, as they should, that no laws were given. Several checks
# also set ``n_components = 1`` on any estimator that has it (a convention for
# decompositions): the kernel tests then warn, as they should, that it is ignored outside
# method='features'.
@pytest.mark.filterwarnings("ignore:null and alternative are not given:UserWarning")
@pytest.mark.filterwarnings(
    "ignore:.*n_components=1 is ignored. it applies to method='features' only"  # '.': ':'
    ":skdptest.PrivacyLeakWarning")
@parametrize_with_checks(list(_instances()))
def test_sklearn_compatible(estimator, check):
    check(estimator)


@each
def test_budget_parameter_is_shared_by_clone(cls):
    budget = PrivacyBudget(epsilon=1.0)
    est = cls(budget=budget)
    assert clone(est).budget is budget


@each
def test_constraint_table_covers_every_parameter(cls):
    assert set(cls._parameter_constraints) == set(cls().get_params(deep=False))


@each
def test_fit_and_score_charge_exactly_once_with_their_label(cls):
    budget = PrivacyBudget(epsilon=100.0)
    est, (X, y) = _make(cls, budget=budget, random_state=0)
    est.fit(X, y)
    assert [e.label for e in budget.ledger] == [f"{cls.__name__}.fit"]
    epsilon = est.get_params()["epsilon"]
    assert budget.ledger[0].epsilon == pytest.approx(epsilon)
    score = est.score(X, y)
    assert np.isfinite(score)
    assert [e.label for e in budget.ledger] == [f"{cls.__name__}.fit", f"{cls.__name__}.score"]


def _invalid_cases():
    for cls in ESTIMATOR_CLASSES:
        for name, constraints in cls._parameter_constraints.items():
            seen = []
            for constraint in constraints:
                for value in constraint.invalid_examples():
                    if any(value is v for v in seen) or _accepted(value, constraints):
                        continue
                    seen.append(value)
                    yield cls, name, value  # ids below: no object address in them


def _accepted(value, constraints):
    try:
        check_value(value, constraints, "x")
    except InvalidParameterError:
        return False
    return True


def _state_names(est):
    return set(vars(est))


_INVALID_CASES = list(_invalid_cases())


@pytest.fixture(scope="module")
def unspent_budget():
    """One ledger for the 500-odd refusal cases (a new ledger file costs 1.4 ms of CPU):
    none of them may charge it, so each still sees it empty."""
    return PrivacyBudget(epsilon=100.0)


# stable ids (no object address): pytest-xdist workers must collect the same names
@pytest.mark.parametrize(("cls", "name", "value"), _INVALID_CASES,
                         ids=[f"{c.__name__}-{n}-{type(v).__name__}-{i}"
                              for i, (c, n, v) in enumerate(_INVALID_CASES)])
def test_invalid_parameter_raises_before_charging_and_leaves_no_state(cls, name, value,
                                                                       unspent_budget):
    est, (X, y) = _make(cls, budget=unspent_budget, random_state=0)
    before = _state_names(est)
    est.set_params(**{name: value})
    with pytest.raises(InvalidParameterError, match=name):
        est.fit(X, y)
    assert len(unspent_budget) == 0  # nothing charged, by this case or any before it
    assert _state_names(est) == before  # no fitted attribute, no private stash


@each
def test_refit_with_invalid_parameter_clears_the_previous_result(cls):
    budget = PrivacyBudget(epsilon=100.0)
    est, (X, y) = _make(cls, budget=budget, random_state=0)
    fresh = _state_names(est)
    est.fit(X, y)
    est.set_params(epsilon=-1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        est.fit(X, y)
    assert len(budget) == 1
    assert _state_names(est) == fresh


@each
def test_refused_charge_leaves_no_state(cls):
    budget = PrivacyBudget(epsilon=1e-3)
    est, (X, y) = _make(cls, budget=budget, random_state=0)
    fresh = _state_names(est)
    with pytest.raises(skdptest.BudgetExceededError):
        est.fit(X, y)
    assert _state_names(est) == fresh and len(budget) == 0


@each
def test_nan_input_raises_before_charging(cls):
    budget = PrivacyBudget(epsilon=100.0)
    est, (X, y) = _make(cls, budget=budget, random_state=0)
    fresh = _state_names(est)
    X = X.copy()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(X, y)
    assert _state_names(est) == fresh and len(budget) == 0


@each
def test_result_is_frozen_with_the_base_fields_and_decision_is_a_bool(cls):
    est, (X, y) = _make(cls, random_state=0)
    result = est.test(X, y)
    assert isinstance(result, TestResult)
    names = {f.name for f in dataclasses.fields(result)}
    assert {"reject", "alpha", "epsilon", "delta", "n_samples", "method"} <= names
    assert type(result.reject) is bool and isinstance(result.n_samples, int)
    assert isinstance(result.method, str) and 0 <= result.n_samples <= X.shape[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.reject = not result.reject
    decision = est.decision()
    assert type(decision) is bool and decision == result.reject


@each
def test_pickled_estimator_holds_no_private_state(cls):
    est, (X, y) = _make(cls, random_state=0)
    est.fit(X, y)
    state = pickle.loads(pickle.dumps(est)).__dict__
    private = {k for k in state if k.startswith("_")} - {"_sklearn_version", "_stream_closed"}
    assert private == set()


def _grid_cases():
    # n_jobs=2 (fits in loky workers charging the same ledger file) runs the base class's
    # path whatever the estimator: one estimator of each base class takes it
    for cls in ESTIMATOR_CLASSES:
        yield pytest.param(cls, 1, id=f"1-{cls.__name__}")
        if cls.__name__ in ("DPWilcoxonTest", "PrivateEProcess"):
            # starting the two loky workers (each imports skdptest) costs ~8 s of CPU:
            # slow; the default suite's cross-process spends are test_budget's races
            yield pytest.param(cls, 2, id=f"2-{cls.__name__}", marks=pytest.mark.slow)


@pytest.mark.parametrize(("cls", "n_jobs"), list(_grid_cases()))
def test_grid_search_over_epsilon_records_every_release(cls, n_jobs):
    budget = PrivacyBudget(epsilon=1000.0)
    est, (X, y) = _make(cls, budget=budget, random_state=0)
    candidates, folds = [0.5, 1.0], 2
    search = GridSearchCV(est, {"epsilon": candidates}, cv=KFold(folds), n_jobs=n_jobs,
                          error_score="raise")
    search.fit(X, y)
    assert len(budget) == 2 * len(candidates) * folds + 1
    labels = [e.label for e in budget.ledger]
    assert labels.count(f"{cls.__name__}.score") == len(candidates) * folds
