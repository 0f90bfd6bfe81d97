"""DPChiSquareTest and DPContingencyTest: sensitivity by enumeration, exact privacy of the
noisy counts, the non-private limit against scipy, and level on nulls built to break it."""

import itertools
import math
from functools import partial

import numpy as np
import pytest
from scipy import stats

from skdptest import (
    DPChiSquareTest,
    DPContingencyTest,
    InvalidParameterError,
    PrivacyBudget,
)
from skdptest._base import Prepared
from skdptest._noise import discrete_laplace, discrete_laplace_log_pmf, quantise_rate
from skdptest.classical import _chi2
from skdptest.classical._chi2 import contingency_distance, pearson_statistic

ALPHA = 0.05


# -- goodness of fit: sensitivity and exact privacy -----------------------------------------

def test_count_vector_has_l1_sensitivity_two_attained():
    worst = 0
    for n, k in [(3, 3), (4, 2), (2, 4)]:
        for data in itertools.product(range(k), repeat=n):
            base = np.bincount(data, minlength=k)
            for i in range(n):
                for v in range(k):
                    other = np.bincount(data[:i] + (v,) + data[i + 1:], minlength=k)
                    worst = max(worst, int(np.abs(base - other).sum()))
    assert worst == 2


def _worst_log_ratio(shift, rate, width=5):
    """max over noisy count vectors of log P(c + K = r) / P(c + shift + K = r).

    A cell's log ratio rate·(abs(r − s) − abs(r)) is constant outside [-1, 1] (abs(s)
    <= 1): offsets up to ±5 reach every value it takes."""
    grids = np.meshgrid(*[np.arange(-width, width + 1)] * len(shift), indexing="ij")
    r = np.stack([g.ravel() for g in grids])
    shift = np.asarray(shift)[:, None]
    log = (discrete_laplace_log_pmf(r, rate) - discrete_laplace_log_pmf(r - shift, rate))
    return float(np.max(log.sum(axis=0)))


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_noisy_counts_are_epsilon_dp_and_the_halved_noise_mutant_is_not(epsilon):
    rate = quantise_rate(epsilon / 2)
    # every neighbouring pair of count vectors differs by +1 in one cell and -1 in another
    for shift in ([1, -1, 0], [0, 1, -1], [-1, 0, 1]):
        assert _worst_log_ratio(shift, rate) <= epsilon + 1e-12
        assert _worst_log_ratio(shift, quantise_rate(epsilon)) > 1.5 * epsilon


def test_the_estimator_adds_noise_of_rate_half_epsilon_to_each_count(monkeypatch):
    seen = []

    def spy(rng, rate, size=None):
        seen.append((rate, size))
        return discrete_laplace(rng, rate, size=size)

    monkeypatch.setattr(_chi2, "discrete_laplace", spy)
    X = np.array(list("abcab" * 8)).reshape(-1, 1)
    res = DPChiSquareTest(categories=list("abc"), epsilon=0.7, n_resamples=9).fit(X).result_
    assert seen[0] == (quantise_rate(0.35), 3)
    assert all(rate == quantise_rate(0.35) for rate, _ in seen)
    assert len(res.noisy_counts) == 3 and all(isinstance(v, int) for v in res.noisy_counts)
    # the statistic and p-value are functions of the released counts
    assert res.statistic == pytest.approx(pearson_statistic(res.noisy_counts, 40 / 3 * np.ones(3)))


# -- goodness of fit: non-private limit, refusals -------------------------------------------

def test_large_epsilon_matches_scipy_chisquare():
    rng = np.random.default_rng(0)
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    X = rng.choice(4, p=[0.35, 0.3, 0.2, 0.15], size=(400, 1))
    b = 3000
    res = DPChiSquareTest(categories=[0, 1, 2, 3], probabilities=probs, epsilon=1e6,
                          n_resamples=b, random_state=0).fit(X).result_
    counts = np.bincount(X[:, 0], minlength=4)
    ref = stats.chisquare(counts, 400 * probs)
    assert res.noisy_counts == tuple(counts)
    assert res.statistic == pytest.approx(ref.statistic)
    # Monte Carlo error plus the χ² approximation's error at these expected counts (>= 40)
    assert abs(res.pvalue - ref.pvalue) <= 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) / b) \
        + 0.01


