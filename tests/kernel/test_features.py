"""Random-feature dpMMD / dpHSIC: feature map, exactness, relabellings, sensitivity,
privacy (halved-noise mutant), chunk independence, API; validity in the slow suite."""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from skdptest import BudgetExceededError, DPHSICTest, DPMMDTest, PrivacyBudget
from skdptest._params import InvalidParameterError
from skdptest._validation import check_generator
from skdptest.kernel import _features as feat
from skdptest.kernel._hsic import hsic_sensitivity
from skdptest.kernel._mmd import mmd_sensitivity

R = feat.FEATURE_RADIUS
Q = 2.0**-23  # value of one quantisation step


def features(X, omega):
    return feat.feature_map(X, omega).astype(np.float64) * Q


def brute_mmd(F, masks_small, p, q):
    """Direct mean-embedding formula, no shared code."""
    out = []
    for m in masks_small:
        out.append(np.linalg.norm(F[m].sum(0) / p - F[~m].sum(0) / q))
    return np.array(out)


# -- feature map -----------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, func", [("rbf", rbf_kernel), ("laplacian", laplacian_kernel)])
def test_features_approximate_the_kernel(kernel, func):
    # k_phi -> k at rate 1/sqrt(D): with D = 4000, |k_phi - k| <= 6 / sqrt(D) (a bound
    # on the max of 900 entries with sub-Gaussian errors of sd <= 1/sqrt(2D)).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    omega = feat.draw_frequencies(kernel, 0.4, 3, 4000, rng)
    F = features(X, omega)
    err = np.abs(F @ F.T - func(X, gamma=0.4)).max()
    assert err < 6 / math.sqrt(4000)
    # and the frequencies matter: a wrong spectral scale is far off
    G = features(X, omega * 2)
    assert np.abs(G @ G.T - func(X, gamma=0.4)).max() > 0.2


@pytest.mark.parametrize("n_components, bits", [(1, 11), (3, 11), (4, 12), (37, 13),
                                                (64, 14), (255, 14), (256, 15)])
