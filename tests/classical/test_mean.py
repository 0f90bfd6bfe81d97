"""DPBoundedMeanTest: the p-value bound, privacy of the release, validity at finite n."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, stats

import skdptest.classical._mean as mean_module
from skdptest import DPBoundedMeanTest, InvalidParameterError, PrivacyBudget
from skdptest._noise import discrete_laplace, discrete_laplace_log_pmf
from skdptest.classical._mean import (
    BET_GRID,
    _noise_sf,
    bet_plan,
    group_differences,
    plan_fraction,
    rejection_threshold,
    wealth_pvalue,
    wealth_statistic,
)
from tests.classical._reference import wealth_majorant_at_one_as_first_written

ALTERNATIVES = ("two-sided", "greater", "less")


# --------------------------------------------------------------------------------------
# The p-value bound.
# --------------------------------------------------------------------------------------

def test_noise_tail_matches_the_pmf():
    rate = 0.37
    k = np.arange(-400, 401)
    pmf = np.exp(discrete_laplace_log_pmf(k, rate))
    for j in (-5, -1, 0, 1, 2, 9):
        assert _noise_sf([j], rate)[0] == pytest.approx(pmf[k >= j].sum(), rel=1e-12)


def _points(r, grid, rate, log_cap):
    """The points of the bound, built independently of the module."""
    k_cap = math.ceil(log_cap / grid)
    ks = np.arange(-k_cap, k_cap + 1)
    q = math.exp(-rate)

    def sf(j):
        return q**j / (1 + q) if j >= 1 else 1 - q ** (1 - j) / (1 + q)

    w = [0.0] + [math.exp(k * grid) for k in ks] + [math.exp(k_cap * grid)]
    y = [sf(r + k_cap + 1)] + [sf(r - k) for k in ks] + [1.0]
    return np.array(w), np.array(y)


def _hull_by_pairs(w, y):
    """Least concave majorant at 1 by enumerating every chord over 1 (O(N^2))."""
    best = float(y[w == 1].max()) if np.any(w == 1) else 0.0
    for i in np.flatnonzero(w < 1):
        right = w > 1
        chords = (y[i] * (w[right] - 1) + y[right] * (1 - w[i])) / (w[right] - w[i])
        best = max(best, float(chords.max()))
    return best


@pytest.mark.parametrize("grid,rate", [(0.25, 0.3), (0.125, 0.02), (0.5, 2.0)])
def test_bound_is_the_concave_majorant_of_every_chord(grid, rate):
    for r in (-3, 0, 4, 9, 17):
        w, y = _points(r, grid, rate, 6.0)
        assert wealth_pvalue(r, grid, rate, log_cap=6.0) == pytest.approx(
            min(1.0, _hull_by_pairs(w, y)), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("grid,rate,r", [(0.25, 0.3, 6), (0.25, 0.05, 30), (0.5, 1.5, 3)])
def test_bound_is_the_largest_tail_over_laws_with_unit_mean_wealth(grid, rate, r):
    """Linear program over laws of T on [−K, K] with E[e^{hT}] <= 1: its optimum is the
    sup of P(T + Z >= r) there; the bound adds at most e^{-log_cap} for the rest."""
    log_cap = 8.0
    k = np.arange(-math.ceil(log_cap / grid), math.ceil(log_cap / grid) + 1)
    gain = _noise_sf(r - k, rate)
    res = optimize.linprog(-gain, A_ub=[np.exp(k * grid)], b_ub=[1.0],
                           A_eq=[np.ones(k.size)], b_eq=[1.0], bounds=(0, None),
                           method="highs")
    assert res.status == 0
    bound = wealth_pvalue(r, grid, rate, log_cap=log_cap)
    assert -res.fun <= bound + 1e-9
    assert bound <= -res.fun + 2 * math.exp(-log_cap)


def test_bound_is_attained_by_the_constant_law_when_noise_dominates():
    # noise scale 1/rate steps of h: above one nat the point mass T = 0 is the worst law
    grid, rate = 2.0**-6, 2.0**-6 / 1.5
    for r in (50, 150, 300):
        assert wealth_pvalue(r, grid, rate) == pytest.approx(_noise_sf([r], rate)[0],
                                                             rel=1e-9)


def test_threshold_is_the_smallest_rejecting_release():
    for grid, rate, alpha in [(2.0**-8, 2.0**-8, 0.05), (2.0**-9, 2.0**-11, 0.01),
                              (2.0**-6, 2.0**-3, 0.2)]:
        r = rejection_threshold(grid, rate, alpha)
        assert wealth_pvalue(r, grid, rate) <= alpha < wealth_pvalue(r - 1, grid, rate)


# --------------------------------------------------------------------------------------
# The statistic and its privacy.
# --------------------------------------------------------------------------------------

def _log_wealth(y, lam, alternative):
    """log M in floating point, independently of the module's integer arithmetic."""
    plus, minus = np.log1p(lam * y).sum(), np.log1p(-lam * y).sum()
    if alternative == "greater":
        return plus
    if alternative == "less":
        return minus
    return np.logaddexp(plus, minus) - math.log(2.0)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_statistic_is_a_lower_bound_of_the_log_wealth_within_one_step(alternative):
    rng = np.random.default_rng(1)
    plan = bet_plan(-2.0, 4.0, 0.6, 1.0, alternative)
    for n in (1, 7, 300):
        y = rng.uniform(-2.0, 4.0, size=n)
        exact = _log_wealth(y, plan.bet, alternative)
        t = int(wealth_statistic(y, plan, alternative))
        assert t * plan.grid <= exact
        assert exact - t * plan.grid <= plan.grid + 1e-6


