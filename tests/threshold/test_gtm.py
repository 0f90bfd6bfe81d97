"""GeneralizedThresholdMechanism: contract, bad input, accuracy by Monte Carlo."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import special, stats
from sklearn.base import BaseEstimator, clone

import skdptest.threshold._gtm as gtm_module
from skdptest import (
    BudgetExceededError,
    GeneralizedThresholdMechanism,
    InvalidParameterError,
    PrivacyBudget,
    PrivateEProcess,
    TestResult,
    ThresholdResult,
)
from skdptest._recorder import recording
from skdptest.threshold import (
    EstimatorMechanism,
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    RandomizedResponse,
    ThresholdMechanism,
    constant_work_evaluations,
    gtm_evaluation_bound,
    gtm_lambda,
    gtm_p_bar,
    gtm_step_parameters,
    poisson_threshold_k,
)
from skdptest.threshold._gtm import _search, _simulate_search, _steps
from skdptest.threshold._mechanisms import check_outputs


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
                                        failure_probability=0.05, random_state=0)
    assert gtm.fit(X) is gtm
    res = gtm.result_
    assert isinstance(res, ThresholdResult) and isinstance(res, TestResult)
    assert {f.name for f in dataclasses.fields(res)} == {
        "reject", "alpha", "epsilon", "delta", "n_samples", "method", "accepted",
        "n_examined", "n_mechanisms", "accepted_mechanism", "work"}
    assert res.accepted is not None  # the last two mechanisms are good
    assert res.n_mechanisms == 4 and res.epsilon == 1.0 and res.delta == 0.0
    assert res.n_examined == res.accepted + 1 and res.n_samples == X.shape[0]
    assert res.reject is True and gtm.decision() is True
    assert res.alpha == 0.05 and res.work == "poisson"
    assert res.accepted_mechanism == repr(gtm.mechanisms_[res.accepted])
    assert res.accepted_mechanism.startswith("RandomizedResponse(bit=")
    assert budget.spent == (1.0, 0.0)
    assert [e.label for e in budget.ledger] == ["GeneralizedThresholdMechanism.fit"]


def test_no_acceptance_is_no_rejection():
    none = [NoisyThresholdQuery(lambda X, y: -80.0, 0.0, 0.1)] * 3
    gtm = GeneralizedThresholdMechanism(none, random_state=0).fit(X)
    res = gtm.result_
    assert res.accepted is None and res.accepted_mechanism is None
    assert res.reject is False and gtm.decision() is False
    assert res.n_examined == res.n_mechanisms == 3


def test_signature_is_keyword_only_after_mechanisms():
    with pytest.raises(TypeError, match="positional"):
        GeneralizedThresholdMechanism(None, 0.5)
    assert set(GeneralizedThresholdMechanism().get_params()) == {
        "mechanisms", "p_star", "epsilon", "failure_probability", "approximation", "theta",
        "work", "budget", "random_state"}


def test_fit_stores_nothing_before_the_charge():
    budget = PrivacyBudget(epsilon=0.5)
    gtm = GeneralizedThresholdMechanism(rr_stream([1]), epsilon=1.0, budget=budget)
    before = set(vars(gtm))
    with pytest.raises(BudgetExceededError):
        gtm.fit(X)
    assert set(vars(gtm)) == before


@pytest.mark.parametrize("work", ["poisson", "constant"])
def test_decision_finds_the_first_good_mechanism(work):
    # noisy thresholds far from their threshold: p_t ~ 0 for the first two, ~ 1 after
    mechs = [NoisyThresholdQuery(lambda X, y, c=c: c, 0.0, 0.1) for c in (-80, -60, 60, 80)]
    n = 40
    hits = [GeneralizedThresholdMechanism(mechs, work=work, random_state=s).fit(X)
            .result_.accepted for s in range(n)]
    # failures (a false stop at 0 or 1, or a miss at 2) happen with probability <= beta
    assert n - hits.count(2) <= _limit(n)
    assert hits.count(2) >= n - 3  # in practice far fewer than beta n = 4


def test_default_mechanisms_find_the_median_on_a_dyadic_grid():
    Xm = np.random.default_rng(1).normal(3.0, 1.0, size=(2000, 1))
    found = []
    for seed in range(5):
        gtm = GeneralizedThresholdMechanism(random_state=seed).fit(Xm)
        found.append(gtm.mechanisms_[gtm.result_.accepted].statistic.c)
    assert found == [4.0] * 5
    assert len(gtm.mechanisms_) == 63 and gtm.p_star_ == [0.5] * 63


def test_default_mechanisms_are_the_queries_the_constructor_builds():
    from skdptest.threshold._gtm import _BelowFraction, _dyadic_grid, default_mechanisms

    for epsilon in (1.0, 0.3, 7.5, 2e-300):
        got = default_mechanisms(epsilon)
        assert len({id(m) for m in got}) == len(got) == 63
        for mech, c in zip(got, _dyadic_grid(), strict=True):
            want = NoisyThresholdQuery(_BelowFraction(c), 0.0, 0.05 * epsilon)
            assert type(mech) is NoisyThresholdQuery and repr(mech) == repr(want)
            assert {k: v for k, v in vars(mech).items() if k != "statistic"} == \
                {k: v for k, v in vars(want).items() if k != "statistic"}
            assert type(mech.statistic) is _BelowFraction and mech.statistic.c == c
    with pytest.raises(ValueError, match="epsilon"):  # ε_t = 0: the constructor's refusal
        default_mechanisms(5e-324)


def test_score_is_charged_and_scores_early_acceptance():
    budget = PrivacyBudget(epsilon=10.0)
    mechs = [NoisyThresholdQuery(lambda X, y, c=c: c, 0.0, 0.1) for c in (-80, 80, 80)]
    gtm = GeneralizedThresholdMechanism(mechs, budget=budget, random_state=0).fit(X)
    assert gtm.score(X) == -2.0
    assert budget.spent == (2.0, 0.0)
    none = [NoisyThresholdQuery(lambda X, y: -80.0, 0.0, 0.1)] * 2
    assert GeneralizedThresholdMechanism(none, random_state=0).fit(X).score(X) == -3.0


@pytest.mark.parametrize("work", ["poisson", "constant"])
def test_reproducible_and_test_one_liner(work):
    mechs = rr_stream([-1, 1, -1, 1, 1])
    a = GeneralizedThresholdMechanism(mechs, work=work, random_state=3).test(X)
    b = GeneralizedThresholdMechanism(mechs, work=work, random_state=3).fit(X).test()
    assert a == b and a.work == work
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
    assert gtm.result_.accepted == 1
    assert budget.spent == (1.0, 0.0) and gtm.result_.delta == 0.0
    assert gtm.result_.accepted_mechanism.startswith("GaussianThresholdQuery(")


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
    assert gtm.fit(Xp).result_.accepted == 0
    assert inner_budget.spent == (0.0, 0.0)
    assert outer.spent == (1.0, 0.0)
    assert mech.estimator.budget is inner_budget  # the user's estimator is untouched
    assert not hasattr(mech.estimator, "reject_")


def test_estimator_adapter_maps_an_undecided_e_process_to_minus_one():
    # On 20 null rows the e-process has not decided ("continue"); decision() is then
    # False, so every draw is -1 (the old adapter took the truthy "continue" for +1).
    Xn = np.random.default_rng(0).normal(size=(20, 1))
    proc = PrivateEProcess(stats.norm(0, 1), stats.norm(1, 1), epsilon=0.5)
    assert clone(proc).set_params(random_state=0).fit(Xn).result_.decision == "continue"
    out = EstimatorMechanism(proc).sample(Xn, None, 5, np.random.default_rng(0))
    assert out.tolist() == [-1] * 5
    # richer states through ``positive``, which receives the fitted estimator
    cont = EstimatorMechanism(proc, positive=lambda est: est.result_.decision == "continue")
    assert cont.sample(Xn, None, 3, np.random.default_rng(0)).tolist() == [1] * 3
    with pytest.raises(TypeError, match="positive must be None or a callable"):
        EstimatorMechanism(proc, positive="continue")


# -- bad input: clear errors naming the parameter, nothing charged -------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mechanisms": [NoEpsilon()]}, r"mechanisms\[0\] has no attribute 'epsilon'"),
        ({"mechanisms": [BadOutputs()]}, r"mechanisms\[0\]\.sample returned outputs other"),
        ({"mechanisms": [Eps(0.0)]}, r"mechanisms\[0\]\.epsilon must be finite and > 0"),
        ({"mechanisms": [Eps(-1.0)]}, r"mechanisms\[0\]\.epsilon must be finite"),
        ({"mechanisms": [Eps("a")]}, r"mechanisms\[0\]\.epsilon must be a real"),
        ({"mechanisms": [Eps(0.1, 1.0)]}, r"mechanisms\[0\]\.delta must lie in \[0, 1\)"),
        ({"mechanisms": [Eps(0.1, -0.1)]}, r"mechanisms\[0\]\.delta must lie in \[0, 1\)"),
        ({"mechanisms": [object()]}, r"mechanisms\[0\] must have a method sample"),
        ({"mechanisms": Eps(0.1)}, r"mechanisms must be None or a list or tuple"),
        ({"mechanisms": []}, r"mechanisms must contain at least one"),
        ({"p_star": 0.0}, r"p_star must be a real number in \(0, 1\)"),
        ({"p_star": 1.0}, r"p_star must be a real number in \(0, 1\)"),
        ({"p_star": [0.5] * 62 + [1.2]}, r"p_star\[62\] must lie in \(0, 1\), got 1.2"),
        ({"p_star": [0.5] * 62 + ["a"]}, r"p_star\[62\] must be a real number"),
        ({"p_star": [0.5]}, r"p_star has 1 entries but there are 63 mechanisms"),
        ({"p_star": lambda i: -0.1}, r"p_star\(0\) must lie in \(0, 1\)"),
        ({"p_star": "0.5"}, r"p_star must be .* or a callable; got '0.5'"),
        ({"approximation": 1.0}, r"approximation must be a real number in \(1, 2\]"),
        ({"approximation": 2.5}, r"approximation must be a real number in \(1, 2\]"),
        ({"theta": 0.0}, r"theta must be a real number in \(0, inf\)"),
        ({"failure_probability": 0.0},
         r"failure_probability must be a real number in \[1e-100, 1\)"),
        ({"failure_probability": 1.0},
         r"failure_probability must be a real number in \[1e-100, 1\)"),
        ({"failure_probability": 5e-324},  # β_t would underflow to 0
         r"failure_probability must be a real number in \[1e-100, 1\)"),
        ({"epsilon": 0.0}, r"epsilon must be a real number in \(0, inf\)"),
        ({"work": "fast"}, r"work must be one of 'poisson', 'constant'"),
        ({"mechanisms": [Eps(5.0)]}, r"mechanisms\[0\]: epsilon_t=5 is too large"),
        ({"mechanisms": [Eps(1.0)], "work": "constant"},
         r"mechanisms\[0\]: with work='constant' the step would run 5.76e\+12 evaluations"),
    ],
)
def test_bad_input_raises_before_charging(kwargs, match):
    budget = PrivacyBudget(epsilon=10.0)
    gtm = GeneralizedThresholdMechanism(budget=budget, **kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        gtm.fit(X)
    assert budget.spent == (0.0, 0.0)
    assert not hasattr(gtm, "result_") and not hasattr(gtm, "mechanisms_")


def test_output_check_runs_on_a_public_surrogate_not_on_the_data():
    class Records(Eps):
        seen = []

        def sample(self, X, y, size, rng):
            type(self).seen.append(np.array(X))
            return np.ones(size)

    budget = PrivacyBudget(epsilon=0.5)
    with pytest.raises(BudgetExceededError):
        GeneralizedThresholdMechanism([Records(0.1)], budget=budget).fit(X)
    assert len(Records.seen) == 1  # the surrogate check only, before the refused charge
    assert Records.seen[0].shape == X.shape and not Records.seen[0].any()


def test_the_probe_skips_only_the_classes_that_cannot_fail_it(monkeypatch):
    # the skipped classes return int8 ±1 of the asked shape whatever their statistic
    rng = np.random.default_rng(3)
    for value in (0.0, -1e308, 1e308, np.inf, -np.inf, np.nan):
        for mech in (NoisyThresholdQuery(lambda X, y, v=value: v, 0.0, 0.5),
                     GaussianThresholdQuery(lambda X, y, v=value: v, 0.0, 0.5, 1e-3),
                     RandomizedResponse(lambda X, y, v=value: v > 0, 0.5)):
            for size in (0, 1, 7):
                out = mech.sample(X, None, size, rng)
                assert out.dtype == np.int8 and np.array_equal(check_outputs(out, size), out)
    # a subclass is still probed (it may override sample), before the charge
    class Zeros(NoisyThresholdQuery):
        def sample(self, X, y, size, rng):
            return np.zeros(size)

    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="outputs other than ±1"):
        GeneralizedThresholdMechanism([Zeros(lambda X, y: 0.0, 0.0, 0.05)],
                                      budget=budget).fit(X)
    assert budget.spent == (0.0, 0.0)
    # the probe has its own generator: skipping it leaves the release and its draws as
    # they were (the probed fit records the 63 probe draws first)
    def fit_and_record():
        est = GeneralizedThresholdMechanism(random_state=11)
        with recording() as record:
            est.fit(X + 3.0)
        return est.result_, record.draws

    skipped, skipped_draws = fit_and_record()
    monkeypatch.setattr(gtm_module, "_PLUS_MINUS_BY_CONSTRUCTION", ())
    probed, probed_draws = fit_and_record()
    assert skipped == probed
    assert probed_draws[len(probed_draws) - len(skipped_draws):] == skipped_draws
    assert len(probed_draws) - len(skipped_draws) == 63


@pytest.mark.parametrize("later", [2, 0, np.nan])
def test_malformed_outputs_during_the_search_count_as_minus_one(later):
    # after the charge a value other than ±1 must not raise (an exception would tell
    # neighbours apart): it counts as −1, so the search equals one whose mechanism
    # answers −1 there (same seed, same draws)
    def liar(value):
        class Lies(Eps):
            calls = 0

            def sample(self, X, y, size, rng):
                type(self).calls += 1
                return np.ones(size) if type(self).calls == 1 else np.full(size, value)

        return Lies(0.1)

    bad = GeneralizedThresholdMechanism([liar(later) for _ in range(3)],
                                        random_state=0).fit(X).result_
    ref = GeneralizedThresholdMechanism([liar(-1) for _ in range(3)],
                                        random_state=0).fit(X).result_
    assert bad == ref


def test_abstract_mechanism_needs_sample():
    with pytest.raises(TypeError, match="abstract"):
        ThresholdMechanism()


def test_warns_when_expected_evaluations_are_infinite():
    # the warning comes from the plan, before the charge (no search is run here)
    def plan(**kwargs):
        return GeneralizedThresholdMechanism(epsilon=1.0, **kwargs)._prepare(X, None,
                                                                             reset=True)

    with pytest.warns(RuntimeWarning, match="expected number of evaluations of this step is"):
        plan(mechanisms=[Eps(0.34)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan(mechanisms=[Eps(0.3)])
        # constant work: every step runs a finite public number of evaluations
        assert plan(mechanisms=[Eps(0.34)], work="constant").plan.steps[0].constant_work < 2e6


# -- public helpers ---------------------------------------------------------------------

KW = dict(epsilon=1.0, failure_probability=0.1, approximation=1.5, theta=1.0)


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
    lam = gtm_lambda(t, eps_t, epsilon=eps, failure_probability=beta, theta=theta)
    assert lam == pytest.approx(expected, rel=1e-12)
    assert lam <= abstract
    sp = gtm_step_parameters(t, eps_t, 0.0, 0.5, epsilon=eps, failure_probability=beta,
                             approximation=1.5, theta=theta)
    assert math.exp(sp.log_lambda) == pytest.approx(lam, rel=1e-12)


def test_p_bar_abstract_and_exact():
    for p_star in (0.01, 0.5, 0.99):
        assert gtm_p_bar(3, 0.1, p_star) == gtm_p_bar(3, 0.1, p_star, exact=True)
    lam = gtm_lambda(1, 0.05)
    assert gtm_p_bar(1, 0.05, 0.5) == pytest.approx(0.5 / (1.5 * lam))
    assert gtm_p_bar(1, 0.05, 0.5, approximation=1.2) == pytest.approx(0.5 / (1.2 * lam))
    # direct branch with delta > 0: the guaranteed level is at least the abstract's
    assert gtm_p_bar(1, 0.05, 0.3, delta_t=1e-3, exact=True) >= gtm_p_bar(
        1, 0.05, 0.3, delta_t=1e-3)
    with pytest.raises(ValueError, match=r"p_star must be a real number in \(0, 1\); got 1\.0"):
        gtm_p_bar(1, 0.05, 1.0)
    with pytest.raises(ValueError, match=r"approximation must be a real number in \(1, 2\]"):
        gtm_p_bar(1, 0.05, 0.5, approximation=2.5)
    with pytest.raises(ValueError,
                       match=r"failure_probability must be a real number in \(0, 1\); got 0\.0"):
        gtm_lambda(1, 0.05, failure_probability=0.0)
    with pytest.raises(ValueError, match="t must be an integer >= 1"):
        gtm_lambda(0, 0.05)


@pytest.mark.parametrize("p_star", [0.1, 0.99])
def test_evaluation_bound_holds_with_high_probability(p_star):
    sp = gtm_step_parameters(2, 0.1, 0.0, p_star, **KW)
    bound = gtm_evaluation_bound(2, 0.1, p_star)
    rng = np.random.default_rng(0)
    n = 20000
    R = rng.exponential(sp.b0, n)
    nu = rng.exponential(sp.b1, n)
    rate = np.exp(sp.log_rho + sp.direction * 0.1 * (nu - R))
    allowed = sp.failure_probability_t + 0.1 / 4
    assert np.mean(rate > bound) <= stats.binom.ppf(1 - 1e-4, n, allowed) / n
    # constant work: N_t > M_t at most beta_t more often than the rate bound fails
    m = sp.constant_work
    assert m == constant_work_evaluations(math.log(bound), sp.failure_probability_t)
    assert stats.poisson.sf(m, bound) <= sp.failure_probability_t
    assert stats.poisson.sf(m - 1, bound) > sp.failure_probability_t  # the least such m
    over = np.mean(rng.poisson(rate) > m)
    assert over <= stats.binom.ppf(1 - 1e-4, n, allowed + sp.failure_probability_t) / n


def test_memoised_constant_work_equals_the_plain_computation():
    plain = constant_work_evaluations.__wrapped__
    edge = math.log(1e15)
    cases = [(math.log(5.0), 0.01), (-50.0, 0.5), (0.0, 1e-15), (edge, 1e-3),
             (math.nextafter(edge, math.inf), 1e-3), (700.0, 5e-324), (1e308, 0.1),
             (-30.0, 0.2)]
    cases += [(float(v), beta) for v in np.linspace(-3.0, 25.0, 8) for beta in (1e-9, 0.3)]
    for args in cases + cases:  # the second pass reads the cache
        got = constant_work_evaluations(*args)
        assert type(got) is int and got == plain(*args), args
    # np.float64 and int keys hit the float's entry with the same value
    assert constant_work_evaluations(np.float64(3.0), 0.01) == plain(3.0, 0.01)
    assert constant_work_evaluations(3, 0.01) == plain(3.0, 0.01)


@pytest.mark.parametrize(("log_rate", "beta"), [
    (math.log(5.0), 1e-17),   # 1 - beta rounds to 1: scipy's quantile is inf
    (math.log(5.0), 5e-324),
    (29.25, 1e-9),            # rate ~5e12: scipy's quantile is nan
    (math.log(1e14), 1e-20),
])
def test_constant_work_falls_back_to_a_valid_bound_where_scipy_fails(log_rate, beta):
    assert not np.isfinite(stats.poisson.ppf(1.0 - beta, math.exp(log_rate)))
    m = constant_work_evaluations.__wrapped__(log_rate, beta)
    assert type(m) is int and m >= 1
    # independent check of Pr[Po(rate) > m] <= beta: the regularised incomplete gamma
    assert special.pdtrc(m, math.exp(log_rate)) <= beta


def test_tiny_failure_probability_plans_instead_of_crashing():
    # beta_t below 1.1e-16 made scipy's Poisson quantile inf: OverflowError in the plan
    kw = dict(KW, failure_probability=1e-12)
    for t in (1, 2, 63):
        sp = gtm_step_parameters(t, 1.0 / 63, 0.0, 0.5, **kw)
        assert type(sp.constant_work) is int and sp.constant_work >= 1
    X = np.random.default_rng(0).normal(size=(50, 1))
    est = GeneralizedThresholdMechanism(failure_probability=1e-12, random_state=0).fit(X)
    assert est.result_.n_mechanisms == 63 and est.result_.n_examined >= 1


# -- accuracy by Monte Carlo ---------------------------------------------------------------


def _failures(p_star, ratio, eps=1.0, T=12, t_star=None, n=6000, delta=0.0, seed=0,
              work="poisson"):
    """Failures of ``n`` simulated searches. At n = 6000 the bound ``_limit`` is 0.115 n:
    a failure rate of 0.13 (beta + 0.03) exceeds it with probability 0.9998; the shipped
    parameters fail at rates near 0.005."""
    eps_t = ratio * eps
    p_bar = [gtm_p_bar(t + 1, eps_t, p_star, delta_t=delta, epsilon=eps, exact=True)
             for t in range(T)]
    p_bar = [max(v, 0.0) for v in p_bar]
    p = p_bar if t_star is None else p_bar[:t_star] + [p_star] * (T - t_star)
    acc, _ = _simulate_search(p, [p_star] * T, [eps_t] * T, [delta] * T, epsilon=eps,
                              failure_probability=0.1, approximation=1.5, theta=1.0,
                              n_reps=n, rng=np.random.default_rng(seed), work=work)
    if t_star is None:
        return int(np.sum(acc >= 0)), n  # false stops
    return int(np.sum(acc != t_star)), n  # false stop before t*, or miss at t*


def _limit(n, beta=0.1):
    return stats.binom.ppf(1 - 1e-4, n, beta)


# p* = 0.1 takes the direct branch at every step, like 0.01 and 0.5 (0.9 and 0.99 flip at
# eps_t / eps = 0.05): it runs in the slow suite
P_STARS = [0.01, pytest.param(0.1, marks=pytest.mark.slow), 0.5, 0.9, 0.99]


@pytest.mark.parametrize("work", ["poisson", "constant"])
@pytest.mark.parametrize("p_star", P_STARS)
@pytest.mark.parametrize("ratio", [0.05, 0.25])
def test_false_stop_rate_at_most_beta(p_star, ratio, work):
    bad, n = _failures(p_star, ratio, work=work)
    assert bad <= _limit(n)


@pytest.mark.parametrize("work", ["poisson", "constant"])
@pytest.mark.parametrize("p_star", P_STARS)
@pytest.mark.parametrize("ratio", [0.05, 0.25])
def test_miss_rate_at_most_beta(p_star, ratio, work):
    bad, n = _failures(p_star, ratio, t_star=6, work=work)
    assert bad <= _limit(n)


def test_accuracy_check_can_fail():
    # a stream just above the rejection level is accepted far more often than beta:
    # the false-stop check above is not vacuous
    bad, n = _failures(0.5, 0.05, T=12, t_star=0)
    assert n - bad > _limit(n)  # "t_star=0" counts acceptances at the first step


def test_accuracy_with_purified_mechanisms():
    bad, n = _failures(0.3, 0.1, delta=1e-3)
    assert bad <= _limit(n)
    bad, n = _failures(0.3, 0.1, delta=1e-3, t_star=4)
    assert bad <= _limit(n)


@pytest.mark.parametrize("work", ["poisson", "constant"])
def test_shipped_search_accuracy_on_coins(work):
    """The shipped search (not the simulation) on mechanisms with known p."""
    eps_t, T, n = 0.1, 5, 300
    p_bar = [gtm_p_bar(t + 1, eps_t, 0.5) for t in range(T)]
    mechs = [Coin(p, eps_t) for p in p_bar[:3]] + [Coin(0.5, eps_t)] * 2
    rng = np.random.default_rng(7)
    # the steps computed once, as the estimator's plan does (the same function)
    steps = _steps([(eps_t, 0.0)] * T, [0.5] * T, **KW)
    bad = 0
    for _ in range(n):
        i = _search(mechs, [(eps_t, 0.0)] * T, [0.5] * T, X, None, rng, work=work,
                    steps=steps, **KW)
        bad += i != 3
    assert bad <= _limit(n)


# -- no data-dependent work ------------------------------------------------------------------


class Counting(ThresholdMechanism):
    """Randomized response on the sign of X[0, 0] (p = 0.99 or 0.01, so ε_t = ln 99),
    recording the sizes of its draws.

    Its use of the generator does not depend on the data (one uniform per draw), so
    two neighbouring data sets searched with the same seed share every noise draw.
    """

    epsilon = math.log(99.0)
    delta = 0.0

    def __init__(self):
        self.sizes = []

    def sample(self, X, y, size, rng):
        self.sizes.append(size)
        b = 1 if X[0, 0] > 0 else -1
        keep = rng.random(size) < 0.99
        return np.where(keep, b, -b)


def _work_on_neighbours(work, T=4, seeds=range(40)):
    """Per-step sample() sizes and outputs on X and on X with its first row replaced."""
    Xa = np.ones((5, 1))
    Xb = Xa.copy()
    Xb[0, 0] = -1.0  # one row replaced: every mechanism's bit flips
    eps_t = Counting.epsilon
    kw = dict(KW, epsilon=eps_t / 0.05)  # ε_t / ε = 0.05
    runs = []
    for seed in seeds:
        row = []
        for data in (Xa, Xb):
            mechs = [Counting() for _ in range(T)]
            out = _search(mechs, [(eps_t, 0.0)] * T, [0.5] * T, data, None,
                          np.random.default_rng(seed), work=work, **kw)
            row.append((out, [m.sizes for m in mechs]))
        runs.append(row)
    return runs


def _early_stop(mech, X, y, n_evaluations, n_counted, target, phi, rng, name):
    """Mutant: the old behaviour, stopping a step once its count is decided (here: 20)."""
    count = done = 0
    while done < n_evaluations and count < 20:
        m = int(min(64, n_evaluations - done))
        out = mech.sample(X, y, m, rng)
        used = min(max(n_counted - done, 0), m)
        count += int(np.count_nonzero(out[:used] == target))
        done += m
    return count


def test_poisson_work_is_the_same_on_neighbours_step_by_step():
    # Same seed on neighbours: the evaluation count of every step examined by both
    # searches is the same N_t (a function of the noise only), however the outputs differ.
    outputs_differ = False
    for (out_a, sizes_a), (out_b, sizes_b) in _work_on_neighbours("poisson"):
        both = min(len(sizes_a) if out_a is None else out_a + 1,
                   len(sizes_b) if out_b is None else out_b + 1)
        assert [sum(s) for s in sizes_a[:both]] == [sum(s) for s in sizes_b[:both]]
        assert sizes_a[:both] == sizes_b[:both]
        outputs_differ |= out_a != out_b
    assert outputs_differ  # the data do change the search's course


def test_poisson_work_check_detects_a_data_dependent_early_stop(monkeypatch):
    monkeypatch.setattr(gtm_module, "_count_targets", _early_stop)
    with pytest.raises(AssertionError):
        test_poisson_work_is_the_same_on_neighbours_step_by_step()


@pytest.mark.parametrize("mutant", [False, True], ids=["shipped", "early-stop-mutant"])
def test_constant_work_is_a_function_of_the_released_index(monkeypatch, mutant):
    if mutant:
        monkeypatch.setattr(gtm_module, "_count_targets", _early_stop)
    T = 4
    eps_t = Counting.epsilon
    kw = dict(KW, epsilon=eps_t / 0.05)
    M = [gtm_step_parameters(t + 1, eps_t, 0.0, 0.5, **kw).constant_work for t in range(T)]
    ok = True
    for row in _work_on_neighbours("constant", T=T, seeds=range(15)):
        for out, sizes in row:
            examined = T if out is None else out + 1
            # exactly M_t evaluations at every examined step, none after: the whole
            # work is sum_{t <= index} M_t, whatever the data and the noise
            ok &= [sum(s) for s in sizes] == M[:examined] + [0] * (T - examined)
    assert ok is (not mutant)


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
    """A generator stand-in: the first exponential draw (R) is ``r``, later ones (ν) ``nu``;
    uniform draws are 0.5 (only used by mechanisms in constant-work mode)."""

    def __init__(self, r, nu):
        self.values = [r]
        self.nu = nu

    def exponential(self, mean, size=None):
        return self.values.pop() if self.values else self.nu

    def random(self, size=None):
        return np.full(size, 0.5)

    def poisson(self, lam, size=None):
        return np.random.default_rng(0).poisson(lam, size)


class _MustNotRun(Eps):
    def sample(self, X, y, size, rng):
        raise AssertionError("the mechanism must not run above the rate cap")


@pytest.mark.parametrize("p_star, r, nu, expected", [(0.5, 0.0, 1e4, 0), (0.99, 1e4, 0.0, None)],
                         ids=["direct-forced-accept", "flip-forced-reject"])
def test_rate_cap_forces_the_monotone_decision(p_star, r, nu, expected):
    # direct branch: the rate grows with nu - R, above the cap the step is accepted;
    # flip branch: the rate grows with R - nu, above the cap the step is rejected
    sp = gtm_step_parameters(1, 0.1, 0.0, p_star, **KW)
    assert sp.direction == (1 if p_star == 0.5 else -1)
    trace = []
    out = _search([_MustNotRun(0.1)], [(0.1, 0.0)], [p_star], X, None, _FixedNoise(r, nu),
                  trace=trace, **KW)
    assert out == expected
    assert trace == [{"t": 1, "n_runs": 0, "evaluations": 0, "forced": True,
                      "accept": expected == 0}]
    # constant work: the same forced decision, after the step's public M_t evaluations
    trace = []
    out = _search([Coin(0.5, 0.1)], [(0.1, 0.0)], [p_star], X, None, _FixedNoise(r, nu),
                  work="constant", trace=trace, **KW)
    assert out == expected
    assert trace == [{"t": 1, "n_runs": 0, "evaluations": sp.constant_work, "forced": True,
                      "accept": expected == 0}]


@pytest.mark.parametrize("p_star, expected", [(0.5, 0), (0.99, None)],
                         ids=["direct-forced-accept", "flip-forced-reject"])
def test_constant_work_forces_the_step_when_n_exceeds_its_evaluations(p_star, expected):
    # a rate just below the cap: N_t ~ Po(λ_t) exceeds M_t, so the step is forced although
    # the mechanism's outputs (always the non-target) would decide the other way
    sp = gtm_step_parameters(1, 0.1, 0.0, p_star, **KW)
    target_rate = sp.log_rate_cap - 0.01
    nu = (target_rate - sp.log_rho) / (0.1 * sp.direction)
    r, nu = (0.0, nu) if sp.direction == 1 else (-nu, 0.0)

    class Never(Eps):
        def sample(self, X, y, size, rng):
            return np.full(size, -sp.direction)

    trace = []
    out = _search([Never(0.1)], [(0.1, 0.0)], [p_star], X, None, _FixedNoise(r, nu),
                  work="constant", trace=trace, **KW)
    assert trace[0]["n_runs"] > sp.constant_work and trace[0]["forced"]
    assert out == expected
    # poisson work on the same noise counts the outputs instead: the other decision
    out = _search([Never(0.1)], [(0.1, 0.0)], [p_star], X, None, _FixedNoise(r, nu), **KW)
    assert out == (None if expected == 0 else 0)
