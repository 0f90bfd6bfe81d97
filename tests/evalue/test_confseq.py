"""PrivateConfidenceSequence: exact likelihoods, safe inversion, privacy, coverage.

The contract checks (sklearn, charges, refusals, pickles) come from the CASES entry
in tests/test_common.py.
"""

import math
import pickle

import numpy as np
import pytest
from scipy import special, stats

from skdptest import InvalidParameterError, PrivacyBudget, PrivateConfidenceSequence
from skdptest._noise import discrete_laplace, discrete_laplace_log_pmf, log_geometric_mixture_at
from skdptest._recorder import recording
from skdptest.evalue._confseq import _Plan, batch_ends
from skdptest.evalue._csbounds import (
    REFINE,
    MassCache,
    MixturePrior,
    confidence_bounds,
    leaf_excluded,
    log_f_bounds,
)

ALPHA = 0.05


def _exact_log_f(y, n, p, rate):
    """Independent exact log P(Binom(n, p) + Z = y): every term of the convolution."""
    return float(log_geometric_mixture_at(np.array([float(y)]),
                                          stats.binom.logpmf(np.arange(n + 1), n, p),
                                          rate)[0])


def _plan(eps, horizon=None, level=0.95, bounds=(0.0, 1.0)):
    return _Plan({"bounds": bounds, "epsilon": eps, "confidence_level": level,
                  "horizon": horizon})


def _ends(rate, horizon):
    out = []
    for e in batch_ends(rate):
        if e > horizon:
            return np.diff([0] + out)
        out.append(e)


# ------------------------------------------------------------------ exact likelihood
@pytest.mark.parametrize("y, n, rate", [(3, 10, 1.0), (-5, 10, 0.1), (1000, 3300, 1.0),
                                        (980, 3300, 0.1), (0, 50, 1.0), (60, 50, 0.5)])
def test_likelihood_bounds_bracket_the_exact_convolution(y, n, rate):
    ps = np.array([0.0, 0.01, 0.1, 0.29, 0.3, 0.5, 0.9, 1.0])
    low, high = log_f_bounds(y, n, ps, ps, rate)
    exact = np.array([_exact_log_f(y, n, p, rate) for p in ps])
    assert np.all(low <= exact + 1e-9) and np.all(high >= exact - 1e-9)
    near = np.abs(ps - y / n) < 0.05  # where it matters, the bounds are tight
    assert np.all(high[near] - low[near] < 1e-6)
    # cells: the bounds hold for every p inside
    a, b = np.array([0.28, 0.0, 0.5]), np.array([0.3, 0.2, 1.0])
    low, high = log_f_bounds(y, n, a, b, rate)
    for i in range(a.size):
        inside = np.array([_exact_log_f(y, n, p, rate) for p in np.linspace(a[i], b[i], 41)])
        assert low[i] <= inside.min() + 1e-9 and high[i] >= inside.max() - 1e-9


def _exact_e_process(ys, ns, rate, prior, ps):
    """log M_K(p) on ``ps`` with the exact likelihood and every alternative of the
    uniform mixture (brute force)."""
    def log_l(p):
        return sum(_exact_log_f(y, n, p, rate) for y, n in zip(ys, ns, strict=True))
    log_n = special.logsumexp([log_l(q) for q in prior.q]) - math.log(prior.G + 1)
    return np.array([log_n - log_l(p) for p in ps])


def test_interval_holds_every_mean_the_exact_e_process_keeps_and_little_more():
    rng = np.random.default_rng(3)
    rate, prior = 0.5, MixturePrior(32)
    ns = np.array([10, 15, 21, 32])
    ys = rng.binomial(ns, 0.3) + discrete_laplace(rng, rate, size=ns.size)
    lower, upper = confidence_bounds(ys, ns, rate, ALPHA, prior)
    ps = np.linspace(0, 1, 401)
    kept = ps[_exact_e_process(ys, ns, rate, prior, ps) < math.log(1 / ALPHA)]
    assert lower <= kept.min() and kept.max() <= upper
    step, leaf = ps[1], 1 / (prior.G * REFINE)
    assert kept.min() - lower <= step + 2 * leaf and upper - kept.max() <= step + 2 * leaf


