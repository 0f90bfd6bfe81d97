"""Exact post-processing for general laws: quantised optimal statistic + geometric noise."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import skdptest.evalue._lattice as lattice_module
from skdptest import PrivacyBudget, PrivateEProcess, PrivateEValueTest, expected_log_e_value
from skdptest.evalue._lattice import LatticeExact
from skdptest.evalue._laws import make_laws
from tests.evalue._reference import geometric_pmf_written, law_of_sum, validity_sum


# n = 2 is slow: n = 1 and 3 stay, beside test_float_safe.py's enumeration of the same
# laws at n = 2 (test_lattice_validity_at_the_quantised_rate)
@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.slow), 3])
def test_validity_discrete_by_enumeration(n):
    null, alt = stats.binom(3, 0.3), stats.binom(3, 0.6)
    model = LatticeExact(make_laws(null, alt), 1.0)
    support = np.arange(4)
    g = model.cells(alt.logpmf(support) - null.logpmf(support), n)
    law = np.zeros(n * model.steps(n) + 1)
    for rows in itertools.product(support, repeat=n):  # every dataset of n rows
        law[g[list(rows)].sum()] += np.prod(null.pmf(np.array(rows)))
    total = validity_sum(model, law, n, model.noise_rate(n))
    assert total <= 1.0 + 1e-12
    assert total == pytest.approx(1.0, abs=1e-8)


def test_gaussian_cell_masses_match_independent_normal_cdfs():
    mu = 0.5
    null, alt = stats.norm(0, 1), stats.norm(mu, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    n = 10
    steps, lo, h = model._grid(n)
    shift = -float(model.stat.log_e(np.array([0.0]))[0])
    # L(x) = mu x - mu^2/2: the cell edges in x
    x_edges = (lo + (np.arange(steps) + 0.5) * h + shift + mu**2 / 2) / mu
    p_ind = np.diff(np.concatenate([[0.0], null.cdf(x_edges), [1.0]]))
    q_ind = np.diff(np.concatenate([[0.0], alt.cdf(x_edges), [1.0]]))
    p, q = model.cell_masses(n)
    np.testing.assert_allclose(p, p_ind, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(q, q_ind, rtol=1e-9, atol=1e-15)


# n = 1 is slow: n = 4 takes the same direct path (and test_validity_discrete_by_
# enumeration checks n = 1 of the lattice by enumeration)
@pytest.mark.parametrize("n", [pytest.param(1, marks=pytest.mark.slow), 4])
def test_validity_gaussian_with_independent_law_of_the_sum(n):
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    total = validity_sum(model, law_of_sum(model.cell_masses(n)[0], n), n,
                          model.noise_rate(n))
    assert total <= 1.0 + 1e-12
    assert total == pytest.approx(1.0, abs=1e-8)


@pytest.mark.slow  # > 3 s: default suite budget (doc/contributing.md)
def test_monte_carlo_validity_gaussian():
    null, alt = stats.norm(0, 1), stats.norm(0.4, 1)
    rng = np.random.default_rng(0)
    est = PrivateEValueTest(null, alt, statistic="exact", random_state=rng)
    e = np.array([math.exp(est.fit(rng.normal(size=(30, 1))).result_.log_e_value)
                  for _ in range(3000)])
    assert e.mean() <= 1 + 4 * e.std(ddof=1) / math.sqrt(e.size)


def _release_law(model, count, n, rate, ys):
    return geometric_pmf_written(ys - count, rate)


def test_privacy_exact_output_ratio_on_adversarial_rows():
    """The release is discrete: compare its exact law on neighbouring datasets."""
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    n = 20
    X = np.random.default_rng(1).normal(size=(n, 1))
    worst = 0.0
    ys = np.arange(-400, 800)
    for v in (-50.0, 0.0, 50.0):
        for w in (-50.0, 0.0, 50.0):
            D, D2 = X.copy(), X.copy()
            D[0, 0], D2[0, 0] = v, w
            t1, t2 = model.count(D), model.count(D2)
            rate = model.noise_rate(n)
            ratio = np.log(_release_law(model, t1, n, rate, ys)) - np.log(
                _release_law(model, t2, n, rate, ys))
            worst = max(worst, float(np.max(np.abs(ratio))))
    assert worst == pytest.approx(1.0, abs=1e-9)  # attained by the extreme rows


@pytest.mark.slow
def test_noise_draws_follow_the_geometric_law_and_halved_noise_is_caught(monkeypatch):
    # Slow (10 000 releases): in the default suite
    # test_float_safe.py::test_exact_samplers_follow_the_pmf_used_by_log_lr spies this
    # release's draws (each at exactly noise_rate(n), which it checks against
    # quantise_rate: a doubled rate fails), and audits the sampler's law at that rate.
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    n, rng = 20, np.random.default_rng(2)
    # 5000 draws: every cell expects >= 10 (rate 1/32); the mutant's chi2 is far above
    z = np.array([model.release(0, 1.0, rng, n) for _ in range(5000)])
    rate = model.noise_rate(n)
    values = np.arange(-60, 61)
    expected = geometric_pmf_written(values, rate) * z.size
    observed = np.array([(z == v).sum() for v in values])
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    assert chi2 < stats.chi2.ppf(1 - 1e-4, values.size - 1)
    monkeypatch.setattr(LatticeExact, "noise_rate", lambda self, n: 2 * rate)
    z2 = np.array([model.release(0, 1.0, rng, n) for _ in range(5000)])
    observed2 = np.array([(z2 == v).sum() for v in values])
    chi2_2 = float(np.sum((observed2 - expected) ** 2 / expected))
    assert chi2_2 > stats.chi2.ppf(1 - 1e-4, values.size - 1)


@pytest.mark.slow  # > 3 s: default suite budget (doc/contributing.md)
def test_exact_beats_the_merged_statistic_in_expectation():
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    n = 400
    model = LatticeExact(make_laws(null, alt), 1.0)
    log_q = model.log_laws(n)[1]
    rate = model.noise_rate(n)
    bulk = np.flatnonzero(log_q >= log_q.max() - 40)  # the rest has mass < e^-30
    ys = np.arange(bulk[0] - int(40 / rate), bulk[-1] + int(40 / rate))
    lq = model.log_density(ys, log_q, n)
    assert np.exp(lq).sum() > 1 - 1e-9
    power = float(np.sum(np.exp(lq) * model.log_lr(ys, n)))
    assert power > expected_log_e_value(null, alt, n, 1.0)


def test_lattice_is_kept_below_its_cap_for_large_batches():
    model = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 1.0)
    assert model.steps(100) == 32 and model.steps(10_000) == 32
    assert model.steps(10**6) == 4 and model.steps(10**7) == 1


@pytest.mark.parametrize("n", [150, pytest.param(600, marks=pytest.mark.slow)])
def test_fft_law_of_the_sum_matches_direct_convolutions(n):
    """Large lattices use one FFT per tilt; where trusted, its relative error is
    certified as ``rel``: the measured error is far below it (margin >= 20), and
    every untrusted value has an upper bound. n = 150 (a lattice the estimator already
    sums by FFT: test_reciprocal_is_valid_against_q_with_its_own_guard) in the default
    suite, half the cost of n = 300 (measured errors 1.2e-10 and 8.5e-11 against
    rel / 20 = 5e-10); n = 600 (the same FFT path on a lattice four times as long,
    ~1.5 s) runs in the slow suite."""
    model = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 1.0)
    for masses in model.cell_masses(n):
        direct, _ = model._log_law_of_sum(masses, n)
        fft, bound, rel = model._log_law_of_sum_fft(masses, n)
        trusted = np.isfinite(fft)
        assert trusted.mean() > 0.95
        err = np.abs(np.expm1(fft[trusted] - direct[trusted])).max()
        assert err <= rel / 20
        assert np.all(bound[~trusted] >= direct[~trusted])
        assert not np.isfinite(bound[trusted]).any()


def test_fft_law_of_the_sum_far_in_the_tails():
    """Two cells: T is Binomial(n, p); the FFT path against scipy down to e^-3000."""
    model = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 1.0)
    n, p = 5000, 0.3
    log_law, bound, rel = model._log_law_of_sum_fft(np.array([1 - p, p]), n)
    exact = stats.binom.logpmf(np.arange(n + 1), n, p)
    trusted = np.isfinite(log_law)
    assert trusted[[1, 100, 1500, 3000, 4500, 4999]].all() and exact.min() < -3000
    np.testing.assert_allclose(np.exp(log_law[trusted] - exact[trusted]), 1.0, rtol=rel)
    assert np.all(bound[~trusted] >= exact[~trusted])


@pytest.mark.slow  # > 3 s: default suite budget (doc/contributing.md)
def test_validity_gaussian_on_the_fft_path():
    """n = 150 with 32 cells: a lattice of 4801 points, on the FFT path."""
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    n = 150
    assert n * model.steps(n) + 1 > lattice_module._DIRECT_MAX
    total = validity_sum(model, law_of_sum(model.cell_masses(n)[0], n), n,
                          model.noise_rate(n))
    assert total <= 1.0
    assert total == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow  # > 3 s: default suite budget (doc/contributing.md)
def test_eprocess_exact_on_gaussian_stream_is_valid_and_private():
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    budget = PrivacyBudget(201.0)
    proc = PrivateEProcess(null, alt, statistic="exact", alpha=0.1, max_samples=300,
                           budget=budget, random_state=np.random.default_rng(3))
    rng = np.random.default_rng(4)
    rejections = sum(proc.fit(rng.normal(size=(300, 1))).result_.decision == "reject"
                     for _ in range(200))
    assert rejections <= stats.binom.ppf(1 - 1e-3, 200, 0.1)
    assert len(budget.ledger) == 200
    assert proc.fit(rng.normal(0.5, 1, size=(300, 1))).result_.decision == "reject"


def test_tilted_law_of_the_sum_is_accurate_far_in_the_tails():
    """Two cells {0, 1}: T is Binomial(n, p); compare with scipy's logpmf down to e^-3000."""
    model = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 1.0)
    n, p = 5000, 0.3
    log_law, bound = model._log_law_of_sum(np.array([1 - p, p]), n)
    k = np.array([0, 1, 100, 1500, 3000, 4500, 5000])
    exact = stats.binom.logpmf(k, n, p)
    assert exact.min() < -3000
    np.testing.assert_allclose(log_law[k], exact, rtol=1e-9, atol=1e-8)
    assert not np.isfinite(bound).any()


