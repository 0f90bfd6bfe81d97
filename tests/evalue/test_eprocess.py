"""PrivateEProcess: anytime validity, stream privacy, chunking, budget and input handling."""

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

import skdptest.evalue._exact as exact_module
import skdptest.evalue._merge as merge_module
from skdptest import (
    BudgetExceededError,
    EProcessResult,
    InvalidParameterError,
    PrivacyBudget,
    PrivateEProcess,
)
from skdptest._noise import quantise_rate
from skdptest.evalue._exact import BinaryExact
from tests.evalue._reference import (
    P0,
    bern_pair,
    binomial_release_pmf,
    geometric_audit_pvalue,
    geometric_difference_pmf,
    log_mgf_bounds,
    tail_cut_search,
)


def _public_plan(proc, n_features=1):
    """The public plan of a stream of ``proc`` (laws, statistics, schedule)."""
    return proc._plan(proc._validate_params(), np.zeros((0, n_features)), None)


def _tolerance(n, level):
    """Largest count of level-α errors compatible with rate <= α (one-sided, 1e-3)."""
    return stats.binom.ppf(1 - 1e-3, n, level)


# ---------------------------------------------------------------- validity
# The Monte Carlo validity checks run in the slow suite (tslr ~1.7 s, exact and optimal
# 6-9 s each): anytime validity is guarded by default by the exact peeking-analyst check
# (test_optional_stopping_by_peeking_analyst_is_valid and its compensator mutants, which
# catch log E + 0.001 per batch where this count catches + 0.6), over the merge code every
# statistic shares; tslr's per-row E_P[E] <= 1 is checked exactly by
# test_evalue.py::test_tslr_is_valid_and_weaker_than_optimal and
# test_normaliser.py::test_oscillating_density_tslr_is_an_e_value_exactly.
@pytest.mark.slow
@pytest.mark.parametrize("statistic", ["exact", "optimal", "tslr"])
def test_anytime_validity_under_null_one_sided(statistic):
    """Streams under P, stopped at the first crossing (a data-dependent time).

    200 streams (tolerance 34 rejections): a release inflated by e^0.6 per batch
    (log E + 0.6) makes 52 of them reject, so the check fails for it (at 400 streams:
    108 against a tolerance of 60; log E + 0.3 passes at either size: 27 and 54)."""
    alpha, n_streams = 0.1, 200
    proc = PrivateEProcess(*bern_pair(0.5), statistic=statistic, alpha=alpha, max_samples=600,
                           random_state=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    rejections = 0
    for _ in range(n_streams):
        proc.fit(rng.binomial(1, 0.3, size=(600, 1)))
        rejections += proc.result_.decision == "reject"
    assert rejections <= _tolerance(n_streams, alpha)


#: The peeking analyst's stream: laws and ε (schedule "auto": batches of 22, 11, 16,
#: 25, ... rows, each with its own bet).
PEEK_LAWS, PEEK_EPS = bern_pair(0.6), 1.0


def _peeking_analyst_releases(monkeypatch, n_batches):
    """The released log e-value of each of the first ``n_batches`` batches of the
    peeking analyst's stream as a function of its count of ones, with the stream's
    noise draws K set to 0.

    For each count k one stream is fed through ``partial_fit`` in chunks of 1 to 29
    rows, each batch holding min(k, n_b) ones in shuffled places; the analyst peeks
    (``test()``) after every chunk and sees the e-process of the last completed batch,
    never anything of a pending one. A last stream of zeros with K = 1 gives the step g
    of one unit of K (the release is g·(M + K) − c). Returns (sizes, releases[k, b],
    rates[b], g[b]): batch sizes, increments of the released path at K = 0, and the
    rate of the discrete Laplace draws and g of each batch."""
    draw, rates = [0], []

    def stub(rng, rate, size=None):
        assert size is None
        rates.append(rate)
        return draw[0]

    monkeypatch.setattr(merge_module, "discrete_laplace", stub)
    kw = dict(epsilon=PEEK_EPS, statistic="optimal", alpha=1e-300, random_state=0)
    sizes = list(itertools.islice(_public_plan(PrivateEProcess(*PEEK_LAWS, **kw)).sizes(),
                                  n_batches))
    ends = np.cumsum(sizes)
    rng = np.random.default_rng(2)
    releases = np.empty((max(sizes) + 2, len(sizes)))
    for k in range(max(sizes) + 2):
        if k == max(sizes) + 1:
            k, draw[0] = 0, 1
        X = np.concatenate([rng.permutation(np.arange(n) < k) for n in sizes])
        X = X.astype(float)[:, None]
        proc = PrivateEProcess(*PEEK_LAWS, **kw)
        fed = 0
        while fed < ends[-1]:
            chunk = X[fed:fed + int(rng.integers(1, 30))]
            proc.partial_fit(chunk)
            fed += chunk.shape[0]
            peek = proc.test()
            done = int(np.searchsorted(ends, fed, side="right"))
            assert list(peek.batch_ends) == list(ends[:done])
            assert peek.e_value == (math.exp(peek.log_e_process[-1]) if done else 1.0)
        releases[k if draw[0] == 0 else -1] = np.diff(
            np.concatenate([[0.0], proc.result_.log_e_process]))
    rates = np.array(rates).reshape(len(releases), len(sizes))
    assert np.all(rates == rates[0])  # the noise law is public: the same for every k
    return np.array(sizes), releases[:-1], rates[0], releases[-1] - releases[0]


def _expected_batch_e_values(monkeypatch, n_batches):
    """E_P[exp(release)] of each batch, exactly: the sum over the batch count
    k ~ Binomial(n_b, P0) of exp(release at K = 0) times E[e^{gK}] for K discrete
    Laplace at the rate the stream draws at (written out, with certified tails).
    Returns (expectations, g)."""
    sizes, at_zero, rates, g = _peeking_analyst_releases(monkeypatch, n_batches)
    expected = np.empty(sizes.size)
    for b, n in enumerate(sizes):
        if not rates[b] > g[b]:  # E[e^{gK}] = inf
            expected[b] = math.inf
            continue
        cut = int(50 / (rates[b] - g[b])) + 1  # certified tail below e^-50
        log_mgf = log_mgf_bounds(rates[b], g[b], cut)[1]
        log_pk = stats.binom.logpmf(np.arange(n + 1), n, P0)
        expected[b] = math.exp(special.logsumexp(log_pk + at_zero[:n + 1, b]) + log_mgf)
    return expected, g


def test_optional_stopping_by_peeking_analyst_is_valid(monkeypatch):
    """An analyst who feeds rows in chunks and peeks after each one, stopping as soon as
    the e-process reaches 1/α, rejects under P with probability at most α: the analyst
    sees only the e-process at completed batch ends, each batch's release depends on its
    own rows and fresh noise only, and E_P[exp(release)] <= 1 for every batch, so the
    e-process is a test supermartingale and Ville's inequality holds at any stopping time.

    The expectation is computed exactly (every count, the noise's moment generating
    function in closed form), at P itself where E* has E_P[E*] = 1: the release then
    loses only its floors to the grid, at most one step g = 2^-11 per batch, so the check
    is tight to 1e-3 and catches any mutant that inflates a batch's e-value by more (the
    compensator mutants below; a Monte Carlo count of crossings at 300 streams missed
    them all, even log E + 1 per batch)."""
    expected, g = _expected_batch_e_values(monkeypatch, 4)
    assert np.all(expected <= 1 + 1e-12)
    assert np.all(expected >= np.exp(-2 * g))


@pytest.mark.parametrize("mutant", ["omitted", "halved", "half the noise", "plus 0.001"])
def test_compensator_mutants_fail_the_exact_peeking_analyst_check(monkeypatch, mutant):
    """Mutants of the released g·J − c (the planner keeps the true c): the compensator
    c = log E[e^{gK}] left out, halved, or computed for half the noise (rate 2r) while
    the draws stay at rate r, or log E + 0.001 per batch. Each makes the exact
    expectation of both batches checked exceed 1 (E_P[exp(release)] = 2.10 and 1.55
    without c, 1.45 and 1.25 with c/2, 1.82 and 1.41 for half the noise, 1.00096 and
    1.00075 for + 0.001; the honest 0.99996 and 0.99975)."""
    real = merge_module.GridNoise.log_mgf.fget
    wrong = {
        "omitted": lambda noise: 0.0,
        "halved": lambda noise: real(noise) / 2,
        "half the noise": lambda noise: float(
            merge_module.discrete_laplace_log_mgf(2 * noise.rate, noise.grid)),
        "plus 0.001": lambda noise: real(noise) - 0.001,
    }[mutant]
    monkeypatch.setattr(merge_module.GridNoise, "value",
                        lambda noise, j: float(j) * noise.grid - wrong(noise))
    expected, _ = _expected_batch_e_values(monkeypatch, 2)
    assert np.all(expected > 1 + 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("statistic", ["exact", "optimal"])
def test_two_sided_error_rates(statistic):
    alpha = beta = 0.05
    n_streams = 300
    proc = PrivateEProcess(*bern_pair(0.6), epsilon=1.0, statistic=statistic, alpha=alpha,
                           beta=beta, max_samples=3000, random_state=np.random.default_rng(3))
    rng = np.random.default_rng(4)
    wrong_p = wrong_q = 0
    for _ in range(n_streams):
        wrong_p += proc.fit(rng.binomial(1, 0.3, size=(3000, 1))).result_.decision == "reject"
        wrong_q += proc.fit(rng.binomial(1, 0.6, size=(3000, 1))).result_.decision == "accept"
    assert wrong_p <= _tolerance(n_streams, alpha)
    assert wrong_q <= _tolerance(n_streams, beta)


def test_stops_early_under_the_alternative():
    proc = PrivateEProcess(*bern_pair(0.7), alpha=0.025, beta=0.025, random_state=0)
    rng = np.random.default_rng(5)
    # 40 streams (was 100; the same median, 24: deciles 11 to 61, none at 110 of 100
    # streams): a process stopping at 110 or later on 80 % of streams still fails with
    # probability 1 - 1e-4 (Binomial(40, 0.2) >= 20)
    used = [proc.fit(rng.binomial(1, 0.7, size=(2000, 1))).result_.n_samples
            for _ in range(40)]
    assert np.median(used) < 110  # the paper reports a median of 62 with DP-SPRT at 110


# ---------------------------------------------------------------- exact post-processing
@pytest.mark.parametrize("n, eps, q", [(1, 1.0, 0.6), (20, 0.5, 0.5), (60, 2.0, 0.7)])
def test_exact_post_processing_is_an_e_value(n, eps, q):
    """E_P[f_Q(Y)/f_P(Y)] = 1 and E_Q[f_P(Y)/f_Q(Y)] = 1, by exact summation over the
    integer releases, with f_P and f_Q computed independently by scipy."""
    model = BinaryExact(1.0, 0.3, q)
    M, tail = tail_cut_search(eps)
    assert tail < 1e-15
    ys = np.arange(-M, n + M + 1)
    f_p, f_q = binomial_release_pmf(n, 0.3, eps, M), binomial_release_pmf(n, q, eps, M)
    assert math.fsum(f_p) == pytest.approx(1.0, abs=1e-12)
    assert np.exp(model.log_density(ys, n, 0.3, eps)) == pytest.approx(f_p, rel=1e-9)
    ell = model.log_lr(ys, n, eps)
    assert math.fsum(f_p * np.exp(ell)) == pytest.approx(1.0, abs=1e-12)
    assert math.fsum(f_q * np.exp(-ell)) == pytest.approx(1.0, abs=1e-12)


def test_exact_log_lr_is_increasing_in_the_release():
    model = BinaryExact(1.0, 0.3, 0.6)
    inside = np.arange(0, 51)
    assert np.all(np.diff(model.log_lr(inside, 50, 1.0)) > 0)
    # beyond the support both laws have the same geometric tail: the ratio is flat
    tails = np.concatenate([np.arange(-20, 1), np.arange(50, 71)])
    assert np.all(np.diff(model.log_lr(tails, 50, 1.0)) > -1e-12)


@pytest.mark.parametrize("y", [0.5, [0.0, 2.25], np.nan, np.inf])
def test_exact_density_refuses_impossible_releases(y):
    with pytest.raises(ValueError, match="y must be integer-valued"):
        BinaryExact(1.0, 0.3, 0.6).log_density(y, 10, 0.3, 1.0)


def test_exact_monte_carlo_validity():
    rng = np.random.default_rng(6)
    model = BinaryExact(1.0, 0.3, 0.5)
    n, eps, reps = 30, 1.0, 20000
    y = rng.binomial(n, 0.3, size=reps) + stats.dlaplace.rvs(eps, size=reps, random_state=rng)
    e = np.exp(model.log_lr(y, n, eps))
    assert e.mean() <= 1 + 4 * e.std(ddof=1) / math.sqrt(reps)


# ---------------------------------------------------------------- privacy
def _increments(proc, X):
    path = np.array(proc.fit(X).result_.log_e_process)
    return np.diff(np.concatenate([[0.0], path]))


@pytest.mark.parametrize("statistic", ["optimal", "tslr"])
def test_neighbouring_streams_change_one_batch_within_epsilon(statistic):
    """Same seed: the increments (batch releases) differ in one batch only, and there by
    at most b·ε, i.e. the exact log pmf ratio r|ΔM| of that release (g(M + K) − c,
    b = g/r) is <= ε."""
    eps = 1.0
    X = np.random.default_rng(7).binomial(1, 0.5, size=(400, 1)).astype(float)
    proc = PrivateEProcess(*bern_pair(0.7), epsilon=eps, statistic=statistic, schedule=[40, 80],
                           alpha=1e-300, random_state=9)
    base = _increments(proc, X)
    plan = _public_plan(proc)
    for i in (0, 39, 40, 150, 359, 399):
        X2 = X.copy()
        X2[i, 0] = 1.0 - X2[i, 0]
        diff = np.abs(_increments(proc, X2) - base)
        if i >= 360:  # an incomplete final batch is not used
            assert np.all(diff == 0)
            continue
        batch = 0 if i < 40 else 1 + (i - 40) // 80
        assert np.count_nonzero(diff > 1e-12) == 1 and diff[batch] > 0
        n_b = 40 if batch == 0 else 80
        b = merge_module.noise_scale(*plan.batch_plan("P", n_b), eps)
        assert diff[batch] / b <= eps + 1e-9


@pytest.mark.parametrize("beta", [pytest.param(None, marks=pytest.mark.slow), 0.05])
def test_gaussian_stream_with_planned_clips_changes_one_batch_within_epsilon(beta):
    """Merged Gaussian batches plan a narrower unmerged clip where it pays (bet 1): an
    extreme replacement moves that batch's release by b·ε_stat up to one grid step and
    the rate's quantisation, never more (both directions in two-sided mode, ε/2 each),
    and no other batch."""
    eps = 1.0
    X = np.random.default_rng(3).normal(0.25, 1, size=(130, 1))
    kw = dict(epsilon=eps, schedule=[10, 40, 80], alpha=1e-300, beta=beta, random_state=5)
    proc = PrivateEProcess(stats.norm(0, 1), stats.norm(0.25, 1), **kw)
    plan = _public_plan(proc)
    eps_stat = eps if beta is None else eps / 2
    plans = {n: plan.batch_plan("P", n) for n in (10, 40, 80)}
    assert plans[10][1] == 1.0  # the unmerged clip is used at small batches
    assert plans[10][0].log_hi - plans[10][0].log_lo < eps_stat
    directions = [("P", "log_e_process")] + ([] if beta is None else
                                             [("Q", "log_e_process_alt")])
    for i, n_b, batch in ((0, 10, 0), (60, 80, 2)):
        fits = []
        for v in (-50.0, 50.0):
            D = X.copy()
            D[i, 0] = v
            fits.append(PrivateEProcess(stats.norm(0, 1), stats.norm(0.25, 1), **kw)
                        .fit(D).result_)
        for against, field in directions:
            incs = [np.diff(np.concatenate([[0.0], getattr(r, field)])) for r in fits]
            diff = np.abs(incs[1] - incs[0])
            assert np.count_nonzero(diff > 1e-12) == 1
            b = merge_module.noise_scale(*plan.batch_plan(against, n_b), eps_stat)
            assert eps_stat * (1 - 2.0**-8) <= diff[batch] / b <= eps_stat * (1 + 1e-9)


def test_halved_noise_fails_the_stream_privacy_check(monkeypatch):
    real = merge_module.quantise_rate  # mutant: the noise rate doubled (half the noise)
    monkeypatch.setattr(merge_module, "quantise_rate", lambda rate: real(2 * rate))
    eps = 1.0
    X = np.random.default_rng(7).binomial(1, 0.5, size=(120, 1)).astype(float)
    proc = PrivateEProcess(*bern_pair(0.7), epsilon=eps, statistic="optimal", schedule=[40],
                           alpha=1e-300, random_state=9)
    base = _increments(proc, X)
    plan = _public_plan(proc)
    X2 = X.copy()
    X2[0, 0] = 1.0 - X2[0, 0]
    diff = np.abs(_increments(proc, X2) - base)[0]
    b = merge_module.noise_scale(*plan.batch_plan("P", 40), eps)
    assert diff / b > 1.5 * eps


#: Rows of the audited exact stream (batches of 4: 300 draws) and the audit's pooled
#: tails beyond +-4 (each of its 10 cells expects >= 12 draws at ε = 0.7). At 300 draws
#: the honest p = 0.99 and the halved-noise mutant's p = 3e-18 (threshold 1e-6); at the
#: former 600 draws (half width 5) 0.80 and 4e-39, for 0.2 s more per test.
AUDIT_ROWS, AUDIT_HALF_WIDTH = 1200, 4


def _exact_noise(monkeypatch, eps, n_rows=AUDIT_ROWS):
    draws = []
    real = BinaryExact.release

    def spy(self, count, epsilon, rng):
        y = real(self, count, epsilon, rng)
        draws.append(y - count)
        return y

    monkeypatch.setattr(BinaryExact, "release", spy)
    X = np.random.default_rng(8).binomial(1, 0.5, size=(n_rows, 1))
    PrivateEProcess(*bern_pair(0.5), epsilon=eps, statistic="exact", schedule=[4],
                    alpha=1e-300, beta=1e-300, random_state=10).fit(X)
    return np.array(draws)


@pytest.mark.parametrize("n, eps", [(1, 1.0), (40, 0.7), (40, 2.0)])
def test_exact_release_law_on_neighbouring_batches_is_epsilon_dp(n, eps):
    """The release is discrete: its exact law on neighbouring batches (counts k and
    k + 1) has log probability ratio at most ε at every y; the maximum is the sampler's
    quantised rate r = quantise_rate(ε) <= ε, attained."""
    model = BinaryExact(1.0, 0.3, 0.6)
    X = np.random.default_rng(12).binomial(1, 0.5, size=(n, 1)).astype(float)
    X[0, 0] = 0.0
    X2 = X.copy()
    X2[0, 0] = 1.0  # replace one row
    k, k2 = model.count(X), model.count(X2)
    assert k2 == k + 1
    ys = np.arange(k - 30, k + 31)
    rate = model.noise_rate(eps)
    assert rate == quantise_rate(eps) and eps - 2.0**-20 < rate <= eps
    ratio = (np.log(geometric_difference_pmf(ys - k, rate))
             - np.log(geometric_difference_pmf(ys - k2, rate)))
    worst = float(np.max(np.abs(ratio)))
    assert worst <= eps + 1e-12
    assert worst == pytest.approx(rate, abs=1e-12)


def test_exact_stream_noise_is_two_sided_geometric_at_rate_epsilon(monkeypatch):
    """The count has replace-one sensitivity 1: two-sided geometric noise at rate ε makes
    each batch ε-DP. A statistical audit of the noise actually added (chi-square)."""
    eps = 0.7
    z = _exact_noise(monkeypatch, eps)  # 300 draws (batches of 4 rows)
    assert z.size >= 270
    assert geometric_audit_pvalue(z, eps, AUDIT_HALF_WIDTH) > 1e-3


def test_exact_stream_halved_noise_fails_the_geometric_audit(monkeypatch):
    real = exact_module.two_sided_geometric
    monkeypatch.setattr(exact_module, "two_sided_geometric",
                        lambda rng, rate: real(rng, 2 * rate))
    z = _exact_noise(monkeypatch, 0.7)
    # 300 draws: p = 3e-18 (600 draws: 4e-39); the honest draws above: p = 0.99
    assert geometric_audit_pvalue(z, 0.7, AUDIT_HALF_WIDTH) < 1e-6


# ---------------------------------------------------------------- streaming API
CHUNK_KWS = [dict(statistic="exact", beta=0.05), dict(statistic="optimal", beta=0.05),
             dict(statistic="tslr"), dict(schedule="paper")]


# One row at a time with the optimal statistic in two-sided mode is slow here: it is
# test_scale_paths.py::test_one_row_at_a_time_is_one_chunk_is_fit's default case laws3
# (Bernoulli, optimal, beta, with mixed chunk sizes too)
@pytest.mark.parametrize("chunk, kw", [
    pytest.param(chunk, kw, id=f"{chunk}-kw{i}",
                 marks=pytest.mark.slow if (chunk, i) == (1, 1) else ())
    for chunk in (1, 7, 100) for i, kw in enumerate(CHUNK_KWS)])
def test_partial_fit_in_chunks_equals_fit(kw, chunk):
    X = np.random.default_rng(11).binomial(1, 0.45, size=(700, 1))
    ref = PrivateEProcess(*bern_pair(0.6), alpha=1e-6, random_state=3, **kw).fit(X).result_
    proc = PrivateEProcess(*bern_pair(0.6), alpha=1e-6, random_state=3, **kw)
    for start in range(0, len(X), chunk):
        proc.partial_fit(X[start:start + chunk])
    assert proc.result_ == ref


def test_budget_charged_once_per_stream():
    budget = PrivacyBudget(2.5)
    proc = PrivateEProcess(*bern_pair(0.6), epsilon=1.0, budget=budget, random_state=0)
    for _ in range(10):
        proc.partial_fit(np.zeros((5, 1)))
    assert len(budget.ledger) == 1 and budget.ledger[0].label == "PrivateEProcess.partial_fit"
    proc.fit(np.zeros((5, 1)))
    assert [e.label for e in budget.ledger][-1] == "PrivateEProcess.fit"
    with pytest.raises(BudgetExceededError, match="asked for epsilon=1"):
        proc.fit(np.zeros((5, 1)))
    assert len(budget.ledger) == 2


def test_rows_after_decision_are_ignored_and_max_samples_caps():
    proc = PrivateEProcess(*bern_pair(0.9), alpha=0.05, random_state=0)
    proc.fit(np.ones((500, 1)))
    r = proc.test()
    assert r.decision == "reject" and r.n_samples < 500
    proc.partial_fit(np.zeros((500, 1)))
    assert proc.test() == r
    capped = PrivateEProcess(*bern_pair(0.6), alpha=1e-9, max_samples=50, random_state=0)
    capped.fit(np.zeros((400, 1)))
    assert capped.test().n_samples == 50 and capped.result_.decision == "continue"
    assert capped.test().batch_ends[-1] == 50


def test_result_exposes_only_private_quantities():
    proc = PrivateEProcess(*bern_pair(0.6), beta=0.1, random_state=0).fit(np.ones((300, 1)))
    r = proc.test()
    assert isinstance(r, EProcessResult)
    assert set(vars(r)) == {"decision", "reject", "e_value", "log_e_process",
                            "log_e_process_alt", "batch_ends", "n_samples", "alpha",
                            "beta", "epsilon", "delta", "method"}
    assert len(r.log_e_process) == len(r.batch_ends) == len(r.log_e_process_alt)
    public = {k for k in vars(proc) if k.endswith("_") and not k.startswith("_")}
    assert public == {"result_", "n_features_in_", "privacy_spent_"}


def test_decision_values_and_score():
    budget = PrivacyBudget(10.0)
    proc = PrivateEProcess(*bern_pair(0.7), alpha=0.05, beta=0.05, budget=budget, random_state=1)
    assert proc.decision(np.ones((300, 1))) is True and proc.result_.decision == "reject"
    assert proc.decision(np.zeros((300, 1))) is False and proc.result_.decision == "accept"
    assert proc.decision(np.ones((2, 1))) is False and proc.result_.decision == "continue"
    s = proc.score(np.ones((300, 1)))
    assert s > 3 and budget.ledger[-1].label == "PrivateEProcess.score"


# Range and type checks of single parameters are derived from the constraint tables in
# tests/test_common.py; these are the structured checks of the e-process.
BAD_PARAMS = [
    (dict(schedule=[3, 0]), "non-empty sequence of positive integers"),
    (dict(schedule=[]), "non-empty sequence of positive integers"),
    (dict(schedule=3), "schedule must be one of"),
    (dict(null=stats.bernoulli(0.3), alternative=None), "given together"),
]


@pytest.mark.parametrize("params, match", BAD_PARAMS)
def test_bad_parameters_rejected_without_charge(params, match):
    budget = PrivacyBudget(10.0)
    kw = dict(zip(("null", "alternative"), bern_pair(0.6), strict=True))
    with pytest.raises(InvalidParameterError, match=match):
        PrivateEProcess(**{**kw, **params}, budget=budget).partial_fit(np.zeros((3, 1)))
    assert budget.ledger == []


@pytest.mark.parametrize("X, match", [
    (np.array([[0.0], [np.nan]]), "NaN"),
    (np.array([[0.0], [3.0]]), "outside the support of the null"),
    (np.zeros((2, 2)), "X has 2 feature"),
])
def test_bad_data_for_a_new_stream_charges_nothing(X, match):
    budget = PrivacyBudget(10.0)
    with pytest.raises(ValueError, match=match):
        PrivateEProcess(*bern_pair(0.6), budget=budget).partial_fit(X)
    assert budget.ledger == []


def test_bad_rows_mid_stream_are_rejected_and_the_stream_goes_on():
    proc = PrivateEProcess(*bern_pair(0.6), alpha=1e-9, schedule=[10], random_state=0)
    proc.partial_fit(np.zeros((15, 1)))
    with pytest.raises(ValueError, match="X has 2 features"):
        proc.partial_fit(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="outside the support"):
        proc.partial_fit(np.array([[0.5]]))
    proc.partial_fit(np.zeros((5, 1)))
    assert proc.test().n_samples == 20


def test_exact_refused_without_exact_model():
    null = stats.multivariate_normal(np.zeros(2), np.eye(2))
    alt = stats.multivariate_normal(np.ones(2), 2 * np.eye(2))
    with pytest.raises(ValueError, match="exact model of the laws"):
        PrivateEProcess(null, alt, statistic="exact").fit(np.zeros((4, 2)))


def test_gaussian_stream_rejects_under_alternative():
    proc = PrivateEProcess(stats.norm(0, 1), stats.norm(0.5, 1), alpha=0.05, beta=0.05,
                           random_state=0)
    X = np.random.default_rng(0).normal(0.5, 1, size=(2000, 1))
    assert proc.decision(X) is True and proc.result_.decision == "reject"

