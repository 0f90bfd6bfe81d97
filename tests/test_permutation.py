"""The integer-exact DP permutation p-value of ``skdptest._permutation``.

Checks: the release equals a brute-force recomputation from the same integer draws; the
law of the p-value is computed exactly on small cases and its log-ratio on neighbours is
at most ε (the mutant with twice the rate is caught); type-I error <= α under
exchangeability (a tie-breaking mutant and one that drops the "1 +" are caught); ε → ∞
gives the non-private p-value; the certified bounds/refine path is bit for bit the exact
path.
"""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from skdptest._noise import discrete_laplace, quantise_rate
from skdptest._permutation import (
    DiscreteNoise,
    PermutationPValue,
    dp_permutation_pvalue,
    permutation_noise,
    privacy_xi,
)

P_FLOOR = 1e-4


def _brute_force(statistics, noise, seed, strict=False):
    """The release recomputed with Python loops from the same integer noise draws."""
    draws = discrete_laplace(np.random.default_rng(seed), noise.rate, size=len(statistics))
    noisy = [math.floor(t / noise.grid) + int(k) for t, k in zip(statistics, draws, strict=True)]
    count = 0
    for b in range(1, len(noisy)):
        count += noisy[b] > noisy[0] if strict else noisy[b] >= noisy[0]
    return (1 + count) / len(noisy)


def test_xi_and_noise_parameters():
    assert privacy_xi(1.0, 0.0) == 1.0
    assert privacy_xi(0.5, 0.2) == pytest.approx(0.5 + math.log(1 / 0.8), rel=1e-15)
    for sens, eps, delta, eta in [(1.0, 1.0, 0.0, 0.0), (0.05, 0.3, 0.1, 1e-9),
                                  (3.7, 8.0, 0.0, 0.01), (1.0, 1e-3, 0.0, 0.0)]:
        noise = permutation_noise(sens, eps, delta, abs_error=eta)
        exact = Fraction(sens) + 2 * Fraction(eta)
        assert noise.sensitivity == float(exact)
        assert math.frexp(noise.grid)[0] == 0.5  # a power of two
        assert noise.integer_sensitivity == math.ceil(exact / Fraction(noise.grid))
        assert noise.rate == quantise_rate(noise.rate)
        # never less noise than asked, and little more (quantisation and ceiling)
        xi = privacy_xi(eps, delta)
        assert noise.rate <= xi / (2 * noise.integer_sensitivity)
        assert noise.scale == noise.grid / noise.rate
        assert 2 * sens / xi <= noise.scale < 2 * float(exact) / xi * 1.05


def test_release_equals_brute_force_from_the_same_draws():
    for seed in range(30):
        rng = np.random.default_rng(1000 + seed)
        b = int(rng.integers(1, 60))
        # statistics with ties and negative values, on and off the grid
        t = np.round(rng.normal(size=b + 1), int(rng.integers(0, 4)))
        sens, eps = float(rng.uniform(0.01, 2)), float(rng.uniform(0.1, 5))
        got = dp_permutation_pvalue(t, sens, eps, 0.0, np.random.default_rng(seed))
        assert isinstance(got, PermutationPValue) and isinstance(got.noise, DiscreteNoise)
        assert got.noise == permutation_noise(sens, eps)
        assert got.pvalue == _brute_force(t, got.noise, seed)
        pvalue, noise = got  # unpacks as a pair; nothing else is released
        assert len(got) == 2 and abs(pvalue * (b + 1) - round(pvalue * (b + 1))) < 1e-9


def test_large_epsilon_gives_the_non_private_pvalue():
    checked = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        t = rng.uniform(size=41)
        # the noise scale is 2e-8: only compare where no statistic is that close to T_0
        if np.min(np.abs(t[1:] - t[0])) < 1e-5:
            continue
        p = dp_permutation_pvalue(t, 1.0, 1e8, 0.0, rng).pvalue
        assert p == (1 + np.count_nonzero(t[1:] >= t[0])) / 41
        checked += 1
    assert checked > 150


