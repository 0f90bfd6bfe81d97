"""Helpers shared by the rank-test files: exhaustive neighbours, exact release laws,
and the null grid of type-I errors (run by a fast and a slow test per estimator); and
copies of the code that speed-ups replaced (regression oracles of test_tulap.py and
test_mean.py).

Imported by full name, ``from tests.classical._reference import ...`` (the repository
root is on sys.path through pyproject's pytest ``pythonpath``; tests/ is a namespace
package).
"""

import functools
import itertools
import math

import numpy as np
from scipy import stats

from skdptest._noise import discrete_laplace
from skdptest.classical._rank import (
    kruskal_sensitivity,
    kruskal_twice_statistic,
    mann_whitney_sensitivity,
    mann_whitney_u,
    monte_carlo_pvalue,
    noise_rate,
    null_rank_sums,
    null_signed_rank,
    random_signs_and_magnitudes,
    signed_rank_sensitivity,
    signed_rank_statistic,
    tie_broken_ranks,
)

ALPHA = 0.05
GRID_B = 98  # (B + 1) p-values on multiples of 1/99: exact level 4/99 on continuous data


# -- exhaustive neighbours at the level of orders ------------------------------------------

@functools.lru_cache(maxsize=8)
def all_moves(n):
    """Every rank vector of n rows (all permutations) and every replace-one move.

    Returns (before, after): arrays of shape (M, n) of ranks 1..n, one row per
    (permutation, moved row i, new rank r'); the other rows shift by one between the
    old and the new rank, which is what replacing row i's value does to a total order.
    Memoised (several tests enumerate the same n), so the arrays are read-only.
    """
    perms = np.array(list(itertools.permutations(range(1, n + 1))), dtype=np.int64)
    before, after = [], []
    for i in range(n):
        for new in range(1, n + 1):
            old = perms[:, i:i + 1]
            moved = perms - ((perms > old) & (perms <= new)) + ((perms >= new) & (perms < old))
            moved[:, i] = new
            before.append(perms)
            after.append(moved)
    before, after = np.concatenate(before), np.concatenate(after)
    before.flags.writeable = after.flags.writeable = False
    return before, after


def u_of(ranks, n1):
    """U of the first n1 rows for rank vectors (rows of ``ranks``)."""
    return ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) // 2


def twice_t_of(ranks, sizes):
    """2T (absolute-deviation Kruskal–Wallis) for rank vectors, groups in blocks."""
    n = int(np.sum(sizes))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sums = np.add.reduceat(ranks, starts, axis=1)
    return np.abs(2 * sums - np.asarray(sizes) * (n + 1)).sum(axis=1)


# -- exact law of a release ---------------------------------------------------------------

def discrete_laplace_pmf(k, rate):
    return math.tanh(rate / 2) * np.exp(-rate * np.abs(k))


def release_law(statistics, rate, support):
    """P(S + K = u) for u in ``support``: S uniform over the listed ``statistics`` (one per
    equally likely draw of the data-independent randomness), K discrete Laplace."""
    values, counts = np.unique(np.asarray(statistics), return_counts=True)
    weights = counts / counts.sum()
    return (weights[None, :] * discrete_laplace_pmf(support[:, None] - values[None, :], rate)
            ).sum(axis=1)


def max_log_ratio(law_a, law_b):
    return float(np.max(np.abs(np.log(law_a) - np.log(law_b))))


# -- null grid -----------------------------------------------------------------------------

def stable_ranks(rng, values):
    """MUTANT: ties ordered by row order (a stable sort, no random permutation)."""
    order = np.lexsort(values.T[::-1])
    ranks = np.empty(values.shape[0], dtype=np.int64)
    ranks[order] = np.arange(1, values.shape[0] + 1)
    return ranks


def zeros_positive(rng, differences):
    """MUTANT: zero differences counted as positive (no random sign)."""
    positive, magnitudes = random_signs_and_magnitudes(rng, differences)
    return positive | np.all(differences == 0, axis=1), magnitudes


GROUP_LAWS = {
    "normal": lambda rng, n: rng.normal(size=n),
    "exponential": lambda rng, n: rng.exponential(size=n),
    "lognormal": lambda rng, n: rng.lognormal(0.0, 2.0, size=n),
    "cauchy": lambda rng, n: rng.standard_cauchy(size=n),
    "t1e6": lambda rng, n: 1e6 * rng.standard_t(1, size=n),
    "poisson0.3": lambda rng, n: rng.poisson(0.3, size=n).astype(float),
    "bernoulli0.1": lambda rng, n: (rng.random(n) < 0.1).astype(float),
    "rounded": lambda rng, n: np.round(rng.normal(size=n)),
}

