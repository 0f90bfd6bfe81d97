"""Confidence intervals of DPBinomialTest and DPBoundedMeanTest: exact and Monte Carlo
coverage over the sampling and the noise together, with mutants (noise ignored in the
inversion) that the same checks catch."""

import math
import pickle

import numpy as np
import pytest
from scipy import stats

import skdptest.classical._interval as interval_module
from skdptest import (
    BinomialTestResult,
    ConfidenceInterval,
    DPBinomialTest,
    DPBoundedMeanTest,
    InvalidParameterError,
)
from skdptest._interval import check_confidence_level
from skdptest._noise import discrete_laplace
from skdptest.classical._interval import mean_interval_ends, tulap_interval
from skdptest.classical._mean import bet_plan, wealth_statistic
from skdptest.classical._proportion import tulap_rate
from skdptest.classical._tulap import binomial_log_pvalue

# --------------------------------------------------------------------------------------
# The dataclass and its parameter.
# --------------------------------------------------------------------------------------


def test_confidence_interval_is_frozen_and_unpacks():
    ci = ConfidenceInterval(low=0.1, high=0.4, confidence_level=0.9, parameter="p",
                            method="m")
    low, high = ci
    assert (low, high, ci.width, ci.covers) == (0.1, 0.4, pytest.approx(0.3),
                                                 "sampling and noise")
    with pytest.raises(AttributeError, match="cannot assign"):
        ci.low = 0.0


@pytest.mark.parametrize("bad, match", [
    (0.0, r"confidence_level must be in \(0, 1\)"),
    (1.0, r"confidence_level must be in \(0, 1\)"),
    (float("nan"), r"confidence_level must be in \(0, 1\)"),
    (True, "confidence_level must be a real number"),
    ("0.95", "confidence_level must be a real number"),
])
def test_confidence_level_is_checked(bad, match):
    with pytest.raises(InvalidParameterError, match=match):
        check_confidence_level(bad)
    result = DPBinomialTest(random_state=0).fit(np.ones((20, 1))).result_
    with pytest.raises(InvalidParameterError, match=match):
        result.confidence_interval(bad)


# --------------------------------------------------------------------------------------
# Proportion: exact coverage by enumerating the count and integrating the Tulap noise.
# --------------------------------------------------------------------------------------

def _tulap_cdf(t, rate):
    """P(G + U <= t), written from the definition (independent of _tulap.py): G discrete
    Laplace of ``rate``, U uniform on (−1/2, 1/2)."""
    b = math.exp(-rate)
    k = math.floor(t + 0.5)

    def g_cdf(j):  # P(G <= j)
        return b ** (-j) / (1 + b) if j <= 0 else 1 - b ** (j + 1) / (1 + b)

    pmf = (1 - b) / (1 + b) * b ** abs(k)
    return g_cdf(k - 1) + pmf * (t - k + 0.5)


def _cover_edges(interval, n, theta, rate):
    """(z_lo, z_hi): interval(z) covers θ exactly for z_lo <= z <= z_hi (its ends are
    non-decreasing in z), found by bisection on z."""
    reach = 80.0 / rate + 5.0

    def bisect(covered_left):
        # covered_left: the cover condition holds left of the edge (z_hi), else right
        left, right = -reach, n + reach
        for _ in range(60):
            mid = 0.5 * (left + right)
            low, high = interval(mid)
            ok = low <= theta if covered_left else high >= theta
            if ok == covered_left:
                left = mid
            else:
                right = mid
        return 0.5 * (left + right)

    return bisect(False), bisect(True)


def exact_coverage(interval, n, theta, rate):
    """P_θ(low <= θ <= high) = Σ_x C(n, x) θ^x (1 − θ)^{n−x} P(z_lo <= x + N <= z_hi)."""
    z_lo, z_hi = _cover_edges(interval, n, theta, rate)
    pmf = stats.binom.pmf(np.arange(n + 1), n, theta)
    return float(sum(p * max(_tulap_cdf(z_hi - x, rate) - _tulap_cdf(z_lo - x, rate), 0.0)
                     for x, p in enumerate(pmf)))


