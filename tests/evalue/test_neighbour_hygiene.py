"""Nothing after the charge depends on the data but the release; refusals carry no
private value (issue 18, items 2 and 3), for every route of the e-value family.

Neighbours differ in one row set to ±1e308, 1e154, a subnormal (and a value inside the
support where the law declares one). Under ``warnings.simplefilter("error")`` each fit
either releases (no warning, no exception, a finite release within the clip range that
sets its sensitivity) or is refused before the charge with one message whatever the
value, nothing spent.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from skdptest import (
    FixedRandomStateWarning,
    PrivacyBudget,
    PrivateEProcess,
    PrivateEValueTest,
)

EXTREMES = [1e308, -1e308, 1e154, 5e-324]

# (id, null, alternative, base rows, values inside the support)
LAWS = [
    ("gauss", stats.norm(0, 1), stats.norm(0.5, 1), lambda r, n: r.normal(size=(n, 1)), []),
    ("gauss-far", stats.norm(1e6, 1), stats.norm(1e6 + 0.5, 1),
     lambda r, n: 1e6 + r.normal(size=(n, 1)), [1e6 + 40.0]),
    ("unequal-var", stats.norm(0, 1), stats.norm(0, 2), lambda r, n: r.normal(size=(n, 1)), []),
    ("t", stats.t(3), stats.t(3, loc=1), lambda r, n: r.standard_t(3, size=(n, 1)), []),
    ("expon", stats.expon(), stats.expon(scale=2), lambda r, n: r.exponential(size=(n, 1)),
     [0.0, 700.0]),
    ("bern", stats.bernoulli(0.3), stats.bernoulli(0.6),
     lambda r, n: r.binomial(1, 0.3, size=(n, 1)).astype(float), [0.0, 1.0]),
    ("binom", stats.binom(12, 0.3), stats.binom(12, 0.5),
     lambda r, n: r.binomial(12, 0.3, size=(n, 1)).astype(float), [0.0, 12.0]),
    ("mvn", stats.multivariate_normal(np.zeros(2), np.eye(2)),
     stats.multivariate_normal([0.5, -0.5], np.eye(2)), lambda r, n: r.normal(size=(n, 2)), []),
]
CERTIFIED = {"gauss", "gauss-far", "unequal-var", "t", "expon", "bern", "binom", "mvn"}
EXACT = {"gauss", "gauss-far", "bern", "binom", "mvn"}


def _neighbours(make, values):
    rng = np.random.default_rng(5)
    X = make(rng, 120)
    out = []
    for v in values:
        for col in range(X.shape[1]):
            Y = X.copy()
            Y[0, col] = v
            if X.shape[1] == 2:  # a second extreme of the other sign in the other column
                Y[0, 1 - col] = -v
            out.append(Y)
    return X, out


def _fit(make_est, X):
    """(result or None, refusal message or None, charges) under warnings as errors."""
    budget = PrivacyBudget(1e6)
    est = make_est(budget)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        try:
            est.fit(X)
        except ValueError as exc:
            assert len(budget.ledger) == 0, "refused after the charge"
            return None, str(exc)
    assert len(budget.ledger) == 1
    return est.result_, None


# Routes whose first fit plans by quadrature or null-law convolutions (seconds each)
# run in the slow suite; the default suite keeps one route per model and statistic.
FAST = {("evalue", n, s) for n in ("gauss", "gauss-far", "bern", "binom", "mvn")
        for s in ("tslr", "optimal", "exact")} | {("evalue", "t", "tslr"),
                                                  ("evalue", "expon", "tslr"),
                                                  ("eprocess", "bern", "auto"),
                                                  ("eprocess", "mvn", "tslr")}


def _routes():
    for name, P, Q, make, inside in LAWS:
        stats_ok = ["tslr"] + (["optimal"] if name in CERTIFIED else []) + \
            (["exact"] if name in EXACT else [])
        for statistic in stats_ok:
            marks = () if ("evalue", name, statistic) in FAST else pytest.mark.slow
            yield pytest.param(name, P, Q, make, inside, statistic, "evalue", marks=marks,
                               id=f"evalue-{name}-{statistic}")
        for statistic in ["auto"] + stats_ok:
            # the e-process's batches are the batch routes above on fewer rows: one law
            # per model (table, two-point exact, Gaussian, certified univariate) suffices
            if name not in ("bern", "binom", "mvn", "unequal-var") or \
                    (statistic == "exact" and name != "bern"):
                continue
            marks = () if ("eprocess", name, statistic) in FAST else pytest.mark.slow
            yield pytest.param(name, P, Q, make, inside, statistic, "eprocess", marks=marks,
                               id=f"eprocess-{name}-{statistic}")


@pytest.mark.parametrize("name, P, Q, make, inside, statistic, kind", list(_routes()))
def test_extreme_neighbours_release_quietly_or_are_refused_alike(name, P, Q, make, inside,
                                                                 statistic, kind):
    def make_est(budget):
        if kind == "evalue":
            return PrivateEValueTest(P, Q, statistic=statistic, budget=budget,
                                     random_state=1)
        return PrivateEProcess(P, Q, statistic=statistic, schedule=[40], budget=budget,
                               random_state=1)

    X, neighbours = _neighbours(make, EXTREMES + inside)
    base, refusal = _fit(make_est, X)
    assert refusal is None and base is not None
    messages = set()
    for Y in neighbours:
        result, refusal = _fit(make_est, Y)
        if refusal is not None:
            messages.add(refusal)
            continue
        if kind == "evalue":
            assert math.isfinite(result.log_e_value)
            if result.grid:  # a merged release: g·J − c, J an integer
                j = (result.log_e_value + result.compensator) / result.grid
                assert abs(j - round(j)) < 1e-6
        else:
            assert all(math.isfinite(v) for v in result.log_e_process)
    # every refusal is the domain refusal, one message whatever the value
    assert len(messages) <= 1
    for m in messages:
        assert "outside the support" in m
        assert "value(s)" not in m
        assert not any(repr(v) in m or f"{v:g}" in m for v in EXTREMES)


def _bad_rows(k, kind):
    X = np.zeros((40, 1))
    X[:k, 0] = {"outside": 0.5, "nan": np.nan, "inf": np.inf, "neg": -3.0}[kind]
    return X


_BERN = (stats.bernoulli(0.3), stats.bernoulli(0.6))
_BINOM = (stats.binom(30, 0.3), stats.binom(30, 0.5))
_EXPON = (stats.expon(), stats.expon(scale=2))
_GAUSS = (stats.norm(0, 1), stats.norm(1, 1))
_LOGNORM = (stats.expon(), stats.lognorm(1))
REFUSALS = [
    # (id, estimator class, laws, keyword arguments, kind of bad row); the law objects
    # are shared so that the public plans are computed once
    ("table-outside", PrivateEValueTest, _BERN, {}, "outside"),
    ("table-large-outside", PrivateEValueTest, _BINOM, {}, "outside"),
    ("table-nan", PrivateEValueTest, _BERN, {}, "nan"),
    ("exact-outside", PrivateEValueTest, _BERN, {"statistic": "exact"}, "outside"),
    ("univariate-outside", PrivateEValueTest, _EXPON, {"bet": 0.5}, "neg"),
    ("tslr-outside", PrivateEValueTest, _LOGNORM, {"statistic": "tslr"}, "neg"),
    ("gauss-nan", PrivateEValueTest, _GAUSS, {"bet": 0.5}, "nan"),
    ("gauss-inf", PrivateEValueTest, _GAUSS, {"bet": 0.5}, "inf"),
    ("eprocess-outside", PrivateEProcess, _BERN, {}, "outside"),
    ("eprocess-nan", PrivateEProcess, _GAUSS, {"statistic": "tslr"}, "nan"),
    ("eprocess-neg", PrivateEProcess, _EXPON, {"statistic": "tslr"}, "neg"),
]


@pytest.mark.parametrize("cls, laws, kwargs, kind",
                         [pytest.param(*r[1:], id=r[0]) for r in REFUSALS])
def test_refusals_say_what_kind_never_how_many(cls, laws, kwargs, kind):
    messages = []
    for k in (7, 8):
        with pytest.raises(ValueError) as info:
            cls(*laws, **kwargs).fit(_bad_rows(k, kind))
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "7" not in messages[0] and "8" not in messages[0]


def test_streaming_refusal_says_what_kind_never_how_many():
    messages = []
    for k in (7, 8):
        est = PrivateEProcess(stats.bernoulli(0.3), stats.bernoulli(0.6), schedule=[1000])
        est.partial_fit(np.zeros((5, 1)))
        with pytest.raises(ValueError) as info:
            est.partial_fit(_bad_rows(k, "outside"))
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "7" not in messages[0]


@pytest.mark.parametrize("X", [
    np.array([[1.0], ["abc"]], dtype=object),
    [[1.0], ["secret"]],
    np.array([1.5, 2.5, 3.5]),
    np.array([[1 + 2j], [3 + 0j]]),
], ids=["object-string", "list-string", "1d-default-laws", "complex"])
def test_scikit_learn_messages_quoting_the_data_are_replaced(X):
    with pytest.raises(ValueError) as info:
        PrivateEValueTest().fit(X)
    text = str(info.value)
    assert info.value.__cause__ is None or "abc" not in str(info.value.__cause__)
    for secret in ("abc", "secret", "1.5", "2.5", "1.+2.j", "array="):
        assert secret not in text


def test_nan_message_gives_the_library_advice_not_an_imputer():
    with pytest.raises(ValueError, match=r"NaN \(missing values\).*public rule") as info:
        PrivateEProcess(stats.norm(0, 1), stats.norm(1, 1)).fit(np.array([[0.0], [np.nan]]))
    assert "HistGradientBoosting" not in str(info.value) and "imputer" not in str(info.value)