def test_fourier_rows_are_12_bit_integers_of_norm_at_most_R(n_components, bits):
    # q = 11 + floor(log2(D) / 2): abs(k) <= 2^11 on the grid 2^-q (one float32 product
    # of 4096 rows is exact), every row of norm <= R = 1 + 2^-10 (exact integer check)
    assert feat.fourier_bits(n_components) == bits
    rng = np.random.default_rng(1)
    X = rng.normal(scale=30, size=(1000, 4))
    omega = feat.draw_frequencies("rbf", 1.0, 4, n_components, rng)
    F = feat.feature_map(X, omega, block_rows=333).astype(np.int64)
    step = 2 ** (23 - bits)
    assert np.all(F % step == 0)
    assert np.abs(F // step).max() <= 2**11
    assert np.abs(F // step).max() >= 2**10  # the grid is not needlessly coarse
    # R^2 2^46 with R = 1 + 2^-10, computed as a fraction
    radius2 = Fraction(2**10 + 1, 2**10) ** 2 * 2**46
    assert radius2.denominator == 1 and R == float(Fraction(2**10 + 1, 2**10))
    assert np.all(np.einsum("ij,ij->i", F, F) <= radius2.numerator)
    # rounding moves a unit row by less than sqrt(2) 2^-11
    assert np.all(np.abs(np.linalg.norm(F * Q, axis=1) - 1) < math.sqrt(2) * 2.0**-11)


def test_feature_rows_are_position_independent_and_fine_rows_on_the_2_23_grid():
    rng = np.random.default_rng(1)
    X = rng.normal(scale=30, size=(5000, 4))
    omega = feat.draw_frequencies("rbf", 1.0, 4, 37, rng)
    F = feat.feature_map(X, omega, block_rows=333).astype(np.int64)
    # a row's features depend on that row only: shuffled rows, other blocks, same bits
    order = rng.permutation(5000)
    G = feat.feature_map(X[order], omega, block_rows=1000).astype(np.int64)
    assert np.array_equal(G, F[order])
    # the squared map's rows: 2^-23 grid, R = 1 + 2^-16
    H = feat.feature_map(X, omega, block_rows=333, fine=True).astype(np.int64)
    assert np.all(np.einsum("ij,ij->i", H, H) <= feat._RADIUS2_INT)
    assert np.all(np.abs(np.linalg.norm(H * Q, axis=1) - 1) < 1e-5)
    assert np.abs(H - F).max() <= 2 ** (23 - 13 - 1) + 1  # within half a coarse step


def test_shrink_enforces_the_radius_exactly():
    big = np.array([[2**23, 2**23, 0, 0], [2**22, 0, 0, 0]], dtype=np.int64)
    out = feat._shrink_rows(big.copy())
    assert int(out[0] @ out[0]) <= feat._RADIUS2_INT < int(big[0] @ big[0])
    assert np.array_equal(out[1], big[1])  # rows within R are untouched
    # the 12-bit rows' radius, q = 11: R^2 2^22 = 2^22 + 2^13 + 2^2
    big = np.array([[2**11, 2**11, 5, 0], [2**11, 0, 0, 0]], dtype=np.int64)
    out = feat._shrink_rows(big.copy(), 2**22 + 2**13 + 4)
    assert int(out[0] @ out[0]) <= 2**22 + 2**13 + 4 < int(big[0] @ big[0])
    assert np.array_equal(out[1], big[1])


# -- relabellings ----------------------------------------------------------------------------

def _subset_codes(masks):
    return masks.astype(np.int64) @ (2 ** np.arange(masks.shape[1]))


@pytest.mark.parametrize("n, m", [(5, 2), (6, 1), (7, 3)])
def test_subset_masks_are_uniform(n, m):
    # all C(n, m) subsets equally likely: chi-square goodness of fit (the key threshold
    # t / 256 is off m / n for (5, 2) and (6, 1): most rows are corrected)
    masks = feat.subset_masks(n, m, 5000, np.random.default_rng(2))
    assert np.all(masks.sum(1) == m)
    counts = np.bincount(_subset_codes(masks), minlength=2**n)
    counts = counts[counts > 0]
    assert counts.size == math.comb(n, m)
    assert stats.chisquare(counts).pvalue > 1e-3


class _FirstRanks(feat.SubsetDraw):
    """A biased correction: always the first selected (unselected) positions."""

    def _ranks(self, counts, excess, r0):
        need = np.abs(excess)
        rows = np.repeat(np.arange(counts.size), need)
        return rows, np.arange(rows.size) - np.repeat(np.cumsum(need) - need, need)


def test_uniformity_check_catches_a_biased_count_fix():
    masks = _FirstRanks(5, 2, 5000, np.random.default_rng(2)).masks(0, 5000)
    assert np.all(masks.sum(1) == 2)
    counts = np.bincount(_subset_codes(masks), minlength=32)
    assert stats.chisquare(counts[counts > 0]).pvalue < 1e-6


@pytest.mark.parametrize("rank_words", [2, 4])
def test_rows_whose_rank_words_run_out_stay_uniform(rank_words):
    # too few words for most rows: their ranks come from the fallback generator
    draw = feat.SubsetDraw(7, 3, 5000, np.random.default_rng(4))
    draw.rank_words = rank_words
    masks = np.vstack([draw.masks(0, 1234), draw.masks(1234, 5000)])
    assert np.all(masks.sum(1) == 3)
    counts = np.bincount(_subset_codes(masks), minlength=2**7)
    counts = counts[counts > 0]
    assert counts.size == 35 and stats.chisquare(counts).pvalue > 1e-3


def test_subset_masks_do_not_depend_on_the_row_chunks():
    # 9000 positions: three key blocks, the last one short
    ref = feat.subset_masks(9000, 3100, 9, np.random.default_rng(3))
    draw = feat.SubsetDraw(9000, 3100, 9, np.random.default_rng(3))
    got = np.vstack([draw.masks(0, 1), draw.masks(1, 4), draw.masks(4, 9)])
    assert np.array_equal(got, ref)
    assert np.all(ref.sum(axis=1) == 3100)
    with pytest.raises(RuntimeError, match="row order"):
        draw.masks(2, 3)


def test_subset_masks_fix_the_count_both_ways():
    # m/n far from the key threshold's resolution: corrections add and remove positions
    for m in (1, 7, 13):
        masks = feat.subset_masks(14, m, 500, np.random.default_rng(m))
        assert np.all(masks.sum(1) == m)


@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("n, m", [(70, 30), (9000, 4500), (5003, 17)])
def test_subset_sums_are_the_sums_of_the_masks(n, m, coarse, monkeypatch):
    # the in-memory path never forms the fixed masks: Bernoulli products plus the
    # flipped rows; exactly masks @ F, in any row chunks, with either popcount, with
    # one product of the 12-bit rows (coarse) or two of split rows
    rng = np.random.default_rng(n)
    F = feat.feature_map(rng.normal(size=(n, 3)), feat.draw_frequencies("rbf", 1.0, 3, 8, rng))
    masks = feat.subset_masks(n, m, 23, np.random.default_rng(1))
    ref = (masks.astype(np.int64) @ F.astype(np.int64)).astype(np.float64)
    draw = feat.SubsetDraw(n, m, 23, np.random.default_rng(1))
    got = np.vstack([feat.subset_sums(F, draw, 0, 5, coarse=coarse),
                     feat.subset_sums(F, draw, 5, 23, coarse=coarse)])
    assert np.array_equal(got, ref)
    monkeypatch.delattr(np, "bitwise_count", raising=False)  # numpy < 2 popcount
    draw = feat.SubsetDraw(n, m, 23, np.random.default_rng(1))
    assert np.array_equal(feat.subset_sums(F, draw, 0, 23, coarse=coarse), ref)


def test_one_float32_product_of_12_bit_rows_is_exact_at_the_extremes():
    # 12-bit rows at +-2^11 (and 2^11 - 1) times 2^(23 - q) over a full key block of
    # 4096 rows: partial sums up to 2^23 2^(23 - q), exact in one float32 product
    rows = feat.KEY_BLOCK
    for shift in (12, 9, 5):
        row = np.array([2**11, -(2**11), 2**11 - 1, -(2**11 - 1), 1365], dtype=np.float32)
        F = np.tile(row * np.float32(2**shift), (rows, 1))
        masks = np.ones((3, rows), dtype=bool)
        masks[1, ::3] = False
        masks[2, 1::2] = False
        ref = (masks.astype(np.int64) @ F.astype(np.int64)).astype(np.float64)
        assert np.array_equal(feat._masked_sums(F, masks, coarse=True), ref)
        draw = feat.SubsetDraw(rows, rows // 2, 7, np.random.default_rng(shift))
        ref = (draw.masks(0, 7).astype(np.int64) @ F.astype(np.int64)).astype(np.float64)
        draw = feat.SubsetDraw(rows, rows // 2, 7, np.random.default_rng(shift))
        assert np.array_equal(feat.subset_sums(F, draw, 0, 7, coarse=True), ref)


def test_split_products_are_exact_at_the_extremes():
    # features at +-2^23 and 2^23 - 1 over a full float32 block: the split sums are exact
    rows = feat._SPLIT_ROWS
    F = np.tile(np.array([[2.0**23, -(2.0**23), 2.0**23 - 1, -(2.0**23 - 1), 2049.0]],
                         dtype=np.float32), (rows, 1))
    masks = np.ones((2, rows), dtype=bool)
    masks[1, ::3] = False
    ref = (masks.astype(np.int64) @ F.astype(np.int64)).astype(np.float64)
    assert np.array_equal(feat._masked_sums(F, masks), ref)


# -- statistics ------------------------------------------------------------------------------

def test_mmd_statistics_match_brute_force_and_chunking():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(70, 3))
    codes = np.repeat([0, 1], [40, 30])  # group 1 is the smaller one
    F = feat.feature_map(X, feat.draw_frequencies("rbf", 0.5, 3, 16, rng))
    s = feat.feature_mmd_statistics(F, codes, 30, np.random.default_rng(5), kind="fourier")
    # the split products give the same bits
    assert np.array_equal(s, feat.feature_mmd_statistics(F, codes, 30,
                                                         np.random.default_rng(5)))
    # replay the relabellings with the same generator consumption
    masks = np.vstack([codes == 1, feat.subset_masks(70, 30, 30, np.random.default_rng(5))])
    ref = brute_mmd(F.astype(np.float64) * Q, masks, 30, 40)
    assert np.allclose(s, ref, rtol=1e-12, atol=0)
    for mask_bytes, block in [(70, 7), (70 * 4, 64), (10**6, 5)]:
        t = feat.feature_mmd_statistics(F, codes, 30, np.random.default_rng(5),
                                        max_mask_bytes=mask_bytes, block_rows=block,
                                        kind="fourier")
        assert np.array_equal(s, t)  # bit for bit: exact integer sums


def test_ksample_statistics_match_brute_force_and_chunking():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 2))
    codes = np.repeat([0, 1, 2], [8, 10, 12])
    F = feat.feature_map(X, feat.draw_frequencies("laplacian", 1.0, 2, 8, rng))
    s = feat.feature_mmd_statistics(F, codes, 12, np.random.default_rng(7), kind="fourier")
    assert np.array_equal(s, feat.feature_mmd_statistics(F, codes, 12,
                                                         np.random.default_rng(7)))
    Ff = F.astype(np.float64) * Q
    g = np.random.default_rng(7)
    assign = np.tile(codes.astype(np.int8), (13, 1))
    g.permuted(assign[1:], axis=1, out=assign[1:])
    ref = [math.sqrt(sum(np.mean(a == k) * np.sum((Ff[a == k].mean(0) - Ff.mean(0)) ** 2)
                         for k in range(3))) for a in assign]
    assert np.allclose(s, ref, rtol=1e-12, atol=0)
    t = feat.feature_mmd_statistics(F, codes, 12, np.random.default_rng(7), max_mask_bytes=60,
                                    block_rows=4)
    assert np.array_equal(s, t)


def _feature_pair(seed, n, d_x, d_y, n_x, n_y, kernel_y, bandwidth_y):
    """Features F (rbf, bandwidth 0.5; ``n_x`` components) of ``n`` normal rows X in
    ``d_x`` dimensions, and G of ``n`` normal rows Y, all drawn from one seed."""
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, d_x)), rng.normal(size=(n, d_y))
    F = feat.feature_map(X, feat.draw_frequencies("rbf", 0.5, d_x, n_x, rng))
    G = feat.feature_map(Y, feat.draw_frequencies(kernel_y, bandwidth_y, d_y, n_y, rng))
    return F, G


