"""PrivacyBudget: the shared SQLite ledger, its handle semantics, and how estimators charge it."""

from __future__ import annotations

import copy
import math
import multiprocessing
import os
import pickle
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV, KFold

import skdptest
from skdptest import BudgetExceededError, LedgerEntry, PrivacyBudget

# pytest runs with --import-mode=importlib, which does not put tests/ on sys.path. The
# helpers must be importable by name in worker processes (loky and multiprocessing pass
# sys.path on to them), so put the folder there rather than loading the file by path.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
from _toy import ToyMeanTest, race_spend  # noqa: E402

# -- spending and the ledger ------------------------------------------------------------


def test_spend_is_recorded_in_the_ledger():
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5)
    assert budget.spent == (0.0, 0.0)
    assert budget.ledger == []
    budget.spend(0.25, label="first")
    budget.spend(0.5, 1e-6, label="second")
    entries = budget.ledger
    assert [e.label for e in entries] == ["first", "second"]
    assert all(isinstance(e, LedgerEntry) for e in entries)
    assert [(e.epsilon, e.delta) for e in entries] == [(0.25, 0.0), (0.5, 1e-6)]
    assert entries[0].time <= entries[1].time
    assert abs(entries[0].time - time.time()) < 60
    assert budget.spent == (0.75, 1e-6)
    assert budget.remaining == pytest.approx((0.25, 1e-5 - 1e-6))
    assert len(budget) == 2
    with pytest.raises(AttributeError, match="cannot assign|frozen"):
        entries[0].epsilon = 0.0


def test_empty_budget_is_truthy():
    # A handle with no spends yet must not read as "no budget" in `if budget:`.
    assert bool(PrivacyBudget(epsilon=1.0)) is True


def test_refused_spend_records_nothing():
    budget = PrivacyBudget(epsilon=1.0)
    budget.spend(0.7, label="ok")
    assert issubclass(BudgetExceededError, ValueError)
    with pytest.raises(
        BudgetExceededError,
        match=r"asked for epsilon=0\.5, delta=0 \(too much\), but only epsilon=0\.3, "
        r"delta=0 remain",
    ):
        budget.spend(0.5, label="too much")
    assert [e.label for e in budget.ledger] == ["ok"]
    assert budget.spent == (0.7, 0.0)
    # What remains can still be spent exactly.
    budget.spend(0.3, label="rest")
    assert budget.remaining[0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=1e-06"):
        budget.spend(1e-6)
    assert len(budget) == 2


BAD_SPENDS = [
    ({"epsilon": 0.0}, ValueError, r"epsilon must be > 0, got 0\.0"),
    ({"epsilon": -0.1}, ValueError, r"epsilon must be > 0, got -0\.1"),
    ({"epsilon": float("nan")}, ValueError, r"epsilon must be finite, got nan"),
    ({"epsilon": float("inf")}, ValueError, r"epsilon must be finite, got inf"),
    ({"epsilon": "0.1"}, TypeError, r"epsilon must be a real number, got str"),
    ({"epsilon": None}, TypeError, r"epsilon must be a real number, got NoneType"),
    ({"epsilon": True}, TypeError, r"epsilon must be a real number, got bool"),
    ({"epsilon": np.array([0.1])}, TypeError, r"epsilon must be a real number, got ndarray"),
    ({"epsilon": 0.1, "delta": -1e-9}, ValueError, r"delta must be >= 0"),
    ({"epsilon": 0.1, "delta": 1.0}, ValueError, r"delta must be < 1\.0, got 1\.0"),
    ({"epsilon": 0.1, "delta": float("nan")}, ValueError, r"delta must be finite"),
    ({"epsilon": 0.1, "delta": "0"}, TypeError, r"delta must be a real number, got str"),
    ({"epsilon": 0.1, "label": 3}, TypeError, r"label must be a str, got int"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), BAD_SPENDS)
def test_spend_with_bad_arguments_records_nothing(kwargs, error, match):
    budget = PrivacyBudget(epsilon=1.0, delta=0.5)
    with pytest.raises(error, match=match):
        budget.spend(**kwargs)
    assert budget.ledger == []
    assert budget.spent == (0.0, 0.0)


def test_numpy_scalars_are_accepted():
    budget = PrivacyBudget(epsilon=np.float64(1.0), delta=np.float32(0.0))
    budget.spend(np.float64(0.5), np.int64(0), label="numpy")
    assert budget.spent == (0.5, 0.0)
    assert type(budget.ledger[0].epsilon) is float


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 0}, ValueError, r"epsilon must be > 0"),
        ({"epsilon": float("inf")}, ValueError, r"epsilon must be finite"),
        ({"epsilon": "1"}, TypeError, r"epsilon must be a real number"),
        ({"epsilon": 1.0, "delta": 1.0}, ValueError, r"delta must be < 1\.0"),
        ({"epsilon": 1.0, "delta": -0.5}, ValueError, r"delta must be >= 0"),
    ],
)
def test_constructor_rejects_bad_totals(kwargs, error, match):
    with pytest.raises(error, match=match):
        PrivacyBudget(**kwargs)


