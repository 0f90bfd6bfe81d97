"""Tests of skdptest.audit: the audit on mechanisms whose ε is known, then (slow) the
shipped estimators on worst-case neighbours and the mutants the audit must catch."""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from skdptest.audit import (
    attainable_floats_differ,
    epsilon_lower_bound,
    epsilon_lower_bound_from_samples,
    exact_ratio,
    float_bits_view,
    release_view,
)


# ---------------------------------------------------------------------------
# Toy mechanisms with a known ε
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Bit:
    bit: bool
    epsilon: float


class _RandomizedResponse:
    """Releases the bit X[0, 0] with probability e^eps_true / (1 + e^eps_true).

    ``claimed`` is the ε written on the result (a mutant claims less than it spends).
    """

    def __init__(self, eps_true=1.0, claimed=None, random_state=None):
        self.eps_true, self.claimed, self.random_state = eps_true, claimed, random_state

    def fit(self, X):
        rng = np.random.default_rng(self.random_state)
        keep = rng.random() < 1.0 / (1.0 + math.exp(-self.eps_true))
        claimed = self.eps_true if self.claimed is None else self.claimed
        self.result_ = _Bit(bool(np.asarray(X)[0, 0]) == keep, claimed)
        self.n_features_in_ = 1
        return self


def _rr_samples(eps, n, rng):
    """n randomized-response outputs on each of the neighbours bit=1 and bit=0."""
    keep = 1.0 / (1.0 + math.exp(-eps))
    return rng.random(n) < keep, rng.random(n) >= keep


# ---------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------
def test_release_view_is_bit_exact_and_covers_fitted_attributes():
    @dataclass(frozen=True)
    class R:
        value: float
        arr: np.ndarray

    class Est:
        pass

    a, b = Est(), Est()
    a.result_, b.result_ = R(0.1 + 0.2, np.array([1.0])), R(0.3, np.array([1.0]))
    for e in (a, b):
        e.n_features_in_, e._private = 1, object()
    # 0.1 + 0.2 and 0.3 differ in the last bit: the views must differ.
    assert release_view(a) != release_view(b)
    b.result_ = R(0.1 + 0.2, np.array([1.0]))
    assert release_view(a) == release_view(b)
    # A public fitted attribute is part of what is released.
    b.extra_ = 2.0
    assert release_view(a) != release_view(b)
    assert [name for name, _ in release_view(b)] == ["result_", "extra_", "n_features_in_"]
    # -0.0 and 0.0 are different releases.
    a.result_, b.result_ = R(0.0, np.zeros(1)), R(-0.0, np.zeros(1))
    assert release_view(a)[0] != release_view(b)[0]


def test_release_view_is_a_fixed_point_of_the_encoding():
    # epsilon_lower_bound keeps release_view's output as it is (a custom view is encoded):
    # encoding it again must change nothing
    from skdptest.audit import _canonical

    @dataclass(frozen=True)
    class R:
        value: float
        arr: np.ndarray
        extra: object

    class Est:
        pass

    e = Est()
    e.result_ = R(-0.0, np.array([[0.1, 2.0]]), {"k": (1, np.int64(2), None, 1 + 2j)})
    e.n_features_in_, e.flags_, e.name_ = np.int64(1), frozenset({True, 0.5}), "x"
    view = release_view(e)
    assert _canonical(view) == view and hash(view) == hash(_canonical(view))


def test_threshold_and_set_events_count_their_views():
    from skdptest.audit import _canonical, _Event

    views = [_canonical(v) for v in ([0.5], [2.0], [-1.0], [], [0.5], [True])]
    # leaf (0,): the first element (the bool as 1.0); the empty view has none
    assert _Event("le", 0.5, (0,), "x").hits(views) == 3  # 0.5, -1.0, 0.5
    assert _Event("ge", 0.5, (0,), "x").hits(views) == 4  # 0.5, 2.0, 0.5, True
    assert _Event("ge", 1.0, (0,), "x").hits(views) == 2  # 2.0, True
    assert _Event("le", 0.5, (1,), "x").hits(views) == 0  # a leaf no view has
    assert _Event("set", frozenset(views[:2])).hits(views) == 3


def test_release_view_refuses_unfitted_and_non_dataclass_results():
    class Est:
        pass

    with pytest.raises(ValueError, match="not fitted: it has no result_"):
        release_view(Est())
    e = Est()
    e.result_ = {"pvalue": 0.5}
    with pytest.raises(TypeError, match="result_ must be a dataclass"):
        release_view(e)


@pytest.mark.parametrize("value, expected", [
    (1.0, (1, 1, 52)), (0.75, (1, 0, 51)), (-3.0, (-1, 2, 51)),
    (2.0**-1074, (1, -1073, 52)), (0.0, ("zero", 1)), (-0.0, ("zero", -1)),
    (math.inf, ("nonfinite", "inf")),
])
def test_float_bits_view(value, expected):
    assert float_bits_view(value) == expected


def test_float_bits_view_reads_the_lowest_set_bit():
    # 1 + 2**-52 has its lowest set bit in the last place: no trailing zeros.
    assert float_bits_view(1.0 + 2.0**-52) == (1, 1, 0)
    sign, e, t = float_bits_view(1 / 3)
    assert (sign, e, t) == (1, -1, 0)