def test_hsic_statistics_match_brute_force():
    F, G = _feature_pair(8, 40, 2, 1, 6, 5, "rbf", 1.0)
    s = feat.feature_hsic_statistics(F, G, 6, np.random.default_rng(9))
    Ff, Gf = F.astype(np.float64) * Q, G.astype(np.float64) * Q
    g = np.random.default_rng(9)
    ref = []
    for b in range(7):
        p = np.arange(40)
        if b:
            g.permuted(p, out=p)
        # sqrt(HSIC_b) of the feature kernels: trace form, independent of the code
        K, L = Ff @ Ff.T, Gf[p] @ Gf[p].T
        H = np.eye(40) - 1 / 40
        ref.append(math.sqrt(np.trace(K @ H @ L @ H)) / 40)
    assert np.allclose(s, ref, rtol=1e-10)


def test_abs_error_bounds_the_rounding():
    # computed statistics against the exact rational value of the same formula (the
    # integer sums are exact): the difference must stay within the certified bound
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 5))
    codes = np.repeat([0, 1], [120, 180])
    F = feat.feature_map(X, feat.draw_frequencies("rbf", 0.2, 5, 32, rng))
    s = feat.feature_mmd_statistics(F, codes, 20, np.random.default_rng(11), kind="fourier")
    Fi = F.astype(np.int64)
    masks = np.vstack([codes == 0, feat.subset_masks(300, 120, 20,
                                                     np.random.default_rng(11))])
    eta = feat.feature_mmd_abs_error(32, 2)
    for m, val in zip(masks, s, strict=True):
        us, ur = Fi[m].sum(0), Fi[~m].sum(0)
        sq = sum((Fraction(int(a), 120) - Fraction(int(b), 180)) ** 2
                 for a, b in zip(us, ur, strict=True))
        exact = math.sqrt(sq) * Q  # float sqrt of an exact rational: within 2 ulps
        assert abs(val - exact) <= eta + 4e-16 * exact
    assert 0 < eta < 1e-12