def test_non_private_limit_matches_the_binomial_mixture():
    # rate 30: the noise is below 1e-13 away from 0, so the interval is the uniform
    # mixture CS of the counts alone (computed here by brentq on its closed form)
    rng = np.random.default_rng(0)
    rate, prior = 30.0, MixturePrior(1024)
    ns = np.array([100, 400, 500])
    ys = rng.binomial(ns, 0.3)
    lower, upper = confidence_bounds(ys, ns, rate, ALPHA, prior)
    s, t = int(ys.sum()), int(ns.sum())
    log_n = np.log(np.mean(np.exp(
        [sum(stats.binom.logpmf(y, n, q) for y, n in zip(ys, ns, strict=True))
         for q in prior.q])))

    def g(p):
        return log_n - sum(stats.binom.logpmf(y, n, p)
                           for y, n in zip(ys, ns, strict=True)) - math.log(1 / ALPHA)

    from scipy.optimize import brentq
    lo, hi = brentq(g, 1e-6, s / t), brentq(g, s / t, 1 - 1e-6)
    leaf = 1 / (prior.G * REFINE)
    assert lo - 2 * leaf <= lower <= lo + 1e-12 and hi - 1e-12 <= upper <= hi + 2 * leaf


def test_horizon_mixture_keeps_the_mle_and_covers_its_exact_set():
    rng = np.random.default_rng(5)
    plan = _plan(1.0, horizon=500)
    ns = _ends(plan.rate, 500)
    ys = rng.binomial(ns, 0.4) + discrete_laplace(rng, plan.rate, size=ns.size)
    lower, upper = confidence_bounds(ys, ns, plan.rate, ALPHA, plan.prior)
    mle = ys.sum() / ns.sum()
    assert lower < mle < upper and upper - lower < 0.25


# ------------------------------------------------------------------ privacy
def _count_law(xs):
    """Exact law of the randomly rounded count of rows xs in [0, 1] (Poisson binomial)."""
    law = np.array([1.0])
    for x in xs:
        law = np.convolve(law, [1 - x, x])
    return law


def _release_log_pmf(xs, rate, ys):
    law = _count_law(xs)
    return np.array([special.logsumexp(np.log(np.maximum(law, 1e-300))
                                       + discrete_laplace_log_pmf(y - np.arange(law.size),
                                                                  rate))
                     for y in ys])


def _worst_log_ratio(rate_drawn):
    """Largest log pmf ratio of one batch release between neighbouring batches (one
    row replaced, Bernoulli and bounded rows), noise drawn at ``rate_drawn``."""
    ys = np.arange(-40, 50)
    worst = 0.0
    for xs, xs2 in [([0, 1, 1, 0, 1], [1, 1, 1, 0, 1]),
                    ([0.2, 0.7, 1.0, 0.5], [0.9, 0.7, 1.0, 0.5]),
                    ([0.0] * 6, [1.0] + [0.0] * 5)]:
        d = _release_log_pmf(xs, rate_drawn, ys) - _release_log_pmf(xs2, rate_drawn, ys)
        worst = max(worst, float(np.max(np.abs(d))))
    return worst


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_release_is_eps_dp_by_exact_pmf_ratio_and_the_halved_noise_mutant_fails(eps):
    # the rate the estimator actually draws at, read from its draws
    est = PrivateConfidenceSequence(epsilon=eps, random_state=0)
    with recording() as rec:
        est.fit(np.ones((first := next(batch_ends(_plan(eps).rate)), 1)))
    rates = [1 / d.scale for d in rec.draws if d.kind == "discrete_laplace"]  # scale 1/r
    assert len(rates) == 1 and rates[0] <= eps and est.result_.n_samples == first
    # the random rounding uses one fresh uniform per row: a constant row of value 1/2
    # rounds to a Binomial(n, 1/2) count, not to all-zero or all-one batches
    est = PrivateConfidenceSequence(epsilon=30.0, random_state=1).fit(np.full((2000, 1), 0.5))
    assert est.result_.lower < 0.5 < est.result_.upper < 0.6
    assert _worst_log_ratio(rates[0]) <= eps + 1e-9
    assert _worst_log_ratio(2 * rates[0]) > eps * 1.5  # halved noise: not ε-DP


