"""Ledger v2: accountants (zCDP, Rényi), batch reports, reservations, search costs,
the default ledger and what fitted estimators report.

Independent computations: dp_accounting's own Rényi formulas and conversions, and the
exact privacy loss distribution of k-fold randomized response (a binomial).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sqlite3

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdpa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.dummy import DummyClassifier
from sklearn.model_selection import GridSearchCV, KFold, RandomizedSearchCV, cross_validate

from skdptest import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    PrivacyBudget,
    PrivacySpent,
    _budget,
    default_budget,
    search_cost,
)
from skdptest import _accountants as acc
from tests._toy import ToyMeanTest


class LaplaceToy(ToyMeanTest):
    # ToyMeanTest's release is one Laplace draw of scale sensitivity/ε plus the clipped
    # mean, then a comparison: a Laplace post-processing.
    _privacy_profile = "laplace"


def _data(n=60, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 2))


# -- the accountants' formulas against dp_accounting --------------------------------------


@pytest.mark.parametrize("epsilon", [1e-4, 0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("order", [1.05, 1.5, 2.0, 5.9, 32.0, 256.0])
def test_renyi_formulas_equal_dp_accounting(epsilon, order):
    assert acc.rdp_laplace(epsilon, order) == pytest.approx(
        rdpa._laplace_rdp(epsilon, order), rel=1e-9, abs=1e-15
    )
    p = 2 / (1 + math.exp(epsilon))  # dp_accounting's noise parameter of binary RR at ε
    assert acc.rdp_pure(epsilon, order) == pytest.approx(
        rdpa._randomized_response_rdp_replace_one(p, 2, order), rel=1e-6
    )
    # In 50 digits: D_α of randomized response, P = (p, q) against Q = (q, p).
    with mpmath.workdps(50):
        e, a = mpmath.mpf(epsilon), mpmath.mpf(order)
        pp = mpmath.e**e / (1 + mpmath.e**e)
        qq = 1 - pp
        exact = mpmath.log(pp**a * qq ** (1 - a) + qq**a * pp ** (1 - a)) / (a - 1)
    assert acc.rdp_pure(epsilon, order) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize("epsilon", [1e-4, 0.05, 0.5, 2.0])
def test_laplace_zcdp_is_the_supremum_of_its_renyi_curve(epsilon):
    # Harrison and Manurangsi (2026): the Laplace mechanism is exactly
    # (ε + e^-ε - 1)-zCDP, the limit of D_α/α as α -> 1 (its KL divergence).
    rho = acc.rho(epsilon, "laplace")
    orders = 1 + np.logspace(-6, 3, 400)
    ratios = [acc.rdp_laplace(epsilon, a) / a for a in orders]
    assert max(ratios) <= rho * (1 + 1e-9)
    assert ratios[0] == pytest.approx(rho, rel=1e-4)  # attained at α -> 1
    assert rho == pytest.approx(rdpa._laplace_rdp(epsilon, 1), rel=1e-9)  # the KL
    # ε²/2 bounds every ε-DP release, so the pure profile's Rényi curve stays under it
    # (from α = 1.01: nearer 1, the float formula loses its relative precision).
    assert max(acc.rdp_pure(epsilon, a) / a for a in orders if a >= 1.01) <= acc.rho(
        epsilon, "pure")


def test_conversion_equals_dp_accounting():
    orders = rdpa.DEFAULT_RDP_ORDERS
    for rho_total in (1e-4, 0.05, 0.5, 3.0):
        for delta in (1e-9, 1e-6, 1e-3):
            curve = [a * rho_total for a in orders]
            expected, _ = rdpa.compute_epsilon(orders, curve, delta)
            assert acc.zcdp_epsilon(rho_total, delta) == pytest.approx(expected, rel=1e-12)


# -- the targets ----------------------------------------------------------------


def test_hundred_adaptive_tests_fit_under_zcdp_and_the_report_is_tight():
    budget = PrivacyBudget(5.23, 1e-6, accountant="zcdp")
    for i in range(100):
        budget.spend(0.1, label=f"test {i}")
    with pytest.raises(BudgetExceededError, match=r"under the 'zcdp' accountant"):
        budget.spend(0.1)
    assert len(budget) == 100
    report = budget.report()
    assert report.basic_epsilon == pytest.approx(10.0)
    assert report.adaptive_epsilon == 5.23
    assert report.zcdp_epsilon == pytest.approx(5.2215, abs=1e-4)
    assert report.batch_epsilon <= 4.78
    assert "declared in advance" in report.label
    # Independent: the exact privacy loss distribution of 100-fold randomized response
    # (the worst case of pure ε-DP) is ε(2B - k), B ~ Binomial(k, e^ε / (1 + e^ε)).
    k, eps = 100, 0.1
    losses = eps * (2 * np.arange(k + 1) - k)
    probs = stats.binom.pmf(np.arange(k + 1), k, 1 / (1 + math.exp(-eps)))

    def delta_at(e):
        return float(np.sum(probs * np.clip(-np.expm1(e - losses), 0, None)))

    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_at(mid) <= 1e-6 else (mid, hi)
    assert report.batch_epsilon == pytest.approx(hi, abs=1e-3)


def test_basic_composition_refuses_long_before_zcdp():
    budget = PrivacyBudget(5.23, 1e-6)
    for _ in range(52):
        budget.spend(0.1)
    with pytest.raises(BudgetExceededError, match=r"only epsilon=0\.03, "):
        budget.spend(0.1)


def test_laplace_profile():
    lap = PrivacyBudget(5.23, 1e-6, accountant="zcdp")
    for _ in range(100):
        lap.spend(0.1, profile="laplace")
    # ρ = ε + e^-ε - 1 < ε²/2: a few more Laplace releases fit than generic ones.
    assert lap.loss_spent == pytest.approx(100 * (0.1 + math.expm1(-0.1)))
    lap.spend(0.1, profile="laplace")


# Slow (about 105 spends): by default, what the RDP filter admits is checked against
# dp_accounting by test_filter_never_admits_a_sequence_beyond_its_target, its order and
# report by test_budget_postgres.py::test_accountants_agree_across_backends[*-rdp]; this
# adds the count of the target (at least 100 releases of ε = 0.1 fit).
@pytest.mark.slow
def test_rdp_accountant_fits_a_hundred_tests():
    rdp = PrivacyBudget(5.23, 1e-6, accountant="rdp")
    assert rdp.rdp_order > 1
    n = 0
    with pytest.raises(BudgetExceededError, match=r"'rdp' accountant"):
        while True:
            rdp.spend(0.1)
            n += 1
    assert n >= 100
    composed, _ = rdpa.compute_epsilon([rdp.rdp_order], [n * acc.rdp_pure(0.1, rdp.rdp_order)],
                                       1e-6)
    assert composed <= 5.23
    assert rdp.report().rdp_epsilon <= 5.23


# Each example: a target and an adaptively chosen sequence (the next ε depends on what
# was admitted so far); whatever the filter admits must compose within the target,
# computed by dp_accounting independently of the ledger's running sums. 6 examples: a
# check-then-add filter (the new spend's loss left out of the check) failed in 10 of 10
# seeded runs, as with 12.
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    accountant=st.sampled_from(["zcdp", "rdp"]),
    target=st.floats(0.3, 3.0),
    log_delta=st.floats(-9, -3),
    data=st.data(),
)
def test_filter_never_admits_a_sequence_beyond_its_target(accountant, target, log_delta, data):
    delta = 10.0**log_delta
    budget = PrivacyBudget(target, delta, accountant=accountant)
    admitted, refused = [], 0
    while refused < 3 and len(admitted) < 40:
        scale = 0.5 if not admitted else max(e for e, _ in admitted)
        eps = data.draw(st.floats(0.01, max(scale, 0.02) * 2))
        profile = data.draw(st.sampled_from(acc.PROFILES))
        try:
            budget.spend(eps, profile=profile)
            admitted.append((eps, profile))
        except BudgetExceededError:
            refused += 1
    if accountant == "zcdp":
        # Independent of the ledger's code: ε²/2, and the Laplace KL from dp_accounting.
        rho = sum(rdpa._laplace_rdp(e, 1) if p == "laplace" else e * e / 2
                  for e, p in admitted)
        orders = rdpa.DEFAULT_RDP_ORDERS
        composed, _ = rdpa.compute_epsilon(orders, [a * rho for a in orders], delta)
    else:
        order = budget.rdp_order
        curve = sum(
            rdpa._laplace_rdp(e, order) if p == "laplace"
            else rdpa._randomized_response_rdp_replace_one(2 / (1 + math.exp(e)), 2, order)
            for e, p in admitted
        )
        composed, _ = rdpa.compute_epsilon([order], [curve], delta)
    assert composed <= target


def test_accountant_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match=r"accountant must be one of"):
        PrivacyBudget(1.0, 1e-6, accountant="pld")
    with pytest.raises(InvalidParameterError, match=r"accountant='zcdp' needs delta > 0"):
        PrivacyBudget(1.0, accountant="zcdp")
    budget = PrivacyBudget(1.0, 1e-6, accountant="zcdp")
    with pytest.raises(InvalidParameterError, match=r"delta must be 0 on a ledger with"):
        budget.spend(0.1, 1e-7)
    with pytest.raises(InvalidParameterError, match=r"profile must be one of"):
        budget.spend(0.1, profile="gaussian")
    assert len(budget) == 0


def test_reopening_with_another_accountant_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    PrivacyBudget(1.0, 1e-6, path, accountant="zcdp").spend(0.1)
    with pytest.raises(LedgerError, match=r"created with accountant='zcdp'.*accountant='basic'"):
        PrivacyBudget(1.0, 1e-6, path)
    again = PrivacyBudget(1.0, 1e-6, path, accountant="zcdp")
    assert again.loss_spent == pytest.approx(0.005)
    assert again.ledger[0].profile == "pure"


def test_to_frame_for_auditors():
    budget = PrivacyBudget(2.0)
    budget.spend(0.25, label="a")
    budget.spend(0.5, label="b", profile="laplace")
    frame = budget.to_frame()
    assert list(frame.columns) == ["time", "label", "epsilon", "delta", "profile", "loss",
                                   "reservation"]
    assert frame["label"].tolist() == ["a", "b"]
    assert frame["epsilon"].sum() == pytest.approx(budget.spent[0])
    assert frame["profile"].tolist() == ["pure", "laplace"]
    assert frame.attrs["accountant"] == "basic"
    assert str(frame["time"].dt.tz) == "UTC"


# -- reservations and search costs ------------------------------------------------------


def _search(budget, n_jobs=1):
    # 2 candidates x 5 folds x (fit + score) at ε = 1, then the refit: 21.
    est = ToyMeanTest(epsilon=1.0, budget=budget, random_state=0)
    return GridSearchCV(est, {"alpha": [0.05, 0.1]}, cv=KFold(5), error_score="raise",
                        n_jobs=n_jobs)


def test_search_cost_is_exact_without_reading_data():
    X = _data()
    cost = search_cost(_search(None), X)
    assert (cost.n_candidates, cost.n_folds, cost.n_releases) == (2, 5, 21)
    assert cost.epsilon == 21.0 and cost.delta == 0.0
    budget = PrivacyBudget(100.0)
    _search(budget).fit(X)
    assert len(budget) == cost.n_releases and budget.spent[0] == cost.epsilon
    # cross_validate: folds x (fit + score), no refit.
    cv_cost = search_cost(ToyMeanTest(epsilon=0.5), X, cv=3)
    budget = PrivacyBudget(100.0)
    cross_validate(ToyMeanTest(epsilon=0.5, budget=budget), X, cv=3)
    assert (len(budget), budget.spent[0]) == (cv_cost.n_releases, cv_cost.epsilon) == (6, 3.0)
    # Candidates with different ε: the refit's cost is the largest candidate's.
    search = GridSearchCV(ToyMeanTest(), {"epsilon": [0.5, 1.0]}, cv=2)
    assert search_cost(search, X).epsilon == 2 * 2 * 1.5 + 1.0


def test_search_cost_refuses_what_it_cannot_price():
    X = _data()
    with pytest.raises(InvalidParameterError, match=r"only scoring=None"):
        search_cost(GridSearchCV(ToyMeanTest(), {"alpha": [0.1]}, scoring="accuracy"), X)
    with pytest.raises(InvalidParameterError, match=r"int random_state"):
        search_cost(RandomizedSearchCV(ToyMeanTest(), {"alpha": [0.1, 0.2]}, n_iter=2), X)
    with pytest.raises(InvalidParameterError, match=r"must be a skdptest estimator"):
        search_cost(GridSearchCV(DummyClassifier(), {}), X)
    seeded = RandomizedSearchCV(ToyMeanTest(), {"epsilon": [0.1, 0.2]}, n_iter=2,
                                random_state=0, cv=2)
    assert search_cost(seeded, X).n_releases == 9


# n_jobs=2: the loky workers' spends draw on the reservation too (slow: process start-up).
@pytest.mark.parametrize("n_jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_search_short_of_budget_is_refused_before_its_first_spend(n_jobs):
    X = _data()
    budget = PrivacyBudget(20.5)  # 0.5 short of the 21 the search costs
    search = _search(budget, n_jobs)
    cost = search_cost(search, X)
    with pytest.raises(BudgetExceededError, match=r"a reservation of epsilon=21.*"
                       r"Nothing was reserved or spent"):
        with budget.reserve(cost):
            search.fit(X)
    assert len(budget) == 0 and budget.reserved == (0.0, 0.0)
    # When it fits, exactly its cost is spent, all of it drawn on the reservation.
    budget = PrivacyBudget(21.0)
    search = _search(budget, n_jobs)
    with budget.reserve(search_cost(search, X)):
        assert budget.remaining[0] == 0.0
        search.fit(X)
    assert budget.spent[0] == 21.0 and len(budget) == 21
    assert budget.reserved == (0.0, 0.0)
    assert (budget.to_frame()["reservation"] == 1).all()


def test_reservation_under_zcdp_prices_each_release():
    X = _data()
    budget = PrivacyBudget(40.0, 1e-6, accountant="zcdp")
    search = _search(budget)
    cost = search_cost(search, X)
    with budget.reserve(cost):
        search.fit(X)
    assert budget.loss_spent == pytest.approx(21 * 0.5)  # 21 releases of ρ = ε²/2
    assert budget.reserved == (0.0, 0.0)


def test_reservation_blocks_other_spenders_and_returns_the_rest():
    budget = PrivacyBudget(1.0)
    other = pickle_roundtrip(budget)  # another handle on the same ledger, no reservation
    with budget.reserve(0.8):
        with pytest.raises(BudgetExceededError, match=r"only epsilon=0\.2.*some of it reserved"):
            other.spend(0.3)
        other.spend(0.2)
        budget.spend(0.5)  # drawn on the reservation
        with pytest.raises(RuntimeError, match=r"already inside a reservation"):
            with budget.reserve(0.1):
                pass  # pragma: no cover
        assert budget.reserved[0] == pytest.approx(0.3)
    assert budget.reserved == (0.0, 0.0)
    assert budget.remaining[0] == pytest.approx(0.3)


def pickle_roundtrip(obj):
    import pickle

    return pickle.loads(pickle.dumps(obj))


def _reserve_and_die(budget):
    with budget.reserve(0.9):
        budget.spend(0.1)
        os._exit(0)  # killed inside the block: no exit handler runs


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_reservation_of_a_dead_process_is_freed_and_its_spends_kept(tmp_path):
    budget = PrivacyBudget(1.0, path=tmp_path / "ledger.sqlite")
    child = multiprocessing.get_context("fork").Process(target=_reserve_and_die, args=(budget,))
    child.start()
    child.join(60)
    assert budget.reserved[0] == pytest.approx(0.8)  # held by a process that no longer exists
    budget.spend(0.85)  # needs the dead reservation: it is freed, the 0.1 spent stays
    assert budget.spent[0] == pytest.approx(0.95) and budget.reserved == (0.0, 0.0)
    assert len(PrivacyBudget(1.0, path=tmp_path / "ledger.sqlite")) == 2  # reopens verified


def test_edited_reservation_is_detected(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(1.0, path=path)
    with budget.reserve(0.5):
        with sqlite3.connect(path) as con:
            con.execute("UPDATE reservations SET loss_left = '1p0'")
        con.close()
        with pytest.raises(LedgerError, match=r"reservation 1 does not match its integrity"):
            budget.spend(0.1)
        with sqlite3.connect(path) as con:
            con.execute("DELETE FROM reservations")
        con.close()
        with pytest.raises(LedgerError, match=r"reservations do not add up"):
            PrivacyBudget(1.0, path=path)
        with pytest.raises(LedgerError):
            budget.ledger  # noqa: B018
    assert budget.spent == (0.0, 0.0)


# -- what estimators report; the default ledger -----------------------------------------


def test_fitted_estimator_reports_what_it_spent():
    budget = PrivacyBudget(10.0)
    est = LaplaceToy(epsilon=0.5, budget=budget, random_state=0).fit(_data())
    assert est.privacy_spent_ == PrivacySpent(0.5, 0.0, "laplace", budget.path)
    assert budget.ledger[-1].profile == "laplace"
    assert budget.to_frame()["loss"].tolist() == [0.5]


def test_fit_without_a_budget_is_recorded_in_the_default_ledger():
    ledger = default_budget()
    assert ledger is default_budget() and ledger.epsilon == math.inf
    before = len(ledger)
    est = ToyMeanTest(epsilon=0.3, random_state=0).fit(_data())
    est.score(_data(seed=1))
    entries = ledger.ledger[before:]
    assert [(e.label, e.epsilon) for e in entries] == [("ToyMeanTest.fit", 0.3),
                                                       ("ToyMeanTest.score", 0.3)]
    assert est.privacy_spent_.ledger == ledger.path
    assert os.environ[_budget.DEFAULT_LEDGER_ENV] == ledger.path  # children charge it too


def test_default_ledger_persists_where_the_environment_says(tmp_path, monkeypatch):
    path = tmp_path / "default.sqlite"
    monkeypatch.setenv(_budget.DEFAULT_LEDGER_ENV, str(path))
    monkeypatch.setitem(_budget._default, "budget", None)
    try:
        ToyMeanTest(epsilon=0.2, random_state=0).fit(_data())
        assert default_budget().path == str(path)
    finally:
        _budget._default["budget"] = None
    reopened = PrivacyBudget._unlimited(path)
    assert [e.label for e in reopened.ledger] == ["ToyMeanTest.fit"]


def test_cli_json_reports_what_was_spent(tmp_path, capsys):
    from skdptest import cli

    data = tmp_path / "data.csv"
    data.write_text("k\n" + "\n".join(str(v) for v in [0, 1, 1, 0, 1] * 8) + "\n")
    ledger = tmp_path / "ledger.sqlite"
    PrivacyBudget(5.0, 1e-6, ledger, accountant="zcdp")  # the CLI reopens its accountant
    code = cli.main(["evalue", "--file", str(data), "--column", "k", "--null",
                     "bernoulli(0.3)", "--alternative", "bernoulli(0.6)", "--epsilon", "0.5",
                     "--ledger", str(ledger), "--json"])
    payload = __import__("json").loads(capsys.readouterr().out)
    assert code == 0
    assert payload["privacy_spent"] == {"epsilon": 0.5, "delta": 0.0, "profile": "pure",
                                        "ledger": str(ledger)}
    assert payload["ledger"]["n_releases"] == 1
    assert PrivacyBudget(5.0, 1e-6, ledger, accountant="zcdp").loss_spent == 0.125


def test_only_the_owners_machine_judges_a_reservation_crashed():
    # a pid means nothing on another machine sharing a server ledger: an owner there
    # counts as alive, so a live reservation is never freed early by a spend elsewhere
    import os
    import subprocess
    import sys

    from skdptest import _budget

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    here = _budget._host_tag()
    assert _budget._owner_id() == here << 32 | os.getpid()
    assert _budget._owner_alive(_budget._owner_id())
    assert not _budget._owner_alive(here << 32 | child.pid)
    assert _budget._owner_alive((here ^ 1) << 32 | child.pid)
