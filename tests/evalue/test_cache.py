"""The e-value plan cache: keys by the laws' values, never a collision, bounded; and the
fused release computes the same integer as the unfused reference."""

import copy
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

from skdptest import PrivateEProcess, PrivateEValueTest
from skdptest.evalue import _cache
from skdptest.evalue._cache import _cached, law_token, law_tokens, snapshot
from skdptest.evalue._evalue import check_laws, merged_plan, resolve_statistic
from skdptest.evalue._laws import make_laws
from skdptest.evalue._merge import (
    GridNoise,
    _log_merge,
    fused_integer_sum,
    release_noise,
    row_integer_sum,
)
from skdptest.evalue._optimal import EStatistic, optimal_statistic, tslr_statistic


def _params(null, alt, statistic="optimal", epsilon=1.0):
    return {"null": null, "alternative": alt, "statistic": statistic, "epsilon": epsilon}


# ---------------------------------------------------------------- value keys
EQUAL_PAIRS = [
    (lambda: stats.norm(0, 1), "norm"),
    (lambda: stats.norm(loc=0.5, scale=2.0), "norm kwds"),
    (lambda: stats.t(3, loc=1.0), "t"),
    (lambda: stats.bernoulli(0.3), "bernoulli"),
    (lambda: stats.binom(20, 0.4), "binom"),
    (lambda: stats.rv_discrete(values=([0, 1, 2], [0.2, 0.3, 0.5]))(), "rv_discrete values"),
    (lambda: stats.multivariate_normal(np.zeros(2), np.eye(2)), "mvn"),
]


@pytest.mark.parametrize("make, label", EQUAL_PAIRS, ids=[p[1] for p in EQUAL_PAIRS])
def test_equal_laws_share_a_value_key(make, label):
    a, b = make(), make()
    assert a is not b
    assert law_token(a)[0] == "value"
    assert law_token(a) == law_token(b)
    assert law_token(copy.deepcopy(a)) == law_token(a)  # what sklearn's clone does
    assert hash(law_token(a)) == hash(law_token(b))


def test_using_a_law_does_not_change_its_key():
    law = stats.norm(0.5, 2.0)
    before = law_token(law)
    law.logpdf(np.linspace(-3, 3, 7))
    law.ppf([0.1, 0.9])
    law.rvs(size=4, random_state=0)  # the random state is not part of the key
    law.mean(), law.var(), law.support()
    assert law_token(law) == before
    mvn = stats.multivariate_normal(np.zeros(3), np.eye(3))
    before = law_token(mvn)
    mvn.logpdf(np.ones((2, 3)))
    mvn.rvs(size=2, random_state=0)
    assert law_token(mvn) == before


DIFFERENT = [
    (stats.norm(0, 1), stats.norm(0, 2), "scale"),
    (stats.norm(0, 1), stats.norm(1e-300, 1), "location by one tiny float"),
    (stats.norm(0.0, 1), stats.norm(-0.0, 1), "signed zero"),
    (stats.norm(0, 1), stats.norm(0.0, 1), "int and float (computed differently)"),
    (stats.norm(0.1, 1), stats.norm(np.float32(0.1), 1), "float32 parameter"),
    (stats.norm(0, 1), stats.logistic(0, 1), "family, same arguments"),
    (stats.t(3), stats.t(4), "shape"),
    (stats.t(3), stats.t(3.0000000000000004), "shape by one ulp"),
    (stats.bernoulli(0.3), stats.bernoulli(0.30000000000000004), "probability by one ulp"),
    (stats.binom(20, 0.4), stats.binom(21, 0.4), "discrete shape"),
    (stats.binom(20, 0.4), stats.binom(20, 0.4, loc=1), "discrete loc"),
    (stats.rv_discrete(values=([0, 1, 2], [0.2, 0.3, 0.5]))(),
     stats.rv_discrete(values=([0, 1, 3], [0.2, 0.3, 0.5]))(), "rv_discrete support"),
    (stats.rv_discrete(values=([0, 1, 2], [0.2, 0.3, 0.5]))(),
     stats.rv_discrete(values=([0, 1, 2], [0.3, 0.2, 0.5]))(), "rv_discrete masses"),
    (stats.multivariate_normal(np.zeros(2), np.eye(2)),
     stats.multivariate_normal(np.array([0.0, 1e-12]), np.eye(2)), "mvn mean"),
    (stats.multivariate_normal(np.zeros(2), np.eye(2)),
     stats.multivariate_normal(np.zeros(2), np.array([[1.0, 0.1], [0.1, 1.0]])), "mvn cov"),
    (stats.multivariate_normal(np.zeros(2), np.eye(2)),
     stats.multivariate_normal(np.zeros(2), np.eye(2), allow_singular=True), "allow_singular"),
    (stats.multivariate_normal(np.zeros(1), np.eye(1)), stats.norm(0, 1), "mvn and norm"),
]


