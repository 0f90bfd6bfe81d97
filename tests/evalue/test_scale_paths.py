"""The fast paths of the e-value tests give the same releases as the reference paths.

- ``PrivateEValueTest`` on finite discrete laws: the support check (per-value equality
  counts, also the finiteness check) and the per-value counts of the release, against
  the row-by-row scipy path; the integer sum keeps its sensitivity on every neighbour;
  the plan is public (the same object for any data of the same size).
- ``PrivateEProcess.partial_fit``: one row at a time (fast path) == one chunk == fit, and
  the fast path refuses what the full validation refuses, with its messages.
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import skdptest.evalue._eprocess as eprocess_module
from skdptest import InvalidParameterError, PrivacyBudget, PrivateEProcess, PrivateEValueTest
from skdptest._noise import floor_to_grid
from skdptest._validation import check_generator
from skdptest.evalue._merge import release

BERN = (stats.bernoulli(0.3), stats.bernoulli(0.6))
BINOM3 = (stats.binom(3, 0.4), stats.binom(3, 0.55))  # 4 values: equality counts
BINOM12 = (stats.binom(12, 0.4), stats.binom(12, 0.5))  # 13 values: bincount path


def _rows(law, n, seed, dtype):
    return law.rvs(size=(n, 1), random_state=seed).astype(dtype)


def _reference(est, X, seed):
    """The pre-table release: scipy logpmf per row, clip, floor, exact integer sum."""
    plan = est._prepare(X, None, reset=False).plan
    ref, _ = release(plan.stat.log_e(plan.laws.log_ratio(X.astype(float))), plan.stat,
                     plan.bet, est.epsilon, check_generator(seed))
    return plan, ref


@pytest.mark.parametrize("laws", [BERN, BINOM3, BINOM12], ids=["bern", "binom3", "binom12"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, np.int8])
def test_discrete_fit_is_the_row_by_row_release(laws, dtype):
    X = _rows(laws[1], 3000, 1, dtype)
    est = PrivateEValueTest(*laws, epsilon=0.7, random_state=5).fit(X)
    plan, ref = _reference(est, X, 5)
    assert plan.table is not None
    assert est.result_.log_e_value == ref


@pytest.mark.parametrize("laws", [BERN, BINOM3, BINOM12], ids=["bern", "binom3", "binom12"])
def test_discrete_integer_sum_moves_at_most_the_sensitivity_on_every_neighbour(laws):
    # replace each row of a small dataset by every support value: S moves by at most
    # Δ_h = floor(hi/h) − floor(lo/h), M = S >> k by at most Δ_int (noise.steps), the
    # quantities the noise rate is calibrated to
    X = _rows(laws[1], 12, 2, np.float64)
    est = PrivateEValueTest(*laws, random_state=0)
    plan = est._prepare(X, None, reset=True).plan
    table, noise = plan.table, plan.noise
    ends = floor_to_grid(np.array([noise.lo, noise.hi]), noise.fine)
    span = int(ends[1]) - int(ends[0])
    s = table.integer_sum(X)
    assert s == sum(table.value_codes[list(table.values).index(v)] for v in X[:, 0])
    for i in range(X.shape[0]):
        for v in table.values:
            Y = X.copy()
            Y[i, 0] = v
            t = table.integer_sum(Y)
            assert abs(t - s) <= span
            assert abs((t >> noise.fine_bits) - (s >> noise.fine_bits)) <= noise.steps


def test_unchecked_rows_are_counted_inside_the_support():
    # the release counts every row at exactly one allowed value, so even rows that
    # skipped the check cannot push a row's integer outside the computed extremes
    X = np.array([[0.0], [1.0], [7.0], [np.nan]])
    est = PrivateEValueTest(*BERN, random_state=0)
    table = est._prepare(np.zeros((4, 1)), None, reset=True).plan.table
    lo, hi = min(table.value_codes), max(table.value_codes)
    assert sum(table.counts(X)) == 4
    assert 4 * lo <= table.integer_sum(X) <= 4 * hi


@pytest.mark.parametrize("laws", [BERN, BINOM12], ids=["bern", "binom12"])
@pytest.mark.parametrize("bad, match", [
    (np.nan, "NaN"), (np.inf, "infinity"), (0.5, "outside the support"),
    (-1.0, "outside the support"), (99.0, "outside the support"),
])
def test_discrete_refusals_before_the_charge(laws, bad, match):
    X = _rows(laws[1], 50, 3, np.float64)
    X[17, 0] = bad
    budget = PrivacyBudget(10.0)
    with pytest.raises(ValueError, match=match):
        PrivateEValueTest(*laws, budget=budget).fit(X)
    assert budget.ledger == []


def test_support_values_outside_the_dtype_range_count_no_rows():
    # support {127, 128}: int8 rows can only be 127 (128 is not representable)
    laws = (stats.bernoulli(0.3, loc=127), stats.bernoulli(0.6, loc=127))
    X = np.full((40, 1), 127, dtype=np.int8)
    est = PrivateEValueTest(*laws, random_state=2).fit(X)
    assert est.result_.log_e_value == _reference(est, X, 2)[1]
    with pytest.raises(ValueError, match="outside the support"):
        PrivateEValueTest(*laws, random_state=0).fit(np.array([[-1], [127]], dtype=np.int8))


def test_the_plan_is_public_and_reused():
    # the same object for two different datasets of the same size: nothing in it can
    # depend on the rows
    est = PrivateEValueTest(*BERN, random_state=0)
    a = est._prepare(_rows(BERN[0], 500, 1, float), None, reset=True).plan
    b = est._prepare(_rows(BERN[1], 500, 2, float), None, reset=True).plan
    assert a is b
    assert est._prepare(_rows(BERN[1], 501, 2, float), None, reset=True).plan is not a


# ------------------------------------------------------------------ partial_fit
STREAMS = [
    (BERN, dict(statistic="auto"), np.float64),
    (BERN, dict(statistic="auto", beta=1e-9), np.int64),
    (BERN, dict(statistic="optimal"), bool),
    (BERN, dict(statistic="optimal", beta=1e-9, max_samples=300), np.float64),
    (BINOM3, dict(statistic="optimal"), np.int64),
    # continuous laws: the first stream plans every batch size (about 2 s each)
    pytest.param((stats.norm(0, 1), stats.norm(0.3, 1)), dict(statistic="optimal"),
                 np.float64, marks=pytest.mark.slow),
    pytest.param((stats.expon(), stats.expon(scale=1.3)), dict(statistic="tslr"),
                 np.float32, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("laws, kw, dtype", STREAMS)
def test_one_row_at_a_time_is_one_chunk_is_fit(laws, kw, dtype):
    X = laws[1].rvs(size=(400, 1), random_state=4).astype(dtype)

    def proc():
        return PrivateEProcess(*laws, alpha=1e-9, schedule=[23, 40, 61], random_state=9,
                               **kw)

    whole = proc().fit(X).result_
    chunk = proc().partial_fit(X).result_
    single = proc()
    for i in range(X.shape[0]):
        single.partial_fit(X[i:i + 1])
    mixed, i, sizes = proc(), 0, iter([1, 300, 2, 1, 7, 1000])  # fast and full paths
    while i < X.shape[0]:
        step = next(sizes)
        mixed.partial_fit(X[i:i + step])
        i += step
    assert whole == chunk == single.result_ == mixed.result_
    assert len(whole.batch_ends) >= 3


def test_single_rows_skip_the_full_validation(monkeypatch):
    calls = []
    real = eprocess_module.validate_rows

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(eprocess_module, "validate_rows", spy)
    proc = PrivateEProcess(*BERN, alpha=1e-9, random_state=0)
    proc.partial_fit(np.zeros((1, 1)))
    assert len(calls) == 1  # the charged start is fully validated
    for v in (0.0, 1.0, 1, True):
        proc.partial_fit(np.array([[v]]))
    assert len(calls) == 1
    proc.partial_fit([[1.0]])  # not an ndarray: the full path
    assert len(calls) == 2


@pytest.mark.parametrize("row, match", [
    (np.array([[np.nan]]), "NaN"),
    (np.array([[np.inf]]), "infinity"),
    (np.array([[0.5]]), "outside the support"),
    (np.array([[2]]), "outside the support"),
    (np.zeros((1, 2)), "X has 2 features"),
    (np.zeros((0, 1)), "0 sample"),
    (np.array([["a"]]), "numeric"),
])
def test_fast_path_refuses_with_the_full_messages_and_the_stream_goes_on(row, match):
    proc = PrivateEProcess(*BERN, alpha=1e-9, schedule=[10], random_state=0)
    proc.partial_fit(np.zeros((5, 1)))
    with pytest.raises(ValueError, match=match):
        proc.partial_fit(row)
    for _ in range(5):
        proc.partial_fit(np.ones((1, 1)))
    assert proc.result_.n_samples == 10


def test_gaussian_and_continuous_fast_path_refusals():
    proc = PrivateEProcess(stats.norm(), stats.norm(0.5), alpha=1e-9, random_state=0)
    proc.partial_fit(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="NaN"):
        proc.partial_fit(np.array([[np.nan]]))
    proc = PrivateEProcess(stats.expon(), stats.expon(scale=2), statistic="tslr",
                           alpha=1e-9, random_state=0)
    proc.partial_fit(np.ones((3, 1)))
    with pytest.raises(ValueError, match="outside the support"):
        proc.partial_fit(np.array([[-1.0]]))


def test_changed_parameters_are_caught_on_the_fast_path():
    proc = PrivateEProcess(*BERN, epsilon=1.0, alpha=1e-9, schedule=[10], random_state=0)
    proc.partial_fit(np.zeros((3, 1)))
    proc.set_params(epsilon=2.0)
    with pytest.raises(InvalidParameterError, match="epsilon changed"):
        proc.partial_fit(np.zeros((1, 1)))
    proc.set_params(epsilon=float("1.0"))  # an equal value (a new object) is accepted
    for _ in range(7):
        proc.partial_fit(np.zeros((1, 1)))
    assert proc.result_.n_samples == 10


def test_rows_after_feature_names_keep_sklearns_warning():
    proc = PrivateEProcess(*BERN, alpha=1e-9, random_state=0)
    proc.partial_fit(pd.DataFrame({"x": [0.0, 1.0]}))
    with pytest.warns(UserWarning, match="feature names"):
        proc.partial_fit(np.zeros((1, 1)))


def test_rows_after_the_decision_are_checked_then_ignored():
    proc = PrivateEProcess(*BERN, alpha=0.5, schedule=[5], random_state=0)
    while proc.result_.decision == "continue" if hasattr(proc, "result_") else True:
        proc.partial_fit(np.ones((1, 1)))
    done = proc.result_
    proc.partial_fit(np.ones((1, 1)))
    assert proc.result_ is done
    with pytest.raises(ValueError, match="outside the support"):
        proc.partial_fit(np.array([[3.0]]))
    assert math.isfinite(done.log_e_process[-1])