def _neighbour_search(plan, alternative, lo, hi, n, rng, n_data=60):
    """Largest |T(D) − T(D')| over replace-one neighbours of random data on [lo, hi]
    (endpoints, zero and random values; every row replaced by every candidate)."""
    worst, pair = 0, None
    for _ in range(n_data):
        y = rng.choice(np.r_[lo, hi, 0.0, rng.uniform(lo, hi, 3)], size=n)
        t = int(wealth_statistic(y, plan, alternative))
        # the neighbours in order (row i, then candidate v), as rows of one batch
        rows = np.repeat(np.arange(n), 4)
        values = np.concatenate([(lo, hi, 0.0, rng.uniform(lo, hi)) for _ in range(n)])
        neighbours = np.tile(y, (4 * n, 1))
        neighbours[np.arange(4 * n), rows] = values
        for d in np.abs(wealth_statistic(neighbours, plan, alternative) - t).tolist():
            if d > worst:
                worst, pair = d, (t, t + d)
    # two-sided: the log-sum-exp moves by a whole term's range only when one of the two
    # bets dominates, which takes many rows: long constant datasets, one row replaced
    for fill in (lo, hi):
        y = np.full(400, fill)
        t = int(wealth_statistic(y, plan, alternative))
        for v in (lo, hi):
            y2 = y.copy()
            y2[0] = v
            d = abs(int(wealth_statistic(y2, plan, alternative)) - t)
            if d > worst:
                worst, pair = d, (t, t + d)
    return worst, pair


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.95])
def test_sensitivity_is_never_exceeded_and_is_attained(alternative, fraction):
    lo, hi = -1.0, 3.0
    plan = bet_plan(lo, hi, fraction, 1.0, alternative)
    worst, _ = _neighbour_search(plan, alternative, lo, hi, 4, np.random.default_rng(2))
    assert worst <= plan.sensitivity
    assert worst >= plan.sensitivity - 2  # tight: the noise is not oversized