def test_replacing_one_row_moves_one_batch_count_by_at_most_one():
    # brute force over every position, with the rounding bits coupled (same uniforms)
    rng = np.random.default_rng(1)
    ends = np.array([10, 15, 21, 32])
    x = rng.uniform(size=32)
    u = rng.uniform(size=32)
    base = np.add.reduceat((u < x).astype(int), np.r_[0, ends[:-1]])
    for i in range(32):
        for new in (0.0, 1.0, 0.37):
            x2 = x.copy()
            x2[i] = new
            counts = np.add.reduceat((u < x2).astype(int), np.r_[0, ends[:-1]])
            diff = np.abs(counts - base)
            assert diff.sum() <= 1


# ------------------------------------------------------------------ the stream
def test_stream_releases_at_the_public_batch_ends_and_stands_between():
    rng = np.random.default_rng(0)
    est = PrivateConfidenceSequence(epsilon=1.0, random_state=0)
    est.partial_fit(rng.binomial(1, 0.3, size=(9, 1)))
    assert est.result_.intervals == () and (est.result_.lower, est.result_.upper) == (0, 1)
    est.partial_fit(rng.binomial(1, 0.3, size=(1, 1)))  # the first end: 10 rows
    first = est.result_
    est.partial_fit(rng.binomial(1, 0.3, size=(3, 1)))  # next end at 15: no release
    assert est.result_ == first
    for _ in range(20):
        est.partial_fit(rng.binomial(1, 0.3, size=(50, 1)))
    iv = est.intervals_
    assert iv.shape[1] == 3 and list(iv[:, 0]) == [10, 15, 22, 32, 46, 68, 100, 147, 215,
                                                   316, 464, 681, 1000][:iv.shape[0]]
    assert np.all(np.diff(iv[:, 1]) >= 0) and np.all(np.diff(iv[:, 2]) <= 0)  # intersection
    assert est.result_.n_samples == int(iv[-1, 0])
    lower, upper = est.result_
    assert lower <= 0.3 <= upper and not est.result_.empty


def test_bounded_rows_map_to_the_bounds_and_out_of_bounds_refuses_before_charging():
    rng = np.random.default_rng(2)
    X = 2.0 + 2.0 * rng.beta(2, 5, size=(700, 1))  # mean 2 + 2 * 2/7
    est = PrivateConfidenceSequence(bounds=(2.0, 4.0), epsilon=1.0, random_state=0).fit(X)
    lower, upper = est.result_
    assert 2.0 <= lower < 2 + 4 / 7 < upper <= 4.0
    budget = PrivacyBudget(epsilon=5.0)
    bad = PrivateConfidenceSequence(bounds=(2.0, 4.0), budget=budget)
    with pytest.raises(ValueError, match="outside bounds"):
        bad.fit(X + 1.0)
    assert len(budget) == 0 and not hasattr(bad, "result_")
    with pytest.raises(ValueError, match="exactly one column"):
        PrivateConfidenceSequence(budget=budget).fit(np.zeros((10, 2)))
    with pytest.raises(InvalidParameterError, match="bounds"):
        PrivateConfidenceSequence(bounds=(1.0, 0.0)).fit(np.zeros((10, 1)))
    assert len(budget) == 0


