"""GeneralizedThresholdMechanism: contract, bad input, accuracy by Monte Carlo."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, clone

from skdptest import GeneralizedThresholdMechanism, PrivacyBudget, ThresholdResult
from skdptest.threshold import (
    EstimatorMechanism,
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    RandomizedResponse,
    ThresholdMechanism,
    gtm_evaluation_bound,
    gtm_lambda,
    gtm_p_bar,
    gtm_step_parameters,
    poisson_threshold_k,
)
from skdptest.threshold._gtm import _search, _simulate_search


class Coin(ThresholdMechanism):
    """A mechanism with a fixed p (ignores the data): ε-DP for any ε."""

    def __init__(self, p, epsilon, delta=0.0):
        self.p, self.epsilon, self.delta = p, epsilon, delta

    def sample(self, X, y, size, rng):
        return np.where(rng.random(size) < self.p, 1, -1)


class BadOutputs:
    epsilon = 0.1

    def sample(self, X, y, size, rng):
        return np.zeros(size)


class NoEpsilon:
    def sample(self, X, y, size, rng):
        return np.ones(size)


class Eps:
    def __init__(self, epsilon, delta=0.0):
        self.epsilon, self.delta = epsilon, delta

    def sample(self, X, y, size, rng):
        return np.ones(size)


X = np.random.default_rng(0).normal(size=(50, 2))


def rr_stream(bits, eps_t=0.1):
    return [RandomizedResponse(lambda X, y, b=b: b > 0, eps_t) for b in bits]


# -- contract ----------------------------------------------------------------------


def test_fit_result_and_budget():
    budget = PrivacyBudget(epsilon=5.0)
    gtm = GeneralizedThresholdMechanism(rr_stream([-1, -1, 1, 1]), epsilon=1.0, budget=budget,
                                        random_state=0)
    assert gtm.fit(X) is gtm
    res = gtm.result_
    assert isinstance(res, ThresholdResult)
    assert {f.name for f in dataclasses.fields(res)} == {
        "accepted", "n_examined", "n_mechanisms", "epsilon", "delta", "method"}
    assert res.n_mechanisms == 4 and res.epsilon == 1.0 and res.delta == 0.0
    assert res.n_examined == (4 if res.accepted is None else res.accepted + 1)
    assert gtm.decision() == res.accepted
    assert budget.spent == (1.0, 0.0)
    assert [e.label for e in budget.ledger] == ["GeneralizedThresholdMechanism.fit"]


def test_decision_finds_the_first_good_mechanism():
    # noisy thresholds far from their threshold: p_t ~ 0 for the first two, ~ 1 after
    mechs = [NoisyThresholdQuery(lambda X, y, c=c: c, 0.0, 0.1) for c in (-80, -60, 60, 80)]
    hits = [GeneralizedThresholdMechanism(mechs, random_state=s).fit(X).decision()
            for s in range(20)]
    assert hits.count(2) >= 19


def test_default_mechanisms_find_the_median_on_a_dyadic_grid():
    Xm = np.random.default_rng(1).normal(3.0, 1.0, size=(2000, 1))
    found = []
    for seed in range(5):
        gtm = GeneralizedThresholdMechanism(random_state=seed).fit(Xm)
        found.append(gtm.mechanisms_[gtm.decision()].statistic.c)
    assert found == [4.0] * 5
    assert len(gtm.mechanisms_) == 63 and gtm.p_star_ == [0.5] * 63


def test_score_is_charged_and_scores_early_acceptance():
    budget = PrivacyBudget(epsilon=10.0)
    mechs = [NoisyThresholdQuery(lambda X, y, c=c: c, 0.0, 0.1) for c in (-80, 80, 80)]
    gtm = GeneralizedThresholdMechanism(mechs, budget=budget, random_state=0).fit(X)
    assert gtm.score(X) == -2.0
    assert budget.spent == (2.0, 0.0)
    none = [NoisyThresholdQuery(lambda X, y: -80.0, 0.0, 0.1)] * 2
    assert GeneralizedThresholdMechanism(none, random_state=0).fit(X).score(X) == -3.0


def test_reproducible_and_test_one_liner():
    mechs = rr_stream([-1, 1, -1, 1, 1])
    a = GeneralizedThresholdMechanism(mechs, random_state=3).test(X)
    b = GeneralizedThresholdMechanism(mechs, random_state=3).fit(X).test()
    assert a == b
    assert clone(GeneralizedThresholdMechanism(mechs)).get_params()["mechanisms"] is not None


@pytest.mark.parametrize("p_star", [[0.2, 0.5, 0.9], np.array([0.2, 0.5, 0.9]),
                                    (lambda i: 0.2 + 0.3 * i)],
                         ids=["sequence", "array", "callable"])
def test_adaptive_thresholds(p_star):
    gtm = GeneralizedThresholdMechanism(rr_stream([1, 1, 1]), p_star=p_star, random_state=0)
    gtm.fit(X)
    assert gtm.p_star_ == pytest.approx([0.2, 0.5, 0.8 if callable(p_star) else 0.9])


def test_purified_gaussian_mechanisms_spend_pure_epsilon():
    budget = PrivacyBudget(epsilon=1.0)
    mechs = [GaussianThresholdQuery(lambda X, y, c=c: c, 0.0, 0.1, 1e-4) for c in (-100, 100)]
    gtm = GeneralizedThresholdMechanism(mechs, budget=budget, random_state=0).fit(X)
    assert gtm.decision() == 1
    assert budget.spent == (1.0, 0.0) and gtm.result_.delta == 0.0


class _ToyTest(BaseEstimator):
    def __init__(self, epsilon=0.1, budget=None, random_state=None):
        self.epsilon, self.budget, self.random_state = epsilon, budget, random_state

    def fit(self, X, y=None):
        if self.budget is not None:
            self.budget.spend(self.epsilon, label="toy")
        rng = np.random.default_rng(self.random_state)
        self.reject_ = np.clip(X[:, 0], -1, 1).sum() + rng.laplace(0, 2 / self.epsilon) > 0
        return self

    def decision(self, X=None, y=None):
        return bool(self.reject_)


def test_estimator_adapter_is_cloned_and_not_charged_twice():
    inner_budget = PrivacyBudget(epsilon=1.0)
    outer = PrivacyBudget(epsilon=1.0)
    with pytest.warns(UserWarning, match="budget is ignored"):
        mech = EstimatorMechanism(_ToyTest(epsilon=0.1, budget=inner_budget))
    assert mech.epsilon == 0.1 and mech.delta == 0.0
    Xp = np.abs(X) + 1.0  # every row pushes the toy test to reject
    gtm = GeneralizedThresholdMechanism([mech], p_star=0.5, budget=outer, random_state=0)
    assert gtm.fit(Xp).decision() == 0
    assert inner_budget.spent == (0.0, 0.0)
    assert outer.spent == (1.0, 0.0)
    assert mech.estimator.budget is inner_budget  # the user's estimator is untouched
    assert not hasattr(mech.estimator, "reject_")


# -- bad input: clear errors, nothing charged --------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"mechanisms": [NoEpsilon()]}, ValueError, r"mechanisms\[0\] has no attribute 'epsilon'"),
        ({"mechanisms": [BadOutputs()]}, ValueError, r"outputs other than ±1"),
        ({"mechanisms": [Eps(0.0)]}, ValueError,
         r"mechanisms\[0\]\.epsilon must be finite and > 0"),
        ({"mechanisms": [Eps(-1.0)]}, ValueError, r"mechanisms\[0\]\.epsilon must be finite"),
        ({"mechanisms": [Eps("a")]}, TypeError, r"mechanisms\[0\]\.epsilon must be a real"),
        ({"mechanisms": [Eps(0.1, 1.0)]}, ValueError,
         r"mechanisms\[0\]\.delta must lie in \[0, 1\)"),
        ({"mechanisms": [Eps(0.1, -0.1)]}, ValueError, r"delta must lie in \[0, 1\)"),
        ({"mechanisms": [object()]}, TypeError, r"mechanisms\[0\] must have a method sample"),
        ({"mechanisms": Eps(0.1)}, TypeError, r"mechanisms must be None or a sequence"),
        ({"mechanisms": []}, ValueError, r"mechanisms must contain at least one"),
        ({"p_star": 0.0}, ValueError, r"p_star must be > 0.0"),
        ({"p_star": 1.0}, ValueError, r"p_star must be < 1.0"),
        ({"p_star": [0.5] * 62 + [1.2]}, ValueError, r"p_star\[62\] must be < 1.0"),
        ({"p_star": [0.5]}, ValueError, r"p_star has 1 entries but there are 63 mechanisms"),
        ({"p_star": lambda i: -0.1}, ValueError, r"p_star\(0\) must be > 0.0"),
        ({"p_star": "0.5"}, TypeError, r"p_star must be a float, a sequence"),
        ({"gamma": 1.0}, ValueError, r"gamma must be > 1.0"),
        ({"gamma": 2.5}, ValueError, r"gamma must be <= 2.0"),
        ({"theta": 0.0}, ValueError, r"theta must be > 0.0"),
        ({"beta": 0.0}, ValueError, r"beta must be > 0.0"),
        ({"beta": 1.0}, ValueError, r"beta must be < 1.0"),
        ({"epsilon": 0.0}, ValueError, r"epsilon must be > 0.0"),
        ({"mechanisms": [Eps(5.0)]}, ValueError, r"mechanisms\[0\]: epsilon_t=5 is too large"),
    ],
)
def test_bad_input_raises_before_charging(kwargs, error, match):
    budget = PrivacyBudget(epsilon=10.0)
    with pytest.raises(error, match=match):
        GeneralizedThresholdMechanism(budget=budget, **kwargs).fit(X)
    assert budget.spent == (0.0, 0.0)


def test_malformed_outputs_during_the_search_raise():
    class Lies(Eps):
        calls = 0

        def sample(self, X, y, size, rng):
            type(self).calls += 1
            return np.ones(size) if type(self).calls == 1 else np.full(size, 2)

    with pytest.raises(ValueError, match=r"mechanisms\[0\]\.sample returned outputs other"):
        GeneralizedThresholdMechanism([Lies(0.1)], random_state=0).fit(X)


def test_abstract_mechanism_needs_sample():
    with pytest.raises(TypeError, match="abstract"):
        ThresholdMechanism()


def test_warns_when_expected_evaluations_are_infinite():
    with pytest.warns(RuntimeWarning, match="expected number of evaluations of this step is"):
        GeneralizedThresholdMechanism([Eps(0.34)], epsilon=1.0, random_state=0)._check_params()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GeneralizedThresholdMechanism([Eps(0.3)], epsilon=1.0)._check_params()


# -- public helpers ---------------------------------------------------------------------


@pytest.mark.parametrize("beta_t", [0.1, 1e-3, 1e-6])
def test_k_is_the_least_integer_with_both_poisson_tails_small(beta_t):
    k = poisson_threshold_k(beta_t, 1.5)
    r = math.sqrt(1.5)

    def ok(k):
        return (stats.poisson.cdf(k - 1, r * k) <= beta_t
                and stats.poisson.sf(k - 1, k / r) <= beta_t)

    assert ok(k) and not any(ok(j) for j in range(1, k))


@pytest.mark.parametrize("t, eps_t, eps, beta, theta",
                         [(1, 0.05, 1.0, 0.1, 1.0), (7, 0.2, 0.5, 0.05, 2.0)])
def test_lambda_matches_the_closed_form(t, eps_t, eps, beta, theta):
    a = (2 + theta) * eps_t / eps
    log_term = math.log(5 * t * math.log(t + 2) ** 3)
    expected = math.exp(a * log_term + a / theta * math.log(4 / beta) + a * math.log(1 / beta))
    abstract = math.exp(a * log_term + (3 + theta + 2 / theta) * eps_t / eps
                        * math.log(4 / beta))
    lam = gtm_lambda(t, eps_t, epsilon=eps, beta=beta, theta=theta)
    assert lam == pytest.approx(expected, rel=1e-12)
    assert lam <= abstract
    sp = gtm_step_parameters(t, eps_t, 0.0, 0.5, epsilon=eps, beta=beta, gamma=1.5,
                             theta=theta)
    assert math.exp(sp.log_lambda) == pytest.approx(lam, rel=1e-12)


def test_p_bar_abstract_and_exact():
    for p_star in (0.01, 0.5, 0.99):
        assert gtm_p_bar(3, 0.1, p_star) == gtm_p_bar(3, 0.1, p_star, exact=True)
    lam = gtm_lambda(1, 0.05)
    assert gtm_p_bar(1, 0.05, 0.5) == pytest.approx(0.5 / (1.5 * lam))
    # direct branch with delta > 0: the guaranteed level is at least the abstract's
    assert gtm_p_bar(1, 0.05, 0.3, delta_t=1e-3, exact=True) >= gtm_p_bar(
        1, 0.05, 0.3, delta_t=1e-3)
    with pytest.raises(ValueError, match="p_star must be < 1.0"):
        gtm_p_bar(1, 0.05, 1.0)
    with pytest.raises(ValueError, match="t must be an integer >= 1"):
        gtm_lambda(0, 0.05)


@pytest.mark.parametrize("p_star", [0.1, 0.99])
def test_evaluation_bound_holds_with_high_probability(p_star):
    sp = gtm_step_parameters(2, 0.1, 0.0, p_star, epsilon=1.0, beta=0.1, gamma=1.5, theta=1.0)
    bound = gtm_evaluation_bound(2, 0.1, p_star)
    rng = np.random.default_rng(0)
    n = 20000
    R = rng.exponential(sp.b0, n)
    nu = rng.exponential(sp.b1, n)
    rate = np.exp(sp.log_rho + sp.direction * 0.1 * (nu - R))
    allowed = sp.beta_t + 0.1 / 4
    assert np.mean(rate > bound) <= stats.binom.ppf(1 - 1e-4, n, allowed) / n


# -- accuracy by Monte Carlo ---------------------------------------------------------------


def _failures(p_star, ratio, eps=1.0, T=12, t_star=None, n=20000, delta=0.0, seed=0):
    eps_t = ratio * eps
    p_bar = [gtm_p_bar(t + 1, eps_t, p_star, delta_t=delta, epsilon=eps, exact=True)
             for t in range(T)]
    p_bar = [max(v, 0.0) for v in p_bar]
    p = p_bar if t_star is None else p_bar[:t_star] + [p_star] * (T - t_star)
    acc, _ = _simulate_search(p, [p_star] * T, [eps_t] * T, [delta] * T, epsilon=eps,
                              beta=0.1, gamma=1.5, theta=1.0, n_reps=n,
                              rng=np.random.default_rng(seed))
    if t_star is None:
        return int(np.sum(acc >= 0)), n  # false stops
    return int(np.sum(acc != t_star)), n  # false stop before t*, or miss at t*


def _limit(n, beta=0.1):
    return stats.binom.ppf(1 - 1e-4, n, beta)


@pytest.mark.parametrize("p_star", [0.01, 0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("ratio", [0.05, 0.25])
def test_false_stop_rate_at_most_beta(p_star, ratio):
    bad, n = _failures(p_star, ratio)
    assert bad <= _limit(n)


@pytest.mark.parametrize("p_star", [0.01, 0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("ratio", [0.05, 0.25])
def test_miss_rate_at_most_beta(p_star, ratio):
    bad, n = _failures(p_star, ratio, t_star=6)
    assert bad <= _limit(n)


def test_accuracy_with_purified_mechanisms():
    bad, n = _failures(0.3, 0.1, delta=1e-3)
    assert bad <= _limit(n)
    bad, n = _failures(0.3, 0.1, delta=1e-3, t_star=4)
    assert bad <= _limit(n)


def test_shipped_search_accuracy_on_coins():
    """The shipped search (not the simulation) on mechanisms with known p."""
    eps_t, T, n = 0.1, 5, 300
    p_bar = [gtm_p_bar(t + 1, eps_t, 0.5) for t in range(T)]
    mechs = [Coin(p, eps_t) for p in p_bar[:3]] + [Coin(0.5, eps_t)] * 2
    rng = np.random.default_rng(7)
    bad = 0
    for _ in range(n):
        i = _search(mechs, [(eps_t, 0.0)] * T, [0.5] * T, X, None, rng, epsilon=1.0,
                    beta=0.1, gamma=1.5, theta=1.0)
        bad += i != 3
    assert bad <= _limit(n)


# -- safeguards ----------------------------------------------------------------------------


def test_poisson_draw_handles_huge_rates():
    from skdptest.threshold._gtm import _poisson

    rng = np.random.default_rng(0)
    lam = 5e16
    draws = np.array([_poisson(rng, lam) for _ in range(200)], dtype=float)
    z = (draws.mean() - lam) / math.sqrt(lam / 200)
    assert abs(z) < 4.5
    assert _poisson(rng, 3.0) >= 0


class _FixedNoise:
    """A generator stand-in: the first exponential draw (R) is ``r``, later ones (ν) ``nu``."""

    def __init__(self, r, nu):
        self.values = [r]
        self.nu = nu

    def exponential(self, mean, size=None):
        return self.values.pop() if self.values else self.nu


class _MustNotRun(Eps):
    def sample(self, X, y, size, rng):
        raise AssertionError("the mechanism must not run above the rate cap")


@pytest.mark.parametrize("p_star, r, nu, expected", [(0.5, 0.0, 1e4, 0), (0.99, 1e4, 0.0, None)],
                         ids=["direct-forced-accept", "flip-forced-reject"])
def test_rate_cap_forces_the_monotone_decision(p_star, r, nu, expected):
    # direct branch: the rate grows with nu - R, above the cap the step is accepted;
    # flip branch: the rate grows with R - nu, above the cap the step is rejected
    sp = gtm_step_parameters(1, 0.1, 0.0, p_star, epsilon=1.0, beta=0.1, gamma=1.5, theta=1.0)
    assert sp.direction == (1 if p_star == 0.5 else -1)
    trace = []
    out = _search([_MustNotRun(0.1)], [(0.1, 0.0)], [p_star], X, None, _FixedNoise(r, nu),
                  epsilon=1.0, beta=0.1, gamma=1.5, theta=1.0, trace=trace)
    assert out == expected
    assert trace == [{"t": 1, "n_runs": 0, "evaluations": 0, "forced": True,
                      "accept": expected == 0}]