def test_delta_budget():
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5)
    budget.spend(1.0, 6e-6, label="a")
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=1, delta=5e-06 \(b\)"):
        budget.spend(1.0, 5e-6, label="b")
    budget.spend(1.0, 4e-6, label="c")
    assert budget.spent == pytest.approx((2.0, 1e-5))
    assert [e.label for e in budget.ledger] == ["a", "c"]
    # Once δ is used up, pure-ε spends still go through.
    budget.spend(1.0, label="pure")
    assert budget.spent[0] == pytest.approx(3.0)


def test_pure_budget_refuses_any_delta():
    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(BudgetExceededError, match=r"delta=1e-12 \(approx\).*delta=0 remain"):
        budget.spend(0.1, 1e-12, label="approx")
    assert budget.ledger == []


def test_rounding_slack_admits_hundred_hundredths():
    budget = PrivacyBudget(epsilon=1.0)
    for _ in range(100):
        budget.spend(0.01)
    with pytest.raises(BudgetExceededError, match="asked for epsilon=0.01"):
        budget.spend(0.01)
    assert len(budget) == 100
    # The slack is relative and tiny: it never admits a visible overspend.
    budget = PrivacyBudget(epsilon=1.0)
    budget.spend(1.0)
    with pytest.raises(BudgetExceededError, match="asked for epsilon=1e-08"):
        budget.spend(1e-8)


# -- persistence ------------------------------------------------------------------------


def test_persistent_ledger_survives_reopen(tmp_path):
    path = tmp_path / "ledger.sqlite"
    first = PrivacyBudget(epsilon=2.0, delta=1e-6, path=path)
    assert first.path == str(path)
    first.spend(0.5, label="session 1")
    del first

    second = PrivacyBudget(epsilon=2.0, delta=1e-6, path=str(path))
    assert [e.label for e in second.ledger] == ["session 1"]
    assert second.spent == (0.5, 0.0)
    second.spend(1.5, label="session 2")
    with pytest.raises(BudgetExceededError, match=r"only epsilon=0, delta=1e-06 remain"):
        second.spend(0.1, label="session 2 again")

    third = PrivacyBudget(epsilon=2.0, delta=1e-6, path=path)
    assert [e.label for e in third.ledger] == ["session 1", "session 2"]
    assert third.remaining == (0.0, 1e-6)


