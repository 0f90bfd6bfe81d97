"""Privacy of the rank tests: sensitivities by exhaustive search, exact release laws on
neighbours (<= e^ε, a halved-noise mutant fails), the noise rate actually used, and
the shared helpers (ranks, signs, the (B + 1) p-value)."""

import functools
import itertools
import math

import numpy as np
import pytest

from skdptest import (
    DPKruskalWallisTest,
    DPMannWhitneyTest,
    DPWilcoxonTest,
    InvalidParameterError,
    PrivacyBudget,
)
from skdptest.classical import _rank
from skdptest.classical._rank import (
    kruskal_sensitivity,
    kruskal_twice_statistic,
    mann_whitney_sensitivity,
    mann_whitney_u,
    monte_carlo_pvalue,
    random_signs_and_magnitudes,
    ranks_given_shuffle,
    signed_rank_sensitivity,
    signed_rank_statistic,
    tie_broken_ranks,
)
from tests.classical._reference import (
    all_moves,
    max_log_ratio,
    release_law,
    twice_t_of,
    u_of,
)

SHUFFLES6 = np.array(list(itertools.permutations(range(6))))


# -- ranks, signs, p-values ---------------------------------------------------------------

def test_ranks_follow_the_values_and_break_ties_uniformly():
    rng = np.random.default_rng(0)
    x = np.array([[2.0], [0.0], [2.0], [-0.0], [5.0]])
    seen = {}
    for _ in range(1000):
        r = tie_broken_ranks(rng, x)
        assert sorted(r) == [1, 2, 3, 4, 5] and r[4] == 5
        assert set(r[[1, 3]]) == {1, 2} and set(r[[0, 2]]) == {3, 4}  # 0.0 == -0.0
        key = (r[1] < r[3], r[0] < r[2])
        seen[key] = seen.get(key, 0) + 1
    assert len(seen) == 4
    assert all(abs(c / 1000 - 0.25) < 0.07 for c in seen.values())  # 5 SE


def test_several_columns_are_ordered_lexicographically():
    x = np.array([[1.0, 9.0], [0.0, 5.0], [1.0, -3.0], [0.0, 5.0]])
    r = ranks_given_shuffle(x, np.array([3, 2, 1, 0]))
    np.testing.assert_array_equal(r, [4, 2, 3, 1])  # rows 1 and 3 tie: row 3 listed first


def test_signs_zeros_are_fair_coins_and_smallest():
    rng = np.random.default_rng(1)
    d = np.array([[0.0], [-2.0], [3.0], [-0.0]])
    pos = np.zeros(4)
    for _ in range(600):
        positive, mags = random_signs_and_magnitudes(rng, d)
        np.testing.assert_array_equal(mags[:, 0], [0.0, 2.0, 3.0, 0.0])
        assert not positive[1] and positive[2]
        pos += positive
    assert abs(pos[0] / 600 - 0.5) < 0.1 and abs(pos[3] / 600 - 0.5) < 0.1  # 5 SE
    # several columns: the sign of the first non-zero coordinate, magnitudes symmetric
    positive, mags = random_signs_and_magnitudes(rng, np.array([[0.0, -1.0], [0.0, 1.0]]))
    np.testing.assert_array_equal(positive, [False, True])
    np.testing.assert_array_equal(mags, [[0.0, 1.0], [0.0, 1.0]])


def test_monte_carlo_pvalue_counts_ties_against_rejection():
    null = np.array([0, 1, 2, 3, 4])
    assert monte_carlo_pvalue(3, null, "greater") == 3 / 6
    assert monte_carlo_pvalue(3, null, "less") == 5 / 6
    assert monte_carlo_pvalue(4, null, "two-sided", 4) == 3 / 6  # |2T - 4| >= 4: 0, 4
    assert monte_carlo_pvalue(9, null, "greater") == 1 / 6