def _max_log_ratio(t, t2, rate):
    r = np.arange(min(t, t2) - 2000, max(t, t2) + 2000)
    return float(np.max(np.abs(discrete_laplace_log_pmf(r - t, rate)
                               - discrete_laplace_log_pmf(r - t2, rate))))


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_release_ratio_on_neighbours_is_at_most_e_epsilon_and_halved_noise_fails(
        alternative, epsilon):
    lo, hi = -3.0, 3.0
    plan = bet_plan(lo, hi, 0.45, epsilon, alternative)
    worst, (t, t2) = _neighbour_search(plan, alternative, lo, hi, 3,
                                       np.random.default_rng(3), n_data=30)
    assert plan.rate * plan.sensitivity <= epsilon
    assert _max_log_ratio(t, t2, plan.rate) <= epsilon + 1e-9
    # halved noise (twice the rate) breaks the guarantee on the same neighbours
    assert _max_log_ratio(t, t2, 2 * plan.rate) > epsilon


def test_two_group_differences_change_in_one_place_per_replaced_row():
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, 23)
    codes = np.r_[np.zeros(7, int), np.ones(16, int)]
    rng.shuffle(codes)
    sizes = np.bincount(codes)
    base = group_differences(x, codes, sizes, (0.0, 1.0), np.random.default_rng(9))
    assert base.size == 7 and np.all(np.abs(base) <= 1.0)
    for i in range(x.size):
        x2 = x.copy()
        x2[i] = 1.0 - x2[i]
        moved = group_differences(x2, codes, sizes, (0.0, 1.0), np.random.default_rng(9))
        assert np.count_nonzero(moved != base) <= 1


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("sizes", [(4, 4), (6, 2)])
def test_two_group_sensitivity_through_the_pairing(alternative, sizes):
    """Two groups: a replaced row moves one side of one D by at most b − a; the reduced
    sensitivity (steepest window of the log-factor) is never exceeded through the whole
    pipeline (pairing, differences, statistic), is attained one-sided, and the release
    ratio on the worst neighbours found is <= e^ε (halved noise: not)."""
    a, b = 0.0, 1.0
    plan = bet_plan(a - b, b - a, 0.6, 1.0, alternative, b - a)
    rng = np.random.default_rng(8)
    codes = np.r_[np.zeros(sizes[0], int), np.ones(sizes[1], int)]
    counts = np.bincount(codes)

    def stat(x):
        d = group_differences(x, codes, counts, (a, b), np.random.default_rng(0))
        return int(wealth_statistic(d, plan, alternative))

    datasets = [rng.choice(np.r_[a, b, 0.5, rng.uniform(a, b, 2)], size=codes.size)
                for _ in range(10)]
    # the steep windows: one group at a, the other at b
    datasets += [np.where(codes == 0, a, b), np.where(codes == 0, b, a)]
    worst, pair = 0, None
    for x in datasets:
        t = stat(x)
        for i in range(x.size):
            for v in (a, b, rng.uniform(a, b)):
                x2 = x.copy()
                x2[i] = v
                d = abs(stat(x2) - t)
                if d > worst:
                    worst, pair = d, (t, t + d)
    assert worst <= plan.sensitivity
    if alternative == "two-sided":
        # the mixture moves by a whole steep window only when one bet dominates, which
        # takes many rows: 40 per group, one group at a, the other at b but one row
        codes = np.r_[np.zeros(40, int), np.ones(40, int)]
        counts = np.bincount(codes)
        for first, second in ((a, b), (b, a)):
            x = np.where(codes == 0, first, second)
            x[-1] = first
            t = stat(x)
            for i in range(40):
                x2 = x.copy()
                x2[i] = second
                d = abs(stat(x2) - t)
                if d > worst:
                    worst, pair = d, (t, t + d)
        assert worst <= plan.sensitivity
    if alternative != "two-sided":
        assert worst >= plan.sensitivity - 2
    assert plan.rate * plan.sensitivity <= 1.0
    assert _max_log_ratio(*pair, plan.rate) <= 1.0 + 1e-9
    assert _max_log_ratio(*pair, 2 * plan.rate) > 1.0