def _clopper_pearson_on_noisy_count(n, level=0.95):
    """The mutant: the noise ignored, Clopper–Pearson on the rounded, clipped release."""
    a = 1 - level

    def interval(z):
        x = min(max(round(z), 0), n)
        low = 0.0 if x == 0 else stats.beta.ppf(a / 2, x, n - x + 1)
        high = 1.0 if x == n else stats.beta.ppf(1 - a / 2, x + 1, n - x)
        return low, high

    return interval


def _coverage_of_tulap(n, theta, epsilon, level=0.95):
    rate = tulap_rate(epsilon)

    def interval(z):
        return tuple(tulap_interval(z, n, epsilon, level))

    return exact_coverage(interval, n, theta, rate)


@pytest.mark.parametrize("n, theta, epsilon, level", [
    (5, 0.5, 1.0, 0.95),
    (12, 0.1, 0.3, 0.9),
    (30, 0.93, 2.0, 0.95),
])
def test_tulap_interval_coverage_is_exact(n, theta, epsilon, level):
    assert _coverage_of_tulap(n, theta, epsilon, level) == pytest.approx(level, abs=1e-7)


def test_the_exact_coverage_check_catches_a_noise_ignoring_interval():
    n, theta, epsilon = 30, 0.3, 0.5
    mutant = exact_coverage(_clopper_pearson_on_noisy_count(n), n, theta,
                            tulap_rate(epsilon))
    assert mutant < 0.95 - 0.05  # far below the level: the check fails it


def test_tulap_interval_in_the_non_private_limit_is_inside_clopper_pearson():
    # ε large: Z = X + U only; the randomised exact interval lies within Clopper–Pearson
    n = 40
    for x, u in ((0, 0.3), (7, -0.2), (20, 0.0), (40, -0.4)):
        low, high = tulap_interval(x + u, n, 500.0)
        cp_low = 0.0 if x == 0 else stats.beta.ppf(0.025, x, n - x + 1)
        cp_high = 1.0 if x == n else stats.beta.ppf(0.975, x + 1, n - x)
        assert cp_low - 1e-12 <= low <= x / n <= high <= cp_high + 1e-12


def test_tulap_interval_ends_solve_the_one_sided_tests():
    n, epsilon, z = 200, 0.7, 61.3
    ci = tulap_interval(z, n, epsilon, 0.9)
    # the one-sided p-values at the ends, from the independent CDF above
    rate = tulap_rate(epsilon)
    pmf_low = stats.binom.pmf(np.arange(n + 1), n, ci.low)
    pmf_high = stats.binom.pmf(np.arange(n + 1), n, ci.high)
    p_greater = sum(p * (1 - _tulap_cdf(z - x, rate)) for x, p in enumerate(pmf_low))
    p_less = sum(p * _tulap_cdf(z - x, rate) for x, p in enumerate(pmf_high))
    assert (p_greater, p_less) == (pytest.approx(0.05, rel=1e-8), pytest.approx(0.05, rel=1e-8))


@pytest.mark.parametrize("z, n, epsilon", [(61.3, 200, 0.7), (3.5e3, 10_000, 0.05)])
def test_tulap_interval_inverts_the_estimators_one_sided_tests(z, n, epsilon):
    # the ends are where DPBinomialTest's own one-sided p-values equal α/2
    ci = tulap_interval(z, n, epsilon, 0.95)
    rate = tulap_rate(epsilon)
    assert math.exp(binomial_log_pvalue(z, n, ci.low, rate, "greater")) == pytest.approx(
        0.025, rel=1e-9)
    assert math.exp(binomial_log_pvalue(z, n, ci.high, rate, "less")) == pytest.approx(
        0.025, rel=1e-9)


def test_tulap_interval_width_is_within_1_2_clopper_pearson_at_n_1000_eps_1():
    # typical releases (z = the expected count) and one fixed-seed fit per proportion
    n, rng = 1000, np.random.default_rng(3)
    for p in (0.5, 0.2, 0.05):
        for z in (n * p, None):
            if z is None:
                X = rng.binomial(1, p, size=(n, 1))
                result = DPBinomialTest(epsilon=1.0, random_state=rng).fit(X).result_
                z, ci = result.statistic, result.confidence_interval()
            else:
                ci = tulap_interval(z, n, 1.0)
            x = min(max(round(z), 0), n)
            cp = stats.beta.ppf(0.975, x + 1, n - x) - stats.beta.ppf(0.025, x, n - x + 1)
            assert ci.width <= 1.2 * cp