@pytest.mark.parametrize("a, b, label", DIFFERENT, ids=[d[2] for d in DIFFERENT])
def test_any_differing_parameter_misses(a, b, label):
    ta, tb = law_token(a), law_token(b)
    assert ta[0] == tb[0] == "value"
    assert ta != tb
    _cache._PLANS.clear()
    calls = []
    for law in (a, b, a, b):
        tokens, anchors = law_tokens(law)
        _cached(("probe", tokens), anchors, lambda: calls.append(1))
    assert len(calls) == 2  # one miss each, then hits


def test_a_differing_alternative_plans_afresh():
    _cache._PLANS.clear()
    near = resolve_statistic(_params(stats.norm(0, 1), stats.norm(0.5, 1)), 1)
    far = resolve_statistic(_params(stats.norm(0, 1), stats.norm(0.5000000000000001, 1)), 1)
    assert far[0] is not near[0]
    assert far[0].alternative.mean() == 0.5000000000000001


def test_laws_that_cannot_be_keyed_by_value_fall_back_to_identity():
    patched = stats.norm(0, 1)
    patched.logpdf = lambda x: np.zeros(np.shape(x))  # a method replaced on the law
    gen_patched = stats.norm(0, 1)
    gen_patched.dist._logpdf = lambda x: np.zeros(np.shape(x))  # ... on its generator

    class Half(stats.rv_continuous):  # a user subclass: its state is not scipy's
        def _pdf(self, x):
            return np.sqrt(2 / np.pi) * np.exp(-x * x / 2)

    huge = stats.multivariate_normal(np.zeros(300), np.eye(300))  # 90,000 > 2**16
    for law in (patched, gen_patched, Half(a=0.0)(), huge):
        assert law_token(law) == ("id", id(law))
        assert snapshot(law, law_token(law)) is law
    assert law_token(stats.norm(0, 1))[0] == "value"
    # an identity entry is found only with the very same object (anchored)
    _cache._PLANS.clear()
    tokens, anchors = law_tokens(patched)
    assert anchors == (patched,)
    calls = []
    for _ in range(2):
        _cached(("probe", tokens), anchors, lambda: calls.append(1))
    assert len(calls) == 1
    other = copy.copy(patched)
    _cached(("probe", law_tokens(other)[0]), (other,), lambda: calls.append(1))
    assert len(calls) == 2


def _pair():
    return stats.norm(0, 1), stats.norm(0.5, 1)


# One data set and one pair of laws for the end-to-end tests: they share their plans
# (a cold Gaussian plan costs about a second).
X300 = np.random.default_rng(2).normal(0.4, 1, size=(300, 1))


def test_fresh_equal_laws_reuse_every_plan():
    first = resolve_statistic(_params(*_pair()), 1)
    plan = merged_plan("auto", *first, 300, 1.0)
    check_laws(_params(*_pair()))
    size = len(_cache._PLANS)
    for _ in range(3):
        again = resolve_statistic(_params(*_pair()), 1)
        assert again[0] is first[0] and again[1] is first[1]
        assert merged_plan("auto", *again, 300, 1.0) is plan
        check_laws(_params(*_pair()))
    assert len(_cache._PLANS) == size  # hits only
    # clone deep-copies the laws (skdptest.power's simulations): the plan is shared
    est = PrivateEValueTest(*_pair())
    cloned = clone(est)
    assert cloned.null is not est.null
    assert resolve_statistic(_params(cloned.null, cloned.alternative), 1)[0] is first[0]


def test_plans_are_computed_on_private_copies_and_mutation_misses():
    law = stats.norm(0.5, 1)
    laws, _ = resolve_statistic(_params(stats.norm(0, 1), law), 1)
    assert laws.alternative is not law  # a private copy
    before = PrivateEValueTest(*_pair(), random_state=1).fit(X300).result_
    law.args = (3.0, 1)  # scipy does not support this, but it must not corrupt plans
    assert law_token(law) != law_token(stats.norm(0.5, 1))
    assert laws.alternative.mean() == 0.5  # the entry's copy is untouched
    moved = resolve_statistic(_params(stats.norm(0, 1), law), 1)[0]
    assert moved is not laws and moved.alternative.mean() == 3.0
    assert PrivateEValueTest(*_pair(), random_state=1).fit(X300).result_ == before
    assert resolve_statistic(_params(*_pair()), 1)[0] is laws


def test_the_cache_is_a_bounded_lru():
    _cache._PLANS.clear()
    for i in range(_cache._PLANS_MAX + 10):
        _cached(("probe", i), (), lambda i=i: i)
    assert len(_cache._PLANS) == _cache._PLANS_MAX
    assert ("probe", 0) not in _cache._PLANS  # the oldest went first
    _cached(("probe", 10), (), lambda: None)  # a hit moves to the end
    _cached(("probe", "new"), (), lambda: None)
    assert ("probe", 10) in _cache._PLANS and ("probe", 11) not in _cache._PLANS


