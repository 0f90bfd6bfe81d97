"""dpHSIC: the blocked cyclic aggregate (the default's automatic route beyond max_memory),
the running-time prediction, max_time and the automatic progress (issue 20, item 3)."""

import functools
import math
import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from threadpoolctl import threadpool_limits

import skdptest.kernel._hsic_routes as routes_mod
import skdptest.kernel._hsic_time as time_mod
from skdptest import DPHSICTest, FixedRandomStateWarning, PrivacyBudget
from skdptest.kernel._bandwidth import bandwidth_grid, hsic_centre
from skdptest.kernel._hsic import hsic_aggregate_statistics
from skdptest.kernel._hsic_blocked import (
    blocked_aggregate_memory_bytes,
    blocked_aggregate_statistics,
    choose_diagonal_block,
)
from skdptest.kernel._kernels import resolve_kernel


def _data(n, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = scale * (X[:, :1] + rng.normal(size=(n, 1)))
    return X, y


def _brute(X, Y, order, names, grids):
    """max over the pairs of sqrt(max(T_s, 0)) / n - h, every cyclic shift by a loop."""
    n = len(X)
    X, Y = X[order], Y[order]
    funcs = {"rbf": rbf_kernel, "laplacian": laplacian_kernel}
    H = np.eye(n) - 1.0 / n
    best = np.full(n, -np.inf)
    for gx in grids[0]:
        K = funcs[names[0]](X, gamma=gx)
        Kc = H @ K @ H
        for gy in grids[1]:
            L = funcs[names[1]](Y, gamma=gy)
            h, _ = hsic_centre(np.trace(Kc), np.trace(H @ L @ H), n, (1.0, 1.0), (True, True))
            for s in range(n):
                p = (np.arange(n) + s) % n
                t = np.sum(Kc * L[np.ix_(p, p)])
                best[s] = max(best[s], math.sqrt(max(t, 0.0)) / n - h)
    return best


@functools.cache  # one brute-force reference per kernel pair, shared by the block sizes
def _brute_reference(names, n=23):
    X, Y = _data(n, seed=2, scale=30.0)
    gx = list(bandwidth_grid(names[0], 2))[::4]
    gy = list(bandwidth_grid(names[1], 1))[::3]
    order = np.random.default_rng(7).permutation(n)
    return _brute(X, Y, order, names, (gx, gy))


@pytest.mark.parametrize("names", [("rbf", "rbf"), ("laplacian", "rbf")])
@pytest.mark.parametrize("block", [1, 5, 32])
def test_blocked_statistics_match_brute_force_and_the_in_memory_route(names, block):
    n = 23
    X, Y = _data(n, seed=2, scale=30.0)
    gx = list(bandwidth_grid(names[0], 2))[::4]
    gy = list(bandwidth_grid(names[1], 1))[::3]
    s = blocked_aggregate_statistics(X, Y, np.random.default_rng(7), (names[0], gx),
                                     (names[1], gy), (1.0, 1.0), (True, True), block=block)
    np.testing.assert_allclose(s, _brute_reference(names), rtol=0, atol=1e-12)
    kx = resolve_kernel(names[0], None, None, X)
    ky = resolve_kernel(names[1], None, None, Y, name="y_kernel")
    ref = hsic_aggregate_statistics(X, Y, 0, np.random.default_rng(7), kx, ky, gx, gy,
                                    cyclic=True)
    np.testing.assert_allclose(s, ref, rtol=0, atol=1e-13)


def test_blocked_statistics_do_not_depend_on_n_jobs_or_blas_threads():
    X, Y = _data(40, seed=1)
    g = list(bandwidth_grid("rbf", 2))[::3]
    args = (("rbf", g), ("rbf", list(bandwidth_grid("rbf", 1))[::5]), (1.0, 1.0),
            (True, True))
    one = blocked_aggregate_statistics(X, Y, np.random.default_rng(3), *args, block=8)
    two = blocked_aggregate_statistics(X, Y, np.random.default_rng(3), *args, block=8,
                                       n_jobs=2)
    assert np.array_equal(one, two)
    for threads in (1, 3):  # nor on the BLAS thread count in force
        with threadpool_limits(threads, "blas"):
            again = blocked_aggregate_statistics(X, Y, np.random.default_rng(3), *args,
                                                 block=8)
        assert np.array_equal(one, again)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        return est.fit(X, y)


@pytest.mark.parametrize("params", [
    {},
    {"kernel": "laplacian"},
    {"y_kernel_params": {"gamma": 0.3}},  # one side fixed
    {"kernel_params": {"gamma": "median"}},  # the fixed side's released bandwidth
])
def test_route_chosen_by_max_memory_releases_what_the_in_memory_route_does(params):
    X, y = _data(150, seed=4)
    full = _fit(DPHSICTest(random_state=5, **params), X, y)
    p_full = full._prepare(X, y, reset=False).plan
    limit = p_full.memory_bytes - 1  # the in-memory route just does not fit
    small = _fit(DPHSICTest(random_state=5, max_memory=limit, **params), X, y)
    assert full.result_.method == "dpHSIC cyclic aggregate"
    assert small.result_.method == "dpHSIC cyclic aggregate blocked"
    assert small.result_.pvalue == full.result_.pvalue
    assert small.result_.gamma == full.result_.gamma
    # the same statistic: the same sensitivity, error bound and noise
    for field in ("sensitivity", "abs_error", "noise_scale"):
        assert getattr(small.result_, field) == getattr(full.result_, field)
    p_small = small._prepare(X, y, reset=False).plan
    assert p_small.blocked is not None and p_full.blocked is None
    assert p_small.memory_bytes <= limit

def test_blocked_route_memory_is_within_its_plan():
    # two sizes (was 200 and 400; peak / plan 0.67 and 0.76 here, 0.76 and 0.85 there)
    for n in (100, 200):
        X, y = _data(n)
        limit = DPHSICTest()._prepare(X, y, reset=True).plan.memory_bytes - 1
        est = DPHSICTest(random_state=0, max_memory=limit)
        plan = est._prepare(X, y, reset=True).plan
        assert plan.blocked is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                est.fit(X, y)
                peak = tracemalloc.get_traced_memory()[1] - before
            finally:
                tracemalloc.stop()
        assert est.result_.method.endswith("blocked")
        assert 0.4 * plan.memory_bytes <= peak <= plan.memory_bytes, (n, peak, plan)


@pytest.mark.parametrize("n", [20_000, 100_000])
def test_default_plans_fit_at_large_n(n):
    # the issue: the default refused n = 5000; now n = 20 000 plans under 2 GiB and no
    # default fit up to 10^5 rows is refused for memory
    X = np.zeros((n, 1))
    plan = DPHSICTest()._prepare(X, X[:, 0], reset=True).plan
    assert plan.blocked is not None
    assert plan.memory_bytes <= (2 * 2**30 if n == 20_000 else 4 * 2**30)
    block, need = choose_diagonal_block(n, 19, 19, 1, 4 * 2**30)
    assert need == blocked_aggregate_memory_bytes(n, 19, 19, block)


def test_memory_refusal_names_max_memory():
    X, y = _data(300)
    budget = PrivacyBudget(10.0)
    with pytest.raises(ValueError, match=r"Raise max_memory"):
        DPHSICTest(max_memory=2**20, budget=budget).fit(X, y)
    assert budget.spent[0] == 0 and len(budget.ledger) == 0


def test_max_time_refuses_before_the_charge(monkeypatch):
    X, y = _data(200)
    budget = PrivacyBudget(10.0)
    monkeypatch.setattr(routes_mod, "predict_seconds", lambda *a, **k: 120.0)
    est = DPHSICTest(max_time=60, budget=budget)
    with pytest.raises(ValueError, match=r"predicted to take about 120 s.*max_time=60"):
        est.fit(X, y)
    assert budget.spent[0] == 0 and len(budget.ledger) == 0
    assert not hasattr(est, "result_")
    with pytest.raises(ValueError, match="max_time"):
        DPHSICTest(max_time=0).fit(X, y)
    DPHSICTest(max_time=200).fit(X, y)  # predicted within: runs


@pytest.mark.parametrize("verbose, predicted, printed", [
    (None, 30.0, True), (None, 1.0, False), (0, 30.0, False), (1, 1.0, True)])
def test_progress_appears_by_itself_for_long_fits(monkeypatch, capsys, verbose, predicted,
                                                  printed):
    X, y = _data(60)
    monkeypatch.setattr(routes_mod, "predict_seconds", lambda *a, **k: predicted)
    DPHSICTest(verbose=verbose).fit(X, y)
    err = capsys.readouterr().err
    assert ("predicted" in err) == printed
    if printed:
        assert f"predicted {predicted:.3g} s" in err and "ETA" in err


def test_prediction_is_public_and_monotone(monkeypatch):
    # the same numbers for any data of the same shape (it sees sizes only)
    monkeypatch.setattr(time_mod, "_load_factor", lambda: 1.0)
    f = time_mod.predict_seconds
    a = f("cyclic aggregate blocked", 2000, 1, 1, 19, 19)
    assert 0 < a < f("cyclic aggregate blocked", 4000, 1, 1, 19, 19)
    assert f("exact", 2000, 1, 1, 1, 1, 2000) < f("exact", 2000, 1, 1, 1, 1, 4000)
    assert f("features", 2000, 1, 1) == 0.0


def _blocked_audit(make):
    from skdptest.audit import grey_box_audit

    # one (x, y) pair moved to an extreme, aligned pair (as tests/test_audit.py)
    rng = np.random.default_rng(0)
    x0, y0 = rng.normal(size=(20, 1)), rng.normal(size=20)
    x1, y1 = x0.copy(), y0.copy()
    x1[0], y1[0] = 50.0, 50.0
    limit = DPHSICTest()._prepare(x0, y0, reset=True).plan.memory_bytes - 1
    return grey_box_audit(lambda r: make(r, limit), x0, x1, y0=y0, y1=y1, random_state=0)


def test_blocked_route_passes_the_grey_box_audit_and_a_halved_noise_mutant_fails(
        monkeypatch):
    from tests._mutants import halve_permutation_noise

    def make(r, limit):
        return DPHSICTest(random_state=r, max_memory=limit)

    r = _blocked_audit(make)
    assert not r.flagged, r.findings
    assert any(q.measured_change for q in r.quantities)
    assert all(q.measured_change is None or q.measured_change <= q.sensitivity
               for q in r.quantities)
    halve_permutation_noise(monkeypatch)
    r = _blocked_audit(make)
    assert r.flagged and any("noise scale" in f for f in r.findings), r


def test_prediction_scales_with_the_machine_load(monkeypatch):
    monkeypatch.setattr(time_mod, "_load_factor", lambda: 1.0)
    base = time_mod.predict_seconds("cyclic aggregate blocked", 3000, 1, 1, 19, 19)
    monkeypatch.setattr(time_mod, "_load_factor", lambda: 4.0)
    assert time_mod.predict_seconds("cyclic aggregate blocked", 3000, 1, 1, 19, 19) == \
        pytest.approx(4 * base)
    monkeypatch.undo()
    assert time_mod._load_factor() >= 1.0