# -- sensitivity (brute force) ---------------------------------------------------------------

def _feature_mmd(X, codes, omega, n_perm=8, seed=12, kind="fourier"):
    F = feat.make_features(X, omega, kind)
    return feat.feature_mmd_statistics(F, codes, n_perm, np.random.default_rng(seed),
                                       kind=kind)


def test_mmd_sensitivity_attained_with_one_frequency():
    # D = 1, d = 1: the angle w x is free, so moving one point of the smaller group by
    # pi / w flips its feature: |Delta T| = 2 / m exactly (the bound with R ~ 1).
    omega = np.array([[1.0]])
    codes = np.repeat([0, 1], [4, 6])
    X = np.zeros((10, 1))
    delta = mmd_sensitivity([4, 6], 2 * R)
    worst = 0.0
    for i in range(10):
        for c in (math.pi, math.pi / 2, 2.0):
            X2 = X.copy()
            X2[i] = c
            worst = max(worst, np.max(np.abs(_feature_mmd(X2, codes, omega)
                                             - _feature_mmd(X, codes, omega))))
    assert worst <= delta + 2 * feat.feature_mmd_abs_error(1, 2)
    assert worst >= 2 / 4 * (1 - 1e-6)  # attained: a halved sensitivity fails
    assert not worst <= delta / 2


@pytest.mark.parametrize("sizes, kind", [((3, 5), "fourier"), ((3, 4, 5), "fourier"),
                                         ((3, 5), "squared")])
def test_mmd_sensitivity_brute_force_random(sizes, kind):
    rng = np.random.default_rng(13)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    X = rng.normal(size=(codes.size, 2))
    delta = mmd_sensitivity(sizes, feat.feature_shape(3, kind)[2])  # fourier: 2R
    eta = feat.feature_mmd_abs_error(3, len(sizes), kind)
    worst = 0.0
    # 8 frequency draws (was 20): the worst move reaches 0.83, 0.53 and 0.68 Delta after
    # 8 (0.83, 0.62, 0.68 after 20), above the Delta / 4 checked below; a sensitivity too
    # small by half is caught where it is attained (the one-frequency tests above)
    for trial in range(8):
        omega = feat.draw_frequencies("rbf", 2.0, 2, 3, np.random.default_rng(trial))
        base = _feature_mmd(X, codes, omega, n_perm=10, kind=kind)
        for i in range(codes.size):
            X2 = X.copy()
            X2[i] = rng.normal(scale=4, size=2)
            moved = _feature_mmd(X2, codes, omega, n_perm=10, kind=kind)
            worst = max(worst, np.max(np.abs(moved - base)))
    assert worst <= delta + 2 * eta
    assert worst > delta / 4  # the search does reach the scale of the bound


@functools.cache  # computed once: the sensitivity and the noise tests
def _hsic_worst_change(n, trials=300, kind="fourier", seed=14):
    """Largest change of any of the 6 feature sqrt(HSIC_b) values over random neighbours.

    D = 1 and angles on the quarter-turn grid; the replaced pair moves both features by
    pi (fourier: a sign flip) or pi / 2 (squared: orthogonal squared features), the
    configurations that attain the bounds.
    """
    rng = np.random.default_rng(seed)
    omega = np.array([[1.0]])
    turn = math.pi if kind == "fourier" else math.pi / 2
    grid = [0.0, math.pi / 2, math.pi, 3 * math.pi / 2]
    worst = 0.0
    for _ in range(trials):
        X, Y = rng.choice(grid, size=(n, 1)), rng.choice(grid, size=(n, 1))
        F, G = feat.make_features(X, omega, kind), feat.make_features(Y, omega, kind)
        base = feat.feature_hsic_statistics(F, G, 5, np.random.default_rng(1))
        i = rng.integers(n)
        X2, Y2 = X.copy(), Y.copy()
        X2[i], Y2[i] = X[i] + turn, Y[i] + turn
        F2, G2 = feat.make_features(X2, omega, kind), feat.make_features(Y2, omega, kind)
        moved = feat.feature_hsic_statistics(F2, G2, 5, np.random.default_rng(1))
        worst = max(worst, np.max(np.abs(moved - base)))
    return worst