# ---------------------------------------------------------------------------
# The audit on randomized response (the truth is known)
# ---------------------------------------------------------------------------
def test_audit_of_an_honest_mechanism_rarely_exceeds_its_epsilon():
    # Each audit's bound exceeds the true ε with probability <= 1 - confidence = 0.05.
    # Over 200 independent audits the number of exceedances is then stochastically
    # below Binomial(200, 0.05); its 0.999 quantile is the tolerance.
    rng = np.random.default_rng(1)
    reps = 200
    over = 0
    for _ in range(reps):
        out0, out1 = _rr_samples(1.0, 400, rng)
        r = epsilon_lower_bound_from_samples(out0, out1, random_state=rng, claimed_epsilon=1.0)
        over += r.contradicted
    assert over <= stats.binom.ppf(0.999, reps, 0.05)


def test_audit_detects_epsilon_three_claimed_as_one():
    # 1000 trials: the bound for ε = 3 was 2.5 to 3.0 over random_state 0..7 (> 2.0), the
    # likely event's hits 651 to 672 of 700 (mean 667, sd 5.6), the rare one's 22 to 40
    # (mean 33); the honest bound 0.79 to 0.92 (> 0.6)
    est = epsilon_lower_bound(lambda s: _RandomizedResponse(3.0, claimed=1.0, random_state=s),
                              [[1]], [[0]], n_trials=1000, random_state=0)
    assert est.claimed_epsilon == 1.0
    assert est.contradicted and est.epsilon_lb > 2.0
    k0, m0, k1, m1 = est.counts
    # 30 % of the fits choose the event (here the threshold on the released bit)
    hits_likely, hits_rare = (k0, k1) if est.direction == "P0/P1" else (k1, k0)
    assert m0 == m1 == 700 and hits_likely > 630 and hits_rare < 70
    assert est.event_kind == "threshold" and est.event.startswith("threshold result_")
    # The honest ε = 1 version, same seeds: not contradicted, and close to 1 (power).
    honest = epsilon_lower_bound(lambda s: _RandomizedResponse(1.0, random_state=s),
                                 [[1]], [[0]], n_trials=1000, random_state=0)
    assert not honest.contradicted and 0.6 < honest.epsilon_lb <= 1.0


def test_audit_of_a_deterministic_release_is_large():
    # A release that is a function of the data: identical outputs on each side,
    # different across sides (strings: no numeric field, so a set event). 700
    # estimation trials give ε_lb = log of about 700/3.7.
    out0, out1 = ["a"] * 1000, ["b"] * 1000
    r = epsilon_lower_bound_from_samples(out0, out1, random_state=0)
    assert r.counts == (700, 700, 0, 700) and r.event_kind == "set"
    a = 0.05 / 2
    assert r.epsilon_lb == pytest.approx(math.log(a ** (1 / 700) / (1 - a ** (1 / 700))))


def test_audit_thresholds_a_continuous_release():
    # Laplace mechanism, sensitivity 1: scale 1 is ε = 1, the halved scale is ε = 2.
    rng = np.random.default_rng(2)
    n = 6000
    honest = epsilon_lower_bound_from_samples(1 + rng.laplace(0, 1, n), rng.laplace(0, 1, n),
                                              random_state=0, claimed_epsilon=1.0)
    halved = epsilon_lower_bound_from_samples(1 + rng.laplace(0, 0.5, n),
                                              rng.laplace(0, 0.5, n),
                                              random_state=0, claimed_epsilon=1.0)
    assert not honest.contradicted and honest.epsilon_lb > 0.5
    assert halved.contradicted and halved.event_kind == "threshold"
    assert not halved.epsilon_lb > 2.0  # still a lower bound of the true ε = 2


@pytest.mark.slow  # joblib's worker start-up alone takes several seconds
def test_audit_parallel_fits_match_serial():
    make = lambda s: _RandomizedResponse(1.0, random_state=s)  # noqa: E731
    serial = epsilon_lower_bound(make, [[1]], [[0]], n_trials=40, random_state=3)
    parallel = epsilon_lower_bound(make, [[1]], [[0]], n_trials=40, random_state=3, n_jobs=2)
    assert serial == parallel


def test_audit_validates_its_parameters():
    make = lambda s: _RandomizedResponse(random_state=s)  # noqa: E731
    with pytest.raises(TypeError, match="make_estimator must be callable"):
        epsilon_lower_bound(None, [[1]], [[0]])
    with pytest.raises(TypeError, match="view must be callable"):
        epsilon_lower_bound(make, [[1]], [[0]], view="all")
    with pytest.raises(ValueError, match="n_trials must be an integer >= 4"):
        epsilon_lower_bound(make, [[1]], [[0]], n_trials=3)
    with pytest.raises(ValueError, match="n_trials must be an integer >= 4"):
        epsilon_lower_bound(make, [[1]], [[0]], n_trials=10.0)
    with pytest.raises(ValueError, match="y0 and y1 must both be given"):
        epsilon_lower_bound(make, [[1]], [[0]], y0=[1])
    with pytest.raises(ValueError, match="confidence must be a real number in"):
        epsilon_lower_bound(make, [[1]], [[0]], confidence=1.0)
    with pytest.raises(ValueError, match="n_trials must be >= 4 per data set"):
        epsilon_lower_bound_from_samples([1, 2, 3], [1, 2, 3])