def test_estimator_noise_rate_is_the_planned_one(monkeypatch):
    seen = []

    def recording(rng, rate, size=None):
        seen.append(rate)
        return discrete_laplace(rng, rate, size=size)

    monkeypatch.setattr(mean_module, "discrete_laplace", recording)
    X = np.random.default_rng(5).uniform(-3, 3, (50, 1))
    for alternative in ALTERNATIVES:
        est = DPBoundedMeanTest(bounds=(-3, 3), alternative=alternative, bet=0.45,
                                epsilon=0.7, random_state=0).fit(X)
        res = est.result_
        plan = bet_plan(-3.0, 3.0, 0.45, 0.7, alternative)
        assert seen[-1] == plan.rate
        assert res.sensitivity == plan.sensitivity * plan.grid
        assert seen[-1] * res.sensitivity / res.grid <= 0.7
        assert res.statistic / res.grid == int(res.statistic / res.grid)  # on the grid


def test_refusal_messages_carry_no_count():
    budget = PrivacyBudget(epsilon=10.0)
    messages = []
    for bad in (1, 7):
        X = np.zeros((40, 1))
        X[:bad] = 5.0
        with pytest.raises(ValueError, match="outside bounds") as info:
            DPBoundedMeanTest(bounds=(-3, 3), budget=budget).fit(X)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert not budget.ledger


# --------------------------------------------------------------------------------------
# Correctness against independent computations.
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_noise_free_limit_is_the_markov_betting_test(alternative):
    """ε → ∞: the noise vanishes and the p-value is min(1, 1/M) of the non-private bet
    (Markov / Ville), up to one grid step."""
    rng = np.random.default_rng(6)
    X = np.clip(rng.normal(0.3, 1.0, (80, 1)), -3, 3)
    res = DPBoundedMeanTest(bounds=(-3, 3), alternative=alternative, bet=0.45,
                            epsilon=1e12, random_state=0).fit(X).result_
    log_m = _log_wealth(X[:, 0], res.bet, alternative)
    assert math.exp(-log_m) <= res.pvalue * (1 + 1e-9) or res.pvalue == 1.0
    assert res.pvalue <= min(1.0, math.exp(-log_m + res.grid + 1e-6))


def test_pairs_and_groups_use_the_differences():
    rng = np.random.default_rng(7)
    x, y = rng.uniform(0, 1, 60), rng.uniform(0, 1, 60)
    paired = DPBoundedMeanTest(bounds=(0, 1), bet=0.5, epsilon=1e12, random_state=0)
    res = paired.fit(x[:, None], y).result_
    assert res.pvalue == pytest.approx(min(1.0, math.exp(-_log_wealth(
        x - y, res.bet, "two-sided"))), rel=2 * res.grid)
    labels = np.r_[np.zeros(30), np.ones(30)]
    grouped = DPBoundedMeanTest(bounds=(0, 1), null_mean=None, bet=0.5, epsilon=1e12,
                                random_state=0).fit(x[:, None], labels)
    assert grouped.result_.group_sizes == (30, 30)
    assert list(grouped.classes_) == [0.0, 1.0]
    assert grouped.result_.bet == pytest.approx(0.5)


def test_clip_mode_tests_the_clipped_mean_and_refuse_mode_refuses():
    X = np.r_[np.full(30, 10.0), np.full(30, -1.0)][:, None]
    with pytest.raises(ValueError, match="out_of_bounds='clip'"):
        DPBoundedMeanTest(bounds=(-1, 1)).fit(X)
    # clipped values are ±1 in equal numbers: the clipped mean is exactly 0
    res = DPBoundedMeanTest(bounds=(-1, 1), out_of_bounds="clip", bet=0.5, epsilon=1e12,
                            random_state=0).fit(X).result_
    assert res.pvalue == pytest.approx(min(1.0, math.exp(-_log_wealth(
        np.clip(X[:, 0], -1, 1), res.bet, "two-sided"))), rel=2 * res.grid)