def test_statistics_match_direct_definitions():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, size=(9, 1)).astype(float)
    codes = np.array([0, 1, 2, 0, 1, 2, 0, 1, 1])
    sizes = np.bincount(codes)
    ranks = tie_broken_ranks(rng, x)
    first, second = ranks[codes == 0], ranks[codes == 1]
    others = ranks[codes != 0]
    assert mann_whitney_u(ranks, codes == 0) == sum(a > b for a in first for b in others)
    assert second.size == 4
    means = [ranks[codes == j].mean() for j in range(3)]
    t = sum(sizes[j] * abs(means[j] - 5.0) for j in range(3))
    assert kruskal_twice_statistic(ranks, codes, sizes) == round(2 * t)
    positive = np.array([True, False] * 4 + [True])
    assert signed_rank_statistic(ranks, positive) == ranks[positive].sum()


def test_simulated_nulls_have_the_exact_laws():
    rng = np.random.default_rng(6)
    draws = 20000
    # rank sums of group 0 of sizes (2, 1, 2): every 2-subset of 1..5 equally likely
    sums = _rank.null_rank_sums(rng, [2, 1, 2], draws)
    assert np.all(sums.sum(axis=1) == 15)
    exact = {}
    for pair in itertools.combinations(range(1, 6), 2):
        exact[sum(pair)] = exact.get(sum(pair), 0) + 1 / 10
    values, counts = np.unique(sums[:, 0], return_counts=True)
    assert set(values) == set(exact)
    for v, c in zip(values, counts, strict=True):
        se = math.sqrt(exact[v] * (1 - exact[v]) / draws)
        assert abs(c / draws - exact[v]) < 5 * se
    # W+ of n = 4 under random signs: the 16 sign vectors equally likely
    w = _rank.null_signed_rank(rng, 4, draws)
    exact = {}
    for signs in itertools.product([0, 1], repeat=4):
        total = sum(r for r, s in zip(range(1, 5), signs, strict=True) if s)
        exact[total] = exact.get(total, 0) + 1 / 16
    values, counts = np.unique(w, return_counts=True)
    assert set(values) == set(exact)
    for v, c in zip(values, counts, strict=True):
        se = math.sqrt(exact[v] * (1 - exact[v]) / draws)
        assert abs(c / draws - exact[v]) < 5 * se


# -- sensitivities: exhaustive over orders (any data, ties broken) ---------------------------

@pytest.mark.parametrize("sizes", [(1, 4), (2, 3), (3, 3), (2, 5), (1, 6)])
def test_mann_whitney_sensitivity_is_max_size_exhaustively(sizes):
    before, after = all_moves(sum(sizes))
    change = np.abs(u_of(after, sizes[0]) - u_of(before, sizes[0])).max()
    assert change == mann_whitney_sensitivity(sizes) == max(sizes)  # never exceeded, attained


@pytest.mark.parametrize(("sizes", "attained"), [
    ((2, 3), True), ((3, 4), True), ((2, 2, 2), True), ((2, 2, 3), True), ((1, 2, 2), False),
    ((1, 2, 3), False), ((3, 3, 1), False), ((1, 1, 1, 3), False), ((2, 2, 2, 1), False),
])
def test_kruskal_sensitivity_bound_exhaustively(sizes, attained):
    before, after = all_moves(sum(sizes))
    change = np.abs(twice_t_of(after, sizes) - twice_t_of(before, sizes)).max()
    bound = 2 * kruskal_sensitivity(sizes)  # on the 2T scale
    assert change <= bound
    # attained in the cases marked (two groups: 2 max(n1, n2)); not with a singleton
    # group, which cannot move its own deviation and the others' the same way (nor for
    # some sizes, e.g. (2, 3, 3): 11 against 12 by the same exhaustive search)
    assert (change == bound) == attained
    if len(sizes) == 2:
        assert bound == 4 * max(sizes)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_signed_rank_sensitivity_is_n_exhaustively(n):
    before, after = all_moves(n)
    worst, block = 0, n * math.factorial(n)  # all_moves lists row 0's moves first
    for signs in itertools.product([0, 1], repeat=n):
        s = np.array(signs)
        w_before = (before * s).sum(axis=1)
        for row, new_sign in itertools.product(range(n), (0, 1)):
            moved = s.copy()
            moved[row] = new_sign
            rows = slice(row * block, (row + 1) * block)
            worst = max(worst, int(np.abs((after[rows] * moved).sum(axis=1)
                                          - w_before[rows]).max()))
    assert worst == signed_rank_sensitivity(n) == n


@pytest.mark.parametrize("sizes", [
    (1, 3), (2, 2), pytest.param((2, 3), marks=pytest.mark.slow)])