SYMMETRIC_LAWS = {
    "normal": lambda rng, n: rng.normal(size=n),
    "cauchy": lambda rng, n: rng.standard_cauchy(size=n),
    "t1e-6": lambda rng, n: 1e-6 * rng.standard_t(1, size=n),
    "laplace": lambda rng, n: rng.laplace(size=n),
    "poisson-diff": lambda rng, n: (rng.poisson(0.3, n) - rng.poisson(0.3, n)).astype(float),
    "rademacher-ties": lambda rng, n: rng.choice([-1.0, 0.0, 0.0, 1.0], size=n),
    # paired: x = b + e1, y = b + e2 with a skewed b: x − y symmetric
    "paired-lognormal": None,
}


def group_cells(sizes_list, epsilons, laws, alternatives=("two-sided",)):
    cells = []
    for i, (law, sizes, eps) in enumerate(itertools.product(laws, sizes_list, epsilons)):
        cells.append((law, tuple(sizes), eps, alternatives[i % len(alternatives)]))
    return cells


def group_type_one(kind, cells, reps, seed, rank=tie_broken_ranks, b=GRID_B):
    """Rejections at ALPHA of the Mann–Whitney ("mw") or Kruskal–Wallis ("kw") release
    under H0 (every row from the cell's law, groups in consecutive blocks as in a
    sorted data frame), each replicate with its own simulated null of b draws.

    The statistic, noise rate and p-value are the estimators' own functions; ``rank``
    may be a mutant. Returns a list of (cell, rejections).
    """
    rng = np.random.default_rng(seed)
    out = []
    for cell in cells:
        law, sizes, eps, alternative = cell
        sizes = np.asarray(sizes)
        n = int(sizes.sum())
        codes = np.repeat(np.arange(sizes.size), sizes)
        if kind == "mw":
            n1, n2 = (int(s) for s in sizes)
            rate = noise_rate(eps, mann_whitney_sensitivity(sizes))
            null = null_rank_sums(rng, sizes, reps * b)[:, 0] - n1 * (n1 + 1) // 2
        else:
            rate = noise_rate(eps, 2 * kruskal_sensitivity(sizes))
            sums = null_rank_sums(rng, sizes, reps * b)
            null = np.abs(2 * sums - sizes * (n + 1)).sum(axis=1)
        null = (null + discrete_laplace(rng, rate, size=reps * b)).reshape(reps, b)
        noise = discrete_laplace(rng, rate, size=reps)
        rejections = 0
        for r in range(reps):
            x = GROUP_LAWS[law](rng, n)[:, None]
            ranks = rank(rng, x)
            if kind == "mw":
                stat = mann_whitney_u(ranks, codes == 0) + noise[r]
                p = monte_carlo_pvalue(stat, null[r], alternative, n1 * n2)
            else:
                stat = kruskal_twice_statistic(ranks, codes, sizes) + noise[r]
                p = monte_carlo_pvalue(stat, null[r], "greater")
            rejections += p <= ALPHA
        out.append((cell, rejections))
    return out


def wilcoxon_cells(ns, epsilons, laws, alternatives=("two-sided", "greater", "less")):
    cells = []
    for i, (law, n, eps) in enumerate(itertools.product(laws, ns, epsilons)):
        cells.append((law, int(n), eps, alternatives[i % len(alternatives)]))
    return cells


def wilcoxon_type_one(cells, reps, seed, signs=random_signs_and_magnitudes, b=GRID_B):
    """Rejections at ALPHA of the signed-rank release under H0 (symmetric differences
    about 0; rows sorted by value, the worst order for a row-order tie-break)."""
    rng = np.random.default_rng(seed)
    out = []
    for cell in cells:
        law, n, eps, alternative = cell
        rate = noise_rate(eps, signed_rank_sensitivity(n))
        null = null_signed_rank(rng, n, reps * b) + discrete_laplace(rng, rate, size=reps * b)
        null = null.reshape(reps, b)
        noise = discrete_laplace(rng, rate, size=reps)
        rejections = 0
        for r in range(reps):
            if law == "paired-lognormal":
                base = rng.lognormal(0.0, 1.5, size=n)
                d = (base + rng.exponential(size=n)) - (base + rng.exponential(size=n))
            else:
                d = SYMMETRIC_LAWS[law](rng, n)
            d = np.sort(d)[:, None]
            positive, magnitudes = signs(rng, d)
            stat = signed_rank_statistic(tie_broken_ranks(rng, magnitudes), positive)
            p = monte_carlo_pvalue(stat + noise[r], null[r], alternative, n * (n + 1) // 2)
            rejections += p <= ALPHA
        out.append((cell, rejections))
    return out


def grid_failures(results, reps):
    """Cells whose type-I error exceeds ALPHA + 2 SE, and whether the pooled rate
    exceeds ALPHA + 2 SE (SE binomial at ALPHA) or, a sharper check of the pooled rate,
    the grid's exact level 4/99 on continuous data + 3 SE (false alarm 0.1 %).
    Returns (failing cells, pooled rate, pooled failure flag)."""
    se_cell = math.sqrt(ALPHA * (1 - ALPHA) / reps)
    failing = [(cell, k / reps) for cell, k in results if k / reps > ALPHA + 2 * se_cell]
    total = sum(k for _, k in results)
    m = reps * len(results)
    pooled = total / m
    exact = math.floor(ALPHA * (GRID_B + 1)) / (GRID_B + 1)
    pooled_fail = (pooled > ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / m)
                   or pooled > exact + 3 * math.sqrt(exact * (1 - exact) / m))
    return failing, pooled, pooled_fail