def test_null_mean_rejects_once_outside_and_the_empty_flag():
    est = PrivateConfidenceSequence(epsilon=2.0, null_mean=0.5, random_state=0)
    est.fit(np.zeros((100, 1)))
    assert est.decision() and est.result_.upper < 0.5
    # a stream whose mean jumps: the running intersection empties, flagged, and the
    # latest released interval is reported alone
    est = PrivateConfidenceSequence(epsilon=2.0, random_state=0)
    est.fit(np.r_[np.zeros(100), np.ones(900)].reshape(-1, 1))
    res = est.result_
    assert res.empty and res.lower < res.upper and res.upper == 1.0


def test_pickle_keeps_the_result_but_not_the_stream():
    est = PrivateConfidenceSequence(random_state=0).fit(np.ones((20, 1)))
    copy = pickle.loads(pickle.dumps(est))
    assert copy.result_ == est.result_ and "_stream" not in vars(copy)
    assert "pending" not in repr(vars(copy))


# ------------------------------------------------------------------ coverage
def _misses(p, eps, streams, horizon, seed, mutant=False):
    """Streams whose true mean's leaf is excluded at some release (over-counts the
    misses of the reported interval), noisy counts simulated as the estimator
    releases them (count + exact discrete Laplace noise at the plan's rate), fed to
    the estimator's inversion; ``mutant`` ignores the noise in the inversion."""
    plan = _plan(eps)
    ns = _ends(plan.rate, horizon)
    rng = np.random.default_rng(seed)
    S = rng.binomial(ns, p, size=(streams, ns.size))
    Y = S + discrete_laplace(rng, plan.rate, size=S.shape)
    rate = 30.0 if mutant else plan.rate
    miss = 0
    for i in range(streams):
        cache = MassCache()
        for k in range(1, ns.size + 1):
            if leaf_excluded(Y[i, :k], ns[:k], rate, ALPHA, plan.prior, p, cache):
                miss += 1
                break
    return miss


def _limit(streams):
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / streams)


def test_small_coverage_and_the_noise_ignoring_mutant_fails():
    assert _misses(0.3, 1.0, 40, 200, seed=11) / 40 <= _limit(40)
    assert _misses(0.3, 0.1, 25, 1000, seed=12, mutant=True) / 25 > _limit(25)


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.01, 0.3, 0.5])
@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_time_uniform_coverage_over_ten_thousand_steps(p, eps):
    # 100 streams per setting keeps the slow suite's share under a minute of CPU; the
    # benchmark runs more (benchmarks/results/confidence_sequences.txt)
    streams = 100
    assert _misses(p, eps, streams, 10_000, seed=int(100 * p + 10 * eps)) / streams \
        <= _limit(streams)


@pytest.mark.slow
def test_coverage_mutant_ignoring_the_noise_fails_at_eps_01():
    assert _misses(0.3, 0.1, 40, 10_000, seed=7, mutant=True) / 40 > _limit(40)


@pytest.mark.slow
@pytest.mark.parametrize("law", ["beta", "two-point"])
def test_bounded_laws_end_to_end_through_partial_fit(law):
    rng = np.random.default_rng(4)
    a, b = -1.0, 3.0
    misses, streams = 0, 8
    for i in range(streams):
        if law == "beta":
            x, mu = a + (b - a) * rng.beta(0.5, 2.0, size=3000), a + (b - a) * 0.2
        else:
            x, mu = np.where(rng.random(3000) < 0.7, a, b), a + (b - a) * 0.3
        est = PrivateConfidenceSequence(bounds=(a, b), epsilon=1.0, random_state=i)
        for chunk in np.array_split(x, 7):
            est.partial_fit(chunk.reshape(-1, 1))
        iv = est.intervals_
        misses += bool(est.result_.empty or np.any((iv[:, 1] > mu) | (iv[:, 2] < mu)))
        assert est.result_.n_samples == 2154
    assert misses / streams <= _limit(streams)
