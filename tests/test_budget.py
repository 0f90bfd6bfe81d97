"""PrivacyBudget: the shared SQLite ledger, its handle semantics, and how estimators charge it."""

from __future__ import annotations

import base64
import copy
import math
import multiprocessing
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV, KFold

from skdptest import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerEntry,
    PrivacyBudget,
    _budget,
)
from skdptest._budget import LEDGER_APPLICATION_ID, LedgerError, LedgerNotFoundError

# By full name (pyproject's pytest pythonpath puts the repository root on sys.path):
# worker processes import it too (loky and multiprocessing pass sys.path on to them).
from tests._toy import ToyMeanTest, race_spend, try_spend

# Messages of the shared amount constraint (skdptest._params).
EPS = r"epsilon must be a real number in \(0, inf\); got "
DELTA = r"delta must be a real number in \[0, 1\); got "
#: The library's refusal of NaN and infinity (no imputer advice: imputing is a release).
MISSING = (r"^X contains missing or infinite values \(NaN or infinity\); impute or drop them "
           r"with public rules before the test \(data-dependent imputation")

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
    ({"epsilon": 0.0}, ValueError, EPS + r"0\.0"),
    ({"epsilon": -0.1}, ValueError, EPS + r"-0\.1"),
    ({"epsilon": float("nan")}, ValueError, EPS + r"nan"),
    ({"epsilon": float("inf")}, ValueError, EPS + r"inf"),
    ({"epsilon": "0.1"}, TypeError, EPS + r"'0?\.?1?'"),
    ({"epsilon": None}, TypeError, EPS + r"None"),
    ({"epsilon": True}, TypeError, EPS + r"True"),
    ({"epsilon": np.array([0.1])}, TypeError, EPS + r"an object of type ndarray"),
    ({"epsilon": 0.1, "delta": -1e-9}, ValueError, DELTA + r"-"),
    ({"epsilon": 0.1, "delta": 1.0}, ValueError, DELTA + r"1\.0"),
    ({"epsilon": 0.1, "delta": float("nan")}, ValueError, DELTA + r"nan"),
    ({"epsilon": 0.1, "delta": "0"}, TypeError, DELTA + r"'0'"),
    ({"epsilon": 0.1, "label": 3}, TypeError, r"label must be a str, got int"),
    # integers above float64's range: a refusal naming the amount, not OverflowError
    ({"epsilon": 10**400}, ValueError, EPS + r"an int of about 401 digits \(outside the range "
     r"of float64\)"),
    ({"epsilon": 0.1, "delta": 10**5000}, ValueError, DELTA + r"an int of about 5001 digits"),
    ({"epsilon": Fraction(10**400, 3)}, ValueError, EPS + r"an object of type Fraction "
     r"\(outside the range of float64\)"),
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
        ({"epsilon": 0}, ValueError, EPS + r"0"),
        ({"epsilon": float("inf")}, ValueError, EPS + r"inf"),
        ({"epsilon": "1"}, TypeError, EPS + r"\'1\'"),
        ({"epsilon": 1.0, "delta": 1.0}, ValueError, DELTA + r"1\.0"),
        ({"epsilon": 1.0, "delta": -0.5}, ValueError, DELTA + r"-"),
        ({"epsilon": 10**400}, InvalidParameterError, EPS + r"an int of about 401 digits"),
        ({"epsilon": -(10**400)}, InvalidParameterError, EPS + r"an int of about 401 digits"),
        ({"epsilon": 1.0, "delta": 10**400}, InvalidParameterError, DELTA + r"an int of"),
    ],
)
def test_constructor_rejects_bad_totals(kwargs, error, match):
    with pytest.raises(error, match=match):
        PrivacyBudget(**kwargs)


BAD_PATHS = [
    ("ledger\0.sqlite", r"path must not contain a NUL byte"),
    ("\0", r"path must not contain a NUL byte"),
    ("", r"path must name a file; got the empty string"),
    ("ledger\ud800.sqlite", r"path cannot be encoded for the file system"),
    (b"ledger.sqlite", r"path must be None, a str or an os.PathLike, got bytes"),
    (3, r"path must be None, a str or an os.PathLike, got int"),
]


@pytest.mark.parametrize(("path", "match"), BAD_PATHS)
def test_invalid_path_is_refused_and_creates_nothing(tmp_path, monkeypatch, path, match):
    # SQLite opened the file named by the part before a NUL byte: "ledger\0.sqlite"
    # created "ledger" (in the working directory) before the link raised ValueError.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidParameterError, match=match):
        PrivacyBudget(epsilon=1.0, path=path)
    with pytest.raises(InvalidParameterError, match=match):
        PrivacyBudget(epsilon=1.0, path=Path(path) if isinstance(path, str) and path else path)
    assert list(tmp_path.iterdir()) == []


def test_path_too_long_is_a_ledger_error_and_creates_nothing(tmp_path):
    path = tmp_path / ("x" * 5000)
    with pytest.raises(LedgerError, match=r"path='.*x': cannot create the (privacy )?ledger"):
        PrivacyBudget(epsilon=1.0, path=path)
    assert list(tmp_path.iterdir()) == []


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