# ---------------------------------------------------------------------------
# exact_ratio
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("eps, k", [(0.5, 2), (1.0, 3), (2.0, 10)])
def test_exact_ratio_of_k_ary_randomized_response(eps, k):
    # k-ary RR: the true value w.p. e^ε/(e^ε + k - 1), each other value w.p. 1/(e^ε + k - 1).
    z = math.exp(eps) + k - 1

    def law(x):
        return {o: (math.exp(eps) if o == x else 1.0) / z for o in range(k)}

    assert exact_ratio(law(0), law(1)) == pytest.approx(eps, abs=1e-12)
    logs = {o: math.log(p) for o, p in law(0).items()}
    assert exact_ratio(logs, {o: math.log(p) for o, p in law(1).items()},
                       log=True) == pytest.approx(eps, abs=1e-12)


def test_exact_ratio_of_a_shifted_truncated_geometric():
    # P(o | x) ∝ r^|o - x| on {0..20}: the loss differs from the rate by the
    # normalisers' log ratio, computed here in closed form (geometric sums).
    rate, m = 0.7, 20
    r = math.exp(-rate)

    def z(x):  # sum_{o=0}^{m} r^|o-x| = (1 - r^(x+1))/(1 - r) + r (1 - r^(m-x))/(1 - r)
        return ((1 - r ** (x + 1)) + r * (1 - r ** (m - x))) / (1 - r)

    p = {x: {o: r ** abs(o - x) / z(x) for o in range(m + 1)} for x in (5, 6)}
    expected = rate + abs(math.log(z(6) / z(5)))
    assert exact_ratio(p[5], p[6]) == pytest.approx(expected, abs=1e-12)


def test_exact_ratio_support_mismatch_is_infinite_and_inputs_are_checked():
    assert exact_ratio({0: 0.5, 1: 0.5, 2: 0.0}, {0: 0.5, 1: 0.5}) == 0.0
    assert exact_ratio({0: 1.0}, {0: 0.5, 1: 0.5}) == math.inf
    assert exact_ratio({0: 0.0, 1: -math.inf}, {0: -math.log(2), 1: -math.log(2)},
                       log=True) == math.inf
    with pytest.raises(TypeError, match="pmf0 must be a dict"):
        exact_ratio([0.5, 0.5], {0: 1.0})
    with pytest.raises(ValueError, match="pmf1 does not sum to 1"):
        exact_ratio({0: 1.0}, {0: 0.9})
    with pytest.raises(ValueError, match="pmf0 holds a probability that is negative"):
        exact_ratio({0: -0.5, 1: 1.5}, {0: 1.0})
    with pytest.raises(ValueError, match="pmf0 is empty"):
        exact_ratio({}, {0: 1.0})
    with pytest.raises(ValueError, match="pmf1 holds a log-probability that is NaN"):
        exact_ratio({0: 0.0}, {0: math.nan}, log=True)


# ---------------------------------------------------------------------------
# Floating-point releases (Mironov)
# ---------------------------------------------------------------------------
def test_naive_float_laplace_is_flagged_by_its_low_order_bits():
    # Neighbours x = 0 and x' = 1/3, sensitivity 1/3, textbook float Laplace at ε = 1.
    rng = np.random.default_rng(4)
    n = 4000
    v0 = 0.0 + rng.laplace(0.0, 1 / 3, n)
    v1 = 1 / 3 + rng.laplace(0.0, 1 / 3, n)
    r = attainable_floats_differ(v0, v1, epsilon=1.0, random_state=0)
    assert r.flagged and r.epsilon_lb > 2.0 and r.off_grid == (0, 0)
    # Claimed on the grid 2**-10, almost every value is off it.
    g = attainable_floats_differ(v0, v1, epsilon=1.0, grid=2.0**-10, random_state=0)
    assert g.flagged and min(g.off_grid) > 0.99 * n


def test_exact_grid_release_passes():
    # Floor to the grid, then add g times exact two-sided geometric noise (the
    # difference of two i.i.d. geometrics). Sensitivity after flooring: at most
    # 1/3 + g, i.e. k = ceil((1/3 + g)/g) grid steps; rate ε/k per step.
    rng = np.random.default_rng(5)
    g, eps, n = 2.0**-10, 1.0, 4000
    k = math.ceil((1 / 3 + g) / g)
    q = 1.0 - math.exp(-eps / k)

    def release(x):
        z = rng.geometric(q, n) - rng.geometric(q, n)
        return (math.floor(x / g) + z) * g  # exact: integers times a power of two

    r = attainable_floats_differ(release(0.0), release(1 / 3), epsilon=eps, grid=g,
                                 random_state=0)
    assert not r.flagged and r.off_grid == (0, 0) and r.epsilon_lb <= eps
    # A public offset is removed before the grid check.
    shifted = attainable_floats_differ(release(0.0) + 0.5, release(0.0) + 0.5, epsilon=eps,
                                       grid=g, offset=0.5, random_state=0)
    assert shifted.off_grid == (0, 0)
    off = attainable_floats_differ(release(0.0) + 0.5, release(0.0) + 0.5, epsilon=eps,
                                   grid=g, offset=0.25 + 2.0**-20, random_state=0)
    assert off.flagged and off.off_grid == (n, n)


