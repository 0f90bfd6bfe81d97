"""Statistical validity of dpMMD and dpHSIC (slow: run with ``-m slow``).

Under H0 the DP permutation p-value is valid at every finite sample size, so
the number of rejections in R independent repetitions is stochastically
smaller than Binomial(R, alpha). Each check allows the 0.999 quantile of that
law (a false alarm probability of at most 1e-3 per check), with fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest import DPHSICTest, DPMMDTest

pytestmark = pytest.mark.slow

ALPHA = 0.05
REPS = 400
LIMIT = int(stats.binom.ppf(0.999, REPS, ALPHA))
# With continuous noise the ranks have no ties, so the level is exactly
# floor(alpha (B + 1)) / (B + 1) = alpha for B = 99: a lower bound too shows
# that the test is not trivially conservative.
LOWER = int(stats.binom.ppf(0.001, REPS, ALPHA))
# The single-bandwidth permutation path (the default is the bandwidth aggregate).
FIXED = {"gamma": None}


def _bounds(level):
    """Two-sided 0.999 binomial bounds on the rejections for an exact ``level``."""
    return (int(stats.binom.ppf(0.001, REPS, level)),
            int(stats.binom.ppf(0.999, REPS, level)))


def _cyclic_level(n):
    """Exact level of the cyclic test over n shifts: floor(alpha n) / n.

    With continuous noise there are no ties: the p-value is (1 + k) / n, k uniform
    on 0 .. n - 1, and it is <= alpha for floor(alpha n) values of k.
    """
    return math.floor(ALPHA * n) / n


def _null_sample(kind, rng, n, d=3):
    if kind == "gaussian":
        return rng.normal(size=(n, d))
    if kind == "heavy_tailed":
        return rng.standard_t(df=1.5, size=(n, d))
    if kind == "discrete_ties":
        return rng.integers(0, 3, size=(n, d)).astype(float)
    if kind == "d50":
        return rng.normal(size=(n, 50))
    raise ValueError(kind)


SCENARIOS = ["gaussian", "heavy_tailed", "discrete_ties", "d50"]


@pytest.mark.parametrize("epsilon", [1.0, 1e6])
@pytest.mark.parametrize("kind", SCENARIOS)
def test_mmd_type_one_error(kind, epsilon):
    rng = np.random.default_rng([SCENARIOS.index(kind), int(epsilon > 1)])
    y = np.repeat([0, 1], [25, 35])
    est = DPMMDTest(epsilon=epsilon, alpha=ALPHA, n_permutations=99, kernel_params=FIXED)
    rejections = 0
    for rep in range(REPS):
        Z = _null_sample(kind, rng, 60)
        rejections += est.set_params(random_state=rep).decision(Z, y)
    assert LOWER <= rejections <= LIMIT, (rejections, LOWER, LIMIT)


@pytest.mark.parametrize("kind", ["gaussian", "discrete_ties"])
def test_mmd_three_sample_type_one_error(kind):
    rng = np.random.default_rng(7)
    y = np.repeat(["a", "b", "c"], [15, 20, 25])
    est = DPMMDTest(epsilon=2.0, alpha=ALPHA, n_permutations=99, kernel_params=FIXED)
    rejections = sum(
        est.set_params(random_state=rep).decision(_null_sample(kind, rng, 60), y)
        for rep in range(REPS)
    )
    assert LOWER <= rejections <= LIMIT


@pytest.mark.parametrize("epsilon", [1.0, 1e6])
@pytest.mark.parametrize("kind", SCENARIOS)
def test_hsic_type_one_error(kind, epsilon):
    rng = np.random.default_rng([10 + SCENARIOS.index(kind), int(epsilon > 1)])
    est = DPHSICTest(epsilon=epsilon, alpha=ALPHA, n_permutations=99, cyclic=False,
                     kernel_params=FIXED, y_kernel_params=FIXED)
    rejections = _hsic_rejections(est, kind, rng, 50, 2)
    assert LOWER <= rejections <= LIMIT, (rejections, LOWER, LIMIT)


@pytest.mark.parametrize("kind", ["gaussian", "discrete_ties"])
def test_mmd_aggregate_type_one_error(kind):
    # the default: max over the public bandwidth grid of centred statistics, one DP
    # p-value; still a permutation test of a permutation-invariant max, level alpha
    rng = np.random.default_rng([40 + SCENARIOS.index(kind)])
    y = np.repeat([0, 1], [25, 35])
    est = DPMMDTest(epsilon=1.0, alpha=ALPHA, n_permutations=99)
    rejections = sum(
        est.set_params(random_state=rep).decision(_null_sample(kind, rng, 60), y)
        for rep in range(REPS)
    )
    assert LOWER <= rejections <= LIMIT, (rejections, LOWER, LIMIT)


@pytest.mark.parametrize("kind", ["gaussian", "discrete_ties"])
def test_hsic_aggregate_type_one_error(kind):
    # the default: aggregate over both grids, cyclic (B = n - 1, n_permutations ignored):
    # at n = 50 the exact level is floor(0.05 * 50) / 50 = 0.04, not 0.05
    rng = np.random.default_rng([50 + SCENARIOS.index(kind)])
    est = DPHSICTest(epsilon=1.0, alpha=ALPHA)
    rejections = _hsic_rejections(est, kind, rng, 50, 2)
    lower, upper = _bounds(_cyclic_level(50))
    assert lower <= rejections <= upper, (rejections, lower, upper)


def _hsic_rejections(est, kind, rng, n, y_dim):
    """Rejections of ``est`` over REPS independent null pairs (X, Y)."""
    rejections = 0
    for rep in range(REPS):
        X = _null_sample(kind, rng, n)
        Y = _null_sample(kind, rng, n, d=y_dim)
        rejections += est.set_params(random_state=rep).decision(X, Y)
    return rejections


@pytest.mark.parametrize("kind", ["gaussian", "discrete_ties"])
def test_hsic_cyclic_type_one_error(kind):
    rng = np.random.default_rng([30 + SCENARIOS.index(kind)])
    # the single-bandwidth cyclic path (the aggregate is tested above)
    est = DPHSICTest(cyclic=True, alpha=ALPHA, kernel_params=FIXED, y_kernel_params=FIXED)
    rejections = _hsic_rejections(est, kind, rng, 60, 1)
    # n = 60 shifts: the level is floor(0.05 * 60) / 60 = 0.05 exactly
    assert _cyclic_level(60) == ALPHA
    assert LOWER <= rejections <= LIMIT, (rejections, LOWER, LIMIT)


def test_private_median_bandwidth_keeps_the_level():
    # The bandwidth is drawn from the pooled sample (MMD) or from each
    # marginal (HSIC): invariant under the permutations, so the test stays exact.
    rng = np.random.default_rng(21)
    y = np.repeat([0, 1], 30)
    mmd = DPMMDTest(kernel_params={"gamma": "median"}, n_permutations=99)
    hsic = DPHSICTest(kernel_params={"gamma": "median"}, y_kernel_params={"gamma": "median"},
                      n_permutations=99)
    r_mmd = r_hsic = 0
    for rep in range(REPS):
        r_mmd += mmd.set_params(random_state=rep).decision(rng.normal(size=(60, 2)), y)
        r_hsic += hsic.set_params(random_state=rep).decision(rng.normal(size=(40, 2)),
                                                             rng.normal(size=40))
    assert LOWER <= r_mmd <= LIMIT
    assert LOWER <= r_hsic <= LIMIT


def test_power_grows_with_epsilon():
    # Not a validity check: the private tests must still detect a clear
    # effect, and less so under stronger privacy.
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 100)
    power = {}
    for epsilon in (0.05, 50.0):
        est = DPMMDTest(epsilon=epsilon, n_permutations=99, kernel_params=FIXED)
        hits = 0
        for rep in range(60):
            Z = np.vstack([rng.normal(size=(100, 2)), rng.normal(0.8, size=(100, 2))])
            hits += est.set_params(random_state=rep).decision(Z, y)
        power[epsilon] = hits / 60
    assert power[50.0] >= 0.9
    assert power[0.05] < power[50.0]