def test_hsic_sensitivity_brute_force():
    # feature HSIC is sqrt(HSIC_b) of the feature kernels (diameter 2R each):
    # Delta = 2 (n - 1) (2R)^2 / n^2 = 8 (n - 1) R^2 / n^2.
    n = 6
    delta = hsic_sensitivity(n, 2 * R, 2 * R)
    assert delta == pytest.approx(8 * (n - 1) * R**2 / n**2, rel=1e-12)
    worst = _hsic_worst_change(n)
    assert worst <= delta + 2 * feat.feature_hsic_abs_error(n, 1, 1)
    assert worst > delta / 2  # a halved sensitivity fails this check


# -- estimator -------------------------------------------------------------------------------

def two_samples(n=150, shift=0.0, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n, d)), rng.normal(shift, size=(n, d))])
    return X, np.repeat([0, 1], n)


def test_estimator_plan_and_release():
    X, y = two_samples(shift=1.0)
    res = DPMMDTest(method="features", n_components=32, kernel_params={"gamma": 0.3},
                    epsilon=2.0, n_permutations=199, random_state=0).fit(X, y).result_
    assert res.method == "dpMMD features" and res.statistic == "sqrt"
    assert res.sensitivity == mmd_sensitivity([150, 150], 2 * R)
    assert 2 / 150 <= res.sensitivity <= 2 / 150 * (1 + 2.0**-10)  # 1 <= R <= 1 + 2^-10
    assert res.abs_error == feat.feature_mmd_abs_error(32, 2)
    assert res.reject
    again = DPMMDTest(method="features", n_components=32, kernel_params={"gamma": 0.3},
                      epsilon=2.0, n_permutations=199, random_state=0).fit(X, y).result_
    assert again == res


def test_estimator_release_equals_replay_at_huge_epsilon():
    # at a huge epsilon the p-value is the non-private rank of the replayed statistics
    X, y = two_samples(n=60, shift=0.3, seed=3)
    est = DPMMDTest(method="features", n_components=16, kernel_params={"gamma": 0.5},
                    epsilon=1e9, n_permutations=49, random_state=5)
    res = est.fit(X, y).result_
    g = check_generator(5)
    omega = feat.draw_frequencies("rbf", 0.5, 3, 16, g)
    s = feat.feature_mmd_statistics(feat.feature_map(X, omega), y, 49, g, kind="fourier")
    assert res.pvalue == (1 + np.sum(s[1:] >= s[0])) / 50


def test_estimator_refusals_before_the_charge():
    X, y = two_samples(n=20)
    budget = PrivacyBudget(10.0)
    cases = [
        (dict(kernel="chi2"), "method='features' needs kernel"),
        (dict(kernel_params={"gamma": "aggregate"}), "numeric kernel_params"),
        (dict(n_components=0), "n_components"),
        (dict(method="nystrom"), "method"),
        (dict(max_memory=1000), "max_memory"),
    ]
    for params, match in cases:
        est = DPMMDTest(**{"method": "features", "budget": budget, "random_state": 0,
                           **params})
        with pytest.raises(InvalidParameterError, match=match):
            est.fit(np.abs(X), y)
        assert not hasattr(est, "result_")
    assert budget.spent == (0.0, 0.0)


def test_budget_charged_once_per_fit():
    X, y = two_samples(n=20)
    budget = PrivacyBudget(1.5)
    est = DPMMDTest(method="features", epsilon=1.0, budget=budget, random_state=0)
    est.fit(X, y)
    with pytest.raises(BudgetExceededError, match="budget"):
        est.fit(X, y)


def test_memory_estimate_at_a_million_rows_is_under_2gib():
    m = feat.feature_mmd_memory_bytes(10**6, 10, 64, 2, 2000)
    assert m < 2 * 2**30
    assert feat.feature_mmd_memory_bytes(10**6, 10, 128, 2, 2000) > m


# -- dpHSIC with features ----------------------------------------------------------------