def test_clipping_moves_the_mean_and_the_hypothesis_says_so():
    """The trap of issue 19: centred Exp(1) clipped to [−2, 2] has mean −e^{-3}, not 0.
    Testing the clipped mean at its true value holds the level; testing 0 (the mean
    before clipping) rejects more often as n grows — which is why out_of_bounds='clip'
    states its hypothesis on the clipped variable."""
    rng = np.random.default_rng(14)
    clipped_mean = -math.exp(-3.0)  # E[min(E, 3)] − 1 for E ~ Exp(1)
    reps = 200
    at_truth, at_zero = [], []
    for n in (100, 3000):
        x = np.clip(rng.exponential(1.0, (reps, n)) - 1.0, -2.0, 2.0)
        # the bet planned for an effect of 0.05 with unit spread
        fraction = plan_fraction(-2.0, 2.0, n, 1.0, 0.05, "two-sided", 0.05, 1.0)
        at_truth.append(np.mean(_our_rejections(x, (-2.0, 2.0), clipped_mean, "two-sided",
                                                1.0, 0.05, rng, fraction)))
        at_zero.append(np.mean(_our_rejections(x, (-2.0, 2.0), 0.0, "two-sided", 1.0,
                                               0.05, rng, fraction)))
    se = math.sqrt(0.05 * 0.95 / reps)
    assert max(at_truth) <= 0.05 + 2 * se
    assert at_zero[1] > 0.5 and at_zero[1] > at_zero[0]


def test_pandas_input_and_refusals_before_the_charge():
    budget = PrivacyBudget(epsilon=10.0)
    df = pd.DataFrame({"score": np.linspace(-1, 1, 40)})
    DPBoundedMeanTest(bounds=(-1, 1), budget=budget, random_state=0).fit(df)
    assert len(budget.ledger) == 1
    cases = [
        (dict(bounds=(1, 1)), np.zeros((20, 1)), None, InvalidParameterError, "bounds"),
        (dict(bounds=(0, "x")), np.zeros((20, 1)), None, InvalidParameterError, "bounds"),
        (dict(bounds=(0, 1), null_mean=1.0), np.zeros((20, 1)), None, ValueError,
         "null_mean must lie strictly inside"),
        (dict(bounds=(0, 1)), np.zeros((20, 2)), None, ValueError, "exactly one column"),
        (dict(bounds=(0, 1), null_mean=None), np.zeros((21, 1)), np.arange(21) % 3,
         ValueError, "exactly 2 groups"),
        (dict(bounds=(0, 1), null_mean=0.5), np.zeros((20, 1)), np.full(20, 2.0),
         ValueError, "y has values outside"),
    ]
    for params, X, y, error, match in cases:
        with pytest.raises(error, match=match):
            DPBoundedMeanTest(budget=budget, **params).fit(X, y)
    assert len(budget.ledger) == 1


def test_planned_bet_is_nearly_as_powerful_as_the_best_fixed_bet():
    """The bet planned from public inputs (n, bounds, ε, α, effect, spread) against
    fixed bets, by simulation with the module's release: N(0.4, 1) clipped to [−3, 3]."""
    rng = np.random.default_rng(12)
    n, reps = 90, 1500
    samples = np.clip(rng.normal(0.4, 1.0, (reps, n)), -3, 3)
    fraction = plan_fraction(-3.0, 3.0, n, 1.0, 0.05, "two-sided", 0.4, 1.0)
    assert fraction in BET_GRID

    def power(f):
        return float(np.mean(_our_rejections(samples, (-3.0, 3.0), 0.0, "two-sided", 1.0,
                                             0.05, np.random.default_rng(13), f)))

    assert power(fraction) >= max(power(f) for f in (0.15, 0.3, 0.6, 0.85)) - 0.03


def test_solve_n_plans_the_test():
    from skdptest.power import solve_n

    def gen(n, rng):
        return np.clip(rng.normal(1.0, 1.0, (n, 1)), -3, 3), None

    sol = solve_n(DPBoundedMeanTest(bounds=(-3, 3), bet=0.6), gen, n_min=10, n_max=160,
                  n_repeats=15, rtol=0.3, random_state=0)
    assert 10 <= sol.value <= 160


# --------------------------------------------------------------------------------------
# Validity at finite n: laws on the bounds with known means.
# --------------------------------------------------------------------------------------