# Slow (101 spends): by default, test_budget_postgres.py::test_race_neither_loses_nor_overdraws
# [sqlite-3] serves exactly 100 spends of 0.01 from a total of 1.0 (and refuses the 101st).
@pytest.mark.slow
def test_rounding_slack_admits_hundred_hundredths():
    budget = PrivacyBudget(epsilon=1.0)
    for _ in range(100):
        budget.spend(0.01)
    with pytest.raises(BudgetExceededError, match="asked for epsilon=0.01"):
        budget.spend(0.01)
    assert len(budget) == 100


def test_rounding_slack_never_admits_a_visible_overspend():
    # The slack is relative and tiny.
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


#: The ledger module alone in a fresh interpreter: the package's front (``skdptest/__init__``)
#: imports every family, hence scikit-learn and scipy (2.5 s of CPU), which the ledger never
#: uses; ``skdptest._budget`` itself needs numpy only. An empty package object stands in for
#: the front, so the relative imports of ``_budget`` load the real core modules.
LEDGER_ONLY = (
    "import sys, types\n"
    "front = types.ModuleType('skdptest')\n"
    f"front.__path__ = [{str(Path(_budget.__file__).parent)!r}]\n"
    "sys.modules['skdptest'] = front\n"
    "from skdptest._budget import PrivacyBudget\n"
)


@pytest.fixture(scope="module")
def exited_process(tmp_path_factory):
    """What one fresh interpreter, now exited, left behind (one interpreter for the three
    tests below, importing the ledger module only: 0.3 s of CPU instead of 3 s).

    It spent on a persistent ledger at ``path``; spent on a temporary ledger and printed
    its path; spent 0.9 on another temporary ledger and printed a pickle of its handle.
    """
    path = tmp_path_factory.mktemp("exited") / "ledger.sqlite"
    code = LEDGER_ONLY + (
        "import base64, os, pickle\n"
        f"PrivacyBudget(1.0, path={str(path)!r}).spend(0.25, label='other process')\n"
        "b = PrivacyBudget(1.0)\n"
        "b.spend(0.5)\n"
        "assert os.path.exists(b.path)\n"
        "print(b.path)\n"
        "b = PrivacyBudget(1.0)\n"
        "b.spend(0.9, label='spent before exit')\n"
        "print(base64.b64encode(pickle.dumps(b)).decode())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    temporary, pickled = out.stdout.split()
    return {"path": path, "temporary": temporary, "pickle": base64.b64decode(pickled)}


def test_persistent_ledger_outlives_the_creating_process(exited_process):
    path = exited_process["path"]
    budget = PrivacyBudget(1.0, path=path)
    assert [(e.label, e.epsilon) for e in budget.ledger] == [("other process", 0.25)]


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(1.5, 0.0), (1.0, 1e-6)], ids=["other-epsilon", "other-delta"]
)
def test_reopening_with_other_totals_is_an_error(tmp_path, epsilon, delta):
    path = tmp_path / "ledger.sqlite"
    PrivacyBudget(epsilon=1.0, path=path).spend(0.5)
    with pytest.raises(
        LedgerError, match=r"holds a ledger created with epsilon=1\.0, delta=0\.0; it cannot"
    ):
        PrivacyBudget(epsilon=epsilon, delta=delta, path=path)
    # The ledger is untouched by the failed reopen.
    assert PrivacyBudget(epsilon=1.0, path=path).spent == (0.5, 0.0)


def test_path_in_missing_directory_is_a_clear_error(tmp_path):
    path = tmp_path / "no such dir" / "ledger.sqlite"
    with pytest.raises(LedgerError, match=r"directory .*no such dir' does not exist"):
        PrivacyBudget(epsilon=1.0, path=path)
    assert not path.parent.exists()


def test_path_that_is_a_directory_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerError, match=r"cannot open the privacy ledger: it is a directory"):
        PrivacyBudget(epsilon=1.0, path=tmp_path)


def test_path_that_is_not_a_ledger_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(LedgerError, match=r"notes\.txt': is not an SQLite database"):
        PrivacyBudget(epsilon=1.0, path=path)
    assert path.read_text() == "not a database\n" * 100


def test_temporary_ledger_is_removed_when_its_process_exits(exited_process):
    path = exited_process["temporary"]
    assert path.endswith(".sqlite")
    assert not os.path.exists(path)


def test_vanished_ledger_is_an_error_not_a_fresh_start(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.5)
    os.remove(path)
    with pytest.raises(LedgerNotFoundError, match=r"no longer exists.*nothing was recorded"):
        budget.spend(0.1)
    assert issubclass(LedgerNotFoundError, FileNotFoundError)
    assert issubclass(LedgerNotFoundError, LedgerError)
    with pytest.raises(FileNotFoundError, match=r"no longer exists"):
        budget.ledger  # noqa: B018
    assert not path.exists()  # no empty ledger was left in its place
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=1.0, delta=0.0, spent=unavailable, path={str(path)!r})"
    )