def paired(n=120, dep=0.0, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, dep * X[:, 0] + rng.normal(size=n)


def test_hsic_statistics_do_not_depend_on_the_chunk_size():
    F, G = _feature_pair(15, 70, 3, 2, 8, 5, "laplacian", 0.7)
    ref = feat.feature_hsic_statistics(F, G, 30, np.random.default_rng(16))
    for max_bytes in (1, 8 * 70 * 3, 8 * 70 * 7 + 5):  # 1, 3 and 7 permutations per chunk
        s = feat.feature_hsic_statistics(F, G, 30, np.random.default_rng(16),
                                         max_perm_bytes=max_bytes)
        assert np.array_equal(s, ref)


def test_hsic_estimator_plan_and_release():
    X, y = paired(dep=1.5)
    est = DPHSICTest(method="features", n_components=16, kernel_params={"gamma": 0.3},
                     y_kernel_params={"gamma": 0.5}, epsilon=5.0, n_permutations=99,
                     random_state=0)
    res = est.fit(X, y).result_
    n = 120
    assert res.method == "dpHSIC features" and res.statistic == "sqrt"
    # the sensitivity that the brute-force search above attains within a factor 2
    assert res.sensitivity == hsic_sensitivity(n, 2 * R, 2 * R)
    assert res.sensitivity >= 8 * (n - 1) / n**2
    assert res.abs_error == feat.feature_hsic_abs_error(n, 16, 16)
    assert res.reject
    assert est.set_params(random_state=0).fit(X, y).result_ == res


def test_hsic_estimator_release_equals_replay_at_huge_epsilon():
    # the estimator privatises exactly these statistics (frequencies x then y from the
    # generator, then the permutations): at a huge epsilon the p-value is their rank
    X, y = paired(n=50, dep=0.3, seed=4)
    est = DPHSICTest(method="features", n_components=8, kernel_params={"gamma": 0.5},
                     y_kernel="laplacian", epsilon=1e9, n_permutations=49, random_state=6)
    res = est.fit(X, y).result_
    g = check_generator(6)
    ox = feat.draw_frequencies("rbf", 0.5, 3, 8, g)
    oy = feat.draw_frequencies("laplacian", 1.0, 1, 8, g)  # gamma = 1 / n_targets
    s = feat.feature_hsic_statistics(feat.feature_map(X, ox),
                                     feat.feature_map(y[:, None], oy), 49, g)
    assert res.pvalue == (1 + np.sum(s[1:] >= s[0])) / 50


def test_hsic_halved_noise_mutant_is_caught():
    # Laplace noise of scale 2 c / epsilon hides a change of c of every statistic; the
    # estimator's scale must cover the change attained by brute force (n = 6, D = 1),
    # which exceeds half the bound: a release with halved noise fails this check.
    n, epsilon = 6, 1.0
    X, y = paired(n=n, seed=1)
    res = DPHSICTest(method="features", n_components=1, epsilon=epsilon, n_permutations=9,
                     random_state=0).fit(X, y).result_
    worst = _hsic_worst_change(n)
    assert res.noise_scale >= 2 * worst / epsilon
    assert not res.noise_scale / 2 >= 2 * worst / epsilon
    assert res.noise.sensitivity >= res.sensitivity + 2 * res.abs_error


def test_hsic_features_refusals_before_the_charge():
    X, y = paired(n=20)
    budget = PrivacyBudget(10.0)
    cases = [
        (dict(kernel="chi2"), "method='features' needs kernel"),
        (dict(y_kernel="chi2"), "method='features' needs kernel"),
        (dict(y_kernel_params={"gamma": "aggregate"}), "numeric kernel_params"),
        (dict(cyclic=True), "cyclic=True is not available with method='features'"),
        (dict(n_components=2**15), "n_components"),
        (dict(max_memory=1000), "max_memory"),
    ]
    for params, match in cases:
        est = DPHSICTest(**{"method": "features", "budget": budget, "random_state": 0,
                            **params})
        with pytest.raises(InvalidParameterError, match=match):
            est.fit(np.abs(X), np.abs(y))
        assert not hasattr(est, "result_")
    assert budget.spent == (0.0, 0.0)


# -- validity (slow) -------------------------------------------------------------------------

REPS, ALPHA = 400, 0.05
LIMIT = int(stats.binom.ppf(0.999, REPS, ALPHA))


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 10, 100])
def test_features_type_one_error(d):
    rng = np.random.default_rng(d)
    y = np.repeat([0, 1], [40, 60])
    est = DPMMDTest(method="features", n_components=32, epsilon=1.0, n_permutations=99)
    rejections = 0
    for rep in range(REPS):
        X = rng.standard_t(3, size=(100, d))
        rejections += est.set_params(random_state=rep).decision(X, y)
    assert rejections <= LIMIT, (rejections, LIMIT)


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 10, 100])
def test_hsic_features_type_one_error(d):
    rng = np.random.default_rng(100 + d)
    est = DPHSICTest(method="features", n_components=16, epsilon=1.0, n_permutations=99)
    rejections = 0
    for rep in range(REPS):
        X = rng.standard_t(3, size=(80, d))
        y = rng.standard_t(3, size=(80, 2))
        rejections += est.set_params(random_state=rep).decision(X, y)
    assert rejections <= LIMIT, (rejections, LIMIT)


# -- squared features (feature_map="squared") ------------------------------------------------

RF = feat._FINE_RADIUS  # the squared map's rows phi: 2^-23 grid, R = 1 + 2^-16


def _squared(X, omega):
    return feat.squared_feature_map(X, omega).astype(np.float64) * Q