def test_float_check_validates_its_parameters():
    v = np.zeros(10)
    with pytest.raises(ValueError, match="grid must be a positive power of two"):
        attainable_floats_differ(v, v, epsilon=1.0, grid=0.3)
    with pytest.raises(ValueError, match="grid must be a positive power of two"):
        attainable_floats_differ(v, v, epsilon=1.0, grid=-0.5)
    with pytest.raises(ValueError, match="epsilon must be a real number >= 0"):
        attainable_floats_differ(v, v, epsilon=-1.0)
    with pytest.raises(ValueError, match="offset must be a finite real number"):
        attainable_floats_differ(v, v, epsilon=1.0, grid=1.0, offset=math.nan)
    with pytest.raises(TypeError, match="values1 must be a 1-D array of floats"):
        attainable_floats_differ(v, np.zeros(10, dtype=int), epsilon=1.0)


# ---------------------------------------------------------------------------
# Slow: the shipped estimators on worst-case neighbours, and the mutants
# ---------------------------------------------------------------------------
N_TRIALS = 1500  # per data set


class _SumAtLeast:
    """Public bit function: at least ``k`` ones in column 0 (flips on one row)."""

    def __init__(self, k):
        self.k = k

    def __call__(self, X, y):
        return float(np.sum(X[:, 0])) >= self.k

    def __repr__(self):
        return f"_SumAtLeast({self.k})"


def _worst_cases():
    """(factory(seed), X0, X1, y0, y1) per estimator; neighbours by replacing one row."""
    import skdptest as s
    from skdptest.threshold import RandomizedResponse

    null, alt = stats.bernoulli(0.3), stats.bernoulli(0.6)
    # e-values: one row moved from the null's most likely value (0) to its least (1).
    b0 = np.zeros((20, 1))
    b1 = b0.copy()
    b1[0] = 1.0
    rng = np.random.default_rng(0)
    # MMD: one row of group 1 moved far away.
    m0 = rng.normal(size=(20, 1))
    m1 = m0.copy()
    m1[-1] = 50.0
    groups = np.repeat([0, 1], 10)
    # HSIC: one (x, y) pair changed to an extreme, aligned pair.
    h0, hy0 = rng.normal(size=(20, 1)), rng.normal(size=20)
    h1, hy1 = h0.copy(), hy0.copy()
    h1[0], hy1[0] = 50.0, 50.0
    # GTM: the mechanisms' bit flips when one row of X goes from 0 to 1.
    g0 = np.r_[np.ones(9), np.zeros(11)][:, None]
    g1 = g0.copy()
    g1[-1] = 1.0
    mechs = [RandomizedResponse(_SumAtLeast(10), 0.25), RandomizedResponse(_SumAtLeast(10), 0.25)]
    return {
        "PrivateEValueTest": (lambda r: s.PrivateEValueTest(
            null=null, alternative=alt, statistic="exact", random_state=r), b0, b1, None, None),
        "PrivateEProcess": (lambda r: s.PrivateEProcess(
            null=null, alternative=alt, random_state=r), b0, b1, None, None),
        "DPMMDTest": (lambda r: s.DPMMDTest(n_permutations=19, random_state=r),
                      m0, m1, groups, groups),
        "DPHSICTest": (lambda r: s.DPHSICTest(random_state=r),  # n - 1 = 19 cyclic shifts
                       h0, h1, hy0, hy1),
        "GeneralizedThresholdMechanism": (lambda r: s.GeneralizedThresholdMechanism(
            mechanisms=mechs, random_state=r), g0, g1, None, None),
    }


def _audit(name, make=None, **kw):
    factory, X0, X1, y0, y1 = _worst_cases()[name]
    return epsilon_lower_bound(make or factory, X0, X1, y0=y0, y1=y1, n_trials=N_TRIALS,
                               random_state=7, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["PrivateEValueTest", "PrivateEProcess", "DPMMDTest",
                                  "DPHSICTest", "GeneralizedThresholdMechanism"])
def test_shipped_estimators_pass_the_audit(name):
    r = _audit(name)
    assert r.claimed_epsilon == 1.0
    assert not r.contradicted, r


def _halve_noise(monkeypatch):
    """Patch every skdptest module's reference to a noise sampler to use half the noise.

    Only the references held by the callers are replaced (``_noise`` itself is left
    alone, so a sampler that delegates to another is not halved twice). Returns the
    names of the modules patched.
    """
    import sys

    from skdptest import _noise

    halved = {
        _noise.laplace: lambda rng, scale, size=None: _noise.laplace(rng, scale / 2, size),
        _noise.exponential: lambda rng, mean, size=None: _noise.exponential(rng, mean / 2, size),
        _noise.discrete_laplace: lambda rng, rate, size=None: _noise.discrete_laplace(
            rng, 2 * rate, size),
        _noise.two_sided_geometric: lambda rng, rate, size=None: _noise.two_sided_geometric(
            rng, 2 * rate, size),
    }
    patched = []
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("skdptest.") or mod_name in ("skdptest._noise",
                                                                 "skdptest.audit"):
            continue
        for attr, value in list(vars(mod).items()):
            if callable(value) and value in halved:
                monkeypatch.setattr(mod, attr, halved[value])
                patched.append(f"{mod_name}.{attr}")
    return patched


@pytest.mark.slow
@pytest.mark.parametrize("name", ["PrivateEValueTest", "PrivateEProcess"])
def test_mutant_halved_noise_is_caught(monkeypatch, name):
    _worst_cases()  # import the estimators' modules before patching them
    patched = _halve_noise(monkeypatch)
    family = "skdptest.evalue."
    assert any(p.startswith(family) for p in patched), patched  # the mutant is not vacuous
    r = _audit(name)
    assert r.contradicted, r


@dataclass(frozen=True)
class _PermResult:
    pvalue: float
    epsilon: float
    noisy_statistic: float | None = None