def test_refusals_name_the_problem_before_the_charge():
    budget = PrivacyBudget(epsilon=10.0)
    X = np.array([["a"], ["b"], ["z"]])
    with pytest.raises(ValueError, match="outside the declared categories") as info:
        DPChiSquareTest(categories=["a", "b"], budget=budget).fit(X)
    assert "z" not in str(info.value) and "1" not in str(info.value)
    with pytest.raises(InvalidParameterError, match="categories must be given"):
        DPChiSquareTest(budget=budget).fit(X)
    with pytest.raises(InvalidParameterError, match="must not repeat"):
        DPChiSquareTest(categories=["a", "a"], budget=budget).fit(X)
    with pytest.raises(InvalidParameterError, match="one value per category"):
        DPChiSquareTest(categories=["a", "b"], probabilities=[1.0], budget=budget).fit(X)
    with pytest.raises(InvalidParameterError, match="sum to 1"):
        DPChiSquareTest(categories=["a", "b"], probabilities=[0.5, 0.6],
                        budget=budget).fit(X)
    with pytest.raises(InvalidParameterError, match="finite and > 0"):
        DPChiSquareTest(categories=["a", "b"], probabilities=[0.0, 1.0],
                        budget=budget).fit(X)
    with pytest.raises(ValueError, match="outside the declared categories"):
        DPContingencyTest(categories=(["a", "b"], ["a", "z"]), budget=budget).fit(
            np.c_[X, X])
    with pytest.raises(InvalidParameterError, match="pair of lists"):
        DPContingencyTest(categories=("ab", "cd", "ef"), budget=budget).fit(np.c_[X, X])
    with pytest.raises(ValueError, match="2 label column"):
        DPContingencyTest(categories=(["a", "b"], ["a", "z"]), budget=budget).fit(X)
    assert len(budget) == 0


def test_string_labels_and_pandas():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"u": ["x", "y"] * 30, "v": ["p", "q", "r"] * 20})
    res = DPContingencyTest(categories=(["x", "y"], ["p", "q", "r"]), n_resamples=99).fit(df)
    assert 0 < res.result_.pvalue <= 1 and res.categories_ == (("x", "y"), ("p", "q", "r"))
    res = DPChiSquareTest(categories=["p", "q", "r"], n_resamples=99).fit(df[["v"]])
    assert res.categories_ == ("p", "q", "r")


@pytest.mark.slow
def test_solve_n_plans_the_goodness_of_fit_test():
    """Slow: solve_n on one unlabelled sample (y None) is the code path and property of
    test_mean's and test_proportion's ``test_solve_n_plans_...`` tests (default suite)."""
    from skdptest.power import solve_n

    def skewed(n, rng):
        return rng.choice(3, p=[0.5, 0.3, 0.2], size=(n, 1)).astype(float), None

    # rtol=0.5: the doubling bracket is enough to drive the estimator through solve_n
    # (the bisection is solve_n's generic code, tests/test_power.py)
    sol = solve_n(DPChiSquareTest(categories=[0, 1, 2], n_resamples=99), skewed, 0.8,
                  n_min=20, n_max=640, params={"epsilon": 1.0}, n_repeats=30, rtol=0.5,
                  random_state=0)
    assert 20 <= sol.value <= 640


# -- contingency: sensitivity ---------------------------------------------------------------

def _table_distance(u, v, r, c):
    table = np.zeros((r, c), dtype=np.int64)
    np.add.at(table, (u, v), 1)
    return int(contingency_distance(table, table.sum(1), table.sum(0)))