def test_squared_map_shape_integers_radius_and_inner_products():
    rng = np.random.default_rng(21)
    X = rng.normal(size=(40, 3)) * 3
    omega = feat.draw_frequencies("rbf", 0.7, 3, 6, rng)
    S = feat.squared_feature_map(X, omega)
    n_dims, radius, diameter = feat.feature_shape(6, "squared")
    assert S.shape == (40, n_dims) == (40, 6 * 13) and S.dtype == np.float32
    assert np.all(S == np.rint(S)) and np.max(np.abs(S)) <= 2**23 * RF * RF
    assert np.all(np.linalg.norm(S.astype(np.float64) * Q, axis=1) <= radius)
    # each row is a function of that row alone (blocks do not matter)
    np.testing.assert_array_equal(feat.squared_feature_map(X[7:8], omega), S[7:8])
    np.testing.assert_array_equal(feat.squared_feature_map(X, omega, block_rows=3), S)
    # <psi, psi'> is (phi^T phi')^2 up to the certified per-row error eta
    P = feat.feature_map(X, omega, fine=True).astype(np.float64) * Q
    eta = radius - RF * RF
    G = (S.astype(np.float64) * Q) @ (S.astype(np.float64) * Q).T
    assert np.max(np.abs(G - (P @ P.T) ** 2)) <= 2 * eta * radius + eta**2
    assert diameter == pytest.approx(math.sqrt(2), rel=1e-4)
    assert diameter > math.sqrt(2) * RF * RF


def test_squared_kernel_mean_matches_the_closed_form():
    # E[k_D(delta)^2] = k(delta)^2 + ((1 + k(2 delta)) / 2 - k(delta)^2) / D with
    # k = rbf(gamma / 2): so k^2 = rbf(gamma) and k(2 delta) = rbf(2 gamma), the kernel
    # the squared map approximates (frequencies drawn for gamma / 2).
    # 1000 draws (was 4000): the largest off-diagonal |mean - expected| / se is 1.6; a map
    # drawn for gamma instead of gamma / 2 gives 27 and one without the sqrt(2) weights
    # 337 (53.7 and 696 at 4000), far above the 4.5 allowed
    rng = np.random.default_rng(22)
    X = rng.normal(size=(6, 2)) * 0.8
    gamma, D, draws = 0.6, 4, 1000
    values = np.empty((draws, 6, 6))
    for t in range(draws):
        omega = feat.draw_frequencies("rbf", feat.spectral_gamma(gamma, "squared"), 2, D,
                                      np.random.default_rng([22, t]))
        S = _squared(X, omega)
        values[t] = S @ S.T
    mean, se = values.mean(0), values.std(0, ddof=1) / math.sqrt(draws)
    expected = rbf_kernel(X, gamma=gamma) + ((1 + rbf_kernel(X, gamma=2 * gamma)) / 2
                                             - rbf_kernel(X, gamma=gamma)) / D
    off = ~np.eye(6, dtype=bool)
    assert np.all(np.abs(mean - expected)[off] <= 4.5 * se[off] + 1e-6)


def _squared_mmd(X, codes, omega, n_perm=8):
    return _feature_mmd(X, codes, omega, n_perm, kind="squared")


@functools.cache  # computed once: the sensitivity and the noise tests
def _squared_mmd_worst_change():
    """Largest change of any squared-feature MMD statistic (sizes 4 and 6, D = 1, d = 1)
    when one point moves; a quarter turn makes (phi^T phi')^2 = 0."""
    omega = np.array([[1.0]])
    codes = np.repeat([0, 1], [4, 6])
    X = np.zeros((10, 1))
    worst = 0.0
    for i in range(10):
        for c in (math.pi / 2, math.pi, 1.0, 2.5):
            X2 = X.copy()
            X2[i] = c
            worst = max(worst, np.max(np.abs(_squared_mmd(X2, codes, omega)
                                             - _squared_mmd(X, codes, omega))))
    return worst


def test_squared_mmd_sensitivity_attained_with_one_frequency():
    # D = 1, d = 1: psi = (cos^2, sqrt 2 cos sin, sin^2) of the angle; a quarter turn
    # makes (phi^T phi')^2 = 0, so one moved point of the smaller group changes the
    # statistic by sqrt(2) / m: the squared diameter is attained, 2 / m never is.
    diameter = feat.feature_shape(1, "squared")[2]
    delta = mmd_sensitivity([4, 6], diameter)
    eta = feat.feature_mmd_abs_error(1, 2, "squared")
    worst = _squared_mmd_worst_change()
    assert worst <= delta + 2 * eta
    assert worst >= math.sqrt(2) / 4 * (1 - 1e-6)  # attained
    assert not worst <= 0.9 * delta


def test_squared_hsic_sensitivity_brute_force():
    # both sides squared: Delta = 2 (n - 1) diam^2 / n^2 with diam ~ sqrt(2): half the
    # fourier bound; quarter turns of the replaced pair attain it.
    n = 6
    diameter = feat.feature_shape(1, "squared")[2]
    delta = hsic_sensitivity(n, diameter, diameter)
    assert delta == pytest.approx(hsic_sensitivity(n, 2 * RF, 2 * RF) / 2, rel=1e-4)
    worst = _hsic_worst_change(n, kind="squared", seed=24)
    assert worst <= delta + 2 * feat.feature_hsic_abs_error(n, 1, 1, "squared")
    assert worst > delta / 2


