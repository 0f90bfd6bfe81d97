"""Extreme laws stay valid or are refused (doc/evalues.md, 'Extreme laws').

A continuous law whose scale is not large against float64's spacing at its location
has rows that float64 rounds to a coarse grid: N(2**52, 1) against N(2**52 + 1, 1)
rejected a true null 176/200 times. Such laws are refused from the laws alone, before
any charge; accepted laws compute their log-likelihood ratio without cancellation.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from skdptest import (
    InvalidParameterError,
    PrivacyBudget,
    PrivateEProcess,
    PrivateEValueTest,
    optimal_rate,
)
from skdptest.evalue._laws import SPACING_BITS, check_float_range, make_laws
from tests.evalue._reference import exact_gaussian_log_ratio

REFUSED_RATIOS = [2.0**52, 2.0**53, 1e15, 1e300]
STATISTICS = ["optimal", "tslr", "exact"]


def _pair(ratio, sigma=1.0, delta=1.0):
    loc = ratio * sigma
    return stats.norm(loc, sigma), stats.norm(loc + delta * sigma, sigma)


def _assert_refused_before_charge(est, X, budget, match):
    fit = est.partial_fit if isinstance(est, PrivateEProcess) else est.fit
    with pytest.raises(InvalidParameterError, match=match):
        fit(X)
    assert budget.ledger == []
    assert not hasattr(est, "result_") and "_stream" not in vars(est)


@pytest.mark.parametrize("ratio", REFUSED_RATIOS)
@pytest.mark.parametrize("sigma", [1.0, 1e-3, 1e3])
def test_coarse_laws_refused_before_the_charge_for_every_statistic(ratio, sigma):
    P, Q = _pair(ratio, sigma)
    X = np.full((20, 1), ratio * sigma)
    for statistic in STATISTICS:
        budget = PrivacyBudget(10.0)
        est = PrivateEValueTest(P, Q, statistic=statistic, budget=budget)
        _assert_refused_before_charge(est, X, budget, r"null=norm\(.*float64 spacings")
    for statistic in ["auto", *STATISTICS]:
        budget = PrivacyBudget(10.0)
        est = PrivateEProcess(P, Q, statistic=statistic, budget=budget)
        _assert_refused_before_charge(est, X, budget, r"null=norm\(.*float64 spacings")
    with pytest.raises(ValueError, match=r"float64 spacings"):
        optimal_rate(P, Q, 1.0)


@pytest.mark.parametrize("law, match", [
    (stats.norm(0, 1e-300), r"null=norm\(0\.0, 1e-300\) has scale .* outside"),
    (stats.norm(0, 1e300), r"null=norm\(0\.0, 1e\+300\) has scale .* outside"),
    (stats.t(3, loc=1e300), r"null=t\(3\.0, loc=1e\+300\) has .*"),
    (stats.laplace(2.0**60, 1.0), r"null=laplace\(.*float64 spacings"),
    (stats.rv_discrete(values=([0.5, 1.5], [0.5, 0.5]))(), r"null=.*not integers"),
    (stats.bernoulli(0.3, loc=0.5), r"null=bernoulli\(0\.3, loc=0\.5\).*not integers"),
    (stats.bernoulli(0.3, loc=2**53), r"null=bernoulli.*2\*\*53"),
    (stats.poisson(1e17), r"null=poisson.*enumerated"),
    (stats.multivariate_normal([2.0**52, 0.0], np.eye(2)), r"null=multivariate_normal"),
], ids=["norm-tiny", "norm-huge", "t-far", "laplace-far", "rv_sample-half",
        "bernoulli-half", "bernoulli-2^53", "poisson-huge", "mvn-far"])
def test_extreme_laws_named_in_the_refusal(law, match):
    budget = PrivacyBudget(10.0)
    X = np.zeros((5, law.dim if hasattr(law, "dim") else 1))
    est = PrivateEValueTest(law, law, statistic="tslr", budget=budget)
    _assert_refused_before_charge(est, X, budget, match)


def test_singular_normal_pair_named_in_the_refusal():
    null = stats.multivariate_normal([0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]], allow_singular=True)
    alt = stats.multivariate_normal([1.0, 0.0], [[1.0, 1.0], [1.0, 1.0]], allow_singular=True)
    budget = PrivacyBudget(10.0)
    est = PrivateEValueTest(null, alt, budget=budget)
    with pytest.raises(ValueError, match=r"null=multivariate_normal.*not finite"):
        est.fit(np.zeros((5, 2)))
    assert budget.ledger == []


def test_accepted_far_law_gives_the_release_of_the_centred_data():
    # L/σ = 1e6 is accepted: its rows lose at most 2^-31 σ to rounding, and the log
    # ratio has no cancellation, so the release equals that of the centred laws on the
    # centred rows (same seeds) up to one grid step, and mostly exactly.
    loc = 1e6
    far_laws = (stats.norm(loc, 1), stats.norm(loc + 0.5, 1))  # one object: plans cached
    near_laws = (stats.norm(0, 1), stats.norm(0.5, 1))
    equal = 0
    for seed in range(10):
        z = np.random.default_rng(seed).normal(0.0, 1.0, size=(300, 1))
        for statistic in ("optimal", "tslr"):
            # a fixed bet: no planning search (the test is about the rows, not the plan)
            far = PrivateEValueTest(*far_laws, statistic=statistic, bet=0.5,
                                    random_state=seed).fit(loc + z)
            near = PrivateEValueTest(*near_laws, statistic=statistic, bet=0.5,
                                     random_state=seed).fit(z)
            a, b = far.result_, near.result_
            assert a.grid == b.grid and a.compensator == b.compensator
            assert abs(a.log_e_value - b.log_e_value) <= a.grid * (1 + 1e-12)
            equal += a.log_e_value == b.log_e_value
    assert equal >= 18


def _midpoint_log_ratio(x, mu_p, mu_q, var):  # the former formula (rounded midpoint)
    return (x - (mu_p + mu_q) / 2.0) * ((mu_q - mu_p) / var)


def test_midpoint_formula_fails_the_cancellation_check():
    # the check of the property test below catches the former formula at an accepted law
    mu_p, mu_q, var = 3e6 + 0.3, 3e6 + 1.1, 1.0
    x = 3e6 + 0.7
    exact = exact_gaussian_log_ratio(x, mu_p, mu_q, var)
    got = make_laws(stats.norm(mu_p, 1), stats.norm(mu_q, 1)).log_ratio(np.array([[x]]))[0]
    tol = 1e-12 * (abs(exact) + abs(mu_q - mu_p))
    assert abs(got - exact) <= tol
    assert abs(_midpoint_log_ratio(x, mu_p, mu_q, var) - exact) > tol


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log_ratio=st.floats(-2, 310),
    sign=st.sampled_from([-1.0, 1.0]),
    log_scale=st.floats(-320, 320),
    shift=st.floats(-4, 4).filter(lambda v: v != 0),
    offsets=st.lists(st.floats(-8, 8), min_size=1, max_size=4),
)
def test_property_refused_or_log_ratio_without_cancellation(log_ratio, sign, log_scale, shift,
                                                            offsets):
    with np.errstate(all="ignore"):
        scale = float(np.float64(10.0) ** log_scale)
        loc = float(sign * np.float64(10.0) ** log_ratio * scale)
    if not (math.isfinite(loc) and scale > 0 and math.isfinite(scale)):
        return
    P, Q = stats.norm(loc, scale), stats.norm(loc + shift * scale, scale)
    iqr = float(P.ppf(0.75) - P.ppf(0.25))
    coarse = not 2.0**-400 <= iqr <= 2.0**400 or \
        iqr < 2.0**SPACING_BITS * np.spacing(max(abs(float(P.ppf(0.25))),
                                                 abs(float(P.ppf(0.75))), abs(loc)))
    try:
        check_float_range(P, "null")
        check_float_range(Q, "alternative")
        laws = make_laws(P, Q)
    except ValueError as exc:
        assert "null=norm(" in str(exc) or "alternative=norm(" in str(exc)
        return
    assert not coarse
    mu_q = float(Q.mean())
    xs = np.array([[loc + o * scale] for o in offsets])
    got = laws.log_ratio(xs)
    for x, g in zip(xs[:, 0], got, strict=True):
        exact = exact_gaussian_log_ratio(x, loc, mu_q, float(P.var()))
        assert abs(g - exact) <= 1e-12 * (abs(exact) + abs(mu_q - loc) / scale), (x, g, exact)


def _type_one(P, Q, statistic, reps, n):
    est = PrivateEValueTest(P, Q, statistic=statistic, epsilon=1.0, alpha=0.05)
    rejections = 0
    for seed in range(reps):
        X = P.rvs(size=(n, 1), random_state=seed)
        rejections += est.set_params(random_state=seed).fit(X).decision()
    return rejections


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [1.0, 1e-3])
def test_type_one_error_at_accepted_far_locations(sigma):
    # L/σ = 1e6 is accepted (2^52, 2^53, 1e15, 1e300 are refused above). A shift of
    # 0.2σ at n = 2000 makes the e-value far from conservative: the level is tested
    # where it could fail.
    alpha, reps = 0.05, 300
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps)
    P, Q = _pair(1e6, sigma, delta=0.2)
    for statistic in STATISTICS:
        rate = _type_one(P, Q, statistic, reps, 2000) / reps
        assert rate <= bound, (statistic, rate)
    rejections, runs = 0, 60
    for seed in range(runs):
        X = P.rvs(size=(3000, 1), random_state=10**6 + seed)
        rejections += PrivateEProcess(P, Q, epsilon=1.0, alpha=alpha,
                                      random_state=seed).fit(X).decision()
    assert rejections / runs <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)


@pytest.mark.parametrize("schedule", [[10**12], [50, 10**10], np.array([10**12])])
def test_huge_schedule_refused_before_the_charge(schedule):
    budget = PrivacyBudget(10.0)
    est = PrivateEProcess(stats.norm(0, 1), stats.norm(1, 1), schedule=schedule,
                          budget=budget)
    _assert_refused_before_charge(est, np.zeros((5, 1)), budget, r"schedule must be .*at most")


def test_large_batch_buffers_only_the_rows_received():
    # a batch of 10**9 rows is accepted; its buffer holds the rows given so far (a
    # schedule of 10**12 used to allocate terabytes at the first chunk, after the charge)
    est = PrivateEProcess(stats.norm(0, 1), stats.norm(1, 1), schedule=[10**9],
                          random_state=0)
    for _ in range(3):
        est.partial_fit(np.zeros((100, 1)))
    state = est._stream.state
    assert state.filled == 300 and state.buffer.shape[0] <= 1024
    assert est.result_.n_samples == 0


def test_buffered_batches_give_the_same_release_as_one_chunk():
    X = np.random.default_rng(3).normal(0.5, 1, size=(400, 1))
    laws = (stats.norm(0, 1), stats.norm(0.5, 1))
    whole = PrivateEProcess(*laws, schedule=[150, 250], random_state=4).fit(X).result_
    est = PrivateEProcess(*laws, schedule=[150, 250], random_state=4)
    for start in range(0, 400, 7):
        est.partial_fit(X[start:start + 7])
    assert est.result_ == whole


@pytest.mark.parametrize("cls, kwargs, match", [
    (PrivateEValueTest, {"statistic": "exact", "bet": 0.5}, r"bet=0\.5 is ignored"),
    (PrivateEProcess, {"rho": 2.0}, r"rho=2\.0 is ignored unless schedule='paper'"),
    (PrivateEValueTest, {"epsilon": 1000.0}, r"computed at epsilon=512"),
    (PrivateEProcess, {"epsilon": 1000.0}, r"computed at epsilon=512"),
])
def test_ignored_or_overridden_parameters_warn(cls, kwargs, match):
    from skdptest import PrivacyLeakWarning

    X = np.random.default_rng(0).binomial(1, 0.5, size=(60, 1))
    with pytest.warns(PrivacyLeakWarning, match=match) as record:
        cls(stats.bernoulli(0.3), stats.bernoulli(0.6), random_state=0, **kwargs).fit(X)
    assert all(r.filename == __file__ for r in record if issubclass(r.category,
                                                                     PrivacyLeakWarning))
