"""DPKolmogorovSmirnovTest: sensitivity by enumeration, exact privacy of the integer release,
the non-private limit against scipy, and level on nulls built to break it."""

import itertools
import math
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
from scipy import stats

from skdptest import DPKolmogorovSmirnovTest, InvalidParameterError, PrivacyBudget
from skdptest._base import Prepared
from skdptest._noise import discrete_laplace_log_pmf, quantise_rate
from skdptest.classical import _ks
from skdptest.classical._ks import ks_grid_statistic, ks_plan_noise, ks_uniform_lattice

ALPHA = 0.05


# -- independent computations ------------------------------------------------------------

def _ks_exact(values, keys, labels, k):
    """max over pairs of sup_t |F_i - F_j| on the order by (value, key), as a Fraction."""
    order = sorted(range(len(values)), key=lambda i: (values[i], keys[i]))
    sizes = [labels.count(g) for g in range(k)]
    counts = [0] * k
    best = Fraction(0)
    for i in order:
        counts[labels[i]] += 1
        for a in range(k):
            for b in range(a + 1, k):
                best = max(best, abs(Fraction(counts[a], sizes[a]) - Fraction(counts[b],
                                                                             sizes[b])))
    return best


def _sup_uniform(codes, bits):
    """sup_t |F(t) - t| over t in [0, 1] of q = codes / 2^bits, from the definition
    (left and right limits at every jump, and the end points), as a Fraction."""
    n, q = len(codes), sorted(Fraction(c, 2**bits) for c in codes)
    best = Fraction(0)
    for t in set(q) | {Fraction(0), Fraction(1)}:
        right = Fraction(sum(v <= t for v in q), n)
        left = Fraction(sum(v < t for v in q), n)
        best = max(best, abs(right - t), abs(left - t))
    return best


def test_lattice_statistics_equal_the_definitions():
    rng = np.random.default_rng(0)
    for _ in range(30):
        k = int(rng.integers(2, 4))
        labels = [int(g) for g in rng.integers(0, k, size=9)]
        if len(set(labels)) < k:
            continue
        values = [int(v) for v in rng.integers(0, 3, size=9)]  # ties
        keys = [int(v) for v in rng.permutation(9)]
        order = sorted(range(9), key=lambda i: (values[i], keys[i]))
        sizes = tuple(labels.count(g) for g in range(k))
        exact = _ks_exact(values, keys, labels, k)
        got = ks_grid_statistic(np.array([labels[i] for i in order]), sizes, 30)
        assert int(got) == math.floor(exact * 2**30)
    for _ in range(30):
        codes = np.sort(rng.integers(0, 8, size=int(rng.integers(1, 7))))
        assert Fraction(int(ks_uniform_lattice(codes, 3)), codes.size * 8) == \
            _sup_uniform(codes.tolist(), 3)


# -- sensitivity by enumeration ----------------------------------------------------------

def _two_sample_worst(labels, all_keys, n_values=3):
    """Largest |D - D'| over every data set on {0..n_values-1} (ties), every key order (or
    the identity) and every neighbour (one row's value replaced, labels fixed)."""
    n, k = len(labels), max(labels) + 1
    worst = Fraction(0)
    key_orders = itertools.permutations(range(n)) if all_keys else [tuple(range(n))]
    for keys in key_orders:
        # every neighbour is itself one of the data sets: each D is computed once
        d = {values: _ks_exact(values, keys, labels, k)
             for values in itertools.product(range(n_values), repeat=n)}
        for values, dv in d.items():
            for i in range(n):
                for v in range(n_values):
                    if v != values[i]:
                        other = values[:i] + (v,) + values[i + 1:]
                        worst = max(worst, abs(dv - d[other]))
    return worst


@pytest.mark.parametrize(("labels", "all_keys", "n_values"),
                         [([0, 0, 1, 1], True, 2), ([0, 0, 1, 1, 1], False, 3),
                          ([0, 0, 1, 1, 2, 2], False, 2)])
def test_two_sample_sensitivity_is_one_over_the_smallest_group_and_attained(labels, all_keys,
                                                                            n_values):
    smallest = min(labels.count(g) for g in set(labels))
    assert _two_sample_worst(labels, all_keys, n_values) == Fraction(1, smallest)


def test_two_sample_sensitivity_bound_holds_when_not_attained():
    # one row against three: the bound 1/1 holds; the attained change is 1/3
    assert _two_sample_worst([0, 1, 1, 1], True, 2) <= 1


def test_goodness_of_fit_sensitivity_is_one_lattice_unit_per_row_and_attained():
    bits, worst = 2, 0
    for n in (1, 2, 3):
        for codes in itertools.product(range(4), repeat=n):
            base = int(ks_uniform_lattice(np.sort(codes), bits))
            for i in range(n):
                for v in range(4):
                    other = np.sort(codes[:i] + (v,) + codes[i + 1:])
                    worst = max(worst, abs(base - int(ks_uniform_lattice(other, bits))))
        assert worst <= 2**bits  # sensitivity 1/n of D = lattice / (n 2^bits)
    assert worst == 2**bits