def test_squared_halved_noise_mutants_are_caught():
    # The estimators' Laplace scale 2 c / epsilon must cover the change c attained by
    # brute force on neighbours; half of it does not, for both squared-feature tests.
    epsilon = 1.0
    X = np.random.default_rng(2).normal(size=(10, 1))
    res = DPMMDTest(method="features", n_components=1, feature_map="squared",
                    epsilon=epsilon, n_permutations=9, random_state=0).fit(
        X, np.repeat([0, 1], [4, 6])).result_
    worst = _squared_mmd_worst_change()
    assert res.noise_scale >= 2 * worst / epsilon
    assert not res.noise_scale / 2 >= 2 * worst / epsilon
    n = 6
    Xh, yh = paired(n=n, seed=1)
    hres = DPHSICTest(method="features", n_components=1, feature_map="squared",
                      epsilon=epsilon, n_permutations=9, random_state=0).fit(Xh, yh).result_
    hworst = _hsic_worst_change(n, kind="squared", seed=24)
    assert hres.noise_scale >= 2 * hworst / epsilon
    assert not hres.noise_scale / 2 >= 2 * hworst / epsilon


def test_squared_estimator_plan_and_release_replay():
    X, y = two_samples(n=60, shift=0.3, seed=3)
    est = DPMMDTest(method="features", n_components=8, feature_map="squared",
                    kernel_params={"gamma": 0.5}, epsilon=1e9, n_permutations=49,
                    random_state=5)
    res = est.fit(X, y).result_
    assert res.method == "dpMMD squared features"
    assert res.sensitivity == pytest.approx(math.sqrt(2) / 60, rel=1e-4)
    assert res.abs_error == feat.feature_mmd_abs_error(8, 2, "squared")
    g = check_generator(5)
    omega = feat.draw_frequencies("rbf", 0.25, 3, 8, g)  # gamma / 2
    s = feat.feature_mmd_statistics(feat.squared_feature_map(X, omega), y, 49, g)
    assert res.pvalue == (1 + np.sum(s[1:] >= s[0])) / 50
    hs = DPHSICTest(method="features", n_components=4, feature_map="squared",
                    epsilon=1.0, n_permutations=19, random_state=0).fit(X, X[:, :1]).result_
    assert hs.method == "dpHSIC squared features"
    diameter = feat.feature_shape(4, "squared")[2]
    assert hs.sensitivity == pytest.approx(hsic_sensitivity(120, diameter, diameter))


def test_squared_memory_refused_before_the_charge():
    budget = PrivacyBudget(1.0)
    X, y = two_samples(n=600)
    est = DPMMDTest(method="features", n_components=64, feature_map="squared",
                    max_memory=2**20, budget=budget)
    with pytest.raises(InvalidParameterError,
                       match=r"feature_map='squared'.*8256 features per row"):
        est.fit(X, y)
    assert budget.spent == (0.0, 0.0)
    with pytest.raises(InvalidParameterError, match="feature_map"):
        DPMMDTest(method="features", feature_map="cubed").fit(X, y)


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 10])
def test_squared_features_type_one_error(d):
    rng = np.random.default_rng(200 + d)
    y = np.repeat([0, 1], [40, 60])
    est = DPMMDTest(method="features", n_components=8, feature_map="squared", epsilon=1.0,
                    n_permutations=99)
    rejections = 0
    for rep in range(REPS):
        X = rng.standard_t(3, size=(100, d))
        rejections += est.set_params(random_state=rep).decision(X, y)
    assert rejections <= LIMIT, (rejections, LIMIT)


@pytest.mark.parametrize("coarse", [True, False])
def test_subset_sums_do_not_depend_on_the_thread_count(coarse):
    # key blocks on 1, 2 or 3 threads, each with its own exact partial sums
    rng = np.random.default_rng(8)
    n = 3 * feat.KEY_BLOCK + 5
    F = feat.feature_map(rng.normal(size=(n, 2)), feat.draw_frequencies("rbf", 1.0, 2, 4, rng))
    got = [feat.subset_sums(F, feat.SubsetDraw(n, 1000, 6, np.random.default_rng(2)), 0, 6,
                            n_threads=k, coarse=coarse) for k in (1, 2, 3)]
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])
    assert np.array_equal(got[0], feat._masked_sums(F, feat.subset_masks(
        n, 1000, 6, np.random.default_rng(2))))


@pytest.mark.parametrize("m, bits", [(500, 1), (250, 2), (300, 8)])
def test_bernoulli_bits_select_at_the_threshold_rate(m, bits):
    # t / 256 from bits of k random words (| where a binary digit is 1, & where 0)
    draw = feat.SubsetDraw(1000, m, 400, np.random.default_rng(1))
    assert draw.n_bits == bits
    ones = sum(int(feat._popcount_rows(draw.bernoulli(b, 0, 400)).sum())
               for b in range(draw.n_blocks))
    p = int(draw.threshold) / 256
    assert abs(ones - 400_000 * p) <= 4 * math.sqrt(400_000 * p * (1 - p))
