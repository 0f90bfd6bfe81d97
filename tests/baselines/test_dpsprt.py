"""DP-SPRT and SPRT baselines: boundaries, sensitivity, validation, error rates,
exact privacy of the OutsideInterval mechanism (with a halved-noise mutant),
and agreement with the authors' library ``dpsprt``."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from skdptest.baselines import DPSPRT, SPRT, dpsprt_boundaries
from skdptest.baselines import _dpsprt as dpsprt_module

BERN = (stats.bernoulli(0.3), stats.bernoulli(0.7))
LOGIT_GAP = math.log(0.7 / 0.3) - math.log(0.3 / 0.7)  # logit 0.7 - logit 0.3


def _upper_binom(n, p, level=1e-3):
    """Largest count compatible with a rate <= p (one-sided binomial test)."""
    return int(stats.binom.ppf(1 - level, n, p))


# --------------------------------------------------------------------------- boundaries
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_boundaries_match_the_documented_formula(eps):
    alpha, beta, delta = 0.1, 0.025, 1.7
    gamma = max(0.5, 1 - 1 / eps)
    zeta = 8.049572  # zeta(1.134), as documented
    n = np.array([1, 10, 1000])
    lower, upper = dpsprt_boundaries(n, alpha, beta, eps, delta)
    expect_u = np.log(1 / (gamma * alpha)) + 6 * delta * np.log(
        max(2, eps) * n**1.134 * zeta / alpha) / eps
    expect_l = np.log(gamma * beta) - 6 * delta * np.log(
        max(2, eps) * n**1.134 * zeta / beta) / eps
    np.testing.assert_allclose(upper, expect_u, rtol=1e-7)
    np.testing.assert_allclose(lower, expect_l, rtol=1e-7)


def test_boundaries_hand_value():
    # eps = 1, alpha = 0.1, Delta = 1, n = 1: log(20) + 6 log(2 * 8.049572 / 0.1)
    _, upper = dpsprt_boundaries(1, 0.1, 0.1, 1.0, 1.0)
    assert upper == pytest.approx(2.995732 + 6 * 5.081351, abs=1e-5)


def test_sensitivity_and_noise_scales_bernoulli():
    test = DPSPRT(*BERN, epsilon=0.5)
    test.boundaries(1)
    assert test.sensitivity_ == pytest.approx(LOGIT_GAP, rel=1e-12)
    assert test.threshold_noise_scale_ == pytest.approx(2 * LOGIT_GAP / 0.5)
    assert test.query_noise_scale_ == pytest.approx(4 * LOGIT_GAP / 0.5)


def test_sensitivity_uses_actual_llr_range_of_a_discrete_law():
    P = stats.rv_discrete(values=([0, 1, 2], [0.2, 0.5, 0.3]))()
    Q = stats.rv_discrete(values=([0, 1, 2], [0.3, 0.4, 0.3]))()
    test = DPSPRT(P, Q)
    test.boundaries(1)
    L = np.log(np.array([0.3, 0.4, 0.3]) / np.array([0.2, 0.5, 0.3]))
    assert test.sensitivity_ == pytest.approx(L.max() - L.min())


def test_infinite_discrete_support_is_refused_without_a_clip():
    # Poisson's LLR x log 2 - 1 is unbounded; a truncated support must not hide it
    P, Q = stats.poisson(1.0), stats.poisson(2.0)
    with pytest.raises(ValueError, match="unbounded"):
        DPSPRT(P, Q).run(np.array([0, 1, 2]))
    test = DPSPRT(P, Q, llr_clip=(-1.0, 2.0))
    test.boundaries(1)
    assert test.sensitivity_ == pytest.approx(3.0)


def test_gaussian_is_refused_without_a_clip_and_accepted_with_one():
    P, Q = stats.norm(0, 1), stats.norm(0.5, 1)
    x = np.random.default_rng(0).normal(0.5, 1, size=(50, 1))
    with pytest.raises(ValueError, match="unbounded.*llr_clip"):
        DPSPRT(P, Q).run(x)
    test = DPSPRT(P, Q, llr_clip=(-1.0, 1.0), random_state=0)
    out = test.run(x)
    assert test.sensitivity_ == 2.0
    assert out.decision in ("reject", "accept", "continue")
    assert 1 <= out.n_samples_used <= 50


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"epsilon": 0.0}, ValueError, r"epsilon must be a real number in \(0, inf\)"),
        ({"epsilon": "1"}, TypeError, "epsilon must be a real number"),
        ({"alpha": 1.0}, ValueError, r"alpha must be a real number in \(0, 1\); got 1\.0"),
        ({"beta": 0.0}, ValueError, r"beta must be a real number in \(0, 1\); got 0\.0"),
        ({"llr_clip": (1.0, -1.0)}, ValueError, "low < high"),
        ({"llr_clip": 3.0}, TypeError, "llr_clip must be None or a pair"),
        ({"llr_clip": (0.0, np.inf)}, ValueError,
         r"llr_clip\[1\] must be a real number; got inf"),
    ],
)
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DPSPRT(*BERN, **kwargs).run(np.ones(10))


def test_bad_laws():
    with pytest.raises(TypeError, match="null must be a frozen scipy.stats"):
        DPSPRT(0.3, BERN[1]).run(np.ones(10))
    with pytest.raises(ValueError, match="constant over the null's support"):
        DPSPRT(stats.bernoulli(0.3), stats.bernoulli(0.3)).run(np.ones(10))


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([0, 1, 2]), "outside the support"),
        (np.array([0, 1, np.nan]), "NaN or infinity"),
        (np.zeros((0, 1)), "empty"),
        (np.zeros((3, 2)), "2 feature"),
        (np.zeros((2, 3, 1, 1)), "must have shape"),
        (np.array(["a", "b"]), "numeric"),
    ],
)
def test_bad_data(X, match):
    with pytest.raises(ValueError, match=match):
        DPSPRT(*BERN).run(X)


def test_bad_simulate_arguments():
    test = DPSPRT(*BERN)
    with pytest.raises(ValueError, match="under must be 'P' or 'Q'"):
        test.simulate(10, "R", 100)
    with pytest.raises(ValueError, match=r"n_runs must be an int in \[1, inf\); got 0"):
        test.simulate(0, "P", 100)
    with pytest.raises(TypeError, match=r"max_samples must be an int in \[1, inf\); got 10\.5"):
        test.simulate(10, "P", 10.5)
    with pytest.raises(ValueError, match="must have shape"):
        test.run_many(np.ones(5))


# --------------------------------------------------------------------------- behaviour
def test_run_fit_and_run_many_agree_and_stop_early():
    x = np.random.default_rng(1).binomial(1, 0.7, size=3000)
    test = DPSPRT(*BERN, epsilon=1.0, alpha=0.1, beta=0.1, random_state=3)
    one = test.run(x)
    assert test.fit(x).result_ == one
    many = test.run_many(x[None, :])
    assert (many.decision[0], many.n_samples_used[0]) == (one.decision, one.n_samples_used)
    assert one.decision == "reject" and one.reject
    assert one.n_samples_used < 3000
    assert (one.epsilon, one.delta, one.method) == (1.0, 0.0, "DPSPRT")
    # rows after the stopping time are not read: changing them changes nothing
    y = x.copy()
    y[one.n_samples_used:] = 0
    assert test.run(y) == one


def test_a_short_stream_continues():
    out = DPSPRT(*BERN, random_state=0).run(np.array([1, 0, 1]))
    assert out.decision == "continue" and out.n_samples_used == 3


def test_sprt_is_wald_on_a_known_path():
    # L(1) = log(7/3) = 0.8473; log(1/0.05) = 2.9957: four ones cross at n = 4
    sprt = SPRT(*BERN, alpha=0.05, beta=0.05)
    out = sprt.run(np.array([1, 1, 1, 1, 0, 0]))
    assert (out.decision, out.n_samples_used) == ("reject", 4)
    out = sprt.run(np.array([0, 0, 0, 0, 1]))
    assert (out.decision, out.n_samples_used) == ("accept", 4)
    assert out.epsilon == math.inf
    assert sprt.boundaries() == pytest.approx((math.log(0.05), math.log(20)))


@pytest.mark.parametrize("cls, kwargs, n_runs", [
    # ε = 1 runs ~575 rows per stream: 500 runs (allowed 128 errors, 26 %) still fail an
    # error rate of 0.3 with probability 0.98; it makes no error in 2000 runs
    (DPSPRT, {"epsilon": 1.0}, 500),
    # slow: the same DP-SPRT code path as ε = 1 above; Wald's SPRT's rejections under P
    # (4000 runs) are bounded by alpha in test_sprt_errors_are_close_to_their_bound
    pytest.param(DPSPRT, {"epsilon": 8.0}, 2000, marks=pytest.mark.slow),
    pytest.param(SPRT, {}, 4000, marks=pytest.mark.slow),
])
def test_error_rates_are_below_the_targets(cls, kwargs, n_runs):
    # the bound must hold at every level; alpha = beta = 0.2 makes errors visible
    alpha = beta = 0.2
    test = cls(stats.bernoulli(0.4), stats.bernoulli(0.6), alpha=alpha, beta=beta,
               random_state=11, **kwargs)
    under_p = test.simulate(n_runs, "P", 20000, random_state=1)
    under_q = test.simulate(n_runs, "Q", 20000, random_state=2)
    assert (under_p.decision == "continue").sum() == 0
    assert (under_q.decision == "continue").sum() == 0
    assert (under_p.decision == "reject").sum() <= _upper_binom(n_runs, alpha)
    assert (under_q.decision == "accept").sum() <= _upper_binom(n_runs, beta)


def test_sprt_errors_are_close_to_their_bound():
    # Wald's test nearly spends its level: the binomial check above has teeth.
    test = SPRT(stats.bernoulli(0.4), stats.bernoulli(0.6), alpha=0.2, beta=0.2)
    rate = np.mean(test.simulate(4000, "P", 20000, random_state=1).decision == "reject")
    assert 0.10 < rate <= 0.2


# --------------------------------------------------------------------------- privacy
# A three-point law whose per-row LLR is exactly -1, 0, +1 (Delta = 2), and a
# probe with small public boundaries (-6, 2): privacy holds for any public
# boundaries, and small ones make stopping likely, so that the check is sharp.
_A = 0.3 / math.e
P3 = stats.rv_discrete(values=([0, 1, 2], [0.3, 1 - 0.3 - _A, _A]))()
Q3 = stats.rv_discrete(values=([0, 1, 2], [_A, 1 - 0.3 - _A, 0.3]))()
T, LOW, UP = 5, -6.0, 2.0
STREAMS = list(itertools.product(range(3), repeat=T))


class _Probe(DPSPRT):
    def _boundaries(self, t, sensitivity):
        return np.full(t.shape, LOW), np.full(t.shape, UP)


def _lap_cdf(x, b):
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b),
                    1 - 0.5 * np.exp(-np.maximum(x, 0) / b))


def _output_laws(S, b_z, b_y, order=40):
    """Exact law of OutsideInterval's output on query paths S (one per row).

    Columns: probability of (stop at t, reject) and (stop at t, accept) for
    t = 1..T, then of "continue". Given the threshold noise Z = z the steps are
    independent; the integral over z uses Gauss-Legendre on pieces between the
    kinks of the integrand (z = 0, UP - S_t, LOW - S_t, (LOW - UP)/2).
    """
    S = np.atleast_2d(np.asarray(S, float))
    kinks = np.concatenate([[0.0, (LOW - UP) / 2], (UP - S).ravel(), (LOW - S).ravel()])
    lo, hi = -60 * b_z, 60 * b_z
    pts = np.unique(np.clip(np.concatenate([[lo, hi], kinks]), lo, hi))
    x, w = np.polynomial.legendre.leggauss(order)
    a, b = pts[:-1, None], pts[1:, None]
    z = ((a + b) / 2 + (b - a) / 2 * x).ravel()
    wz = ((b - a) / 2 * w).ravel() * np.exp(-np.abs(z) / b_z) / (2 * b_z)
    alive, cols = np.ones((S.shape[0], z.size)), []
    for t in range(S.shape[1]):
        St = S[:, t, None]
        up = 1 - _lap_cdf(UP + z - St, b_y)
        down = _lap_cdf(np.minimum(LOW - z, UP + z) - St, b_y)
        cols += [(alive * up) @ wz, (alive * down) @ wz]
        alive = alive * (1 - up - down)
    cols.append(alive @ wz)
    return np.column_stack(cols)


def _paths(streams):
    return np.cumsum(np.array([-1.0, 0.0, 1.0])[np.asarray(streams)], axis=-1)


def _worst_privacy_loss(b_z, b_y):
    laws = dict(zip(STREAMS, _output_laws(_paths(STREAMS), b_z, b_y), strict=True))
    worst, arg = 0.0, None
    for rows, p in laws.items():
        for i, v in itertools.product(range(T), range(3)):
            other = rows[:i] + (v,) + rows[i + 1:]
            loss = np.max(np.abs(np.log(p / laws[other])))
            if loss > worst:
                worst, arg = loss, (rows, other)
    return worst, arg


def _empirical(test, rows, n_runs):
    out = test.run_many(np.tile(np.asarray(rows, float), (n_runs, 1)))
    counts = np.zeros(2 * T + 1)
    stop = out.decision != "continue"
    idx = np.where(out.decision == "reject", 0, 1) + 2 * (out.n_samples_used - 1)
    np.add.at(counts, idx[stop], 1)
    counts[-1] = (~stop).sum()
    return counts


def _chi2_pvalue(counts, probs):
    """Pearson chi-square goodness of fit (cells with < 5 expected pooled)."""
    n = counts.sum()
    keep = probs * n >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(probs[keep] * n, probs[~keep].sum() * n)
    if expected[-1] < 5:
        observed, expected = observed[:-1], expected[:-1]
    stat = np.sum((observed - expected) ** 2 / expected)
    return stats.chi2.sf(stat, df=observed.size - 1)


_LAW_STREAMS = [(2, 2, 2, 2, 0), (0, 2, 2, 2, 0), (1, 1, 0, 2, 1)]


def _probe_laws():
    probe = _Probe(P3, Q3, epsilon=1.0, random_state=5)
    probe.boundaries(1)
    assert probe.sensitivity_ == pytest.approx(2.0)
    b_z, b_y = probe.threshold_noise_scale_, probe.query_noise_scale_
    return probe, _output_laws(_paths(_LAW_STREAMS), b_z, b_y)


def test_exact_law_sums_to_one():
    _, laws = _probe_laws()
    np.testing.assert_allclose(laws.sum(axis=1), 1.0, atol=1e-12)


# Slow (3 x 100 000 runs): by default, test_halved_noise_mutant_fails_the_privacy_check
# checks that run_many follows _output_laws (100 000 runs, the mutant's scales) and not the
# law of other scales.
@pytest.mark.slow
def test_exact_law_matches_the_shipped_mechanism():
    probe, laws = _probe_laws()
    for rows, law in zip(_LAW_STREAMS, laws, strict=True):
        assert _chi2_pvalue(_empirical(probe, rows, 100_000), law) > 1e-4


def test_outside_interval_is_epsilon_dp_exactly():
    eps = 1.0
    probe = _Probe(P3, Q3, epsilon=eps)
    probe.boundaries(1)
    worst, _ = _worst_privacy_loss(probe.threshold_noise_scale_, probe.query_noise_scale_)
    assert worst <= eps
    assert worst > 0.45 * eps  # the check is not vacuous: the loss is of order eps


def test_halved_noise_mutant_fails_the_privacy_check(monkeypatch):
    eps = 1.0
    nominal = dpsprt_module.noise_scales(2.0, eps)
    monkeypatch.setattr(dpsprt_module, "noise_scales",
                        lambda s, e: (1.0 * s / e, 2.0 * s / e))
    mutant = _Probe(P3, Q3, epsilon=eps, random_state=7)
    mutant.boundaries(1)
    noise = (mutant.threshold_noise_scale_, mutant.query_noise_scale_)
    worst, (rows, other) = _worst_privacy_loss(*noise)
    assert worst > 1.25 * eps
    # the mutant really behaves as the halved-noise law predicts (and not as the
    # nominal one), so the exact check above is about the code that runs
    counts = _empirical(mutant, rows, 100_000)
    law_mutant, law_nominal = _output_laws(_paths([rows]), *noise)[0], _output_laws(
        _paths([rows]), *nominal)[0]
    assert _chi2_pvalue(counts, law_mutant) > 1e-4
    assert _chi2_pvalue(counts, law_nominal) < 1e-8


# --------------------------------------------------------------------------- dpsprt
def test_boundaries_agree_with_dpsprt_mean_scale():
    algorithms = pytest.importorskip("dpsprt.core.algorithms")
    mu0, mu1, alpha, beta, eps = 0.3, 0.7, 0.1, 0.05, 1.0
    data = np.zeros(50, dtype=int)
    _, _, info = algorithms.dp_sprt_laplace(data, mu0, mu1, alpha, beta, eps, random_seed=0)
    n = np.arange(1, 51)
    kl01 = stats.entropy([mu0, 1 - mu0], [mu1, 1 - mu1])
    kl10 = stats.entropy([mu1, 1 - mu1], [mu0, 1 - mu0])
    # condition on the LLR scale: multiply the mean-scale inequalities by n Delta
    upper = n * LOGIT_GAP * (info["threshold_term_1"] + info["privacy_term_1"]) + n * kl10
    lower = n * LOGIT_GAP * (info["threshold_term_0"] - info["privacy_term_0"]) - n * kl01
    ours = dpsprt_boundaries(n, alpha, beta, eps, LOGIT_GAP)
    np.testing.assert_allclose(ours[1], upper, rtol=1e-6)
    np.testing.assert_allclose(ours[0], lower, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("under, mu", [("Q", 0.7), ("P", 0.3)])
def test_stopping_times_agree_with_dpsprt(under, mu):
    algorithms = pytest.importorskip("dpsprt.core.algorithms")
    n_runs = 1500
    ours = DPSPRT(*BERN, epsilon=1.0, alpha=0.1, beta=0.1, random_state=21).simulate(
        n_runs, under, 5000, random_state=22)
    rng = np.random.default_rng(23)
    theirs = np.array([
        algorithms.dp_sprt_laplace(rng.binomial(1, mu, size=2000), 0.3, 0.7, 0.1, 0.1, 1.0,
                                   random_seed=i)[1]
        for i in range(n_runs)
    ])
    # the README reports a mean of about 292 (mu0 = 0.3, mu1 = 0.7, eps = 1)
    se = math.sqrt(ours.n_samples_used.var() / n_runs + theirs.var() / n_runs)
    assert abs(ours.n_samples_used.mean() - theirs.mean()) < 4 * se
    assert abs(ours.n_samples_used.mean() - 292) < 4 * ours.n_samples_used.std() / math.sqrt(
        n_runs) + 5
    assert stats.ks_2samp(ours.n_samples_used, theirs).pvalue > 1e-3


def test_sprt_needs_no_bound_on_the_llr():
    # Wald's test is not private: unbounded Gaussian ratios are fine
    test = SPRT(stats.norm(0, 1), stats.norm(0.5, 1), alpha=0.1, beta=0.1)
    under_p = test.simulate(2000, "P", 5000, random_state=4)
    under_q = test.simulate(2000, "Q", 5000, random_state=5)
    assert (under_p.decision == "reject").sum() <= _upper_binom(2000, 0.1)
    assert (under_q.decision == "accept").sum() <= _upper_binom(2000, 0.1)
    assert np.median(under_q.n_samples_used) < 40  # ~ log(10) / KL = 18.4 to first order