# -- exact privacy of the integer release --------------------------------------------------

def _worst_log_ratio(shift, rate, width=4000):
    """max over outputs r of log P(S + K = r) / P(S + shift + K = r), K discrete Laplace."""
    r = np.arange(-width, width + 1)
    return float(np.max(discrete_laplace_log_pmf(r, rate)
                        - discrete_laplace_log_pmf(r - shift, rate)))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_release_is_epsilon_dp_on_neighbours_and_the_halved_noise_mutant_is_not(epsilon):
    # Floored statistics of neighbours (D within 1/s) differ by at most the plan's
    # integer sensitivity; search the attained difference on random neighbours.
    rng = np.random.default_rng(1)
    s, worst = 7, 0
    noise = ks_plan_noise(s, epsilon)
    sizes = (7, 9)
    for _ in range(300):
        labels = np.r_[np.zeros(7, int), np.ones(9, int)]
        x = rng.integers(0, 4, size=16).astype(float)
        keys = rng.permutation(16)
        x2 = x.copy()
        x2[rng.integers(16)] = rng.integers(0, 4)
        a = ks_grid_statistic(labels[np.lexsort((keys, x))], sizes, noise.exponent)
        b = ks_grid_statistic(labels[np.lexsort((keys, x2))], sizes, noise.exponent)
        worst = max(worst, abs(int(a) - int(b)))
    assert 0 < worst <= noise.integer_sensitivity
    assert worst >= noise.integer_sensitivity - 1  # the bound is attained (up to the floor)
    assert _worst_log_ratio(worst, noise.rate) <= epsilon + 1e-12
    mutant = quantise_rate(2 * noise.rate)  # half the noise
    assert _worst_log_ratio(worst, mutant) > 1.5 * epsilon


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_goodness_of_fit_release_is_epsilon_dp_on_attained_neighbours(epsilon):
    rng = np.random.default_rng(2)
    n, worst = 12, 0
    noise = ks_plan_noise(n, epsilon)
    bits = _ks._uniform_bits(n, noise.exponent)

    def released(codes):
        lattice = ks_uniform_lattice(np.sort(codes), bits)
        return int(_ks._floor_scaled(lattice, noise.exponent, n << bits))

    for _ in range(400):
        codes = rng.integers(0, 1 << bits, size=n)
        other = codes.copy()
        other[rng.integers(n)] = rng.choice([0, (1 << bits) - 1, rng.integers(1 << bits)])
        worst = max(worst, abs(released(codes) - released(other)))
    assert noise.integer_sensitivity - 2 <= worst <= noise.integer_sensitivity
    assert _worst_log_ratio(worst, noise.rate) <= epsilon + 1e-12
    assert _worst_log_ratio(worst, quantise_rate(2 * noise.rate)) > 1.5 * epsilon


def test_the_estimator_draws_its_noise_at_the_planned_rate(monkeypatch):
    seen = []
    real = _ks.discrete_laplace

    def spy(rng, rate, size=None):
        seen.append(rate)
        return real(rng, rate, size=size)

    monkeypatch.setattr(_ks, "discrete_laplace", spy)
    X = np.random.default_rng(0).normal(size=(30, 1))
    y = np.r_[np.zeros(10), np.ones(20)]
    for est, args, s in [(DPKolmogorovSmirnovTest(epsilon=0.5), (X, y), 10),
                         (DPKolmogorovSmirnovTest(stats.norm(), epsilon=0.5), (X,), 30)]:
        seen.clear()
        est.fit(*args)
        noise = ks_plan_noise(s, 0.5)
        assert seen == [noise.rate] and noise.rate <= 0.5 / noise.integer_sensitivity
        assert est.result_.sensitivity == 1 / s


# -- the non-private limit ---------------------------------------------------------------

def _se(p, b):
    return math.sqrt(p * (1 - p) / b) + 1 / b


@pytest.mark.parametrize("seed", [0, 1])
def test_large_epsilon_matches_scipy_two_sample(seed):
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=25), rng.normal(0.5, size=35)
    b = 2000
    est = DPKolmogorovSmirnovTest(epsilon=1e6, n_resamples=b, random_state=seed)
    res = est.fit(np.r_[x1, x2].reshape(-1, 1), np.repeat([0, 1], [25, 35])).result_
    ref = stats.ks_2samp(x1, x2, method="exact")
    assert res.statistic == pytest.approx(ref.statistic, abs=2 * res.sensitivity / 4096)
    assert abs(res.pvalue - ref.pvalue) <= 4 * _se(ref.pvalue, b)
    assert list(est.classes_) == [0, 1]