def _rejections(n_rep, alpha, strict=False):
    """Rejections at level alpha under exchangeable statistics with many ties (values 0
    and 1), at an ε so large that the integer noise is almost always 0 and ties stay."""
    count = 0
    noise = permutation_noise(1e-3, 1e8)
    assert noise.rate > 5
    for rep in range(n_rep):
        rng = np.random.default_rng(rep)
        t = rng.integers(0, 2, size=20).astype(float)
        p = _brute_force(t, noise, rep, strict=True) if strict else dp_permutation_pvalue(
            t, 1e-3, 1e8, 0.0, np.random.default_rng(rep)).pvalue
        count += p <= alpha
    return count


def test_type_one_error_under_exchangeability_and_the_strict_tie_mutant_is_caught():
    # 0 rejections; the mutant rejects whenever T_0 = 1 (probability 1/2): its 61 give
    # sf ~ 2e-35, and P(Binomial(100, 1/2) passes the check) < 1e-7
    n_rep, alpha = 100, 0.1
    count = _rejections(n_rep, alpha)
    # one-sided binomial test of "rejection rate <= alpha"
    assert stats.binom.sf(count - 1, n_rep, alpha) > P_FLOOR
    # counting ties against the alternative breaks validity, and the same check sees it
    mutant = _rejections(n_rep, alpha, strict=True)
    assert stats.binom.sf(mutant - 1, n_rep, alpha) < P_FLOOR


def test_type_one_error_with_continuous_exchangeable_statistics():
    # B + 1 = 20: without ties the level is exactly 1/20 = alpha, and the mutant that
    # drops the "1 +" of the p-value rejects at 2/20. The check fails above 77 of 1000;
    # the mutant (mean 100) reaches that with probability 0.993 (here: 108, sf 1e-13).
    n_rep, alpha, count, mutant = 1000, 0.05, 0, 0
    for rep in range(n_rep):
        rng = np.random.default_rng(10_000 + rep)
        p = dp_permutation_pvalue(rng.normal(size=20), 0.5, 1.0, 0.0, rng).pvalue
        count += p <= alpha
        mutant += (round(p * 20) - 1) / 20 <= alpha  # #{b >= 1 : N_b >= N_0} / (B + 1)
    assert stats.binom.sf(count - 1, n_rep, alpha) > P_FLOOR
    assert stats.binom.sf(mutant - 1, n_rep, alpha) < P_FLOOR


# -- exact law of the p-value and privacy on neighbours --------------------------------------

def _survival(m, rate):
    """P(K >= m) for K discrete Laplace of ``rate`` (m an int64 array)."""
    p = math.exp(-rate)
    pos = np.exp(-rate * np.maximum(m, 1)) / (1 + p)
    neg = 1 - np.exp(-rate * np.maximum(1 - m, 1)) / (1 + p)
    return np.where(m >= 1, pos, neg)


def _exact_count_law(s, rate, tail=40.0):
    """(lower, upper) bounds on P(#{b >= 1 : s_b + K_b >= s_0 + K_0} = k), k = 0..B.

    Conditions on K_0 = z for |z| <= Z (the rest has mass 2 p^(Z+1) / (1 + p), added to the
    upper bound); given z the count is a sum of independent Bernoulli(P(K_b >= s_0 + z - s_b))."""
    s = np.asarray(s, dtype=np.int64)
    # the law depends on the gaps s_0 - s_b only: neighbours that shift every statistic
    # alike share one computation (read-only arrays: the cache hands out the same ones),
    # and so do orderings of the same gaps (a sum of independent Bernoulli counts)
    return _count_law_of_gaps(tuple(sorted(int(g) for g in s[0] - s[1:])), rate, tail)


@functools.lru_cache(maxsize=256)
def _count_law_of_gaps(gaps, rate, tail):
    zmax = int(tail / rate)
    z = np.arange(-zmax, zmax + 1)
    weight = math.tanh(rate / 2) * np.exp(-rate * np.abs(z))
    dist = np.ones((z.size, 1))
    for gap in gaps:
        q = _survival(gap + z, rate)[:, None]
        # the next count's law: new[k] = dist[k] (1 - q) + dist[k - 1] q
        new = np.zeros((z.size, dist.shape[1] + 1))
        new[:, :-1] = dist * (1 - q)
        new[:, 1:] += dist * q
        dist = new
    law = weight @ dist
    rest = 2 * math.exp(-rate * (zmax + 1)) / (1 + math.exp(-rate))
    upper = law + rest
    law.flags.writeable = upper.flags.writeable = False
    return law, upper