def _two_point(lo, hi, mean):
    """Law on {lo, hi} with the given mean."""
    p = (mean - lo) / (hi - lo)
    return lambda rng, size: np.where(rng.random(size) < p, hi, lo)


def _clipped_exponential(cap):
    return lambda rng, size: np.minimum(rng.exponential(1.0, size), cap)


def _clipped_lognormal(cap, sigma=1.0):
    return lambda rng, size: np.minimum(rng.lognormal(0.0, sigma, size), cap)


def _clipped_lognormal_mean(cap, sigma=1.0):
    law = stats.lognorm(sigma)
    return integrate.quad(law.sf, 0, cap, epsabs=1e-13)[0]  # E[min(L, c)] = ∫_0^c P(L > t)


def _discrete(values, probs):
    values, probs = np.asarray(values, float), np.asarray(probs, float)
    return (lambda rng, size: rng.choice(values, size=size, p=probs)), float(values @ probs)


_TIES, _TIES_MEAN = _discrete([-3, -1, 0, 0.5, 3], [0.1, 0.3, 0.35, 0.15, 0.1])

#: (name, sampler, bounds, mean): laws ON the bounds whose mean is known exactly.
LAWS = [
    ("two-point at the bounds", _two_point(-3.0, 3.0, 0.0), (-3.0, 3.0), 0.0),
    ("skewed two-point", _two_point(-3.0 * 0.05 / 0.95, 3.0, 0.0), (-3.0, 3.0), 0.0),
    ("skewed two-point, left", _two_point(-3.0, 3.0 * 0.05 / 0.95, 0.0), (-3.0, 3.0), 0.0),
    ("exponential clipped at 6", _clipped_exponential(6.0), (0.0, 6.0), 1 - math.exp(-6.0)),
    ("log-normal clipped at 20", _clipped_lognormal(20.0), (0.0, 20.0),
     _clipped_lognormal_mean(20.0)),
    ("uniform", lambda rng, size: rng.uniform(-1.0, 2.0, size), (-1.0, 2.0), 0.5),
    ("discrete with ties", _TIES, (-3.0, 3.0), _TIES_MEAN),
    ("beta(0.3, 3) on [0, 1]", lambda rng, size: rng.beta(0.3, 3.0, size), (0.0, 1.0),
     0.3 / 3.3),
    # heavy tails clipped symmetrically: the clipped law is symmetric about 0
    ("Cauchy clipped to [-3, 3]", lambda rng, size: np.clip(rng.standard_cauchy(size), -3, 3),
     (-3.0, 3.0), 0.0),
]


def _our_rejections(samples, lo_hi, mean, alternative, epsilon, alpha, rng, fraction):
    """Rejections of the test on a batch (reps, n) of one-sample datasets, through the
    module's statistic, exact noise and p-value (threshold form: p is non-increasing)."""
    lo, hi = lo_hi[0] - mean, lo_hi[1] - mean
    n = samples.shape[1]
    if fraction == "auto":
        fraction = plan_fraction(lo, hi, n, epsilon, alpha, alternative,
                                 (lo_hi[1] - lo_hi[0]) / 20, (lo_hi[1] - lo_hi[0]) / 6)
    plan = bet_plan(lo, hi, fraction, epsilon, alternative)
    t = wealth_statistic(samples - mean, plan, alternative)
    release = t + discrete_laplace(rng, plan.rate, size=t.size)
    return release >= rejection_threshold(plan.grid, plan.rate, alpha)


def _plug_in_normal_rejections(samples, lo_hi, mean, alternative, epsilon, alpha, rng,
                               fraction):
    """MUTANT: a noise-aware plug-in normal test (noisy sum with sensitivity b − a, the
    sample variance plugged in, normal quantiles): invalid at finite n."""
    del fraction
    n = samples.shape[1]
    scale = (lo_hi[1] - lo_hi[0]) / epsilon
    noisy_mean = samples.mean(axis=1) + rng.laplace(0.0, scale, samples.shape[0]) / n
    se = np.sqrt(samples.var(axis=1, ddof=1) / n + 2 * (scale / n) ** 2)
    z = (noisy_mean - mean) / se
    if alternative == "greater":
        return stats.norm.sf(z) <= alpha
    if alternative == "less":
        return stats.norm.cdf(z) <= alpha
    return 2 * stats.norm.sf(np.abs(z)) <= alpha