def test_persistent_ledger_outlives_the_creating_process(tmp_path):
    path = tmp_path / "ledger.sqlite"
    code = (
        "from skdptest import PrivacyBudget\n"
        f"PrivacyBudget(1.0, path={str(path)!r}).spend(0.25, label='other process')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    budget = PrivacyBudget(1.0, path=path)
    assert [(e.label, e.epsilon) for e in budget.ledger] == [("other process", 0.25)]


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(1.5, 0.0), (1.0, 1e-6)], ids=["other-epsilon", "other-delta"]
)
def test_reopening_with_other_totals_is_an_error(tmp_path, epsilon, delta):
    path = tmp_path / "ledger.sqlite"
    PrivacyBudget(epsilon=1.0, path=path).spend(0.5)
    with pytest.raises(
        ValueError, match=r"holds a ledger created with epsilon=1\.0, delta=0\.0; it cannot"
    ):
        PrivacyBudget(epsilon=epsilon, delta=delta, path=path)
    # The ledger is untouched by the failed reopen.
    assert PrivacyBudget(epsilon=1.0, path=path).spent == (0.5, 0.0)


def test_path_in_missing_directory_is_a_clear_error(tmp_path):
    path = tmp_path / "no such dir" / "ledger.sqlite"
    with pytest.raises(ValueError, match=r"directory .*no such dir' does not exist"):
        PrivacyBudget(epsilon=1.0, path=path)
    assert not path.parent.exists()


def test_path_that_is_a_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"cannot open the privacy ledger"):
        PrivacyBudget(epsilon=1.0, path=tmp_path)


def test_path_that_is_not_a_ledger_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(ValueError, match=r"is not a writable privacy ledger"):
        PrivacyBudget(epsilon=1.0, path=path)
    assert path.read_text() == "not a database\n" * 100


def test_temporary_ledger_is_removed_when_its_process_exits():
    code = (
        "from skdptest import PrivacyBudget\n"
        "b = PrivacyBudget(1.0)\n"
        "b.spend(0.5)\n"
        "import os; assert os.path.exists(b.path)\n"
        "print(b.path)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    path = out.stdout.strip()
    assert path.endswith(".sqlite")
    assert not os.path.exists(path)


def test_vanished_ledger_is_an_error_not_a_fresh_start(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.5)
    os.remove(path)
    with pytest.raises(FileNotFoundError, match=r"no longer exists.*nothing was recorded"):
        budget.spend(0.1)
    with pytest.raises(FileNotFoundError, match=r"no longer exists"):
        budget.ledger  # noqa: B018
    assert not path.exists()  # no empty ledger was left in its place
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=1.0, delta=0.0, spent=unavailable, path={str(path)!r})"
    )


def test_repr():
    budget = PrivacyBudget(epsilon=2.0, delta=1e-6)
    budget.spend(0.5, 1e-7)
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=2.0, delta=1e-06, spent=(0.5, 1e-07), path={budget.path!r})"
    )
    assert f"budget={budget!r}" in repr(ToyMeanTest(budget=budget))


# -- handle semantics -------------------------------------------------------------------


def test_copies_and_clones_are_the_same_handle():
    budget = PrivacyBudget(epsilon=1.0)
    assert copy.copy(budget) is budget
    assert copy.deepcopy(budget) is budget
    assert clone(budget, safe=False) is budget
    est = ToyMeanTest(budget=budget)
    assert clone(est).budget is budget
    assert copy.deepcopy(est).budget is budget
    assert copy.deepcopy({"a": budget, "b": [budget]})["b"][0] is budget


def test_pickle_round_trip_charges_the_same_ledger():
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6)
    budget.spend(0.25, label="before")
    loaded = pickle.loads(pickle.dumps(budget))
    assert loaded is not budget
    assert (loaded.epsilon, loaded.delta, loaded.path) == (1.0, 1e-6, budget.path)
    assert [e.label for e in loaded.ledger] == ["before"]
    loaded.spend(0.5, label="after unpickling")
    assert [e.label for e in budget.ledger] == ["before", "after unpickling"]
    assert budget.remaining[0] == pytest.approx(0.25)
    with pytest.raises(BudgetExceededError, match=r"only epsilon=0\.25"):
        budget.spend(0.5)
    # An estimator pickles with its budget.
    est = pickle.loads(pickle.dumps(ToyMeanTest(epsilon=0.25, budget=budget)))
    est.fit(np.zeros((5, 1)))
    assert budget.ledger[-1].label == "ToyMeanTest.fit"