def test_repr():
    budget = PrivacyBudget(epsilon=2.0, delta=1e-6)
    budget.spend(0.5, 1e-7)
    assert repr(budget) == "PrivacyBudget(epsilon=2.0, delta=1e-06, spent=(0.5, 1e-07))"
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


def _pickled_then_removed(path, spent):
    """A ledger handle at ``path`` that spent ``spent``, its pickle; then the file removed."""
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(spent)
    data = pickle.dumps(budget)
    os.remove(path)
    return budget, data


def test_unpickled_handle_of_a_vanished_ledger_refuses_to_spend(tmp_path):
    path = tmp_path / "ledger.sqlite"
    _, data = _pickled_then_removed(path, 0.5)
    with pytest.warns(RuntimeWarning, match=r"no longer exists; this unpickled .* will refuse"):
        loaded = pickle.loads(data)
    assert not path.exists()  # unpickling created nothing
    with pytest.raises(
        LedgerNotFoundError, match=r"ledger\.sqlite': the privacy ledger no longer"
    ):
        loaded.spend(0.1)
    with pytest.raises(LedgerNotFoundError, match=r"no longer exists"):
        loaded.spent  # noqa: B018
    assert not path.exists()  # and neither did the refused spend


def test_unpickling_after_the_temporary_ledger_was_removed_refuses_to_spend(exited_process):
    # The real case: a worker holds a pickle of a budget whose creating process exited
    # (and removed its temporary ledger). It used to recreate a full budget silently.
    data = exited_process["pickle"]
    with pytest.warns(RuntimeWarning, match=r"will refuse to spend"):
        loaded = pickle.loads(data)
    assert not os.path.exists(loaded.path)
    with pytest.raises(LedgerNotFoundError, match=r"no longer exists.*nothing was recorded"):
        loaded.spend(0.5)
    assert not os.path.exists(loaded.path)


def test_handle_refuses_a_ledger_recreated_at_its_path(tmp_path):
    # Deleting a ledger and creating a new one with the same totals at the same path
    # must not hand the old handles (or their pickles) a full budget again.
    path = tmp_path / "ledger.sqlite"
    old, data = _pickled_then_removed(path, 0.9)
    fresh = PrivacyBudget(epsilon=1.0, path=path)
    for handle in (old, pickle.loads(data)):
        with pytest.raises(LedgerError, match=r"is not the ledger this handle was opened on"):
            handle.spend(0.5)
    assert fresh.ledger == []
    fresh.spend(0.5)  # the new ledger itself works
    assert fresh.spent == (0.5, 0.0)


def test_pickle_without_ledger_identity_is_refused():
    budget = PrivacyBudget(epsilon=1.0)
    state = budget.__getstate__()
    del state["ledger_id"]
    handle = object.__new__(PrivacyBudget)
    with pytest.raises(LedgerError, match=r"lacks its ledger identity"):
        handle.__setstate__(state)


@pytest.mark.parametrize(
    ("key", "value", "error", "match"),
    [
        ("epsilon", -1.0, ValueError, EPS + r"-1\.0"),
        ("epsilon", "1", TypeError, EPS + r"'0?\.?1?'"),
        ("delta", 1.0, ValueError, DELTA + r"1\.0"),
    ],
)
def test_unpickling_checks_the_totals(key, value, error, match):
    budget = PrivacyBudget(epsilon=1.0)
    state = budget.__getstate__() | {key: value}
    handle = object.__new__(PrivacyBudget)
    with pytest.raises(error, match=match):
        handle.__setstate__(state)


# -- concurrency ------------------------------------------------------------------------


def _race_unpickled(pickled_budget, *args):
    race_spend(pickle.loads(pickled_budget), *args)


def _race_for_the_last_spend(pickled_budgets, step, barrier, queue):
    recorded = 0
    budgets = pickle.loads(pickled_budgets)
    for budget in budgets:
        barrier.wait()  # every process asks for this ledger's only spend at once
        recorded += try_spend(budget, step)
    queue.put((recorded, len(budgets) - recorded))