class _MockPermutationTest:
    """A tiny DP permutation test, with an optional leak of the noisy statistic.

    Statistic: the mean of X (sensitivity 1/n, the same for every relabelling), each
    of the B + 1 statistics with its own Laplace(1/(n ε)) noise; the p-value ranks
    the observed noisy statistic, and is ε-DP (the permutation theorem). The mutant
    also releases T_0 + N_0, which shares N_0 with the p-value: (p, T_0 + N_0) gives
    away N_0's rank, hence T_0 far beyond ε.
    """

    def __init__(self, leak=False, n_permutations=199, epsilon=1.0, random_state=None):
        self.leak, self.n_permutations = leak, n_permutations
        self.epsilon, self.random_state = epsilon, random_state

    def fit(self, X):
        rng = np.random.default_rng(self.random_state)
        X = np.asarray(X, dtype=float)
        t = X.mean()
        noisy = t + rng.laplace(0.0, 1.0 / (X.shape[0] * self.epsilon), self.n_permutations + 1)
        pvalue = (1 + np.count_nonzero(noisy[1:] >= noisy[0])) / (self.n_permutations + 1)
        self.result_ = _PermResult(float(pvalue), self.epsilon,
                                   float(noisy[0]) if self.leak else None)
        return self


def _denoise_view(est):
    """Attacker's post-processing: T_0 + N_0 minus the noise quantile its rank implies."""
    r = est.result_
    rank = (1.0 - r.pvalue) + 0.5 / (est.n_permutations + 1)  # P(N_i < N_0) estimate
    scale = 1.0 / (10 * r.epsilon)
    return (r.noisy_statistic - stats.laplace.ppf(rank, scale=scale),)


@pytest.mark.slow
def test_mutant_noisy_statistic_released_with_the_pvalue_is_caught():
    X0, X1 = np.zeros((10, 1)), np.r_[np.ones(1), np.zeros(9)][:, None]
    honest = epsilon_lower_bound(lambda r: _MockPermutationTest(random_state=r), X0, X1,
                                 n_trials=N_TRIALS, random_state=0)
    assert honest.claimed_epsilon == 1.0 and not honest.contradicted
    leaky = epsilon_lower_bound(lambda r: _MockPermutationTest(leak=True, random_state=r),
                                X0, X1, n_trials=N_TRIALS, random_state=0, view=_denoise_view)
    assert leaky.contradicted, leaky


class _FloatLaplaceMean:
    """Mutant: the mean of X plus textbook float Laplace noise (x + rng.laplace)."""

    def __init__(self, epsilon=1.0, random_state=None):
        self.epsilon, self.random_state = epsilon, random_state

    def fit(self, X):
        X = np.asarray(X, dtype=float)
        rng = np.random.default_rng(self.random_state)
        self.result_ = _PermResult(float(X.mean() + rng.laplace(0.0, 1 / (3 * self.epsilon))),
                                   self.epsilon)
        return self


@pytest.mark.slow
def test_mutant_float_laplace_release_is_caught_by_its_bits():
    # Neighbours: means 0 and 1/3 (one of three rows from 0 to 1), sensitivity 1/3.
    X0, X1 = np.zeros((3, 1)), np.array([[1.0], [0.0], [0.0]])
    seeds = np.random.default_rng(0).integers(0, 2**32, size=(2, 4000))
    v0 = np.array([_FloatLaplaceMean(random_state=s).fit(X0).result_.pvalue for s in seeds[0]])
    v1 = np.array([_FloatLaplaceMean(random_state=s).fit(X1).result_.pvalue for s in seeds[1]])
    r = attainable_floats_differ(v0, v1, epsilon=1.0, random_state=0)
    assert r.flagged and r.epsilon_lb > 1.0


# One bandwidth (gamma = 1/d): on these neighbours its deterministic (mutant) releases
# differ, while the bandwidth aggregate's happen to coincide.
SINGLE = {"gamma": None}


@pytest.mark.slow
def test_mutant_noise_from_numpy_global_state_is_caught():
    import skdptest as s

    def shipped(seed):
        np.random.seed(0)  # noqa: NPY002 - the shipped estimator must ignore this state
        return s.DPMMDTest(n_permutations=19, kernel_params=SINGLE, random_state=None)

    def mutant(seed):
        np.random.seed(0)  # noqa: NPY002 - the mutant is seeded from it
        return s.DPMMDTest(n_permutations=19, kernel_params=SINGLE,
                           random_state=np.random.randint(2**31))  # noqa: NPY002

    r_shipped = _audit("DPMMDTest", make=shipped)
    assert not r_shipped.contradicted, r_shipped
    r_mutant = _audit("DPMMDTest", make=mutant)
    assert r_mutant.contradicted and r_mutant.epsilon_lb > 5.0, r_mutant
    assert r_mutant.counts[0] == r_mutant.counts[1]  # every release on X0 is the same


@pytest.mark.slow
def test_mutant_epsilon_changed_mid_stream_is_refused():
    import skdptest as s

    proc = s.PrivateEProcess(null=stats.bernoulli(0.3), alternative=stats.bernoulli(0.6),
                             epsilon=1.0, random_state=0)
    proc.partial_fit(np.zeros((10, 1)))
    proc.set_params(epsilon=100.0)
    # If this went through, the next batches' noise would be 100 times smaller.
    with pytest.raises(s.InvalidParameterError, match="epsilon changed while a stream"):
        proc.partial_fit(np.zeros((10, 1)))