def test_binomial_result_interval_and_noise_accuracy():
    X = np.random.default_rng(0).binomial(1, 0.4, size=(300, 1))
    result = DPBinomialTest(epsilon=0.5, random_state=1).fit(X).result_
    assert isinstance(result, BinomialTestResult)
    ci = result.confidence_interval(0.9)
    assert tuple(ci) == tuple(tulap_interval(result.statistic, 300, 0.5, 0.9))
    assert ci.parameter == "proportion" and ci.covers == "sampling and noise"
    assert result.estimate == result.statistic / 300
    b = math.exp(-tulap_rate(0.5))
    assert result.estimate_noise_sd == pytest.approx(
        math.sqrt(2 * b / (1 - b) ** 2 + 1 / 12) / 300, rel=1e-12)
    # the noise-only spread is far narrower than the interval: not a CI
    assert 4 * result.estimate_noise_sd < ci.width
    assert pickle.loads(pickle.dumps(result)).confidence_interval(0.9) == ci


# --------------------------------------------------------------------------------------
# Bounded mean: Monte Carlo coverage (vectorised over datasets) on laws at the bounds.
# --------------------------------------------------------------------------------------

def _law(name, a, b, mean):
    """Samplers of laws on [a, b] with the given mean (two-point at the bounds: the
    worst case of the chord side; a point mass: the noise-dominated case)."""
    if name == "two-point":
        q = (mean - a) / (b - a)
        return lambda rng, size: np.where(rng.random(size) < q, b, a)
    if name == "point":
        return lambda rng, size: np.full(size, float(mean))
    if name == "beta":  # skewed, mean as asked
        k = 0.3
        q = (mean - a) / (b - a)
        return lambda rng, size: a + (b - a) * rng.beta(k * q / (1 - q), k, size)
    raise ValueError(name)


def mean_coverage(n, bounds, mu0, mean, law, alternative, epsilon, fraction, reps, seed,
                  level=0.95):
    """Fraction of ``reps`` one-sample releases whose interval covers ``mean``."""
    a, b = bounds
    lo, hi = a - mu0, b - mu0
    plan = bet_plan(lo, hi, fraction, epsilon, alternative)
    rng = np.random.default_rng(seed)
    y = _law(law, a, b, mean)(rng, (reps, n)) - mu0
    t = wealth_statistic(y, plan, alternative)
    release = t + discrete_laplace(rng, plan.rate, size=reps)
    d_low, d_high = mean_interval_ends(
        release, n_terms=n, lo=lo, hi=hi, bet=plan.bet, grid=plan.grid, rate=plan.rate,
        alternative=alternative, level=level)
    d = mean - mu0
    return float(np.mean((d_low <= d) & (d <= d_high)))


def _tolerance(level, reps):
    return level - 2 * math.sqrt(level * (1 - level) / reps)


MEAN_CASES = [
    (20, (0.0, 1.0), 0.5, 0.9, "two-point", "greater", 1.0, 0.5),
    (20, (0.0, 1.0), 0.5, 0.1, "two-point", "less", 1.0, 0.5),
    (40, (-3.0, 3.0), 0.0, 0.0, "point", "two-sided", 0.3, 0.5),
]


@pytest.mark.parametrize("case", MEAN_CASES)
def test_bounded_mean_interval_covers(case):
    n, bounds, mu0, mean, law, alt, eps, frac = case
    reps = 1500
    cov = mean_coverage(n, bounds, mu0, mean, law, alt, eps, frac, reps, seed=7)
    assert cov >= _tolerance(0.95, reps)