def test_contingency_distance_equals_its_definition():
    rng = np.random.default_rng(0)
    for _ in range(20):
        t = rng.integers(0, 5, size=(3, 4))
        n = t.sum()
        expected = np.outer(t.sum(1), t.sum(0)) / n
        assert contingency_distance(t, t.sum(1), t.sum(0)) == pytest.approx(
            n * np.abs(t - expected).sum())


@pytest.mark.parametrize(("r", "c", "n"), [
    (2, 2, 3),
    pytest.param(2, 3, 3, marks=pytest.mark.slow),
    pytest.param(2, 2, 4, marks=pytest.mark.slow),
])
def test_permuted_statistics_move_by_at_most_8n_exhaustively(r, c, n):
    # every data set, every permutation of the second column, every neighbour
    cells = [(i, j) for i in range(r) for j in range(c)]
    worst = 0
    perms = [np.array(p) for p in itertools.permutations(range(n))]
    # every neighbour is itself one of the data sets: its distances are computed once
    distances = {}
    for data in itertools.product(range(len(cells)), repeat=n):
        u = np.array([cells[d][0] for d in data])
        v = np.array([cells[d][1] for d in data])
        distances[data] = [_table_distance(u, v[p], r, c) for p in perms]
    for data, base in distances.items():
        for i in range(n):
            for new in range(len(cells)):
                moved = distances[data[:i] + (new,) + data[i + 1:]]
                for d, d2 in zip(base, moved, strict=True):
                    worst = max(worst, abs(d - d2))
    assert 0 < worst <= 8 * n


def test_the_8n_bound_is_nearly_attained_so_a_halved_sensitivity_is_unsafe():
    # Random search on permuted tables: the two changes a replacement causes (row i's
    # first variable, row pi^-1(i)'s second variable) as two unit moves of the table.
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(400):
        r, c, n = 3, 3, int(rng.integers(5, 40))
        t = rng.multinomial(n, rng.dirichlet(np.full(r * c, 0.5))).reshape(r, c)
        a, j0 = np.argwhere(t > 0)[rng.integers(np.count_nonzero(t))]
        t2 = t.copy()
        t2[a, j0] -= 1
        t2[rng.integers(r), j0] += 1
        i0, b = np.argwhere(t2 > 0)[rng.integers(np.count_nonzero(t2))]
        t3 = t2.copy()
        t3[i0, b] -= 1
        t3[i0, rng.integers(c)] += 1
        d = abs(int(contingency_distance(t3, t3.sum(1), t3.sum(0)))
                - int(contingency_distance(t, t.sum(1), t.sum(0))))
        worst = max(worst, d / n)
    assert 4.5 < worst <= 8


def test_the_estimator_calibrates_the_permutation_noise_to_8n(monkeypatch):
    seen = []
    real = _chi2.dp_permutation_pvalue

    def spy(statistics, sensitivity, epsilon, delta, rng):
        seen.append((statistics[0], sensitivity, epsilon, delta))
        return real(statistics, sensitivity, epsilon, delta, rng)

    monkeypatch.setattr(_chi2, "dp_permutation_pvalue", spy)
    u = np.arange(30) % 2
    v = np.arange(30) % 3
    DPContingencyTest(categories=([0, 1], [0, 1, 2]), epsilon=0.5, n_resamples=9).fit(
        u.reshape(-1, 1), v)
    assert seen == [(float(_table_distance(u, v, 2, 3)), 240.0, 0.5, 0.0)]


# -- contingency: the non-private limit -----------------------------------------------------