def test_mann_whitney_sensitivity_on_tied_data_through_the_ranking_code(sizes):
    # every data set of values in {0, 1}, every tie order, every replacement value
    n = sum(sizes)
    worst, shuffles = 0, [np.array(s) for s in itertools.permutations(range(n))]
    first = np.arange(n) < sizes[0]

    @functools.cache  # a neighbour with the new value 0 or 1 is one of the data sets
    def u_of(values, s):
        return mann_whitney_u(ranks_given_shuffle(np.array(values)[:, None], shuffles[s]),
                              first)

    for values in itertools.product([0.0, 1.0], repeat=n):
        for s in range(len(shuffles)):
            u = u_of(values, s)
            for row, new in itertools.product(range(n), (-1.0, 0.0, 1.0, 2.0)):
                moved = values[:row] + (new,) + values[row + 1:]
                worst = max(worst, abs(u_of(moved, s) - u))
    assert worst == mann_whitney_sensitivity(sizes) == max(sizes)


# -- exact law of the release on neighbours ---------------------------------------------------

def _plan(est, X, y):
    return est._prepare(X, y, reset=True).plan


def _mw_statistics(x, first):
    return [mann_whitney_u(ranks_given_shuffle(x, s), first) for s in SHUFFLES6]


def _kw_statistics(x, codes, sizes):
    return [kruskal_twice_statistic(ranks_given_shuffle(x, s), codes, sizes) for s in SHUFFLES6]


def _wilcoxon_statistics(d):
    zeros = np.flatnonzero(np.all(d == 0, axis=1))
    out = []
    for coins in itertools.product([False, True], repeat=zeros.size):
        positive = (d[:, 0] > 0)
        positive[zeros] = coins
        mags = np.abs(d)
        out += [signed_rank_statistic(ranks_given_shuffle(mags, np.array(s)), positive)
                for s in itertools.permutations(range(d.shape[0]))]
    return out


MW_PAIRS = [  # (X, neighbour) with groups [0, 0, 0, 1, 1, 1]
    ([1, 2, 3, 4, 5, 6], [7, 2, 3, 4, 5, 6]),  # U moves by 3 = max(n1, n2) for every order
    ([0, 0, 1, 0, 1, 1], [2, 0, 1, 0, 1, 1]),  # ties
    ([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, -1]),  # all tied
]


def _worst_ratio(statistics_a, statistics_b, rate):
    support = np.arange(min(statistics_a + statistics_b) - 60,
                        max(statistics_a + statistics_b) + 61)
    return max_log_ratio(release_law(statistics_a, rate, support),
                         release_law(statistics_b, rate, support))


# epsilon = 0.5 and 2.0 in the slow suite: 1.0 runs the same pairs through the same code
# (exact ratio, attained, and the halved-noise mutant) at one rate
@pytest.mark.parametrize("epsilon", [pytest.param(0.5, marks=pytest.mark.slow), 1.0,
                                     pytest.param(2.0, marks=pytest.mark.slow)])
def test_mann_whitney_release_law_ratio_is_at_most_e_epsilon(epsilon):
    y = np.array([0, 0, 0, 1, 1, 1])
    est = DPMannWhitneyTest(epsilon=epsilon)
    worst = []
    for a, b in MW_PAIRS:
        xa, xb = np.array(a, float)[:, None], np.array(b, float)[:, None]
        rate = _plan(est, xa, y).rate
        assert rate == _plan(est, xb, y).rate  # public: sizes only
        sa, sb = _mw_statistics(xa, y == 0), _mw_statistics(xb, y == 0)
        worst.append(_worst_ratio(sa, sb, rate))
        assert _worst_ratio(sa, sb, 2 * rate) <= 2 * epsilon + 1e-9  # (sanity of the helper)
    assert max(worst) <= epsilon + 1e-9
    assert max(worst) > 0.99 * epsilon  # tight: the first pair attains it in the tails
    # halved noise (twice the rate) breaks the guarantee on the same pair
    xa, xb = (np.array(v, float)[:, None] for v in MW_PAIRS[0])
    rate = _plan(est, xa, y).rate
    assert _worst_ratio(_mw_statistics(xa, y == 0), _mw_statistics(xb, y == 0),
                        2 * rate) > 1.9 * epsilon