def _worst_log_ratio(rate, dint, bases):
    worst = 0.0
    for s in bases:
        s = np.asarray(s, dtype=np.int64)
        lo, hi = _exact_count_law(s, rate)
        for shift in np.array(np.meshgrid(*[[-dint, 0, dint]] * s.size)).T.reshape(-1, s.size):
            lo2, hi2 = _exact_count_law(s + shift, rate)
            worst = max(worst, np.max(np.log(hi / lo2)), np.max(np.log(hi2 / lo)))
    return worst


def _privacy_case(eps, bases):
    noise = permutation_noise(1.0, eps)
    dint, rate = noise.integer_sensitivity, noise.rate
    # statistics in grid units; the neighbour moves every statistic by 0 or ±Δ_int, the
    # largest change of the floored statistics when the exact ones move by Δ = 1
    bases = [[c * dint for c in base] for base in bases]
    assert _worst_log_ratio(rate, dint, bases) <= eps
    mutant = quantise_rate(privacy_xi(eps, 0.0) / dint)  # half the noise
    assert _worst_log_ratio(mutant, dint, bases) > 1.5 * eps


def test_exact_privacy_on_neighbours_and_the_double_rate_mutant_is_caught():
    _privacy_case(1.0, [[0, 0, 0]])


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_exact_privacy_on_more_neighbours(eps):
    _privacy_case(eps, [[0, 0, 0], [0, 1, -1], [2, 0, 3], [0, 0, 0, 1]])


def test_release_follows_the_exact_law():
    # links the implementation to the exact computation above: G-test of 300 releases
    # (the twice-the-rate mutant law's p-value is then 4e-32; in 20 000 multinomial
    # samples of 300 from the true law its largest was 2e-8, far below P_FLOOR)
    sens, eps = 1.0, 1.0
    noise = permutation_noise(sens, eps)
    s = np.array([0, 1500, 3000, -3000])  # grid units; statistics exactly s * g
    lo, hi = _exact_count_law(s, noise.rate)
    assert hi.sum() - lo.sum() < 1e-12
    n = 300
    counts = np.zeros(s.size)
    for seed in range(n):
        p = dp_permutation_pvalue(s * noise.grid, sens, eps, 0.0, np.random.default_rng(seed))
        counts[round(p.pvalue * s.size) - 1] += 1
    assert stats.power_divergence(counts, lo * n, lambda_="log-likelihood").pvalue > P_FLOOR
    # the law of the mutant (twice the rate) differs detectably on this case
    mutant_law, _ = _exact_count_law(s, quantise_rate(2 * noise.rate))
    assert stats.power_divergence(counts, mutant_law * n,
                                  lambda_="log-likelihood").pvalue < P_FLOOR


# -- certified approximate statistics (bounds + refine) ---------------------------------------

def _enclosures(exact, rng, width):
    # random enclosures, each side between width / 2 and width (index 0 exact)
    lower = exact - width * (0.5 + 0.5 * rng.random(exact.size))
    upper = exact + width * (0.5 + 0.5 * rng.random(exact.size))
    lower[0] = upper[0] = exact[0]
    approx = np.where(rng.random(exact.size) < 0.5, lower, upper)
    approx[0] = exact[0]
    return approx, (lower, upper)


@pytest.mark.parametrize("width", [0.0, 1e-3, 0.05, 1.0, 100.0])
def test_bounds_and_refine_give_the_exact_release(width):
    # Same seed, same release as from the exact statistics, whatever the enclosure
    # widths; only the undecided comparisons are refined.
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        exact = rng.normal(size=41) * 0.1
        approx, (lower, upper) = _enclosures(exact, rng, width)
        asked = []

        def refine(idx, exact=exact, asked=asked):
            asked.append(idx.copy())
            return exact[idx]

        ref = dp_permutation_pvalue(exact, 0.05, 1.0, 0.0, np.random.default_rng(seed))
        got = dp_permutation_pvalue(approx, 0.05, 1.0, 0.0, np.random.default_rng(seed),
                                    bounds=(lower, upper), refine=refine)
        assert got == ref
        # the undecided set, recomputed from the same integer draws
        g = ref.noise.grid
        draws = discrete_laplace(np.random.default_rng(seed), ref.noise.rate, size=41)
        n0 = math.floor(exact[0] / g) + draws[0]
        lo = np.floor(lower[1:] / g).astype(np.int64) + draws[1:]
        hi = np.floor(upper[1:] / g).astype(np.int64) + draws[1:]
        undecided = np.flatnonzero((lo < n0) & (hi >= n0)) + 1
        if undecided.size:
            assert len(asked) == 1
            np.testing.assert_array_equal(asked[0], undecided)
        else:
            assert asked == []
        if width == 0.0:
            assert asked == []
        if width == 100.0:  # nothing decided without refinement
            np.testing.assert_array_equal(asked[0], np.arange(1, 41))