def test_the_chord_bound_holds_for_random_laws_on_the_bounds():
    # E[(1 + λY)^{−κ}] <= chord at E[Y], exactly, for discrete laws on [lo, hi]
    rng = np.random.default_rng(0)
    lo, hi = -1.3, 2.2
    for lam in (0.44, -0.3):
        for kappa in (1 / 16, 0.5, 1.0, 4.0):
            f_lo, f_hi = (1 + lam * lo) ** -kappa, (1 + lam * hi) ** -kappa
            for _ in range(50):
                support = rng.uniform(lo, hi, size=6)
                weights = rng.dirichlet(np.ones(6))
                mean = float(weights @ support)
                chord = ((hi - mean) * f_lo + (mean - lo) * f_hi) / (hi - lo)
                assert float(weights @ (1 + lam * support) ** -kappa) <= chord + 1e-15
                assert interval_module._chord_inverse(lam, lo, hi, kappa, chord) == (
                    pytest.approx(mean, abs=1e-9))


def test_chord_exponent_is_a_public_power_of_two():
    kappas = {interval_module.chord_exponent(n, lam, -3.0, 3.0, 0.025)
              for n in (5, 100, 10_000) for lam in (0.01, 0.15, 0.33)}
    assert kappas <= set(interval_module._KAPPAS) and len(kappas) >= 3
    # more rows: a smaller exponent (the Markov term falls as 1/(κn))
    assert interval_module.chord_exponent(10_000, 0.15, -3, 3, 0.025) < (
        interval_module.chord_exponent(100, 0.15, -3, 3, 0.025))


def _noise_ignored(grid, rate, alpha, log_cap=40.0):
    """The mutant's threshold: Markov alone, as if the release had no noise."""
    return math.ceil(math.log(1 / alpha) / grid)


def test_the_mean_coverage_check_catches_a_noise_ignoring_interval(monkeypatch):
    case = (40, (-3.0, 3.0), 0.0, 0.0, "point", "greater", 0.3, 0.5)
    reps = 1500
    monkeypatch.setattr(interval_module, "rejection_threshold", _noise_ignored)
    cov = mean_coverage(*case, reps=reps, seed=7)
    assert cov < _tolerance(0.95, reps) - 0.1


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_bounded_mean_result_interval_matches_the_release(alternative):
    rng = np.random.default_rng(0)
    X = np.clip(rng.normal(0.3, 1.0, size=(200, 1)), -3, 3)
    result = DPBoundedMeanTest(bounds=(-3, 3), null_mean=0.5, alternative=alternative,
                               bet=0.4, random_state=1).fit(X).result_
    assert result.design == "one-sample"
    plan = bet_plan(-3.5, 2.5, 0.4, 1.0, alternative)
    d_low, d_high = mean_interval_ends(
        round(result.statistic / result.grid), n_terms=200, lo=-3.5, hi=2.5, bet=plan.bet,
        grid=plan.grid, rate=plan.rate, alternative=alternative, level=0.9)
    ci = result.confidence_interval(0.9)
    assert (ci.low, ci.high) == (pytest.approx(0.5 + float(d_low), abs=1e-12),
                                 pytest.approx(0.5 + float(d_high), abs=1e-12))
    assert -3 <= ci.low <= ci.high <= 3 and ci.parameter == "mean"
    b = math.exp(-plan.rate)
    assert result.statistic_noise_sd == pytest.approx(
        plan.grid * math.sqrt(2 * b) / (1 - b), rel=1e-12)


def test_bounded_mean_interval_designs():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=(120, 1))
    pairs = DPBoundedMeanTest(bounds=(0, 1), null_mean=0.0, bet=0.5,
                              random_state=0).fit(x, rng.uniform(0, 1, 120)).result_
    labels = np.repeat([0, 1], 60)
    groups = DPBoundedMeanTest(bounds=(0, 1), null_mean=None, bet=0.5,
                               random_state=0).fit(x, labels).result_
    assert (pairs.design, groups.design) == ("paired", "two-sample")
    for result, name in ((pairs, "mean of x - y"), (groups, "difference of group means")):
        ci = result.confidence_interval()
        assert ci.parameter == name and -1 <= ci.low <= ci.high <= 1


# --------------------------------------------------------------------------------------
# Slow: coverage on >= 50 configurations each, with the mutants failing the same checks.
# --------------------------------------------------------------------------------------