def test_kruskal_release_law_ratio_is_at_most_e_epsilon():
    epsilon, y = 1.0, np.array([0, 0, 1, 1, 2, 2])
    sizes = np.array([2, 2, 2])
    est = DPKruskalWallisTest(epsilon=epsilon)
    pairs = [([1, 2, 3, 4, 5, 6], [7, 2, 3, 4, 5, 6]), ([0, 1, 0, 1, 1, 0], [0, 1, 0, 1, 1, 5]),
             ([3, 3, 3, 3, 3, 3], [3, 3, 3, 3, -9, 3]),
             ([1, 6, 2, 5, 3, 4], [7, 6, 2, 5, 3, 4])]  # T moves by 2 (N - n_min) = 8
    worst, rate = [], None
    for a, b in pairs:
        xa, xb = np.array(a, float)[:, None], np.array(b, float)[:, None]
        rate = _plan(est, xa, y).rate
        sa, sb = _kw_statistics(xa, y, sizes), _kw_statistics(xb, y, sizes)
        worst.append((_worst_ratio(sa, sb, rate), _worst_ratio(sa, sb, 2 * rate)))
    assert max(w for w, _ in worst) <= epsilon + 1e-9
    assert max(w for w, _ in worst) > 0.99 * epsilon
    assert max(w for _, w in worst) > 1.9 * epsilon  # halved noise fails


def test_wilcoxon_release_law_ratio_is_at_most_e_epsilon():
    epsilon = 1.0
    est = DPWilcoxonTest(epsilon=epsilon)
    pairs = [([-1, -2, -3, -4, -5], [-1, -2, -3, -4, 9]),  # W+ moves by n
             ([0, 0, 1, -1, 0], [0, 0, 1, -1, 4]), ([0, 0, 0, 0, 0], [0, 0, 0, 0, 2]),
             ([1, -1, 1, -1, 2], [1, -1, 1, -1, 0])]
    worst = []
    for a, b in pairs:
        xa, xb = np.array(a, float)[:, None], np.array(b, float)[:, None]
        rate = _plan(est, xa, None).rate
        sa, sb = _wilcoxon_statistics(xa), _wilcoxon_statistics(xb)
        worst.append((_worst_ratio(sa, sb, rate), _worst_ratio(sa, sb, 2 * rate)))
    assert max(w for w, _ in worst) <= epsilon + 1e-9
    assert max(w for w, _ in worst) > 0.99 * epsilon
    assert max(w for _, w in worst) > 1.9 * epsilon  # halved noise fails


@pytest.mark.parametrize(("est", "y", "sensitivity"), [
    (DPMannWhitneyTest(epsilon=0.7, n_resamples=9), np.repeat([0, 1], [4, 7]), 7),
    (DPKruskalWallisTest(epsilon=0.7, n_resamples=9), np.repeat([0, 1, 2], [4, 5, 2]), 2 * 2 * 9),
    (DPWilcoxonTest(epsilon=0.7, n_resamples=9), None, 11),
])
def test_every_noise_draw_uses_the_rate_of_the_sensitivity(monkeypatch, est, y, sensitivity):
    calls = []
    real = _rank.discrete_laplace

    def spy(rng, rate, size=None):
        calls.append((rate, size))
        return real(rng, rate, size=size)

    monkeypatch.setattr(_rank, "discrete_laplace", spy)
    result = est.fit(np.arange(11.0)[:, None], y).result_
    rate = _rank.quantise_rate(0.7 / sensitivity)
    assert calls == [(rate, 9), (rate, None)]  # the null's B draws, then the release's one
    assert result.sensitivity * (2 if isinstance(est, DPKruskalWallisTest) else 1) == sensitivity


def test_release_replays_from_the_public_helpers():
    X = np.array([[0.0], [1.0], [1.0], [0.0], [2.0], [1.0], [1.0]])
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    result = DPMannWhitneyTest(n_resamples=50, random_state=np.random.default_rng(5)).test(X, y)
    rng = np.random.default_rng(5)
    rate = _rank.noise_rate(1.0, 4)
    null = _rank.null_rank_sums(rng, np.array([3, 4]), 50)[:, 0] - 6
    null = null + _rank.discrete_laplace(rng, rate, size=50)
    u = mann_whitney_u(tie_broken_ranks(rng, X), y == 0) + _rank.discrete_laplace(rng, rate)
    assert result.statistic == u
    assert result.pvalue == monte_carlo_pvalue(u, null, "two-sided", 12)