def _race(target, n_procs, *args):
    """Run ``target(*args, barrier, queue)`` in ``n_procs`` forked processes (each
    unpickles its own handles and opens its own connections); their reports."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n_procs)
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, queue))
             for _ in range(n_procs)]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return reports


def test_processes_racing_for_the_last_spend_never_overspend():
    # A spend can overdraw only when it checks a total that another process is changing:
    # at the last spend that fits. So the race is held there, round after round: each of
    # 20 ledgers has room for one spend, and three processes ask for it at once (forked
    # from this process; each unpickles its own handles and opens its own connections).
    # A check-then-act mutant (the totals read before the write lock, the entry written
    # under it) recorded two or three spends in 3 to 5 of 10 such rounds in each of 5 runs:
    # it passes all 20 rounds with probability about 0.7 ** 20 < 1e-3. The long race of
    # test_processes_racing_never_overspend (slow) crossed the limit once and caught the
    # same mutant in 2 of 3 runs.
    n_procs, n_rounds = 3, 20
    budgets = [PrivacyBudget(epsilon=1.0) for _ in range(n_rounds)]
    reports = _race(_race_for_the_last_spend, n_procs, pickle.dumps(budgets), 1.0)
    assert [len(budget) for budget in budgets] == [1] * n_rounds
    assert sum(r[0] for r in reports) == n_rounds
    assert sum(r[1] for r in reports) == (n_procs - 1) * n_rounds
    assert all(budget.spent == (1.0, 0.0) for budget in budgets)
    # The winners differ from round to round: the processes really raced.
    assert len({budget.ledger[0].label for budget in budgets}) >= 2


@pytest.mark.slow
@pytest.mark.parametrize(("total", "step"), [
    pytest.param(100.0, 1.0, id="1x100"),
    pytest.param(1.0, 0.01, id="0.01x100"),
])
def test_processes_racing_never_overspend(total, step):
    budget = PrivacyBudget(epsilon=total)
    # Separate processes, each with its own connection to the ledger file and its own
    # handle, unpickled as a spawned worker's would be. They are forked from this process,
    # which has imported the library: four spawned interpreters each importing numpy,
    # scipy and scikit-learn cost 12 s of CPU (a fork server, one import, 2.5 s), the
    # race itself well under one.
    n_procs, n_tries = 4, 50
    reports = _race(_race_unpickled, n_procs, pickle.dumps(budget), step, n_tries)
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
        ({}, np.array([[0.0], [np.nan]]), ValueError, MISSING),
        ({}, np.array([[0.0], [np.inf]]), ValueError, MISSING),
        ({}, np.zeros((0, 1)), ValueError, r"0 sample\(s\)"),
        (
            {"epsilon": 0.0},
            np.zeros((5, 1)),
            ValueError,
            r"epsilon must be .* \(0, inf\); got 0\.0",
        ),
        ({"epsilon": float("nan")}, np.zeros((5, 1)), ValueError, r"epsilon must be .*; got nan"),
        ({"epsilon": "1"}, np.zeros((5, 1)), TypeError, EPS + r"\'1\'"),
        ({"alpha": 1.0}, np.zeros((5, 1)), ValueError, r"alpha must be .* \(0, 1\); got 1\.0"),
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
    with pytest.raises(ValueError, match=MISSING):
        est.score(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match=r"X has 3 features, but ToyMeanTest is expecting 2"):
        est.score(np.zeros((4, 3)))
    assert [e.label for e in budget.ledger] == ["ToyMeanTest.fit"]


def test_budget_of_wrong_type_is_rejected():
    est = ToyMeanTest(budget=1.0)
    with pytest.raises(TypeError, match=r"budget must be None or an instance of PrivacyBudget"):
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


# n_jobs=2 is slow: starting the two loky workers (each importing numpy, scipy, scikit-learn
# and skdptest) costs about 9 s of CPU. The slow suite also counts the workers' spends on
# the same ledger in tests/test_common.py's n_jobs=2 search cases (a spend recorded
# elsewhere would leave 1 entry instead of 9); the default suite's spends from other
# processes are the forked races below.
@pytest.mark.parametrize("n_jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_grid_search_records_every_release(n_jobs):
    # The ledger side (order, totals, worker pids); tests/test_common.py counts the spends
    # of every public estimator.
    cls = ToyMeanTest
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


def test_refusal_message_tells_grid_searches_to_raise():
    budget = PrivacyBudget(epsilon=0.5)
    with pytest.raises(
        BudgetExceededError,
        match=r'Nothing was recorded\. In a grid search pass error_score="raise" to GridSearchCV',
    ):
        budget.spend(1.0)


# -- read-only totals -------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [("epsilon", 100.0), ("delta", 0.5), ("path", "x")])
def test_totals_and_path_are_read_only(name, value):
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6)
    before = (budget.epsilon, budget.delta, budget.path)
    with pytest.raises(AttributeError, match=rf"read-only \(cannot assign '{name}'\)"):
        setattr(budget, name, value)
    with pytest.raises(AttributeError, match=rf"read-only \(cannot delete '{name}'\)"):
        delattr(budget, name)
    with pytest.raises(AttributeError, match=r"cannot be re-initialised"):
        budget.__init__(100.0)
    assert (budget.epsilon, budget.delta, budget.path) == before
    budget.spend(1.0)
    with pytest.raises(BudgetExceededError, match=r"only epsilon=0,"):
        budget.spend(1.0)


def test_handle_whose_totals_were_forced_refuses_to_spend(tmp_path):
    # Bypassing the read-only attributes still cannot raise the budget: the spend
    # compares the handle's totals with the file's inside its transaction.
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(1.0, label="all of it")
    object.__setattr__(budget, "_epsilon", 100.0)
    with pytest.raises(
        LedgerError,
        match=r"holds totals epsilon=1\.0, delta=0\.0, but this handle has epsilon=100\.0",
    ):
        budget.spend(1.0)
    forced_pickle = pickle.loads(pickle.dumps(budget))  # the pickle carries the forced total
    with pytest.raises(LedgerError, match=r"but this handle has epsilon=100\.0"):
        forced_pickle.spend(1.0)
    assert [e.label for e in PrivacyBudget(epsilon=1.0, path=path).ledger] == ["all of it"]


def test_file_whose_totals_were_rewritten_is_refused_by_live_handles(tmp_path):
    # Even a consistent rewrite of the totals row (digest recomputed, as only code that
    # knows the format could do) is refused by the handles opened on the old totals.
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(1.0)
    with sqlite3.connect(path) as con:
        row = con.execute(
            "SELECT ledger_id, epsilon, delta, spent_epsilon, spent_delta, n_entries, head, "
            "accountant, rdp_order, loss_limit, spent_loss, reserved_loss, reserved_delta, "
            "n_reservations, digest FROM totals"
        ).fetchone()
        state = budget._parse_totals(row, path).replace(epsilon=100.0)
        con.execute(
            "UPDATE totals SET epsilon = ?, digest = ? WHERE id = 1", (100.0, state.digest())
        )
    con.close()
    with pytest.raises(LedgerError, match=r"holds totals epsilon=100\.0.*handle has epsilon=1\.0"):
        budget.spend(0.5)
    assert len(PrivacyBudget(epsilon=100.0, path=path)) == 1


# -- the ledger marker ------------------------------------------------------------------


def test_ledger_file_carries_the_marker(tmp_path):
    path = tmp_path / "ledger.sqlite"
    PrivacyBudget(epsilon=1.0, path=path).spend(0.5)
    header = path.read_bytes()[:100]
    assert header[:16] == b"SQLite format 3\x00"
    assert header[68:72] == b"SKDP"  # application_id, big-endian
    assert LEDGER_APPLICATION_ID == int.from_bytes(b"SKDP", "big") == 0x534B4450
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == LEDGER_APPLICATION_ID
        assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    con.close()


def _foreign_sqlite(path):
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value REAL NOT NULL)")
        con.execute("INSERT INTO meta VALUES ('epsilon', 1.0), ('delta', 0.0)")
    con.close()


def _other_schema_version(path):
    PrivacyBudget(epsilon=1.0, path=path)
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA user_version = 7")
    con.close()


def _truncated_ledger(path):
    PrivacyBudget(epsilon=1.0, path=path).spend(0.5)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


NOT_LEDGERS = {
    "foreign-sqlite": (
        _foreign_sqlite,
        r"is an SQLite database but not a skdptest privacy ledger \(application_id=0x0, "
        r"a ledger has 0x534b4450\)",
    ),
    "empty": (lambda p: p.write_bytes(b""), r"is an empty \(0-byte\) file, not a privacy ledger"),
    "random-bytes": (
        lambda p: p.write_bytes(np.random.default_rng(0).bytes(8192)),
        r"is not an SQLite database",
    ),
    "short-header": (
        lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x10\x00"),
        r"is a truncated SQLite file",
    ),
    "truncated": (_truncated_ledger, r"is truncated \(\d+ bytes, \d+ pages of \d+ expected\)"),
    "other-version": (
        _other_schema_version,
        r"is a privacy ledger of schema version 7; this skdptest reads version 2",
    ),
}


@pytest.mark.parametrize("kind", NOT_LEDGERS)
def test_file_that_is_not_a_ledger_is_refused_and_left_alone(tmp_path, kind):
    make, match = NOT_LEDGERS[kind]
    path = tmp_path / "file.sqlite"
    make(path)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=r"file\.sqlite': " + match):
        PrivacyBudget(epsilon=1.0, path=path)
    assert path.read_bytes() == before  # never adopted (or repaired) as a ledger


@pytest.mark.parametrize("kind", ["empty", "foreign-sqlite", "truncated"])
def test_live_handle_refuses_a_file_replaced_by_a_non_ledger(tmp_path, kind):
    path = tmp_path / "file.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    os.remove(path)
    NOT_LEDGERS[kind][0](path)
    before = path.read_bytes()
    for action in (lambda: budget.spend(0.1), lambda: budget.spent, lambda: budget.ledger):
        with pytest.raises(LedgerError, match=r"file\.sqlite': " + NOT_LEDGERS[kind][1]):
            action()
    assert path.read_bytes() == before


# -- integrity --------------------------------------------------------------------------


def test_edited_totals_row_is_detected(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.75)
    with sqlite3.connect(path) as con:  # a careless "reset" of the spent total
        con.execute("UPDATE totals SET spent_epsilon = '0'")
    con.close()
    match = r"ledger\.sqlite': is corrupted: its totals row does not match its integrity digest"
    with pytest.raises(LedgerError, match=match):
        budget.spend(0.5)
    with pytest.raises(LedgerError, match=match):
        budget.spent  # noqa: B018
    with pytest.raises(LedgerError, match=match):
        PrivacyBudget(epsilon=1.0, path=path)


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("UPDATE spends SET epsilon = 0.01 WHERE id = 2", r"entry 2 does not match"),
        ("DELETE FROM spends WHERE id = 3", r"entry 3 does not match"),
        ("DELETE FROM spends WHERE id = 4", r"its entries do not add up to its recorded totals"),
        ("UPDATE spends SET label = 'x' WHERE id = 1", r"entry 1 does not match"),
    ],
    ids=["edit", "delete-middle", "delete-last", "relabel"],
)
def test_edited_entries_are_detected(tmp_path, sql, match):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    for i in range(4):
        budget.spend(0.2, label=f"release {i}")
    with sqlite3.connect(path) as con:
        con.execute(sql)
    con.close()
    with pytest.raises(LedgerError, match=r"ledger\.sqlite': is corrupted: " + match):
        budget.ledger  # noqa: B018
    with pytest.raises(LedgerError, match=match):
        PrivacyBudget(epsilon=1.0, path=path)  # reopening verifies every entry
    # The totals row is intact, so the O(1) spend still charges the true total.
    with pytest.raises(BudgetExceededError, match=r"only epsilon=0\.2,"):
        budget.spend(0.3)


def _random_bytes(seeds):
    """Corruptions: 1 to 8 bytes changed at random offsets of the whole file, per seed."""

    def make(original, totals_row):
        for seed in seeds:
            rng = np.random.default_rng(seed)
            data = bytearray(original)
            offsets = rng.choice(len(data), size=int(rng.integers(1, 9)), replace=False)
            for offset in offsets:  # distinct offsets, each changed to another value
                data[offset] ^= int(rng.integers(1, 256))
            yield bytes(data)

    return make


def _bit_flips(seed, all_bits=False):
    """Corruptions: one flipped bit (seeded; or each of the 8) in each byte of the totals row.

    The totals row is the only part of the file a spend reads, and a small one: uniform
    offsets rarely land there. Bit flips keep hex digits valid often enough that a ledger
    without its digest check fails this sweep.
    """

    def make(original, totals_row):
        rng = np.random.default_rng(seed)
        for offset in range(*totals_row):
            for bit in range(8) if all_bits else [int(rng.integers(0, 8))]:
                data = bytearray(original)
                data[offset] ^= 1 << bit
                yield bytes(data)

    return make


def _run_corruption_trials(tmp_path, corruptions):
    """Corrupt a ledger in many ways; each must be refused or account exactly as before."""
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6, path=path)
    for i in range(6):
        budget.spend(0.1, 1e-8 * (i % 2), label=f"release {i}")
    original, spent0, entries0 = path.read_bytes(), budget.spent, budget.ledger
    after = (math.fsum([spent0[0], 0.1]), spent0[1])
    with sqlite3.connect(path) as con:
        ledger_id, digest = con.execute("SELECT ledger_id, digest FROM totals").fetchone()
    con.close()
    end = original.index(digest.encode()) + len(digest)
    totals_row = (original.rindex(ledger_id.encode(), 0, end) - 16, end)
    outcomes = Counter()
    for corrupted in corruptions(original, totals_row):
        assert corrupted != original
        # Once through the live handle (O(1) spend, verified totals row only) and once
        # through a reopen (which verifies every entry too).
        for reopen in (False, True):
            path.write_bytes(corrupted)
            try:
                handle = PrivacyBudget(epsilon=1.0, delta=1e-6, path=path) if reopen else budget
                assert handle.spent == spent0, outcomes.total()
                handle.spend(0.1, label="after corruption")
                assert handle.spent == after, outcomes.total()
                try:
                    entries = handle.ledger
                except LedgerError:
                    outcomes["entries refused"] += 1
                else:
                    assert entries[:-1] == entries0, outcomes.total()
                    assert entries[-1].label == "after corruption"
                outcomes["accounting intact"] += 1
            except LedgerError as exc:
                assert str(exc).startswith(f"path={str(path)!r}: ")
                outcomes["refused"] += 1
    return outcomes


# Slow, beside the 3000 corruptions and the all-bits sweep of the test after them: the
# default suite checks the digest of the totals row (test_edited_totals_row_is_detected) and
# the hash chain (test_edited_entries_are_detected) deterministically, on the same paths
# (the live handle's spend and a reopen).
@pytest.mark.slow
def test_random_corruption_never_changes_the_total(tmp_path):
    # 100 corruptions (3000 in the slow test). Besides the digest (the bit flips below) and
    # the hash chain (test_edited_entries_are_detected), which targeted tests check, these
    # catch a ledger that stops checking the chain: seed 40 does (2 of the first 200 do).
    outcomes = _run_corruption_trials(tmp_path, _random_bytes(range(100)))
    assert outcomes["refused"] + outcomes["accounting intact"] == 200
    # Both outcomes occur, so the check can tell them apart (and could fail): 145 and 55.
    assert outcomes["refused"] > 25
    assert outcomes["accounting intact"] > 25


@pytest.mark.slow  # see above: test_edited_totals_row_is_detected guards the digest
def test_bit_flips_in_the_totals_row_never_change_the_total(tmp_path):
    outcomes = _run_corruption_trials(tmp_path, _bit_flips(seed=0))
    assert outcomes["refused"] + outcomes["accounting intact"] >= 2 * 200
    assert outcomes["refused"] > 200


@pytest.mark.slow
def test_random_corruption_never_changes_the_total_many_trials(tmp_path):
    (tmp_path / "bytes").mkdir()
    (tmp_path / "bits").mkdir()
    outcomes = _run_corruption_trials(tmp_path / "bytes", _random_bytes(range(200, 3200)))
    assert outcomes["refused"] + outcomes["accounting intact"] == 6000
    outcomes = _run_corruption_trials(tmp_path / "bits", _bit_flips(seed=1, all_bits=True))
    assert outcomes["refused"] > 8 * 200


# -- storage errors ---------------------------------------------------------------------


def _wrapped_connect(monkeypatch, setup):
    real = _budget._open_connection

    def connect(uri):
        con = real(uri)
        setup(con)
        return con

    monkeypatch.setattr(_budget, "_open_connection", connect)


def test_read_only_ledger_is_a_ledger_error(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.25)
    real = _budget._open_connection
    # Running as root ignores chmod, so open the file read-only the way SQLite would
    # have to for a read-only file.
    monkeypatch.setattr(
        _budget, "_open_connection", lambda uri: real(uri.replace("?mode=rw", "?mode=ro"))
    )
    assert budget.spent == (0.25, 0.0)  # reading still works
    with pytest.raises(
        LedgerError,
        match=r"ledger\.sqlite': the spend was not recorded: the file "
        r"is read-only \(attempt to write a readonly database\)",
    ) as info:
        budget.spend(0.25)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    monkeypatch.undo()
    assert budget.spent == (0.25, 0.0)
    assert len(budget) == 1


def test_full_disk_is_a_ledger_error(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    # Forbid the file to grow: a spend whose entry needs a new page hits SQLITE_FULL.
    _wrapped_connect(
        monkeypatch,
        lambda con: con.execute(
            f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0]}"
        ),
    )
    with pytest.raises(LedgerError, match=r"not recorded: the disk is full") as info:
        budget.spend(0.25, label="x" * 20_000)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    monkeypatch.undo()
    assert budget.ledger == []
    assert budget.spent == (0.0, 0.0)


def test_lock_held_too_long_is_a_ledger_error(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    monkeypatch.setattr(_budget, "_BUSY_TIMEOUT", 0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer that never finishes
    try:
        with pytest.raises(LedgerError, match=r"another process held the ledger's lock") as info:
            budget.spend(0.25)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    budget.spend(0.25)
    assert len(budget) == 1


def test_label_must_be_utf8_encodable():
    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(ValueError, match=r"label must be encodable as UTF-8"):
        budget.spend(0.1, label="bad \ud800")
    budget.spend(0.1, label="nul \x00 and \x1f separators")
    assert budget.ledger[0].label == "nul \x00 and \x1f separators"


# -- O(1) spends and exact sums ---------------------------------------------------------


def _traced_spend(monkeypatch, budget):
    statements = []
    _wrapped_connect(monkeypatch, lambda con: con.set_trace_callback(statements.append))
    budget.spend(0.001, label="traced")
    monkeypatch.undo()
    # Bound values vary between spends; keep the statement text up to its values.
    return [s.split(" VALUES")[0].split(" SET")[0] for s in statements]


def test_spend_does_not_read_the_entries(monkeypatch):
    budget = PrivacyBudget(epsilon=10.0)
    budget.spend(0.001)
    short = _traced_spend(monkeypatch, budget)
    for _ in range(20):  # a statement per entry, or one read of them, would show at any length
        budget.spend(0.001)
    long = _traced_spend(monkeypatch, budget)
    assert short == long  # the same statements whatever the length of the ledger
    touching_entries = [s for s in long if "spends" in s]
    assert touching_entries == [
        "INSERT INTO spends (id, time, label, epsilon, delta, pid, chain, profile, loss, "
        "reservation)"
    ]
    # The check happens inside the write transaction: BEGIN IMMEDIATE, read and verify
    # the totals row, insert, update it, COMMIT.
    order = [
        next(i for i, s in enumerate(long) if s.startswith(prefix))
        for prefix in (
            "BEGIN IMMEDIATE",
            "SELECT ledger_id",
            "INSERT INTO spends",
            "UPDATE totals",
            "COMMIT",
        )
    ]
    assert order == sorted(order)
    assert len(budget) == 23


def test_spent_is_the_exact_sum_of_the_entries():
    rng = np.random.default_rng(3)
    amounts = rng.uniform(1e-4, 0.05, size=60).tolist() + [0.1] * 10
    budget = PrivacyBudget(epsilon=10.0, delta=0.5)
    for a in amounts:
        budget.spend(a, a * 1e-3)
    eps = [e.epsilon for e in budget.ledger]
    assert budget.spent == (math.fsum(eps), math.fsum(a * 1e-3 for a in amounts))
    # A running float sum would drift: this is what the exact sums avoid.
    naive = 0.0
    for a in amounts:
        naive += a
    assert naive != math.fsum(amounts)


def test_concurrent_constructors_share_one_new_ledger(tmp_path):
    path = tmp_path / "new.sqlite"
    n_threads = 8
    barrier = threading.Barrier(n_threads)
    handles, errors = [], []

    def create():
        barrier.wait()
        try:
            budget = PrivacyBudget(epsilon=1.0, path=path)
            budget.spend(0.1, label=threading.current_thread().name)
            handles.append(budget)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len({h._ledger_id for h in handles}) == 1
    assert len(handles[0]) == n_threads
    assert handles[0].spent[0] == pytest.approx(0.8)
    assert sorted(os.listdir(tmp_path)) == ["new.sqlite"]  # no temporary file left behind


def test_failure_to_create_a_ledger_names_the_path_and_leaves_nothing(tmp_path, monkeypatch):
    real = _budget._open_connection

    def cannot_create(uri):
        if uri.endswith("?mode=rwc"):
            raise sqlite3.OperationalError("unable to open database file")
        return real(uri)

    monkeypatch.setattr(_budget, "_open_connection", cannot_create)
    path = tmp_path / "new.sqlite"
    with pytest.raises(
        LedgerError,
        match=r"new\.sqlite': cannot create the privacy ledger: SQLite: unable to open database",
    ) as info:
        PrivacyBudget(epsilon=1.0, path=path)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert os.listdir(tmp_path) == []


# -- the SQLite queue: first come, first served -----------------------------------------


def _queue(path, *owners):
    """Put tickets of ``owners`` in the ledger's queue (as waiting spends would)."""
    with sqlite3.connect(path) as con:
        con.execute(_budget._QUEUE_TABLE)
        for owner in owners:
            con.execute("INSERT INTO queue (owner) VALUES (?)", (owner,))
    con.close()


