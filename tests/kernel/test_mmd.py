"""DPMMDTest: statistic, golden value, paths, sensitivity, API and privacy contract."""

import math
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

import skdptest.kernel._mmd as mmd_mod
import skdptest.kernel._route_exact as exact_mod
from skdptest import BudgetExceededError, DPMMDTest, PrivacyBudget
from skdptest._permutation import permutation_noise
from skdptest._validation import check_generator
from skdptest.kernel._kernels import resolve_kernel
from skdptest.kernel._mmd import (
    draw_assignments,
    mmd_permutation_statistics,
    mmd_sensitivity,
)
from tests.kernel._reference import _fixed, noise_audit

GOLDEN_MMD_V = 0.37176159397016506


def golden_data():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 3))
    Y = rng.uniform(size=(60, 3)) + 0.3
    return np.vstack([X, Y]), np.repeat([0, 1], [40, 60])


def brute_stats(Z, assignments, gamma, ksample=False):
    """Direct per-assignment formulas (mean embeddings), no shared code."""
    K = rbf_kernel(Z, gamma=gamma)
    out = []
    for a in assignments:
        groups = np.unique(a)
        if not ksample:
            v = np.where(a == 0, 1 / np.sum(a == 0), -1 / np.sum(a == 1))
            out.append(math.sqrt(max(v @ K @ v, 0.0)))
        else:
            N = len(a)
            t2 = 0.0
            for g in groups:
                w = (a == g) / np.sum(a == g) - 1 / N
                t2 += np.sum(a == g) / N * (w @ K @ w)
            out.append(math.sqrt(max(t2, 0.0)))
    return np.array(out)


def test_golden_value():
    Z, y = golden_data()
    k = resolve_kernel("rbf", None, None, Z)
    s = mmd_permutation_statistics(Z, y, 5, np.random.default_rng(1), k)
    assert s[0] == pytest.approx(GOLDEN_MMD_V, rel=1e-13)


def test_golden_value_through_the_estimator_at_huge_epsilon():
    # At a huge epsilon the p-value is the non-private permutation p-value of
    # the same relabellings (replayed from the seed's generator).
    Z, y = golden_data()
    res = _fixed(DPMMDTest, epsilon=1e12, random_state=0, n_permutations=20).test(Z, y)
    k = resolve_kernel("rbf", None, None, Z)
    s = mmd_permutation_statistics(Z, y, 20, check_generator(0), k)
    assert s[0] == pytest.approx(GOLDEN_MMD_V, rel=1e-13)
    assert res.pvalue == (1 + np.sum(s[1:] >= s[0])) / 21
    assert res.sensitivity == pytest.approx(math.sqrt(2) / 40)
    assert res.statistic == "sqrt"