def test_large_epsilon_matches_a_public_permutation_test_and_chi2_contingency():
    rng = np.random.default_rng(2)
    u = rng.integers(0, 3, size=150)
    v = np.where(rng.random(150) < 0.2, u, rng.integers(0, 3, size=150))
    b = 2000
    res = DPContingencyTest(categories=([0, 1, 2], [0, 1, 2]), epsilon=1e6, n_resamples=b,
                            random_state=0).fit(np.c_[u, v]).result_
    ref = stats.permutation_test(
        (v,), lambda w: _table_distance(u, w, 3, 3), permutation_type="pairings",
        n_resamples=4000, alternative="greater", random_state=1)
    tol = 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) * (1 / b + 1 / 4000)) + 2 / b
    assert abs(res.pvalue - ref.pvalue) <= tol
    # the public χ² test reaches the same decision on this dependent table
    table = np.zeros((3, 3))
    np.add.at(table, (u, v), 1)
    assert (stats.chi2_contingency(table).pvalue <= ALPHA) == res.reject


# -- validity grids -------------------------------------------------------------------------

def _fast_fit(est, X, y, rng):
    """One release of ``est``: its own plan (rebuilt from the data) and release, without
    re-validating the constant parameters."""
    params = est._validate_params()
    prep = Prepared(params=params, X=X, y=y, plan=est._plan(params, X, y))
    return est._release(prep, rng)


def _grid_holds(run, configs, reps, seed):
    """Whether the type-I error is <= alpha + 2 SE in every cell and pooled, with a
    confirmation stage: ``run(configs, reps, seed)`` gives rejection counts per cell;
    cells above alpha + 2 SE are run again with ten times the replicates on a fresh seed
    and fail only if they exceed alpha + 2 SE again (an exact-level test puts about one
    of 54 cells above alpha + 2 SE by chance; a real defect fails both stages).
    Returns (holds, first-stage worst rate, pooled rate)."""
    counts = run(configs, reps, seed)

    def above(counts, reps):
        limit = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
        return [name for name, k in counts.items() if k / reps > limit]

    total = len(counts) * reps
    pooled = sum(counts.values()) / total
    pooled_ok = pooled <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / total)
    if not pooled_ok:  # already failed: no confirmation needed
        return False, max(counts.values()) / reps, pooled
    again = {name: configs[name] for name in above(counts, reps)}
    confirmed = above(run(again, 10 * reps, seed + 1), 10 * reps) if again else []
    return pooled_ok and not confirmed, max(counts.values()) / reps, pooled


PROBS = {
    "uniform": lambda k: np.full(k, 1 / k),
    "skewed": lambda k: np.r_[0.9, np.full(k - 1, 0.1 / (k - 1))],
    "sparse": lambda k: np.r_[1.0, 0.5 ** np.arange(1, k) / 50] / (1 + (0.5 ** np.arange(
        1, k) / 50).sum()),
}


def _gof_configs():
    return {f"k={k} {name} n={n} eps={e}": (k, name, n, e)
            for k in (2, 5, 10) for name in ("uniform", "skewed")
            for n in (10, 50, 200) for e in (0.1, 1.0, 10.0)}


class _NoiseFreeGOF(DPChiSquareTest):
    """Mutant: the noisy counts treated as exact (a null simulated without noise)."""

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        n, k, b = prep.n_samples, len(plan.categories), params["n_resamples"]
        noisy = np.bincount(plan.codes, minlength=k) + discrete_laplace(rng, plan.rate, k)
        expected = n * plan.probabilities
        sim = rng.multinomial(n, plan.probabilities, size=b)
        observed = pearson_statistic(noisy, expected)
        p = (1 + np.count_nonzero(pearson_statistic(sim, expected) >= observed)) / (b + 1)
        return type("R", (), {"pvalue": p})