class _Counting:
    """Wraps a threshold mechanism and counts its evaluations (public only in tests)."""

    def __init__(self, mechanism, counter):
        self.mechanism, self.counter = mechanism, counter
        self.epsilon, self.delta = mechanism.epsilon, getattr(mechanism, "delta", 0.0)

    def sample(self, X, y, size, rng):
        self.counter[0] += int(size)
        return self.mechanism.sample(X, y, size, rng)

    def __repr__(self):
        return f"_Counting({self.mechanism!r})"


def _gtm_evaluations(work, n=600):
    """(accepted, evaluations) of n GTM fits on each neighbour, with counted mechanisms."""
    import skdptest as s

    factory, X0, X1, _, _ = _worst_cases()["GeneralizedThresholdMechanism"]
    base = factory(0).mechanisms
    out = []
    for k, X in enumerate((X0, X1)):
        side = []
        for seed in range(n):
            counter = [0]
            est = s.GeneralizedThresholdMechanism(
                mechanisms=[_Counting(m, counter) for m in base], work=work,
                random_state=10_000 * k + seed).fit(X)
            side.append((est.result_.accepted, counter[0]))
        out.append(side)
    return out


@pytest.mark.slow
def test_gtm_constant_work_evaluation_counts_follow_the_released_index():
    side0, side1 = _gtm_evaluations("constant")
    # The evaluation count is a function of the released index, on both neighbours...
    law = {}
    for accepted, evals in side0 + side1:
        law.setdefault(accepted, set()).add(evals)
    assert all(len(v) == 1 for v in law.values()), law
    # ...so its joint law with the index is no more revealing than the index.
    r = epsilon_lower_bound_from_samples(side0, side1, random_state=0, claimed_epsilon=1.0)
    assert not r.contradicted, r
    # The default Poisson mode (an observer of the work learns the secret rate) is
    # the counter-example: the same index comes with many evaluation counts.
    p0, p1 = _gtm_evaluations("poisson", n=100)
    counts = {}
    for accepted, evals in p0 + p1:
        counts.setdefault(accepted, set()).add(evals)
    assert max(len(v) for v in counts.values()) > 1


# ---------------------------------------------------------------------------
# Black-box: thresholds on the scalar release see a halved noise
# ---------------------------------------------------------------------------
LAWS = (stats.bernoulli(0.3), stats.bernoulli(0.6))


def _evalue_pair():
    """Neighbours for the e-value test with Bernoulli laws: one row moved from the
    null's likeliest value (0) to its least likely one (1), a change of the merged
    integer by its full sensitivity (measured by the grey-box test below)."""
    X0 = np.zeros((20, 1))
    X1 = X0.copy()
    X1[0] = 1.0
    return X0, X1


# Slow (300 fits a side): in the default suite the halved noise of the merged e-value is
# caught by the grey box (test_grey_box_flags_a_merged_plan_at_twice_epsilon; the halved
# discrete Laplace sampler by test_grey_box_flags_halved_noise_samplers, on the exact
# statistic), and the black box's threshold event catching an over-claimed ε by
# test_audit_detects_epsilon_three_claimed_as_one.
@pytest.mark.slow
def test_black_box_threshold_catches_halved_noise_of_the_merged_e_value(monkeypatch):
    # Default statistic ("optimal": the merged integer plus exact discrete Laplace
    # noise); with the noise halved the release is 2-DP on these neighbours.
    import skdptest as s

    X0, X1 = _evalue_pair()
    laws = LAWS  # the same objects in every fit: the public plan is computed once

    def make(seed):
        return s.PrivateEValueTest(*laws, random_state=seed)

    _worst_cases()
    assert any(p.startswith("skdptest.evalue.") for p in _halve_noise(monkeypatch))
    r = epsilon_lower_bound(make, X0, X1, n_trials=300, random_state=0)
    assert r.contradicted and r.event_kind == "threshold", r
    assert "log_e_value" in r.event or "e_value" in r.event or "pvalue" in r.event


def _default_evalue_pair():
    """Neighbours for the shipped default PrivateEValueTest (N(0, 1) against N(1, 1)):
    one row moved from -10 to 10, from the lower clip of the e-statistic to its upper
    clip, so the released integer moves by its full sensitivity: the pair that makes
    the release move most."""
    X0 = np.zeros((20, 1))
    X0[0] = -10.0
    X1 = X0.copy()
    X1[0] = 10.0
    return X0, X1


@pytest.mark.slow  # 2 x 5000 fits, about 80 s
@pytest.mark.filterwarnings("ignore:null and alternative are not given")
def test_black_box_is_nearly_tight_on_the_default_e_value_and_flags_halved_noise(
        monkeypatch):
    import skdptest as s

    X0, X1 = _default_evalue_pair()
    make = lambda q: s.PrivateEValueTest(random_state=q)  # noqa: E731
    honest = epsilon_lower_bound(make, X0, X1, n_trials=5000, random_state=1)
    assert honest.claimed_epsilon == 1.0 and honest.event_kind == "threshold"
    assert 0.8 <= honest.epsilon_lb <= 1.0, honest
    _worst_cases()
    _halve_noise(monkeypatch)
    halved = epsilon_lower_bound(make, X0, X1, n_trials=5000, random_state=1)
    assert halved.contradicted and halved.epsilon_lb > 1.0, halved