@pytest.mark.parametrize("null", [stats.norm(), stats.expon(), stats.cauchy(2, 3)])
def test_large_epsilon_matches_scipy_goodness_of_fit(null):
    rng = np.random.default_rng(3)
    x = stats.norm(0.3, 1.2).rvs(size=40, random_state=rng)
    b = 2000
    res = DPKolmogorovSmirnovTest(null, epsilon=1e6, n_resamples=b,
                                  random_state=0).fit(x.reshape(-1, 1)).result_
    ref = stats.kstest(x, null.cdf, method="exact")
    assert res.statistic == pytest.approx(ref.statistic, abs=2 * res.sensitivity / 4096)
    assert abs(res.pvalue - ref.pvalue) <= 4 * _se(ref.pvalue, b)


def test_several_columns_use_the_dp_permutation_pvalue():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    X[40:, 2] += 1.5
    y = np.repeat([0, 1], 40)
    res = DPKolmogorovSmirnovTest(epsilon=1e6, n_resamples=199, random_state=0).fit(X, y)
    assert res.result_.pvalue == pytest.approx(1 / 200) and res.result_.statistic is None
    assert "max over columns" in res.result_.method


# -- refusals (before the charge) --------------------------------------------------------

def test_refusals_happen_before_the_charge():
    budget = PrivacyBudget(epsilon=10.0)
    X = np.arange(20.0).reshape(-1, 1)
    with pytest.raises(ValueError, match="continuous variable is not a grouping"):
        DPKolmogorovSmirnovTest(budget=budget).fit(X, np.linspace(0, 1, 20))
    with pytest.raises(ValueError, match="at least 2 groups"):
        DPKolmogorovSmirnovTest(budget=budget).fit(X, np.zeros(20))
    with pytest.raises(ValueError, match="exactly one column"):
        DPKolmogorovSmirnovTest(stats.norm(), budget=budget).fit(np.c_[X, X])
    with pytest.raises(ValueError, match="y must be None"):
        DPKolmogorovSmirnovTest(stats.norm(), budget=budget).fit(X, np.zeros(20))
    with pytest.raises(InvalidParameterError, match="frozen continuous"):
        DPKolmogorovSmirnovTest(stats.poisson(2), budget=budget).fit(X)
    assert len(budget) == 0


def test_three_groups_and_pandas_input():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"v": rng.normal(size=90)})
    y = pd.Series(np.repeat(["a", "b", "c"], 30))
    res = DPKolmogorovSmirnovTest(n_resamples=99).fit(df, y).result_
    assert res.method == "DP k-sample Kolmogorov-Smirnov" and res.sensitivity == 1 / 30
    assert 0 < res.pvalue <= 1


@pytest.mark.slow
def test_solve_n_plans_the_two_sample_test():
    """Slow (0.5 s): solve_n on two labelled groups is the code path and property of
    test_mannwhitney's ``test_solve_n_plans_the_test`` (0.07 s), which stays in the
    default run; this one plans the KS test itself."""
    from skdptest.power import solve_n

    def shift(n, rng):  # n rows in all, two groups, unit shift
        half = n // 2
        x = np.r_[rng.normal(size=half), rng.normal(1.0, size=n - half)].reshape(-1, 1)
        return x, np.repeat([0, 1], [half, n - half])

    sol = solve_n(DPKolmogorovSmirnovTest(n_resamples=99), shift, 0.8, n_min=10, n_max=320,
                  params={"epsilon": 1.0}, n_repeats=30, random_state=0)
    assert 10 <= sol.value <= 320


# -- validity: level on nulls built to break it ------------------------------------------

LAWS = {
    "normal": stats.norm(),
    "exponential": stats.expon(),
    "lognormal": stats.lognorm(1.5),
    "cauchy": stats.cauchy(),
    "t1 scaled": stats.t(1, scale=1e6),
    "poisson(0.3)": stats.poisson(0.3),
    "binary": stats.bernoulli(0.1),
}


def _releaser(est, y, n):
    """Releases of ``est`` on data sets of n rows with labels y: the estimator's own
    release, with its plan built once (the plan is public: a function of y, n and the
    parameters only)."""
    params = est._validate_params()
    plan = est._plan(params, np.zeros((n, 1)), y)
    return lambda X, rng: est._release(Prepared(params=params, X=X, y=y, plan=plan), rng)