@pytest.mark.parametrize("statistic", ["optimal", "exact"])
def test_release_is_the_same_with_fresh_reused_or_no_cached_plans(statistic):
    P, Q = _pair()

    def fit(null, alt):
        return PrivateEValueTest(null, alt, statistic=statistic,
                                 random_state=5).fit(X300).result_

    _cache._PLANS.clear()
    cold = fit(P, Q)
    assert fit(P, Q) == cold
    assert fit(*_pair()) == cold
    assert fit(*(copy.deepcopy(law) for law in (P, Q))) == cold


def test_eprocess_shares_plans_between_equal_laws():
    def run():
        est = PrivateEProcess(*_pair(), statistic="tslr", schedule=[100, 200],
                              random_state=4)
        return est.fit(X300).result_

    first = run()
    size = len(_cache._PLANS)
    assert run() == first
    assert len(_cache._PLANS) == size


# ---------------------------------------------------------------- fused release
def _reference(X, laws, stat, bet, noise):
    return row_integer_sum(_log_merge(stat.log_e(laws.log_ratio(X)), bet), noise)


FUSED = {
    "norm": lambda: (stats.norm(0, 1), stats.norm(0.5, 1)),
    "mvn": lambda: (stats.multivariate_normal(np.zeros(3), np.eye(3)),
                    stats.multivariate_normal([0.2, 0.0, -0.3], np.eye(3))),
    "t": lambda: (stats.t(3), stats.t(3, loc=0.5)),
}
_FUSED_PLANS = {}


def _fused_plan(name, kind):
    if (name, kind) not in _FUSED_PLANS:  # the univariate normaliser takes a second
        laws = make_laws(*FUSED[name]())
        stat = (optimal_statistic(laws, 1.0)[0] if kind == "optimal"
                else tslr_statistic(laws, 1.0))
        _FUSED_PLANS[name, kind] = laws, stat
    return _FUSED_PLANS[name, kind]


@pytest.mark.parametrize("name", sorted(FUSED))
@pytest.mark.parametrize("kind", ["optimal", "tslr"])
@pytest.mark.parametrize("bet", [1.0, 0.37])
def test_fused_integer_sum_equals_the_unfused_reference(name, kind, bet):
    laws, stat = _fused_plan(name, kind)
    noise = release_noise(stat, bet, 1.0)
    d = laws.n_features
    laws.chunk_rows = 1 << 13  # several chunks on few rows (an instance attribute)
    try:
        rng = np.random.default_rng(4)
        n = 2 * laws.chunk_rows + 4099
        X = rng.standard_t(4, size=(n, d)) * 1.5
        X[:5] = [[0.0] * d, [-0.0] * d, [5e-324] * d, [40.0] * d, [-40.0] * d]
        for rows in (X[:1], X[:1000], X, np.asfortranarray(X)):
            expected = _reference(rows, laws, stat, bet, noise)
            assert fused_integer_sum(rows, laws, stat, bet, noise) == expected
        assert X[3, 0] == 40.0  # the data are not written over
    finally:
        del laws.chunk_rows


class _IdentityLaws:
    """L = the first column (a probe for the floor's edge cases)."""

    chunk_rows = 1 << 13

    @staticmethod
    def log_ratio(X):
        return np.array(X[:, 0], dtype=float)


def test_fused_floor_matches_floor_to_grid_on_its_edge_cases():
    # a grid h > 1: a tiny negative term's quotient underflows to -0, whose floor is -1
    stat = EStatistic("optimal", lambda L: L, -1.0, 1.0)
    noise = GridNoise(grid=4.0, fine_bits=1, lo=-1.0, hi=1.0, steps=1, rate=1.0)
    assert noise.fine == 2.0
    terms = np.array([[-5e-324], [5e-324], [-0.0], [0.0], [-1.0], [0.999], [7.0], [-7.0]])
    expected = _reference(terms, _IdentityLaws, stat, 1.0, noise)
    assert expected == -1 + 0 + 0 + 0 - 1 + 0 + 0 - 1
    assert fused_integer_sum(terms, _IdentityLaws, stat, 1.0, noise) == expected
    # non-finite terms are refused as floor_to_grid refuses them
    bad = np.array([[0.5], [math.nan]])
    with pytest.raises(ValueError, match="values must be finite to be floored"):
        _reference(bad, _IdentityLaws, stat, 1.0, noise)
    with pytest.raises(ValueError, match="values must be finite to be floored"):
        fused_integer_sum(bad, _IdentityLaws, stat, 1.0, noise)