def _null_grid(rejector, configs, reps, seed=0, alpha=0.05):
    """Type-I error per configuration and pooled; returns (cells, pooled, failures),
    a failure being a cell above alpha + 2 SE."""
    rng = np.random.default_rng(seed)
    cells, total, count = [], 0, 0
    for law_index, n, epsilon, alternative, fraction in configs:
        name, sampler, lo_hi, mean = LAWS[law_index]
        samples = sampler(rng, (reps, n))
        rejected = rejector(samples, lo_hi, mean, alternative, epsilon, alpha, rng, fraction)
        rate = float(np.mean(rejected))
        cells.append((name, n, epsilon, alternative, fraction, rate))
        total += int(np.sum(rejected))
        count += reps
    se = math.sqrt(alpha * (1 - alpha) / reps)
    failures = [c for c in cells if c[-1] > alpha + 2 * se]
    pooled = total / count
    pooled_ok = pooled <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / count)
    return cells, pooled, failures, pooled_ok


FAST_CONFIGS = [
    (0, 10, 1.0, "two-sided", "auto"),
    (1, 20, 10.0, "less", 0.5),
    (2, 15, 10.0, "greater", 0.9),
    (3, 10, 0.1, "greater", "auto"),
    (6, 30, 1.0, "two-sided", 0.3),
]


def test_type_one_error_fast_grid_and_plug_in_mutant_is_caught():
    cells, pooled, failures, pooled_ok = _null_grid(_our_rejections, FAST_CONFIGS, 600)
    assert not failures, failures
    assert pooled_ok, pooled
    _, _, mutant_failures, _ = _null_grid(_plug_in_normal_rejections, FAST_CONFIGS, 600)
    assert mutant_failures  # the skewed two-point laws at ε = 10 break the plug-in


def test_type_one_error_of_the_constant_law_is_exact():
    """X ≡ μ0 (T = 0): the rejection probability is P(Z >= r*) <= α, computed exactly,
    and it is close to α (the bound is tight there)."""
    for epsilon in (0.1, 1.0, 10.0):
        for alternative in ALTERNATIVES:
            plan = bet_plan(-3.0, 3.0, 0.45, epsilon, alternative)
            t = int(wealth_statistic(np.zeros(25), plan, alternative))
            r = rejection_threshold(plan.grid, plan.rate, 0.05)
            size = float(_noise_sf([r - t], plan.rate)[0])
            assert size <= 0.05


def _exact_two_point_size(u, v, n, fraction, epsilon, alternative, alpha=0.05):
    """Exact rejection probability on the law with P(v) = −u/(v − u), P(u) = v/(v − u)
    (mean 0 = μ0) on the bounds [−3, 3]: T depends only on the count K of v's, so the
    size is Σ_K P(K) P(Z >= r* − T(K)) — no simulation."""
    plan = bet_plan(-3.0, 3.0, fraction, epsilon, alternative)
    k = np.arange(n + 1)
    rows = np.where(np.arange(n)[None, :] < k[:, None], v, u)
    t = wealth_statistic(rows, plan, alternative)
    r = rejection_threshold(plan.grid, plan.rate, alpha)
    weights = stats.binom.pmf(k, n, -u / (v - u))
    return float(weights @ _noise_sf(r - t, plan.rate))


TWO_POINT_SUPPORTS = [(u, v) for u in (-3.0, -1.5, -0.3, -0.06) for v in (3.0, 1.5, 0.3, 0.06)]


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_exact_size_on_two_point_laws(alternative):
    """Every two-point law with mean μ0 inside the bounds, exactly: size <= α."""
    sizes = [_exact_two_point_size(u, v, n, 0.45, 1.0, alternative)
             for u, v in TWO_POINT_SUPPORTS for n in (10, 60)]
    assert max(sizes) <= 0.05
    assert max(sizes) >= 0.03  # and the bound is not far from tight on these laws