def confirmed_failures(run, cells, reps, seed):
    """Grid check with confirmation: cells failing ALPHA + 2 SE are run again with ten
    times the replicates on a fresh seed and count only if they fail again (with 3 x 54
    cells at the exact level 4/99, about one cell in three grids exceeds ALPHA + 2 SE
    by chance; a real defect fails both stages). ``run(cells, reps, seed)`` returns
    (cell, rejections) pairs. Returns (confirmed failing cells, pooled rate, pooled
    failure flag of the first stage)."""
    failing, pooled, pooled_fail = grid_failures(run(cells, reps, seed), reps)
    again = [cell for cell, _ in failing]
    confirmed = grid_failures(run(again, 10 * reps, seed + 1), 10 * reps)[0] if again else []
    return confirmed, pooled, pooled_fail


def scipy_tolerance(p, b):
    """Monte Carlo tolerance of a (B + 1) p-value around the exact one: 4 SE + 1/(B + 1)."""
    return 4 * math.sqrt(max(p * (1 - p), 1e-4) / b) + 1 / (b + 1)


# -- the code before this session's speed-ups (regression oracles) -------------------------

def tulap_other_side_every_time(law, rate, z, target, a, b):
    """_tulap._other_side before the speed-up, log(-h(c)) evaluated again at every visit
    to c (the regression oracle of test_tulap.py's
    test_remembered_search_is_bit_identical_to_evaluating_every_time)."""
    if z > b:
        inner, sign = a, -1.0
    else:
        inner, sign = b, 1.0
    mirror = inner + sign * max(math.floor(abs(z - (a if z < a else b))), 0)
    if law.log_minus_h(mirror, rate) <= target:
        outer = mirror
    else:
        inner, step = mirror, 1.0
        outer = inner + sign * step
        while law.log_minus_h(outer, rate) > target:
            inner, step = outer, step * 2.0
            outer = inner + sign * step
            if step > 4.0 * (law.n + 1) + 1e6:
                return sign * np.inf
    while abs(outer - inner) > 1.0:
        mid = inner + sign * math.floor(abs(outer - inner) / 2.0)
        if law.log_minus_h(mid, rate) > target:
            inner = mid
        else:
            outer = mid
    l_in, l_out = law.log_minus_h(inner, rate), law.log_minus_h(outer, rate)
    frac = -math.expm1(target - l_in) / -math.expm1(l_out - l_in) if l_out < l_in else 0.0
    return inner + sign * min(max(frac, 0.0), 1.0)


def wealth_majorant_at_one_as_first_written(w, y):
    """_mean._majorant_at_one before the speed-up, every part of w computed on each call
    (the regression oracle of test_mean.py's
    test_prepared_abscissae_give_the_majorant_bit_for_bit)."""
    left, right = w < 1.0, w > 1.0
    wl, yl, wr, yr = w[left], y[left], w[right], y[right]
    i, j = int(np.argmax(yl)), -1
    for _ in range(200):
        j_new = int(np.argmax((yl[i] * (wr - 1.0) + yr * (1.0 - wl[i])) / (wr - wl[i])))
        i_new = int(np.argmax((yl * (wr[j_new] - 1.0) + yr[j_new] * (1.0 - wl))
                              / (wr[j_new] - wl)))
        if (i_new, j_new) == (i, j):
            break
        i, j = i_new, j_new
    s = max(0.0, (yr[j] - yl[i]) / (wr[j] - wl[i]))
    return float(np.max(y + s * (1.0 - w)))


__all__ = [name for name in dir() if not name.startswith("_")] + ["stats"]