@pytest.mark.slow  # > 3 s: default suite budget (doc/contributing.md)
def test_exact_keeps_its_power_at_large_n():
    """Large n: the null density of a typical release under Q is ~e^-2800, far below the
    float range relative to its mode; tilting keeps the likelihood ratio exact there."""
    null, alt = stats.bernoulli(0.3), stats.bernoulli(0.7)
    laws = make_laws(null, alt)
    model = LatticeExact(laws, 1.0)
    n = 10000
    X = np.random.default_rng(5).binomial(1, 0.7, size=(n, 1))
    log_e = model.batch_log_e(X, 1.0, np.random.default_rng(6))
    rate = optimal_rate_value = 0.2842647781563705
    assert log_e > 0.9 * n * optimal_rate_value
    assert rate > 0


def test_constant_statistic_releases_nothing():
    """Q differs from P only outside P's support: on the data domain E* is constant, the
    e-value is 1 and no noise is needed (nothing about the data is released)."""
    est = PrivateEValueTest(stats.randint(0, 3), stats.randint(0, 4), statistic="exact",
                            random_state=0)
    r = est.fit(np.array([[0], [1], [2]])).result_
    assert (r.log_e_value, r.noise_scale) == (0.0, 0.0)


@pytest.mark.slow
def test_validity_gaussian_on_the_fft_path_at_n_600():
    """n = 600 (a lattice of 19 201 points): Σ_y f_P(y) E(y) with f_P from an
    independent law of the sum (repeated direct convolutions), the alternative's
    releases lying where the null density is about e^-60."""
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    n = 600
    total = validity_sum(model, law_of_sum(model.cell_masses(n)[0], n), n,
                          model.noise_rate(n))
    assert total <= 1.0
    assert total == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("n", [4, pytest.param(150, marks=pytest.mark.slow)])