@pytest.mark.slow
def test_exact_size_on_two_point_laws_full_grid():
    worst = 0.0
    for epsilon in (0.1, 1.0, 10.0):
        for alternative in ALTERNATIVES:
            for fraction in (0.1, 0.45, 0.9):
                for n in (10, 40, 150):
                    for u, v in TWO_POINT_SUPPORTS:
                        worst = max(worst, _exact_two_point_size(u, v, n, fraction,
                                                                 epsilon, alternative))
    assert worst <= 0.05


def _slow_configs():
    configs = []
    eps_cycle = (0.1, 1.0, 10.0)
    alt_cycle = ALTERNATIVES
    i = 0
    for law_index in range(len(LAWS)):
        for n in (10, 20, 40, 150):
            for fraction in ("auto", 0.8):
                configs.append((law_index, n, eps_cycle[i % 3], alt_cycle[(i // 3) % 3],
                                fraction))
                i += 1
    return configs


@pytest.mark.slow
def test_type_one_error_grid_slow():
    configs = _slow_configs()
    assert len(configs) >= 50
    cells, pooled, failures, pooled_ok = _null_grid(_our_rejections, configs, 2000, seed=1)
    assert not failures, failures
    assert pooled_ok, pooled
    _, _, mutant_failures, _ = _null_grid(_plug_in_normal_rejections, configs, 2000, seed=1)
    assert len(mutant_failures) >= 3, mutant_failures


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_type_one_error_of_fitted_estimators_two_groups_and_pairs(epsilon):
    """The estimator itself (fit, pairing, p-value), two unbalanced groups from one
    skewed law and pairs of a skewed law: rejection rate <= α + 2 SE."""
    rng = np.random.default_rng(11)
    reps, alpha = 300, 0.05
    sampler = _two_point(-3.0 * 0.05 / 0.95, 3.0, 0.0)
    labels = np.r_[np.zeros(12), np.ones(37)]
    rejections = 0
    for _ in range(reps):
        x = sampler(rng, 49)[:, None]
        est = DPBoundedMeanTest(bounds=(-3, 3), null_mean=None, epsilon=epsilon,
                                alternative="less", random_state=rng)
        rejections += est.fit(x, labels).result_.reject
        xp, yp = sampler(rng, 20)[:, None], sampler(rng, 20)
        est = DPBoundedMeanTest(bounds=(-3, 3), null_mean=0.0, epsilon=epsilon,
                                alternative="greater", random_state=rng)
        rejections += est.fit(xp, yp).result_.reject
    se = math.sqrt(alpha * (1 - alpha) / (2 * reps))
    assert rejections / (2 * reps) <= alpha + 2 * se


def test_prepared_abscissae_give_the_majorant_bit_for_bit():
    rng = np.random.default_rng(12)
    for grid, cap in ((2.0**-8, 40.0), (2.0**-2, 40.0), (1.0, 5.0), (2.0**-10, 3.0)):
        k_cap, k, points = mean_module._wealth_points(grid, cap)
        assert isinstance(points.left, slice) and isinstance(points.right, slice)
        for rate, r in ((0.004, 600), (0.5, 3), (3.0, -7), (1e-3, 10**6), (2.0, -10**6)):
            y = np.concatenate([_noise_sf([r + k_cap + 1], rate), _noise_sf(r - k, rate),
                                [1.0]])
            want = min(1.0, wealth_majorant_at_one_as_first_written(points.w, y))
            assert wealth_pvalue(r, grid, rate, log_cap=cap) == want
    # unsorted abscissae (masks, not slices), a point at 1, ties in y
    for _ in range(50):
        w = np.concatenate([[0.5, 2.0, 1.0, 0.0, 3.0], rng.uniform(0.0, 3.0, 15)])
        y = np.round(rng.uniform(0.0, 1.0, w.size), 1)
        assert mean_module._majorant_at_one(w, y) == wealth_majorant_at_one_as_first_written(w, y)