def test_unpickling_a_vanished_ledger_warns(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.5)
    data = pickle.dumps(budget)
    os.remove(path)
    with pytest.warns(RuntimeWarning, match=r"no longer exists; a fresh one is created"):
        loaded = pickle.loads(data)
    assert loaded.ledger == []


# -- concurrency ------------------------------------------------------------------------


@pytest.mark.parametrize(("total", "step"), [(100.0, 1.0), (1.0, 0.01)], ids=["1x100", "0.01x100"])
def test_processes_racing_never_overspend(total, step):
    budget = PrivacyBudget(epsilon=total)
    ctx = multiprocessing.get_context("spawn")
    n_procs, n_tries = 4, 50
    barrier = ctx.Barrier(n_procs)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=race_spend, args=(budget, step, n_tries, barrier, queue))
        for _ in range(n_procs)
    ]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(r[0] for r in reports) == 100
    assert sum(r[1] for r in reports) == n_procs * n_tries - 100
    entries = budget.ledger
    assert len(entries) == 100
    assert {e.epsilon for e in entries} == {step}
    # The ledger is append-only, so "never exceeded" is the running sums staying in bounds.
    running = np.cumsum([e.epsilon for e in entries])
    assert running[-1] == pytest.approx(total)
    assert np.all(running <= total * (1 + 1e-9))
    assert math.fsum(e.epsilon for e in entries) <= total * (1 + 1e-9)
    # Each process tries only 50, so at least two of them got spends recorded.
    assert len({e.label for e in entries}) >= 2
    with pytest.raises(BudgetExceededError, match="asked for epsilon"):
        budget.spend(step)


# -- estimators charging the budget -----------------------------------------------------


def _toy_data(seed=0, n=60, d=2):
    return np.random.default_rng(seed).normal(0.3, 1.0, size=(n, d))


def test_estimator_charges_fit_and_score():
    budget = PrivacyBudget(epsilon=1.0)
    X = _toy_data()
    est = ToyMeanTest(epsilon=0.25, budget=budget, random_state=0).fit(X)
    est.score(X)
    assert [(e.label, e.epsilon) for e in budget.ledger] == [
        ("ToyMeanTest.fit", 0.25),
        ("ToyMeanTest.score", 0.25),
    ]
    assert est.test() is est.result_  # reading the stored result is free
    est.decision()
    assert len(budget) == 2


@pytest.mark.parametrize(
    ("params", "X", "error", "match"),
    [
        ({}, np.array([[0.0], [np.nan]]), ValueError, r"Input X contains NaN"),
        ({}, np.array([[0.0], [np.inf]]), ValueError, r"Input X contains infinity"),
        ({}, np.zeros((0, 1)), ValueError, r"0 sample\(s\)"),
        ({"epsilon": 0.0}, np.zeros((5, 1)), ValueError, r"epsilon must be > 0"),
        ({"epsilon": float("nan")}, np.zeros((5, 1)), ValueError, r"epsilon must be finite"),
        ({"epsilon": "1"}, np.zeros((5, 1)), TypeError, r"epsilon must be a real number"),
        ({"alpha": 1.0}, np.zeros((5, 1)), ValueError, r"alpha must be < 1\.0"),
    ],
)
def test_invalid_input_is_rejected_before_charging(params, X, error, match):
    budget = PrivacyBudget(epsilon=1.0)
    est = ToyMeanTest(budget=budget, random_state=0, **params)
    with pytest.raises(error, match=match):
        est.fit(X)
    assert budget.ledger == []
    assert not hasattr(est, "result_")


def test_invalid_score_input_is_rejected_before_charging():
    budget = PrivacyBudget(epsilon=1.0)
    est = ToyMeanTest(epsilon=0.5, budget=budget, random_state=0).fit(_toy_data())
    with pytest.raises(ValueError, match=r"Input X contains NaN"):
        est.score(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match=r"X has 3 features, but ToyMeanTest is expecting 2"):
        est.score(np.zeros((4, 3)))
    assert [e.label for e in budget.ledger] == ["ToyMeanTest.fit"]