def test_event_names_are_readable():
    from skdptest.audit import _leaf_name, _leaves

    @dataclass(frozen=True)
    class R:
        log_e_value: float
        reject: bool

    class Est:
        pass

    e = Est()
    e.result_, e.n_features_in_ = R(-0.5, False), 1
    from skdptest.audit import _canonical

    view = _canonical(release_view(e))
    names = sorted(_leaf_name(view, p) for p in _leaves(view))
    assert names == ["n_features_in_", "result_.R.log_e_value", "result_.R.reject"]
    assert _leaf_name(_canonical((0.5, 1.0)), (1,)) == "[1]"
    assert _leaf_name(_canonical(0.5), ()) == "output"


# ---------------------------------------------------------------------------
# Grey-box: identical randomness on neighbours, declared sensitivity and scale
# ---------------------------------------------------------------------------
FIVE = ["PrivateEValueTest", "PrivateEProcess", "DPMMDTest", "DPHSICTest",
        "GeneralizedThresholdMechanism"]


def _grey(name, make=None, **kw):
    from skdptest.audit import grey_box_audit

    factory, X0, X1, y0, y1 = _worst_cases()[name]
    return grey_box_audit(make or factory, X0, X1, y0=y0, y1=y1, random_state=0, **kw)


@pytest.mark.parametrize("name", FIVE)
def test_grey_box_passes_the_shipped_estimators(name):
    r = _grey(name)
    assert not r.flagged, r.findings
    assert r.quantities and all(q.n_draws > 0 for q in r.quantities[:1])
    for q in r.quantities:
        if q.required_scale is not None and q.drawn_scale is not None:
            # the rates are rounded down: never less noise, and at most 0.2 % more
            assert q.required_scale <= q.drawn_scale <= 1.002 * q.required_scale, q
        assert q.measured_change is None or q.measured_change <= q.sensitivity, q
    # the worst-case neighbours move every measured value (they are not vacuous)
    assert any(q.measured_change for q in r.quantities), r.quantities


@pytest.mark.parametrize("name", FIVE)
def test_grey_box_flags_halved_noise_samplers(monkeypatch, name):
    _worst_cases()
    assert _halve_noise(monkeypatch)
    r = _grey(name)
    assert r.flagged and any("noise scale" in f for f in r.findings), r


def _plan_mutant(monkeypatch, name):
    """The estimator's own noise plan halved (ε doubled where the plan sets the noise,
    the claim and the charge unchanged); returns the factory to audit."""
    from skdptest.evalue import _exact
    from skdptest.threshold import _params
    from tests._mutants import halve_permutation_noise

    factory = _worst_cases()[name][0]
    if name in ("PrivateEValueTest", "PrivateEProcess"):
        # the exact two-point release: rate quantise(2 ε) instead of quantise(ε)
        honest = _exact.BinaryExact.noise_rate
        monkeypatch.setattr(_exact.BinaryExact, "noise_rate",
                            staticmethod(lambda epsilon: honest(2 * epsilon)))
    elif name in ("DPMMDTest", "DPHSICTest"):
        # the release's discrete Laplace rate doubled on the same grid
        halve_permutation_noise(monkeypatch)
    else:
        honest = _params._noise_means
        monkeypatch.setattr(_params, "_noise_means",
                            lambda epsilon, theta: honest(2 * epsilon, theta))
    return factory


@pytest.mark.parametrize("name", FIVE)
def test_grey_box_flags_the_plans_halved_noise(monkeypatch, name):
    r = _grey(name, make=_plan_mutant(monkeypatch, name))
    assert r.flagged and any("noise scale" in f for f in r.findings), r


def _merged_factory(cls, **kw):
    import skdptest as s

    est = getattr(s, cls)
    return lambda seed: est(*LAWS, statistic="optimal", random_state=seed, **kw)


@pytest.mark.parametrize("cls, kw", [("PrivateEValueTest", {}),
                                      ("PrivateEProcess", {"schedule": [8, 12]}),
                                      ("PrivateEProcess", {"schedule": [20], "beta": 0.1})])
def test_grey_box_merged_e_values(cls, kw):
    # The default statistic of the e-values (the merged integer), and the e-process's
    # two-sided mode (two releases per batch at ε/2 each).
    from skdptest.audit import grey_box_audit

    X0, X1 = _evalue_pair()
    r = grey_box_audit(_merged_factory(cls, **kw), X0, X1, random_state=0)
    assert not r.flagged, r.findings
    assert {q.label for q in r.quantities} == {"merged integer"}
    # the moved row is in the first batch: its integer moves by the full sensitivity
    first = r.quantities[0]
    assert first.measured_change == first.sensitivity
    if "beta" in kw:
        assert [q.epsilon for q in r.quantities] == [0.5, 0.5]


def test_grey_box_flags_a_merged_plan_at_twice_epsilon():
    import skdptest as s
    from skdptest.audit import grey_box_audit

    class HalvedNoise(s.PrivateEValueTest):
        def _plan(self, params, X, y):
            return super()._plan({**params, "epsilon": 2 * params["epsilon"]}, X, y)

    X0, X1 = _evalue_pair()
    r = grey_box_audit(lambda q: HalvedNoise(*LAWS, random_state=q), X0, X1, random_state=0)
    assert r.flagged and r.findings[0].startswith("merged integer: noise scale"), r


