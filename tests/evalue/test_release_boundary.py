"""Release-boundary fixes: extreme ε, non-numeric and 1-D input, default laws, the
per-value table of discrete laws (same release), and dask input (same release)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from skdptest import PrivacyBudget, PrivacyLeakWarning, PrivateEProcess, PrivateEValueTest
from skdptest._validation import check_generator
from skdptest.evalue._evalue import MAX_EPSILON
from skdptest.evalue._merge import release

LAWS = (stats.norm(0, 1), stats.norm(0.5, 1))
BERN = (stats.bernoulli(0.3), stats.bernoulli(0.5))


def _x(n=200, seed=0):
    return np.random.default_rng(seed).normal(0.5, 1, size=(n, 1))


@pytest.mark.parametrize("epsilon", [1e6, 1e308])
def test_large_epsilon_runs_at_the_cap_and_charges_what_was_asked(epsilon):
    budget = PrivacyBudget(epsilon=1e308)
    with pytest.warns(PrivacyLeakWarning, match=r"computed at epsilon=512"):
        big = PrivateEValueTest(*LAWS, epsilon=epsilon, budget=budget,
                                random_state=3).fit(_x())
    cap = PrivateEValueTest(*LAWS, epsilon=MAX_EPSILON, random_state=3).fit(_x())
    assert big.result_.log_e_value == cap.result_.log_e_value
    assert big.result_.epsilon == epsilon and len(budget) == 1


def test_tiny_epsilon_eprocess_refused_before_the_charge():
    budget = PrivacyBudget(epsilon=1.0)
    # unit shift: the e-power rate at ε = 1e-300 computes to 0 (it used to divide by it
    # after the charge, in the schedule)
    est = PrivateEProcess(stats.norm(0, 1), stats.norm(1, 1), epsilon=1e-300, budget=budget,
                          random_state=0)
    with pytest.raises(ValueError, match=r"epsilon=1e-300"):
        est.partial_fit(_x())
    assert len(budget) == 0
    assert not hasattr(est, "n_features_in_") and "_stream" not in vars(est)


@pytest.mark.parametrize("X", [
    pd.DataFrame({"a": pd.Categorical(["u", "v"] * 10)}),
    (np.datetime64("2020-01-01") + np.arange(20).reshape(-1, 1)).astype("datetime64[D]"),
], ids=["categorical", "datetime"])
@pytest.mark.parametrize("cls", [PrivateEValueTest, PrivateEProcess])
def test_non_numeric_refused(cls, X):
    with pytest.raises(ValueError, match=r"numeric"):
        cls(*LAWS, random_state=0).fit(X)


def test_default_laws_warn():
    with pytest.warns(UserWarning, match=r"null and alternative are not given"):
        PrivateEValueTest(random_state=0).fit(_x())


def test_one_dimensional_rows_for_univariate_laws():
    x = _x()[:, 0]
    a = PrivateEValueTest(*LAWS, random_state=1).fit(x).result_
    b = PrivateEValueTest(*LAWS, random_state=1).fit(x[:, None]).result_
    assert a == b
    with pytest.raises(ValueError, match=r"Expected 2D array"):
        PrivateEValueTest(random_state=1).fit(x)


@pytest.mark.parametrize("dtype", [int, float, bool])
def test_discrete_table_gives_the_row_by_row_release(dtype):
    X = (np.random.default_rng(2).random((5000, 1)) < 0.45).astype(dtype)
    est = PrivateEValueTest(*BERN, epsilon=1.0, random_state=7).fit(X)
    plan = est._prepare(X, None, reset=False).plan
    assert plan.table is not None
    # the reference: per-row scipy logpmf, clip, floor, exact sum (the pre-table path)
    ref, _ = release(plan.stat.log_e(plan.laws.log_ratio(X.astype(float))), plan.stat,
                     plan.bet, 1.0, check_generator(7))
    r = est.result_
    assert r.log_e_value == ref
    j = (r.log_e_value + r.compensator) / r.grid  # g·J − c with J an integer
    assert j == math.floor(j)


def test_discrete_table_refuses_rows_outside_the_support():
    for bad in ([[0], [2]], [[0.5], [1.0]], [[-1], [0]]):
        with pytest.raises(ValueError, match=r"outside the support"):
            PrivateEValueTest(*BERN, random_state=0).fit(np.array(bad))


dask = pytest.importorskip("dask", reason="dask is not installed")


@pytest.mark.parametrize("laws, X", [
    (LAWS, _x(3000, 5)),
    (BERN, (np.random.default_rng(5).random((3000, 1)) < 0.4).astype(float)),
], ids=["gaussian", "bernoulli"])
def test_dask_array_and_dataframe_give_the_numpy_release(laws, X):
    import dask.array as da
    import dask.dataframe as dd

    ref = PrivateEValueTest(*laws, random_state=11).fit(X).result_
    with dask.config.set(scheduler="synchronous"):
        a = PrivateEValueTest(*laws, random_state=11).fit(da.from_array(X, chunks=700))
        df = dd.from_pandas(pd.DataFrame({"x": X[:, 0]}), npartitions=3)
        b = PrivateEValueTest(*laws, random_state=11).fit(df)
    assert a.result_ == ref and b.result_ == ref
    assert a.n_features_in_ == 1 and list(b.feature_names_in_) == ["x"]


def test_dask_chunk_outside_support_refused_before_the_charge():
    import dask.array as da

    X = np.zeros((1000, 1))
    X[900] = 3.0
    budget = PrivacyBudget(epsilon=10.0)
    est = PrivateEValueTest(*BERN, budget=budget, random_state=0)
    with dask.config.set(scheduler="synchronous"), pytest.raises(ValueError, match="support"):
        est.fit(da.from_array(X, chunks=250))
    assert len(budget) == 0 and not hasattr(est, "n_features_in_")


@pytest.mark.slow
def test_dask_local_cluster_gives_the_numpy_release():
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    import dask.array as da

    X = _x(20000, 9)
    ref = PrivateEValueTest(*LAWS, random_state=4).fit(X).result_
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        got = PrivateEValueTest(*LAWS, random_state=4).fit(da.from_array(X, chunks=3000))
    assert got.result_ == ref