def _tickets(path):
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT ticket, owner FROM queue ORDER BY ticket").fetchall()
    con.close()
    return rows


def _dead_owner():
    child = multiprocessing.get_context("fork").Process(target=int)
    child.start()
    child.join(30)
    return _budget._host_tag() << 32 | child.pid


def test_uncontended_spend_takes_no_ticket(tmp_path, monkeypatch):
    budget = PrivacyBudget(epsilon=1.0, path=tmp_path / "ledger.sqlite")
    statements = _traced_spend(monkeypatch, budget)
    assert not any("INSERT INTO queue" in s for s in statements)
    assert len(budget) == 1


def test_tickets_of_dead_processes_never_block_the_queue(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    # A process killed while waiting leaves its ticket; so may a hand edit (a non-integer
    # owner). Both are skipped at once (not after the 60 s timeout) and deleted with the
    # spend that queued behind them.
    _queue(path, _dead_owner(), "not an owner")
    statements = []
    _wrapped_connect(monkeypatch, lambda con: con.set_trace_callback(statements.append))
    t0 = time.monotonic()
    budget.spend(0.25, label="behind dead tickets")
    assert time.monotonic() - t0 < 10
    monkeypatch.undo()
    assert any(s.startswith("INSERT INTO queue") for s in statements)  # it did queue
    assert _tickets(path) == []
    assert [e.label for e in budget.ledger] == ["behind dead tickets"]


def test_ticket_left_by_a_live_process_delays_at_most_the_lock_timeout(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    # An owner on another machine always counts as alive: its ticket is skipped only once
    # it has stayed first for _BUSY_TIMEOUT seconds.
    _queue(path, (_budget._host_tag() ^ 1) << 32 | 12345)
    monkeypatch.setattr(_budget, "_BUSY_TIMEOUT", 0.3)
    t0 = time.monotonic()
    budget.spend(0.25)
    assert 0.3 <= time.monotonic() - t0 < 10
    assert _tickets(path) == []
    assert budget.spent == (0.25, 0.0)


def test_refused_spend_gives_up_its_ticket(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    dead = _dead_owner()
    _queue(path, dead)
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=2"):
        budget.spend(2.0)
    # Nothing recorded; the refused spend's ticket is gone, the dead one's stays (the
    # refused transaction, which would have deleted it, was rolled back).
    assert [owner for _, owner in _tickets(path)] == [dead]
    assert len(budget) == 0
    budget.spend(0.5)
    assert _tickets(path) == []


# -- the amount check's fast path -------------------------------------------------------


@pytest.mark.parametrize("upper", [None, 1.0])
@pytest.mark.parametrize("strictly_positive", [True, False])
def test_amount_fast_path_returns_what_the_constraint_returns(strictly_positive, upper):
    from numbers import Real

    from skdptest._params import Interval, check_value

    closed = "neither" if strictly_positive else "left"
    tiny = 5e-324
    values = [0.0, -0.0, tiny, -tiny, 0.5, 1.0 - 2**-53, 1.0, 1.0 + 2**-52, 2.0, 1e308,
              1.7976931348623157e308, math.inf, -math.inf, math.nan, -1.0, 1, 0, True,
              np.float64(0.5), np.float32(0.5), np.int64(1), "0.5", None]
    for value in values:
        try:
            expected = check_value(value, [Interval(Real, 0, upper, closed=closed)], "eps")
        except InvalidParameterError as exc:
            with pytest.raises(InvalidParameterError) as info:
                _budget._check_amount(value, "eps", strictly_positive=strictly_positive,
                                      upper=upper)
            assert str(info.value) == str(exc)
            continue
        got = _budget._check_amount(value, "eps", strictly_positive=strictly_positive,
                                    upper=upper)
        # The same object (so the same bits, -0.0 included) and the same type.
        assert type(got) is type(expected) and (got is expected or got.hex() == expected.hex())