# -- refusals before the charge -------------------------------------------------------------

def test_refusals_name_the_problem_and_charge_nothing():
    budget = PrivacyBudget(epsilon=10.0)
    X = np.zeros((40, 1))
    with pytest.raises(InvalidParameterError, match="n_resamples"):
        DPMannWhitneyTest(n_resamples=2**27, budget=budget).fit(X, np.arange(40) % 2)
    with pytest.raises(InvalidParameterError, match="too small for the exact noise sampler"):
        DPWilcoxonTest(epsilon=1e-7, budget=budget).fit(X)
    with pytest.raises(ValueError, match="exactly 2 groups"):
        DPMannWhitneyTest(budget=budget).fit(X, np.arange(40) % 3)
    with pytest.raises(ValueError, match="at least 2 groups"):
        DPKruskalWallisTest(budget=budget).fit(X, np.zeros(40))
    with pytest.raises(ValueError, match="discrete group labels"):
        DPKruskalWallisTest(budget=budget).fit(X, np.linspace(0, 1, 40))
    with pytest.raises(ValueError, match="Unknown label type"):
        DPMannWhitneyTest(budget=budget).fit(X, np.array([object()] * 40))
    with pytest.raises(ValueError, match="y contains missing or infinite values"):
        DPWilcoxonTest(budget=budget).fit(X, np.full(40, np.inf))
    assert len(budget) == 0


def test_sizes_of_the_null_are_bounded_in_memory():
    assert _rank._CHUNK_ELEMENTS * 4 <= 8 * 2**20
    rows = list(_rank._chunks(1000, 10_000))
    assert sum(rows) == 1000 and max(rows) * 10_000 <= _rank._CHUNK_ELEMENTS
    assert math.isclose(_rank.MAX_NULL_ELEMENTS, 2**31)


# -- grey-box audit (skdptest.audit.grey_box_audit) ---------------------------------------------

GREY_CASES = {  # worst neighbours: the statistic moves by its full sensitivity
    "mw": (DPMannWhitneyTest, [1, 2, 3, 4, 5, 6, 7], [9, 2, 3, 4, 5, 6, 7],
           np.array([0, 0, 0, 1, 1, 1, 1])),
    "kw": (DPKruskalWallisTest, [1, 6, 2, 5, 3, 4], [7, 6, 2, 5, 3, 4],
           np.array([0, 0, 1, 1, 2, 2])),
    "w": (DPWilcoxonTest, [-1, -2, -3, -4, -5], [-1, -2, -3, -4, 9], None),
}


@pytest.mark.parametrize("name", sorted(GREY_CASES))
def test_grey_box_audit_passes_and_the_sensitivity_is_attained(name):
    from skdptest.audit import grey_box_audit

    cls, a, b, y = GREY_CASES[name]
    X0, X1 = np.array(a, float)[:, None], np.array(b, float)[:, None]
    r = grey_box_audit(lambda seed: cls(n_resamples=20, random_state=seed), X0, X1,
                       y0=y, y1=y, random_state=0)
    assert not r.flagged, r.findings
    null, statistic = r.quantities
    assert null.sensitivity == 0 and null.measured_change == 0
    assert statistic.measured_change == statistic.sensitivity  # attained
    assert statistic.required_scale <= statistic.drawn_scale <= 1.002 * statistic.required_scale


def test_grey_box_audit_flags_halved_noise():
    from skdptest.audit import grey_box_audit

    class HalvedNoise(DPMannWhitneyTest):
        def _plan(self, params, X, y):
            return super()._plan({**params, "epsilon": 2 * params["epsilon"]}, X, y)

    cls, a, b, y = GREY_CASES["mw"]
    r = grey_box_audit(lambda seed: HalvedNoise(n_resamples=20, random_state=seed),
                       np.array(a, float)[:, None], np.array(b, float)[:, None], y0=y, y1=y,
                       random_state=0)
    assert r.flagged and any(f.startswith("U: noise scale") for f in r.findings), r.findings