def test_budget_of_wrong_type_is_rejected():
    est = ToyMeanTest(budget=1.0)
    with pytest.raises(TypeError, match=r"budget must be None or a PrivacyBudget, got float"):
        est.fit(np.zeros((5, 1)))
    assert not hasattr(est, "result_")


def test_exceeded_budget_leaves_no_result():
    budget = PrivacyBudget(epsilon=1.0)
    X = _toy_data()
    est = ToyMeanTest(epsilon=0.6, budget=budget, random_state=0).fit(X)
    assert hasattr(est, "result_")
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=0\.6.*only epsilon=0\.4"):
        est.fit(X)
    assert not hasattr(est, "result_")  # the old result is not passed off as the new one
    with pytest.raises(BudgetExceededError, match=r"\(ToyMeanTest\.fit\)"):
        ToyMeanTest(epsilon=0.6, budget=budget).fit(X)
    assert [e.label for e in budget.ledger] == ["ToyMeanTest.fit"]


# -- grid search ------------------------------------------------------------------------


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize(
    "cls", [ToyMeanTest, skdptest.PrivateEValueTest], ids=lambda c: c.__name__
)
def test_grid_search_records_every_release(cls, n_jobs):
    budget = PrivacyBudget(epsilon=100.0)
    X = _toy_data(seed=1, n=90, d=2)
    grid = {"epsilon": [0.5, 1.0]}
    n_folds = 3
    search = GridSearchCV(
        cls(budget=budget, random_state=0),
        grid,
        cv=KFold(n_folds),
        n_jobs=n_jobs,
        error_score="raise",
    )
    search.fit(X)
    name = cls.__name__
    entries = budget.ledger
    assert len(entries) == 2 * len(grid["epsilon"]) * n_folds + 1 == 13
    assert Counter(e.label for e in entries) == {f"{name}.fit": 7, f"{name}.score": 6}
    assert entries[-1].label == f"{name}.fit"  # the refit comes last
    expected = 2 * n_folds * sum(grid["epsilon"]) + search.best_params_["epsilon"]
    assert budget.spent[0] == pytest.approx(expected)
    assert search.best_estimator_.budget is budget
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    with sqlite3.connect(budget.path) as con:
        pids = {pid for (pid,) in con.execute("SELECT pid FROM spends")}
    if n_jobs == 1:
        assert pids == {os.getpid()}
    else:
        # Fits and scores ran in loky worker processes and charged this same ledger.
        assert pids - {os.getpid()}


def test_grid_search_stops_at_a_refused_release_with_error_score_raise():
    budget = PrivacyBudget(epsilon=5.0)
    search = GridSearchCV(
        ToyMeanTest(budget=budget, random_state=0),
        {"epsilon": [0.5, 1.0]},
        cv=KFold(3),
        error_score="raise",
    )
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=1, .*only epsilon=0,"):
        search.fit(_toy_data())
    # 3 fits + 3 scores at 0.5, then 2 releases at 1.0 exhaust the total of 5.
    assert len(budget) == 8
    assert budget.spent[0] == pytest.approx(5.0)


def test_grid_search_default_error_score_hides_refusals_as_warnings():
    # Documented in doc/privacy_budget.md: why examples pass error_score="raise".
    budget = PrivacyBudget(epsilon=5.0)
    search = GridSearchCV(
        ToyMeanTest(budget=budget, random_state=0), {"epsilon": [0.5, 1.0]}, cv=KFold(3)
    )
    with (
        pytest.warns(FitFailedWarning, match=r"fits failed"),
        pytest.warns(UserWarning, match=r"test scores are non-finite"),
        pytest.raises(BudgetExceededError, match=r"\(ToyMeanTest\.fit\)"),
    ):
        search.fit(_toy_data())
    assert budget.spent[0] == pytest.approx(5.0)
