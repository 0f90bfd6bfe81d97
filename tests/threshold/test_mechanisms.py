"""Binary mechanisms: exact probabilities, batch draws, calibration, purification."""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest.threshold import (
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    Purified,
    RandomizedResponse,
    check_mechanism,
    log_poisson_cdf,
    log_poisson_sf,
    purification_flip_probability,
)
from skdptest.threshold._mechanisms import _gaussian_delta, as_outputs, check_outputs

X = np.zeros((10, 1))
N = 40000


def _agrees(mech, p):
    out = mech.sample(X, None, N, np.random.default_rng(0))
    assert out.shape == (N,) and set(np.unique(out)) <= {-1, 1}
    k = int(np.sum(out == 1))
    lo, hi = stats.binom.ppf([1e-4, 1 - 1e-4], N, p)
    return lo <= k <= hi


@pytest.mark.parametrize("bit", [True, False])
def test_randomized_response(bit):
    m = RandomizedResponse(lambda X, y: bit, epsilon=0.7)
    p = m.probability(X, None)
    assert p == pytest.approx(math.exp(0.7) / (1 + math.exp(0.7)) if bit else
                              1 / (1 + math.exp(0.7)))
    assert _agrees(m, p)


@pytest.mark.parametrize("stat", [-3.0, 2.0, 9.0])
def test_noisy_threshold_query(stat):
    m = NoisyThresholdQuery(lambda X, y: stat, 2.0, epsilon=0.5, sensitivity=2.0)
    p = m.probability(X, None)
    assert p == pytest.approx(stats.laplace.sf(2.0, loc=stat, scale=4.0))
    assert _agrees(m, p)
    # neighbours (statistic moved by the sensitivity) are within e^eps on both outputs
    q = NoisyThresholdQuery(lambda X, y: stat + 2.0, 2.0, epsilon=0.5, sensitivity=2.0)
    p2 = q.probability(X, None)
    assert abs(math.log(p2 / p)) <= 0.5 + 1e-12
    assert abs(math.log((1 - p2) / (1 - p))) <= 0.5 + 1e-12


def test_gaussian_threshold_query_calibration_and_purification():
    m = GaussianThresholdQuery(lambda X, y: 0.5, 0.0, epsilon=0.5, delta=1e-4)
    assert _gaussian_delta(m.sigma, 1.0, 0.5) <= 1e-4
    assert _gaussian_delta(m.sigma * 0.99, 1.0, 0.5) > 1e-4
    p = m.probability(X, None)
    assert p == pytest.approx(stats.norm.sf(-0.5 / m.sigma))
    assert _agrees(m, p)
    # after purification, neighbours are pure eps-close on both outputs (grid of statistics)
    phi = purification_flip_probability(0.5, 1e-4)
    worst = 0.0
    for s in np.linspace(-40, 40, 801):
        a, b = stats.norm.sf(-s / m.sigma), stats.norm.sf(-(s + 1) / m.sigma)
        qa, qb = phi + (1 - 2 * phi) * a, phi + (1 - 2 * phi) * b
        worst = max(worst, abs(math.log(qa / qb)), abs(math.log((1 - qa) / (1 - qb))))
    assert worst <= 0.5 + 1e-9
    pm = Purified(m)
    assert pm.delta == 0.0 and pm.phi == phi
    assert pm.probability(X, None) == pytest.approx(phi + (1 - 2 * phi) * p)
    assert _agrees(pm, pm.probability(X, None))


def test_purification_identity():
    for eps, delta in [(0.1, 1e-6), (1.0, 0.3), (3.0, 0.9)]:
        phi = purification_flip_probability(eps, delta)
        assert (1 - 2 * phi) * delta == pytest.approx((math.exp(eps) - 1) * phi)
    assert purification_flip_probability(1.0, 0.0) == 0.0


def test_check_mechanism_and_outputs():
    assert check_mechanism(RandomizedResponse(lambda X, y: True, 0.3)) == (0.3, 0.0)
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(3,\)"):
        check_outputs(np.ones(2), 3)
    with pytest.raises(ValueError, match="outputs other than ±1"):
        check_outputs(np.array([1, 0, -1]), 3)
    with pytest.raises(ValueError, match=r"epsilon must be a real number in \(0, inf\)"):
        RandomizedResponse(lambda X, y: True, 0.0)
    with pytest.raises(ValueError, match=r"delta must be a real number in \(0, 1\); got 0\.0"):
        GaussianThresholdQuery(lambda X, y: 0.0, 0.0, 1.0, 0.0)



@pytest.mark.parametrize("value, expected", [(np.nan, -1), (-np.inf, -1), (np.inf, 1)])
def test_non_finite_statistic_gives_certain_outputs_without_raising(value, expected):
    # draws run after the search's charge: an exception there would tell neighbours
    # apart; NaN counts as -inf, and probability() agrees with the draws
    for mech in (NoisyThresholdQuery(lambda X, y: value, 0.0, 1.0),
                 GaussianThresholdQuery(lambda X, y: value, 0.0, 1.0, 1e-3)):
        out = mech.sample(X, None, 50, np.random.default_rng(0))
        assert out.tolist() == [expected] * 50
        assert mech.probability(X, None) == (expected == 1)


def test_outputs_after_the_charge_map_other_values_to_minus_one():
    assert as_outputs(np.array([1, 0, -1, 2]), 4).tolist() == [1, -1, -1, -1]
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(3,\)"):
        as_outputs(np.ones(2), 3)


@pytest.mark.parametrize("k", [1, 30, 400])
def test_log_poisson_tails_deep_in_the_tail(k):
    mu = np.array([1e-3, 0.5, k / 3, k, 3 * k, 50 * k + 500])
    up, low = log_poisson_sf(k, mu), log_poisson_cdf(k, mu)
    ref_up = stats.poisson.logsf(k - 1, mu)
    ref_low = stats.poisson.logcdf(k - 1, mu)
    ok = ref_up > -600
    assert np.allclose(up[ok], ref_up[ok], rtol=1e-8)
    ok = ref_low > -600
    assert np.allclose(low[ok], ref_low[ok], rtol=1e-8)
    assert np.all(np.isfinite(up)) and np.all(np.isfinite(low))
    # asymptotics where scipy underflows: log P(k, mu) ~ -mu + k log mu - log k!
    lead = -mu[0] + k * math.log(mu[0]) - math.lgamma(k + 1)
    assert up[0] == pytest.approx(lead, rel=1e-3)
    last = mu[-1]
    lead = -last + (k - 1) * math.log(last) - math.lgamma(k)
    assert low[-1] == pytest.approx(lead, abs=math.log(1 / (1 - k / last)) + 1e-9)
    # a scalar mean takes the same tail path (it used to fail on item assignment)
    assert float(log_poisson_sf(k, mu[0])) == up[0]
    assert float(log_poisson_cdf(k, mu[-1])) == low[-1]


def test_noisy_threshold_query_halved_noise_breaks_the_ratio():
    # Neighbours move the statistic by its sensitivity; with the Laplace scale halved
    # the output probabilities differ by more than e^eps (the check above has teeth).
    # mutant: the noise calibrated to half the true sensitivity 2.0 (scale halved)
    m = NoisyThresholdQuery(lambda X, y: 5.0, 2.0, epsilon=0.5, sensitivity=1.0)
    q = NoisyThresholdQuery(lambda X, y: 7.0, 2.0, epsilon=0.5, sensitivity=1.0)
    p, p2 = m.probability(X, None), q.probability(X, None)
    assert max(abs(math.log(p2 / p)), abs(math.log((1 - p2) / (1 - p)))) > 0.5