def _type_one_grid(make, configs, reps, seed):
    """Rejection counts of each configuration (a dict name -> (law, sizes, epsilon))."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (law, sizes, epsilon) in configs.items():
        y = np.repeat(np.arange(len(sizes)), sizes) if len(sizes) > 1 else None
        n = int(sum(sizes))
        release = _releaser(make(epsilon), y, n)
        hits = 0
        for _ in range(reps):
            X = np.asarray(law.rvs(size=n, random_state=rng), dtype=float).reshape(-1, 1)
            hits += release(X, rng).pvalue <= ALPHA
        out[name] = hits
    return out


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


class _NoTieBreaking(DPKolmogorovSmirnovTest):
    """Mutant: ties ordered by row position (stable sort on the values only)."""

    def _orders(self, X, rng):
        return [np.argsort(X[:, j], kind="stable") for j in range(X.shape[1])]


class _NoiseFreeNull(DPKolmogorovSmirnovTest):
    """Mutant: the noisy statistic compared with a null simulated without noise."""

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        released = self._observed(plan, params["null"], prep.X, rng) + _ks.discrete_laplace(
            rng, plan.noise.rate)
        null = self._simulated(plan, rng, params["n_resamples"])
        pvalue = (1 + int(np.count_nonzero(null >= released))) / (params["n_resamples"] + 1)
        return self._result(params, plan, 0.0, pvalue, "mutant")


def _two_sample_configs():
    sizes = [(10, 10), (10, 40), (30, 30)]
    laws = ["normal", "lognormal", "cauchy", "t1 scaled", "poisson(0.3)", "binary"]
    return {f"{law} {s} eps={e}": (LAWS[law], s, e)
            for law in laws for s in sizes for e in (0.1, 1.0, 10.0)}


def _gof_configs():
    nulls = {"normal": stats.norm(), "exponential": stats.expon(),
             "lognormal": stats.lognorm(1.5), "cauchy": stats.cauchy(),
             "t1 scaled": stats.t(1, scale=1e6), "beta(0.5,0.5)": stats.beta(0.5, 0.5)}
    return {f"{name} n={n} eps={e}": (law, (n,), e)
            for name, law in nulls.items() for n in (10, 30, 100) for e in (0.1, 1.0, 10.0)}


def _two_sample(cls=DPKolmogorovSmirnovTest):
    return lambda e: cls(epsilon=e, n_resamples=19)


def _gof_grid(cls, configs, reps, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, (law, (n,), epsilon) in configs.items():
        release = _releaser(cls(law, epsilon=epsilon, n_resamples=19), None, n)
        hits = 0
        for _ in range(reps):
            X = law.rvs(size=n, random_state=rng).reshape(-1, 1)
            hits += release(X, rng).pvalue <= ALPHA
        out[name] = hits
    return out


def test_level_fast_grid_and_the_no_tie_breaking_mutant_is_caught():
    configs = {k: v for k, v in _two_sample_configs().items()
               if "(10, 40)" in k and "eps=1.0" in k and k.startswith(("normal", "poisson"))}
    reps = 60
    ok, worst, pooled = _grid_holds(partial(_type_one_grid, _two_sample()), configs, reps, 0)
    assert ok, (worst, pooled)
    tied = {k: v for k, v in configs.items() if "poisson" in k}
    mutant = partial(_type_one_grid, _two_sample(_NoTieBreaking))
    assert not _grid_holds(mutant, tied, reps, 0)[0]


def test_level_fast_goodness_of_fit_and_the_noise_free_null_mutant_is_caught():
    configs = {k: v for k, v in _gof_configs().items()
               if "n=10 " in k and "eps=0.1" in k and k.split()[0] in ("cauchy", "lognormal")}
    reps = 60
    assert _grid_holds(partial(_gof_grid, DPKolmogorovSmirnovTest), configs, reps, 1)[0]
    assert not _grid_holds(partial(_gof_grid, _NoiseFreeNull), configs, reps, 1)[0]


@pytest.mark.slow
def test_level_two_sample_grid_and_the_no_tie_breaking_mutant_is_caught():
    configs = _two_sample_configs()
    assert len(configs) >= 50
    reps = 200
    ok, worst, pooled = _grid_holds(partial(_type_one_grid, _two_sample()), configs, reps, 10)
    assert ok, (worst, pooled)
    tied = {k: v for k, v in configs.items() if "poisson" in k or "binary" in k}
    mutant = partial(_type_one_grid, _two_sample(_NoTieBreaking))
    assert not _grid_holds(mutant, tied, reps, 10)[0]


@pytest.mark.slow
def test_level_goodness_of_fit_grid_and_the_noise_free_null_mutant_is_caught():
    configs = _gof_configs()
    assert len(configs) >= 50
    reps = 200
    ok, worst, pooled = _grid_holds(partial(_gof_grid, DPKolmogorovSmirnovTest), configs, reps, 11)
    assert ok, (worst, pooled)
    small_eps = {k: v for k, v in configs.items() if "eps=0.1" in k}
    assert not _grid_holds(partial(_gof_grid, _NoiseFreeNull), small_eps, reps, 11)[0]