def test_bounds_errors():
    rng = np.random.default_rng(0)
    s = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="bounds and refine must be given together"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s, s))
    with pytest.raises(ValueError, match="bounds and refine must be given together"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match="bounds must be two arrays of the shape"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s[:2], s[:2]),
                              refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match="bounds must be a pair"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=s, refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match="bounds must be finite"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s - np.inf, s),
                              refine=lambda idx: s[idx])
    with pytest.raises(ValueError, match="lower <= upper"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s + 1, s),
                              refine=lambda idx: s[idx])
    with pytest.raises(TypeError, match="refine must be callable"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s, s), refine=3)
    with pytest.raises(ValueError, match=r"refine returned shape \(1,\) for 2 indices"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s - 1e9, s + 1e9),
                              refine=lambda idx: s[:1])
    with pytest.raises(ValueError, match="outside bounds"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, bounds=(s - 1e9, s + 1e9),
                              refine=lambda idx: s[idx] + 2e9)


def test_parameter_errors():
    rng = np.random.default_rng(0)
    s = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="at least 2 values"):
        dp_permutation_pvalue(np.array([1.0]), 1.0, 1.0, 0.0, rng)
    with pytest.raises(ValueError, match="statistics must be finite"):
        dp_permutation_pvalue(np.array([1.0, np.nan]), 1.0, 1.0, 0.0, rng)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, 0)
    with pytest.raises(ValueError, match=r"sensitivity must be a real number in \(0, inf\)"):
        dp_permutation_pvalue(s, 0.0, 1.0, 0.0, rng)
    with pytest.raises(ValueError, match=r"epsilon must be a real number in \(0, inf\)"):
        dp_permutation_pvalue(s, 1.0, -1.0, 0.0, rng)
    with pytest.raises(ValueError, match=r"delta must be a real number in \[0, 1\); got 1\.0"):
        dp_permutation_pvalue(s, 1.0, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match=r"abs_error must be a real number in \[0, inf\)"):
        dp_permutation_pvalue(s, 1.0, 1.0, 0.0, rng, abs_error=-1e-9)
    with pytest.raises(ValueError, match="too small for the exact sampler"):
        dp_permutation_pvalue(s, 1.0, 1e-6, 0.0, rng)
    with pytest.raises(ValueError, match="overflows int64"):
        dp_permutation_pvalue(np.array([1e30, 0.0]), 1e-6, 1.0, 0.0, rng)


def test_noise_kept_per_parameter_set_equals_a_fresh_computation():
    # permutation_noise keeps its result per validated (public) parameter set: the same
    # DiscreteNoise as the uncached computation, for equal keys of other types too
    from skdptest import _permutation

    fresh = _permutation._noise_of.__wrapped__
    cases = [(1.0, 1.0, 0.0, 0.0), (0.0707, 0.9, 1e-6, 1.3e-13), (2.0**-40, 50.0, 0.0, 0.0),
             (1e12, 1e-3, 0.5, 7.0), (3.0, 2.0**-10, 0.999, 2.0**-1074)]
    for sens, eps, delta, err in cases:
        first = permutation_noise(sens, eps, delta, abs_error=err)
        assert first == fresh(sens, eps, delta, err)
        assert permutation_noise(sens, eps, delta, abs_error=err) == first
    assert permutation_noise(2, 1, 0, abs_error=0) == fresh(2.0, 1.0, 0.0, 0.0)
    assert (permutation_noise(np.float64(2.0), np.float32(0.5), -0.0, abs_error=-0.0)
            == fresh(2.0, 0.5, 0.0, 0.0))
    for _ in range(2):  # refusals are raised every time, never kept
        with pytest.raises(ValueError, match="too small for the exact sampler"):
            permutation_noise(1.0, 1e-12)
        with pytest.raises(ValueError, match="sensitivity"):
            permutation_noise(math.nan, 1.0)