def test_grey_box_flags_a_sensitivity_claimed_too_small():
    # Declares half the sensitivity and half the ε share: the scale check alone
    # (Δ/ε unchanged) passes, the measured change of the integer does not.
    import dataclasses as dc

    import skdptest as s
    from skdptest.audit import grey_box_audit

    class Understated(s.PrivateEValueTest):
        def _noise_plan(self, prep):
            plan = super()._noise_plan(prep)
            return dc.replace(plan, quantities=tuple(
                dc.replace(q, sensitivity=q.sensitivity / 2, epsilon=q.epsilon / 2)
                for q in plan.quantities))

    X0, X1 = _evalue_pair()
    r = grey_box_audit(lambda q: Understated(*LAWS, random_state=q), X0, X1, random_state=0)
    assert r.flagged and len(r.findings) == 1, r.findings
    assert r.findings[0].startswith("merged integer: measured change 1442 > declared "
                                    "sensitivity 721")


def test_grey_box_flags_undeclared_and_data_dependent_noise(monkeypatch):
    from skdptest import _noise
    from skdptest.audit import grey_box_audit
    from skdptest.evalue import _evalue

    X0, X1 = _evalue_pair()
    make = _merged_factory("PrivateEValueTest")
    honest = _evalue.release_sum

    def extra(total, noise, rng):
        _noise.laplace(rng, 1.0)  # noise no declared quantity accounts for
        return honest(total, noise, rng)

    monkeypatch.setattr(_evalue, "release_sum", extra)
    r = grey_box_audit(make, X0, X1, random_state=0)
    assert r.flagged and any("1 laplace draw(s) that no declared quantity" in f
                             for f in r.findings), r.findings

    first = []

    def data_scaled(total, noise, rng):
        # a noise parameter read from the data: the first data set's row sum gets one
        # probability, the neighbour's another
        first[:] = first or [total]
        _noise.bernoulli(rng, 0.5 if total == first[0] else 0.25)
        return honest(total, noise, rng)

    monkeypatch.setattr(_evalue, "release_sum", data_scaled)
    r = grey_box_audit(make, X0, X1, random_state=0)
    assert r.flagged and any("control flow or a noise parameter depends on the data" in f
                             for f in r.findings), r.findings


def test_grey_box_private_median_bandwidth():
    # The exponential mechanism of the median bandwidth: its selection probabilities
    # on the neighbours differ by at most e^(its ε share).
    import skdptest as s

    r = _grey("DPMMDTest", make=lambda q: s.DPMMDTest(
        n_permutations=19, kernel_params={"gamma": "median"}, random_state=q))
    assert not r.flagged, r.findings
    choice = r.quantities[0]
    assert choice.kind == "choice" and choice.epsilon == pytest.approx(0.05)
    assert 0 < choice.privacy_loss <= 0.05


def test_grey_box_validates_its_parameters():
    from skdptest.audit import grey_box_audit

    make = lambda q: _RandomizedResponse(random_state=q)  # noqa: E731
    with pytest.raises(TypeError, match="make_estimator must be callable"):
        grey_box_audit(None, [[1]], [[0]])
    with pytest.raises(ValueError, match="n_replays must be an integer >= 1"):
        grey_box_audit(make, [[1]], [[0]], n_replays=0)
    with pytest.raises(ValueError, match="y0 and y1 must both be given"):
        grey_box_audit(make, [[1]], [[0]], y0=[1])
    with pytest.raises(TypeError, match="has no _noise_plan"):
        grey_box_audit(make, [[1]], [[0]])


def test_grey_box_gtm_with_every_kind_of_threshold_mechanism(monkeypatch):
    # Gaussian and Laplace threshold queries (sensitivity 2) and randomized response in
    # one search: every draw is declared, and the queries' values move by at most Δ_t.
    import skdptest as s
    from skdptest.audit import grey_box_audit
    from skdptest.threshold import (
        GaussianThresholdQuery,
        NoisyThresholdQuery,
        RandomizedResponse,
        _mechanisms,
    )

    mechs = [GaussianThresholdQuery(_Total(), 5.0, 0.25, 1e-6),
             NoisyThresholdQuery(_Total(), 5.0, 0.25, sensitivity=2.0),
             RandomizedResponse(_SumAtLeast(5), 0.25)]
    X0 = np.r_[np.ones(4), np.zeros(6)][:, None]
    X1 = X0.copy()
    X1[-1] = 1.0

    def make(q):
        return s.GeneralizedThresholdMechanism(mechanisms=mechs, random_state=q)

    r = grey_box_audit(make, X0, X1, random_state=0, n_replays=5)
    assert not r.flagged, r.findings
    by_label = {q.label: q for q in r.quantities}
    assert by_label["threshold queries (laplace)"].required_scale == 8.0  # Δ/ε = 2/0.25
    assert by_label["threshold queries (gaussian)"].drawn_scale == mechs[0].sigma
    # a halved Gaussian threshold noise is caught too
    honest = _mechanisms._noise.gaussian
    monkeypatch.setattr(_mechanisms._noise, "gaussian",
                        lambda rng, sigma, size=None: honest(rng, sigma / 2, size))
    r = grey_box_audit(make, X0, X1, random_state=0, n_replays=5)
    assert r.flagged and any(f.startswith("threshold queries (gaussian): noise scale")
                             for f in r.findings), r.findings


class _Total:
    """Public statistic: the sum of column 0 (sensitivity 1 for rows in [0, 1])."""

    def __call__(self, X, y):
        return float(np.sum(X[:, 0]))

    def __repr__(self):
        return "_Total()"