def _gof_grid(cls, configs, reps, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, (k, probs_name, n, epsilon) in configs.items():
        probs = PROBS[probs_name](k)
        est = cls(categories=list(range(k)), probabilities=probs, epsilon=epsilon,
                  n_resamples=19)
        hits = 0
        for _ in range(reps):
            X = rng.choice(k, p=probs, size=(n, 1))
            hits += _fast_fit(est, X, None, rng).pvalue <= ALPHA
        out[name] = hits
    return out


MARGINS = {
    "uniform": lambda k: np.full(k, 1 / k),
    "skewed": lambda k: np.r_[0.85, np.full(k - 1, 0.15 / (k - 1))],
    "sparse": lambda k: np.r_[0.96, np.full(k - 1, 0.04 / (k - 1))],
}


def _table_configs():
    return {f"{r}x{c} {m} n={n} eps={e}": (r, c, m, n, e)
            for r, c in ((2, 2), (3, 4), (5, 2)) for m in ("uniform", "skewed", "sparse")
            for n in (20, 60) for e in (0.1, 1.0, 10.0)}


class _PlugInContingency(DPContingencyTest):
    """Mutant: the noisy table (rate ε/2 per cell) plugged into the public χ² test as if
    it were exact (its margins and the χ² law)."""

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        r, c = len(plan.categories[0]), len(plan.categories[1])
        rate = quantise_rate(params["epsilon"] / 2)
        table = np.bincount(plan.rows * c + plan.cols, minlength=r * c).reshape(r, c)
        noisy = np.maximum(table + discrete_laplace(rng, rate, (r, c)), 0)
        if np.any(noisy.sum(0) == 0) or np.any(noisy.sum(1) == 0):
            return type("R", (), {"pvalue": 1.0})
        p = stats.chi2_contingency(noisy, correction=False).pvalue
        return type("R", (), {"pvalue": p})


def _table_grid(cls, configs, reps, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, (r, c, margins, n, epsilon) in configs.items():
        p, q = MARGINS[margins](r), MARGINS[margins](c)[::-1]
        est = cls(categories=(list(range(r)), list(range(c))), epsilon=epsilon,
                  n_resamples=19)
        hits = 0
        for _ in range(reps):
            X = np.c_[rng.choice(r, p=p, size=n), rng.choice(c, p=q, size=n)]
            hits += _fast_fit(est, X, None, rng).pvalue <= ALPHA
        out[name] = hits
    return out


def test_level_fast_goodness_of_fit_and_the_noise_free_mutant_is_caught():
    configs = {k: v for k, v in _gof_configs().items()
               if k.startswith("k=5 skewed n=10 ") and "eps=0.1" in k}
    reps = 80
    assert _grid_holds(partial(_gof_grid, DPChiSquareTest), configs, reps, 0)[0]
    assert not _grid_holds(partial(_gof_grid, _NoiseFreeGOF), configs, reps, 0)[0]


def test_level_fast_contingency_and_the_plug_in_mutant_is_caught():
    configs = {k: v for k, v in _table_configs().items()
               if k.startswith("3x4 sparse n=60 ") and "eps=0.1" in k}
    reps = 80
    assert _grid_holds(partial(_table_grid, DPContingencyTest), configs, reps, 0)[0]
    assert not _grid_holds(partial(_table_grid, _PlugInContingency), configs, reps, 0)[0]


@pytest.mark.slow
def test_level_goodness_of_fit_grid_and_the_noise_free_mutant_is_caught():
    configs = _gof_configs()
    assert len(configs) >= 50
    reps = 100
    ok, worst, pooled = _grid_holds(partial(_gof_grid, DPChiSquareTest), configs, reps, 20)
    assert ok, (worst, pooled)
    small = {k: v for k, v in configs.items() if "eps=0.1" in k}
    assert not _grid_holds(partial(_gof_grid, _NoiseFreeGOF), small, reps, 20)[0]


@pytest.mark.slow
def test_level_contingency_grid_and_the_plug_in_mutant_is_caught():
    configs = _table_configs()
    assert len(configs) >= 50
    reps = 100
    ok, worst, pooled = _grid_holds(partial(_table_grid, DPContingencyTest), configs, reps, 21)
    assert ok, (worst, pooled)
    small = {k: v for k, v in configs.items() if "eps=0.1" in k}
    assert not _grid_holds(partial(_table_grid, _PlugInContingency), small, reps, 21)[0]