@pytest.mark.parametrize("max_kernel_bytes", [None, 0])
@pytest.mark.parametrize("block_rows", [1024, 7])
@pytest.mark.parametrize("max_column_bytes", [None, 800])
def test_all_paths_match_brute_force(monkeypatch, max_kernel_bytes, block_rows,
                                     max_column_bytes):
    monkeypatch.setattr(exact_mod, "BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(37, 2))
    codes = np.repeat([0, 1], [15, 22])
    k = resolve_kernel("rbf", {"gamma": 0.7}, None, Z)
    s = mmd_permutation_statistics(Z, codes, 30, np.random.default_rng(5), k,
                                   max_kernel_bytes=max_kernel_bytes,
                                   max_column_bytes=max_column_bytes)
    A = draw_assignments(codes, 30, np.random.default_rng(5))
    np.testing.assert_allclose(s, brute_stats(Z, A, 0.7), rtol=1e-11, atol=1e-13)
    codes3 = np.repeat([0, 1, 2], [10, 12, 15])
    s3 = mmd_permutation_statistics(Z, codes3, 30, np.random.default_rng(5), k,
                                    max_kernel_bytes=max_kernel_bytes,
                                    max_column_bytes=max_column_bytes)
    A3 = draw_assignments(codes3, 30, np.random.default_rng(5))
    np.testing.assert_allclose(s3, brute_stats(Z, A3, 0.7, ksample=True), rtol=1e-11,
                               atol=1e-13)


def _exact_forms(K, V):
    """diag(V^T K_sym V) in rational arithmetic, K_sym from K's lower triangle."""
    from fractions import Fraction
    n = K.shape[0]
    Kf = [[Fraction(float(K[max(i, j), min(i, j)])) for j in range(n)] for i in range(n)]
    out = []
    for c in range(V.shape[1]):
        v = [Fraction(float(x)) for x in V[:, c]]
        out.append(sum(v[i] * sum(Kf[i][j] * v[j] for j in range(n)) for i in range(n)))
    return out


@pytest.mark.parametrize("kappa", [1.0, 1e-3, 7.5])
def test_triangular_forms_within_the_certified_error(kappa):
    # Any bounded "kernel" (not symmetric, not PSD, diagonal not constant): the forms
    # use the lower triangle only (the upper one is NaN here) and every computed value
    # is within mmd_abs_error(squared=True) of the rational value of the same floats.
    rng = np.random.default_rng(11)
    n, sizes = 24, [10, 14]
    K = rng.uniform(-kappa, kappa, size=(n, n))
    K[np.triu_indices(n, 1)] = np.nan
    codes = np.repeat([0, 1], sizes)
    V = mmd_mod._two_group_rows(codes, np.array(sizes), 6, True, rng,
                                np.random.default_rng(1)).dense().T
    q = mmd_mod.triangular_quadratic_forms(K, V)
    exact = _exact_forms(K, V)
    bound = mmd_mod.mmd_abs_error(sizes, kappa, 2 * kappa, squared=True)
    errors = [abs(float(q[c]) - float(exact[c])) for c in range(V.shape[1])]
    assert np.all(np.isfinite(q)) and max(errors) <= bound
    # and it is the same quadratic form as the full product of the symmetrised matrix
    Ks = np.tril(K) + np.tril(K, -1).T
    np.testing.assert_allclose(q, np.einsum("ij,ij->j", V, Ks @ V), rtol=0, atol=bound)
    # a constant diagonal takes the closed form m (1/m)^2 + n (1/n)^2 of sum v_i^2
    np.fill_diagonal(K, 0.5 * kappa)
    col_sq = sizes[0] * (1 / sizes[0]) ** 2 + sizes[1] * (1 / sizes[1]) ** 2
    q2 = mmd_mod.triangular_quadratic_forms(K, V, col_sq)
    exact2 = _exact_forms(K, V)
    assert max(abs(float(q2[c]) - float(exact2[c])) for c in range(V.shape[1])) <= bound


def test_many_groups_path_matches_brute_force():
    rng = np.random.default_rng(8)
    Z = rng.normal(size=(45, 2))
    codes = np.repeat(np.arange(20), [1, 2, 3] * 6 + [4, 5])
    k = resolve_kernel("rbf", None, None, Z)
    s = mmd_permutation_statistics(Z, codes, 15, np.random.default_rng(2), k)
    A = draw_assignments(codes, 15, np.random.default_rng(2))
    np.testing.assert_allclose(s, brute_stats(Z, A, 0.5, ksample=True), rtol=1e-10)
    # the column (GEMM) path, forced by a kernel-size cap of 0, agrees
    s2 = mmd_permutation_statistics(Z, codes, 15, np.random.default_rng(2), k,
                                    max_kernel_bytes=0)
    np.testing.assert_allclose(s, s2, rtol=1e-10)


def test_assignments_are_uniform_relabellings():
    codes = np.repeat([0, 1], [2, 3])
    A = draw_assignments(codes, 5000, np.random.default_rng(0))
    assert np.array_equal(A[0], codes)
    assert np.all((A[1:] == 0).sum(axis=1) == 2)
    # all C(5, 2) = 10 placements equally likely
    keys = (A[1:] == 0) @ (2 ** np.arange(5))
    _, counts = np.unique(keys, return_counts=True)
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > 1e-3


class _TiedKeys:
    """A stand-in generator whose 32-bit keys are all equal: every row ties."""

    def integers(self, low, high, size, dtype):
        return np.zeros(size, dtype=dtype)


def test_tied_keys_are_redrawn_uniformly():
    # Every row of the main draw ties at the threshold, so every row comes
    # from the tie generator (rejection) and must still be a uniform subset.
    masks = mmd_mod._two_group_masks(5, 2, 5000, _TiedKeys(), np.random.default_rng(1))
    assert np.all(masks.sum(axis=1) == 2)
    _, counts = np.unique(masks @ (2 ** np.arange(5)), return_counts=True)
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > 1e-3


class _FewKeys:
    """A stand-in generator whose 16-bit keys take 3 values: many rows tie, some not."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def integers(self, low, high, size, dtype):
        parts = self._rng.integers(0, 3, size=(*size, 4)).astype(np.uint64)
        return (parts << (16 * np.arange(4, dtype=np.uint64))).sum(axis=-1).astype(dtype)


def test_partly_tied_16_bit_keys_give_uniform_subsets():
    # Rows without a tie at the threshold are kept, the others redrawn: the mixture
    # is still uniform over the C(5, 2) placements (the no-tie event is symmetric).
    masks = mmd_mod._two_group_masks(5, 2, 6000, _FewKeys(3), np.random.default_rng(1))
    assert np.all(masks.sum(axis=1) == 2)
    _, counts = np.unique(masks @ (2 ** np.arange(5)), return_counts=True)
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > 1e-3


def _reference_masks(n, m, n_rows, seed):
    # The rule, written plainly: the m smallest of the row's keys (16-bit up to
    # KEY16_MAX_ROWS rows, else 32-bit), ties at the threshold redrawn from tie_rng.
    rng, tie_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    per_word = 4 if n <= mmd_mod.KEY16_MAX_ROWS else 2
    words = rng.integers(0, 2**64, size=(n_rows, -(-n // per_word)), dtype=np.uint64)
    keys = words.view(np.uint16 if per_word == 4 else np.uint32)[:, :n]
    out = np.empty((n_rows, n), dtype=bool)
    for r in range(n_rows):
        threshold = np.sort(keys[r])[m - 1]
        out[r] = keys[r] <= threshold
        while out[r].sum() != m:
            row = tie_rng.integers(0, 2**32, size=n, dtype=np.uint32)
            out[r] = row <= np.sort(row)[m - 1]
    return out


@pytest.mark.parametrize("n, m, n_rows", [(1000, 500, 700), (1000, 1, 600), (1000, 999, 600),
                                          (5000, 2000, 120), (7, 3, 50)])
def test_selected_masks_follow_the_rule_on_any_path(n, m, n_rows):
    # radix sort (16-bit keys) or partition (32-bit), one thread or several, the
    # masks are those of the plain rule, ties included (0.6 % of rows at n = 1000)
    expected = _reference_masks(n, m, n_rows, 5)
    got = mmd_mod._two_group_masks(n, m, n_rows, np.random.default_rng(5),
                                   np.random.default_rng(6))
    np.testing.assert_array_equal(got, expected)
    with threadpool_limits(1, "blas"):
        got1 = mmd_mod._two_group_masks(n, m, n_rows, np.random.default_rng(5),
                                        np.random.default_rng(6))
    np.testing.assert_array_equal(got1, expected)


def test_relabellings_do_not_depend_on_chunking():
    codes = np.repeat([0, 1], [30, 45])
    full = draw_assignments(codes, 40, np.random.default_rng(4))
    rng = np.random.default_rng(4)
    tie_rng = mmd_mod._tie_generator(rng)
    sizes = np.bincount(codes)
    parts = [mmd_mod._relabelled_codes(codes, sizes, rows, first, rng, tie_rng)
             for rows, first in [(7, True), (1, False), (33, False)]]
    np.testing.assert_array_equal(np.vstack(parts), full)


@pytest.mark.parametrize("m, n", [(1, 1), (3, 7), (40, 60), (333, 667), (999, 1)])
def test_two_group_coefficients_are_exact(m, n):
    masks = np.random.default_rng(0).random((4, m + n)) < 0.5
    V = mmd_mod._MaskRows(masks, 1.0 / m, -1.0 / n).dense()
    assert np.all(V[masks] == 1.0 / m)
    assert np.all(V[~masks] == -1.0 / n)


def test_two_group_ksample_statistic_gives_the_same_test():
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(50, 2))
    codes = np.repeat([0, 1], [20, 30])
    k = resolve_kernel("rbf", None, None, Z)
    s2 = mmd_permutation_statistics(Z, codes, 200, np.random.default_rng(1), k)
    sk = mmd_permutation_statistics(Z, codes, 200, np.random.default_rng(1), k, ksample=True)
    np.testing.assert_allclose(sk, math.sqrt(20 * 30) / 50 * s2, rtol=1e-10)
    d2 = mmd_sensitivity([20, 30], k.diameter)
    dk = math.sqrt(2) / 50 * math.sqrt(30 / 20)
    assert mmd_sensitivity([20, 30, 0][:2], k.diameter) == pytest.approx(math.sqrt(2) / 20)
    assert dk == pytest.approx(math.sqrt(20 * 30) / 50 * d2)


# -- sensitivity by brute force ------------------------------------------------------------

def _max_move(Z, codes, candidates, kernel, n_perm=40):
    """Largest change of any of the B + 1 statistics over all one-row replacements."""
    base = mmd_permutation_statistics(Z, codes, n_perm, np.random.default_rng(9), kernel)
    worst = 0.0
    for i in range(len(Z)):
        for c in candidates:
            Z2 = Z.copy()
            Z2[i] = c
            s = mmd_permutation_statistics(Z2, codes, n_perm, np.random.default_rng(9), kernel)
            worst = max(worst, np.max(np.abs(s - base)))
    return worst


def test_sensitivity_attained_by_two_point_masses():
    # Group 0 at 0, group 1 at 100 (k = 0 between them); moving one point of
    # the smaller group attains Delta = sqrt(2) / min(m, n) exactly.
    Z = np.r_[np.zeros(4), np.full(6, 100.0)][:, None]
    codes = np.repeat([0, 1], [4, 6])
    k = resolve_kernel("rbf", None, None, Z)
    delta = mmd_sensitivity([4, 6], k.diameter)
    assert delta == pytest.approx(math.sqrt(2) / 4)
    worst = _max_move(Z, codes, [np.array([0.0]), np.array([100.0]), np.array([-50.0])], k)
    assert worst <= delta * (1 + 1e-9)
    assert worst >= delta * (1 - 1e-9)  # attained: a halved Delta fails
    assert not worst <= (delta / 2) * (1 + 1e-9)


@pytest.mark.parametrize("sizes", [(3, 5), (3, 4, 5)])
def test_sensitivity_brute_force_random_data(sizes):
    rng = np.random.default_rng(4)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    Z = rng.normal(size=(len(codes), 2))
    cands = [rng.normal(scale=5, size=2) for _ in range(4)] + [Z[0], np.full(2, 50.0)]
    k = resolve_kernel("rbf", {"gamma": 2.0}, None, Z)
    delta = mmd_sensitivity(sizes, k.diameter)
    worst = _max_move(Z, codes, cands, k, n_perm=20)
    assert worst <= delta * (1 + 1e-9)


def test_ksample_sensitivity_attained_by_point_masses():
    sizes = (3, 4, 5)
    codes = np.repeat([0, 1, 2], sizes)
    Z = np.r_[np.zeros(3), np.full(4, 100.0), np.full(5, 200.0)][:, None]
    k = resolve_kernel("rbf", None, None, Z)
    delta = mmd_sensitivity(sizes, k.diameter)
    worst = _max_move(Z, codes, [np.array([300.0]), np.array([100.0])], k, n_perm=20)
    assert delta / 2 < worst <= delta * (1 + 1e-9)


def test_sensitivity_scales_with_the_kernel_bound():
    assert mmd_sensitivity([10, 20], math.sqrt(2 * 4.0)) == pytest.approx(
        2 * mmd_sensitivity([10, 20], math.sqrt(2)))


@pytest.mark.slow
def test_noise_scale_used_by_fit():
    # (slow: 500 fits; the fast tests pin the noise description exactly.)
    # End to end: the p-values of B = 1 follow the noise law at the documented
    # scale 2 (Delta + 2 eta) / epsilon; a halved noise is rejected (z > 6).
    Z, y = golden_data()
    eps = 0.4
    est = _fixed(DPMMDTest, epsilon=eps, n_permutations=1)
    k = resolve_kernel("rbf", None, None, Z)
    res = est.set_params(random_state=0).fit(Z, y).result_
    eta = mmd_mod.mmd_abs_error([40, 60], 1.0, math.sqrt(2))
    laplace = 2 * (math.sqrt(2) / 40 + 2 * eta) / eps
    assert res.abs_error == eta and 0 < eta < 1e-5
    # the discrete noise is never smaller than the Laplace scale asked, and close to it
    scale = res.noise_scale
    assert res.noise == permutation_noise(math.sqrt(2) / 40, eps, 0.0, abs_error=eta)
    assert laplace <= scale <= 1.005 * laplace

    def fit_pvalue(seed):
        return est.set_params(random_state=seed).fit(Z, y).result_.pvalue

    def replay(seed):
        return mmd_permutation_statistics(Z, y, 1, check_generator(seed), k)

    z, z_half = noise_audit(fit_pvalue, replay, scale, range(500))
    assert abs(z) < 4, z
    assert z_half > 6, z_half


# -- API ----------------------------------------------------------------------------------

def test_string_labels_and_dataframe():
    Z, y = golden_data()
    df = pd.DataFrame(Z, columns=["a", "b", "c"])
    labels = np.where(y == 0, "control", "treated")
    est = _fixed(DPMMDTest, random_state=0, n_permutations=99).fit(df, labels)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    assert list(est.classes_) == ["control", "treated"]
    assert est.result_.method == "dpMMD"
    assert est.decision() == est.result_.reject


def test_three_groups():
    rng = np.random.default_rng(0)
    Z = np.vstack([rng.normal(size=(100, 2)), rng.normal(size=(100, 2)),
                   rng.normal(1.5, size=(100, 2))])
    y = np.repeat([1, 2, 3], 100)
    res = _fixed(DPMMDTest, random_state=0, n_permutations=199).test(Z, y)
    assert res.method == "dpMMD k-sample"
    assert res.sensitivity == pytest.approx(math.sqrt(2) / 300 * math.sqrt(200 / 100))
    assert res.reject


def test_one_class_raises_and_charges_nothing():
    budget = PrivacyBudget(1.0)
    est = DPMMDTest(budget=budget)
    with pytest.raises(ValueError, match="1 class"):
        est.fit(np.ones((5, 2)), np.zeros(5))
    with pytest.raises(ValueError, match="1 class"):
        est.fit(np.ones((1, 2)), [3])
    assert budget.spent[0] == 0


@pytest.mark.parametrize(
    "params, exc, match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"n_permutations": 0}, ValueError, "n_permutations"),
        ({"n_permutations": 2.5}, TypeError, "n_permutations"),
        ({"kernel": "linear"}, ValueError, "kernel_bound"),
        ({"kernel": "sigmoid"}, ValueError, "positive definite"),
        ({"kernel_params": {"gamma": 0}}, ValueError, "gamma"),
        ({"kernel": "linear", "kernel_bound": 0.01}, ValueError, "kernel_bound=0.01"),
        ({"budget": 1.0}, TypeError, "budget"),
    ],
)
def test_bad_parameters_raise_and_charge_nothing(params, exc, match):
    Z, y = golden_data()
    budget = PrivacyBudget(1.0)
    est = DPMMDTest(budget=budget, n_permutations=9).set_params(**params)
    with pytest.raises(exc, match=match):
        est.fit(Z, y)
    assert budget.spent[0] == 0
    assert len(budget.ledger) == 0


def test_budget_charged_per_fit_and_score_and_refused_when_exhausted():
    Z, y = golden_data()
    budget = PrivacyBudget(1.0)
    est = DPMMDTest(epsilon=0.4, budget=budget, random_state=0, n_permutations=99,
                    cyclic=False)
    est.fit(Z, y)
    score = est.score(Z, y)
    assert budget.spent[0] == pytest.approx(0.8)
    assert score > 0
    with pytest.raises(BudgetExceededError):
        est.fit(Z, y)
    assert budget.spent[0] == pytest.approx(0.8)


def test_score_is_minus_log_p_value():
    Z, y = golden_data()
    est = DPMMDTest(random_state=0, n_permutations=99, cyclic=False).fit(Z, y)
    # score draws from stream 1 of the same seed: a fit on that generator replays it
    replay = DPMMDTest(random_state=check_generator(0, stream=1), n_permutations=99,
                       cyclic=False)
    p = replay.fit(Z, y).result_.pvalue
    assert est.score(Z, y) == pytest.approx(-math.log(p))


def test_results_and_attributes_hide_the_raw_statistic():
    Z, y = golden_data()
    est = DPMMDTest(random_state=0, n_permutations=50, cyclic=False).fit(Z, y)
    res = est.result_
    numbers = [getattr(res, f.name) for f in fields(res)]
    numbers += [v for v in vars(est).values()]
    for value in numbers:
        arr = np.atleast_1d(np.asarray(value, dtype=object))
        for item in arr.ravel():
            if isinstance(item, (float, np.floating)):
                assert not math.isclose(item, GOLDEN_MMD_V, rel_tol=1e-9)
        assert arr.size < 51  # no B + 1 statistics or noise vectors stored
    assert not any(k.startswith("_") for k in vars(est))


def test_reproducible_with_seed():
    Z, y = golden_data()
    a = DPMMDTest(random_state=3, n_permutations=99, cyclic=False).test(Z, y)
    b = DPMMDTest(random_state=3, n_permutations=99, cyclic=False).test(Z, y)
    assert a == b


def test_agrees_with_scipy_permutation_test_as_epsilon_grows():
    # Same statistic; scipy enumerates all C(12, 5) = 792 relabellings
    # (exact), ours uses B = 3000 random ones: p-values agree within the Monte
    # Carlo error and the released statistic is the statistic.
    rng = np.random.default_rng(11)
    for shift in (0.0, 0.8, 2.0):
        Z = np.vstack([rng.normal(size=(5, 2)) + shift, rng.normal(size=(7, 2))])
        y = np.repeat([0, 1], [5, 7])
        K = rbf_kernel(Z, gamma=0.5)

        def mmd(i, j, axis=-1, K=K):
            out = []
            for a, b in zip(np.atleast_2d(i), np.atleast_2d(j), strict=True):
                v = np.zeros(12)
                v[a.astype(int)] += 1 / 5
                v[b.astype(int)] -= 1 / 7
                out.append(math.sqrt(max(v @ K @ v, 0)))
            return np.array(out) if np.ndim(i) > 1 else np.float64(out[0])

        ref = stats.permutation_test((np.arange(5.0), np.arange(5.0, 12.0)), mmd,
                                     permutation_type="independent",
                                     alternative="greater", n_resamples=10**5)
        res = _fixed(DPMMDTest, epsilon=1e12, n_permutations=3000, random_state=1).test(Z, y)
        tol = 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) / 3000) + 2 / 3001
        assert abs(res.pvalue - ref.pvalue) <= tol
        if abs(ref.pvalue - 0.05) > tol:
            assert res.reject == (ref.pvalue <= 0.05)


def test_other_kernel_forms_through_the_estimator():
    from sklearn.gaussian_process.kernels import RBF

    Z, y = golden_data()
    res = DPMMDTest(kernel=RBF(2.0), random_state=0, n_permutations=49).test(Z, y)
    assert res.sensitivity == pytest.approx(math.sqrt(2) / 40)

    def gauss(A, B):
        return np.exp(-((A[:, None, :] - B[None]) ** 2).sum(-1) / 3)

    res = DPMMDTest(kernel=gauss, kernel_bound=1.0, epsilon=1e12, random_state=0,
                    n_permutations=49).test(Z, y)
    # a callable is not assumed positive definite: squared statistic, any-kernel rule
    assert res.statistic == "squared"
    assert res.sensitivity == pytest.approx(8 / 40 - 2 / 40**2)
    k = resolve_kernel(gauss, None, 1.0, Z)
    s = mmd_permutation_statistics(Z, y, 49, check_generator(0), k, squared=True)
    assert s[0] == pytest.approx(GOLDEN_MMD_V**2, rel=1e-9)
    assert res.pvalue == (1 + np.sum(s[1:] >= s[0])) / 50
    budget = PrivacyBudget(1.0)
    with pytest.raises(ValueError, match="needs an explicit kernel_bound"):
        DPMMDTest(kernel=gauss, budget=budget).fit(Z, y)
    assert budget.spent[0] == 0


def test_blocked_path_in_the_estimator(monkeypatch):
    # A kernel-size cap of 0 and tiny blocks give the same release (9 permutations: the
    # tiny-block path is slow, and equality holds per permuted statistic, whatever
    # their number).
    Z, y = golden_data()
    a = DPMMDTest(random_state=5, n_permutations=9, cyclic=False).test(Z, y)
    monkeypatch.setattr(exact_mod, "MAX_KERNEL_BYTES", 0)
    monkeypatch.setattr(exact_mod, "BLOCK_ROWS", 16)
    monkeypatch.setattr(exact_mod, "MAX_COLUMN_BYTES", 8 * 100 * 10)
    b = DPMMDTest(random_state=5, n_permutations=9, cyclic=False).test(Z, y)
    assert a.pvalue == b.pvalue
    assert a == b


def test_delta_enters_xi():
    Z, y = golden_data()
    res = _fixed(DPMMDTest, epsilon=0.5, delta=0.3, random_state=0, n_permutations=9).test(Z, y)
    laplace = 2 * (math.sqrt(2) / 40 + 2 * res.abs_error) / (0.5 - math.log(0.7))
    assert laplace <= res.noise_scale <= 1.005 * laplace
    assert res.delta == 0.3


def test_private_median_bandwidth():
    from sklearn.metrics.pairwise import euclidean_distances

    Z, y = golden_data()
    budget = PrivacyBudget(10.0)
    est = DPMMDTest(kernel_params={"gamma": "median"}, epsilon=2.0, budget=budget,
                    random_state=0, n_permutations=99).fit(Z, y)
    assert budget.spent[0] == pytest.approx(2.0) and len(budget.ledger) == 1
    laplace = 2 * (math.sqrt(2) / 40 + 2 * est.result_.abs_error) / (0.95 * 2.0)
    assert laplace <= est.result_.noise_scale <= 1.005 * laplace
    assert est.result_.epsilon == 2.0
    assert est.gamma_ > 0 and est.gamma_ == est.result_.gamma
    # at a huge epsilon the chosen bandwidth is the median distance (grid step 12 %)
    est = DPMMDTest(kernel_params={"gamma": "median"}, epsilon=1e6, random_state=0,
                    n_permutations=9).fit(Z, y)
    med = np.median(euclidean_distances(Z)[np.triu_indices(100, k=1)])
    assert abs(math.log(1 / math.sqrt(est.gamma_)) - math.log(med)) < 0.12
    assert DPMMDTest(random_state=0, n_permutations=9, cyclic=False).fit(Z, y).gamma_ is None


def test_closed_form_diagonal_only_for_public_unit_diagonal_kernels(monkeypatch):
    # The closed form for sum v_i^2 is chosen from a public property of the kernel,
    # never from the data's diagonal (a data-dependent branch would show in the time).
    seen = []
    original = mmd_mod.triangular_quadratic_forms

    def spy(K, V, col_sq=None):
        seen.append(col_sq is not None)
        return original(K, V, col_sq)

    monkeypatch.setattr(exact_mod, "triangular_quadratic_forms", spy)
    rng = np.random.default_rng(31)
    codes = np.repeat([0, 1], [12, 15])
    for name, expected in (("rbf", True), ("laplacian", True), ("linear", False),
                           ("cosine", False)):
        for X in (rng.normal(size=(27, 2)), np.ones((27, 2))):  # equal norms or not
            k = resolve_kernel(name, None, 10.0 if name == "linear" else None, X)
            assert k.unit_diagonal is expected
            seen.clear()
            mmd_permutation_statistics(X, codes, 5, np.random.default_rng(0), k)
            assert seen == [expected]