def test_reciprocal_is_valid_against_q_with_its_own_guard(n):
    """Two-sided use: the e-value against Q inflates Q's density (not P's), on the
    direct (n = 4) and FFT (n = 150) paths."""
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    model = LatticeExact(make_laws(null, alt), 1.0)
    total = validity_sum(model, law_of_sum(model.cell_masses(n)[1], n), n,
                          model.noise_rate(n), against="Q")
    assert total <= 1.0
    assert total == pytest.approx(1.0, abs=1e-6)


def test_guards_keep_each_denominator_conservative(monkeypatch):
    """Against P the null density is inflated, against Q the alternative's: each
    e-value is below its raw likelihood ratio, and the e-value against Q is below
    the plain reciprocal of the one against P."""
    monkeypatch.setattr(lattice_module, "_REL_GUARD", 0.5)
    model = LatticeExact(make_laws(stats.norm(0, 1), stats.norm(0.5, 1)), 1.0)
    log_p, log_q = model.log_laws(5)[:2]
    y = np.array([10.0])
    raw = model.log_density(y, log_q, 5) - model.log_density(y, log_p, 5)
    against_p, against_q = model.log_lr(y, 5)[0], model.log_lr(y, 5, against="Q")[0]
    assert against_p < raw[0]
    assert against_q < -raw[0]
    assert against_q < -against_p
    with pytest.raises(ValueError, match="against must be 'P' or 'Q'"):
        model.log_lr(y, 5, against="R")


def test_two_sided_eprocess_exact_lattice_accepts_p():
    """Gaussian stream from P, two-sided exact mode: the reciprocal (against Q)
    process accepts P, and under Q it rejects P."""
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1)
    rng = np.random.default_rng(7)
    proc = PrivateEProcess(null, alt, statistic="exact", alpha=0.05, beta=0.05,
                           max_samples=2000, random_state=np.random.default_rng(8))
    assert proc.fit(rng.normal(size=(2000, 1))).result_.decision == "accept"
    assert proc.fit(rng.normal(0.5, 1, size=(2000, 1))).result_.decision == "reject"