PROPORTION_GRID = [
    (n, theta, eps)
    for n in (3, 25, 150)
    for theta in (0.01, 0.2, 0.5, 0.97)
    for eps in (0.1, 1.0, 4.0)
] + [(1000, 0.5, 1.0), (1000, 0.02, 1.0), (60, 1e-4, 0.5), (60, 0.9999, 0.5),
     (8, 0.5, 0.05), (400, 0.3, 0.2), (1, 0.3, 1.0), (1, 0.5, 0.1), (2, 0.7, 2.0),
     (10, 0.5, 10.0), (50, 0.05, 0.5), (3000, 0.1, 0.3), (100, 0.999, 1.0),
     (500, 0.5, 0.02)]


@pytest.mark.slow
def test_tulap_interval_exact_coverage_grid():
    assert len(PROPORTION_GRID) >= 50
    for n, theta, eps in PROPORTION_GRID:
        assert _coverage_of_tulap(n, theta, eps) == pytest.approx(0.95, abs=1e-6), (
            n, theta, eps)


@pytest.mark.slow
def test_the_proportion_grid_fails_the_noise_ignoring_mutant():
    failures = sum(
        exact_coverage(_clopper_pearson_on_noisy_count(n), n, theta, tulap_rate(eps))
        < 0.95 - 1e-6 for n, theta, eps in PROPORTION_GRID)
    assert failures >= 25


MEAN_GRID = [
    (n, bounds, mu0, mean, law, alt, eps, 0.5)
    for n in (5, 60, 400)
    for (bounds, mu0, mean, law) in (
        ((0.0, 1.0), 0.5, 0.95, "two-point"),
        ((0.0, 1.0), 0.3, 0.05, "two-point"),
        ((-3.0, 3.0), 0.0, 1.0, "beta"),
        ((-1.0, 1.0), 0.2, -0.2, "point"),
    )
    for alt in ("greater", "less", "two-sided")
    for eps in (0.2, 3.0)
]


@pytest.mark.slow
def test_bounded_mean_interval_coverage_grid():
    reps = 2000
    assert len(MEAN_GRID) >= 50
    low = [(case, cov) for case, cov in (
        (case, mean_coverage(*case, reps=reps, seed=11 + i))
        for i, case in enumerate(MEAN_GRID)) if cov < _tolerance(0.95, reps)]
    assert not low


@pytest.mark.slow
def test_the_mean_grid_fails_the_noise_ignoring_mutant(monkeypatch):
    reps = 2000
    monkeypatch.setattr(interval_module, "rejection_threshold", _noise_ignored)
    failures = sum(mean_coverage(*case, reps=reps, seed=11 + i) < _tolerance(0.95, reps)
                   for i, case in enumerate(MEAN_GRID))
    assert failures >= 10


@pytest.mark.slow
@pytest.mark.parametrize("design", ["paired", "two-sample"])
def test_bounded_mean_interval_coverage_through_fits(design):
    # the pairs and groups paths end to end (estimator fits), two-point laws at the bounds
    rng = np.random.default_rng(5)
    reps, n, covered = 400, 40, 0
    for _ in range(reps):
        x = np.where(rng.random((n, 1)) < 0.8, 1.0, 0.0)
        if design == "paired":
            y, truth = np.where(rng.random(n) < 0.3, 1.0, 0.0), 0.8 - 0.3
            est = DPBoundedMeanTest(bounds=(0, 1), null_mean=0.0, alternative="greater",
                                    bet=0.5, epsilon=0.5, random_state=rng)
        else:
            x[n // 2:] = np.where(rng.random((n - n // 2, 1)) < 0.1, 1.0, 0.0)
            y, truth = np.repeat([0, 1], [n // 2, n - n // 2]), 0.8 - 0.1
            est = DPBoundedMeanTest(bounds=(0, 1), null_mean=None, alternative="less",
                                    bet=0.5, epsilon=0.5, random_state=rng)
        ci = est.fit(x, y).result_.confidence_interval()
        covered += ci.low <= truth <= ci.high
    assert covered / reps >= _tolerance(0.95, reps)
