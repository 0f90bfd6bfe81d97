"""After the charge nothing depends on the data except the release: every public estimator.

Neighbouring data sets that differ in one row, set to an extreme finite value (±1e308,
1e154, the smallest subnormal), are fitted with every warning recorded. Both neighbours
must give the same outcome: a fit with the same warnings (no floating-point warning, only
notices about parameters) and a finite result, or (when
the extreme value leaves the test's declared domain) a refusal before the charge that
nothing distinguishes but the one bit "the data left the domain" (documented in
doc/user_guide/pitfalls.md). The families' own boundary tests cover each route (kernel
features, median bandwidths, dask, lattice, ...); this one covers every estimator as
configured in tests/test_common.py, so a new family is covered the day it is added.
"""

import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from skdptest import FixedRandomStateWarning, PrivacyBudget

_spec = importlib.util.spec_from_file_location(
    "_skdptest_common_cases_boundary", Path(__file__).with_name("test_common.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
CASES, ESTIMATOR_CLASSES = _common.CASES, _common.ESTIMATOR_CLASSES

EXTREMES = [1e308, -1e308, 1e154, 5e-324]


def _outcome(cls, X, y):
    """('ok', warnings) or ('refused', message, spent); every warning is recorded."""
    kwargs, _ = CASES[cls.__name__]
    budget = PrivacyBudget(epsilon=100.0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        # Fixed seeds are the suite's own choice (a parameter, identical for both).
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        try:
            result = cls(**kwargs, budget=budget, random_state=0).fit(X, y).result_
        except (ValueError, TypeError) as exc:
            return ("refused", str(exc), budget.spent)
    for name in ("pvalue", "e_value", "log_e_value"):
        value = getattr(result, name, None)
        if value is not None and not isinstance(value, (list, tuple)):
            assert not math.isnan(float(value)), (name, value)
    if hasattr(result, "pvalue"):
        assert 0.0 <= float(result.pvalue) <= 1.0
    seen = sorted({(w.category.__name__, str(w.message)) for w in record})
    # No floating-point (or any other runtime) warning may escape a fit.
    assert not [w for w in seen if w[0] == "RuntimeWarning"], seen
    return ("ok", seen)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=[c.__name__ for c in ESTIMATOR_CLASSES])
def test_an_extreme_row_changes_nothing_but_the_release(cls):
    _, data = CASES[cls.__name__]
    X, y = data()
    X = np.array(X, dtype=float, copy=True)
    base = _outcome(cls, X, y)
    assert base[0] == "ok"
    refusals = set()
    for value in EXTREMES:
        neighbour = X.copy()
        neighbour[0, 0] = value
        outcome = _outcome(cls, neighbour, y)
        if outcome[0] == "refused":
            # Only a pre-charge domain refusal may differ from the neighbour's fit, with
            # one message whatever the value (a bit, not a value or a count).
            assert outcome[2] == (0.0, 0.0), outcome
            refusals.add(outcome[1])
        else:
            assert outcome == base  # the same warnings (parameter notices only), or none
    assert len(refusals) <= 1, refusals
