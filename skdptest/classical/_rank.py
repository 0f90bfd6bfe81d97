"""Shared machinery of the private rank tests: ranks with ties broken at random,
the rank statistics as exact integers, their replace-one sensitivities, the noise
rate, the Monte Carlo null (random ranks or random signs plus the same noise) and
the (B + 1) rank p-value.

Why ties are broken at random. Under the null of exchangeable rows (two- and
k-sample tests) the values are assigned to the rows uniformly at random; if the
rows are then ordered by value, with ties ordered by a uniformly random
permutation drawn independently of the data, the rank vector is a uniformly random
permutation of 1..N whatever the law of the values, ties included. The null law of
any function of the ranks and the (public) group labels is therefore that of random
ranks: it can be simulated without the data. With midranks the statistic's law
depends on the tie pattern (private): the untied null is then conservative on tied
data (power lost). Ties ordered by row order make it depend on how the rows are laid
out: anti-conservative when the order follows the groups (the mutant the validity
grids catch).

Why the statistics are integers. Every statistic here is an integer (or twice a
half-integer), so the release integer + exact discrete Laplace noise is float-safe
(``skdptest/_noise.py``), and its law on neighbouring data is computable exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils.multiclass import type_of_target

from .._base import BasePrivateTest, validate_input
from .._budget import PrivacyBudget
from .._noise import discrete_laplace, quantise_rate
from .._params import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
)
from .._recorder import NoisedQuantity, NoisePlan, observe

__all__ = [
    "ALTERNATIVE",
    "MAX_NULL_ELEMENTS",
    "MAX_ROWS",
    "check_null_work",
    "GroupRankTest",
    "kruskal_sensitivity",
    "kruskal_twice_statistic",
    "mann_whitney_sensitivity",
    "mann_whitney_u",
    "monte_carlo_pvalue",
    "noise_rate",
    "noisy",
    "null_rank_sums",
    "null_signed_rank",
    "random_signs_and_magnitudes",
    "rank_constraints",
    "rank_plan",
    "RankPlan",
    "ranks_given_shuffle",
    "RankTest",
    "release_integer",
    "signed_rank_sensitivity",
    "signed_rank_statistic",
    "tie_broken_ranks",
]

MAX_ROWS = 2**26
"""Largest number of rows: every statistic (at most about N²/2) and every rank sum
stays below 2**53, so integers are exact in float64 and int64."""

MAX_NULL_ELEMENTS = 2**31
"""Largest ``n_resamples * n_samples`` of the Monte Carlo null (a few minutes of CPU);
larger requests are refused before the charge."""

_CHUNK_ELEMENTS = 2**21  # rows of the null simulated at a time: <= 8 MiB of int32


# -- ranks ---------------------------------------------------------------------------

def tie_broken_ranks(rng, values):
    """Ranks 1..N of the rows of ``values``, ties broken by a random permutation.

    Rows are compared lexicographically (first column first; later columns only
    order rows whose earlier columns are equal), with exact float comparisons
    (``-0.0 == 0.0``). Rows that are equal in every column are ordered by a uniformly
    random permutation drawn from ``rng`` independently of the data: the rows are
    shuffled first and then sorted stably.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the tie-breaking permutation.
    values : ndarray of shape (n_samples, n_columns)
        Finite values.

    Returns
    -------
    ndarray of shape (n_samples,) of int64
        ``ranks[i]`` is the rank of row i.
    """
    return ranks_given_shuffle(values, rng.permutation(values.shape[0]))


def ranks_given_shuffle(values, shuffle):
    """Ranks 1..N of the rows of ``values`` ordered lexicographically, rows equal in
    every column ordered as in ``shuffle`` (a permutation of the row indices: the row
    listed first ranks lower). :func:`tie_broken_ranks` with a uniform ``shuffle``."""
    n = values.shape[0]
    shuffled = values[shuffle]
    if shuffled.shape[1] == 1:
        order = np.argsort(shuffled[:, 0], kind="stable")
    else:  # np.lexsort sorts by its last key first
        order = np.lexsort(shuffled.T[::-1])
    ranks = np.empty(n, dtype=np.int64)
    ranks[shuffle[order]] = np.arange(1, n + 1, dtype=np.int64)
    return ranks


def random_signs_and_magnitudes(rng, differences):
    """Signs and canonical magnitudes of the differences, zeros given a random sign.

    For one column: sign(d) and |d|. For several columns the sign is that of the first
    non-zero coordinate and the magnitude is the row times that sign (so d and −d have
    the same magnitude and opposite signs, the property the signed-rank null uses).
    A zero row has no sign: it gets a fair random sign, drawn independently of the
    data, and magnitude 0 (the smallest). Under a null symmetric about 0, the signs
    are then independent fair coins independent of the magnitudes, zeros included.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the zeros' signs (one fair bit per row, drawn for every row so that
        the number of draws is public).
    differences : ndarray of shape (n_samples, n_columns)
        Finite differences from the centre.

    Returns
    -------
    positive : ndarray of shape (n_samples,) of bool
        Whether each row counts as positive.
    magnitudes : ndarray of shape (n_samples, n_columns)
        The canonical magnitudes.
    """
    coin = rng.integers(0, 2, size=differences.shape[0], dtype=np.int8) == 1
    nonzero = differences != 0
    first = np.argmax(nonzero, axis=1)
    lead = differences[np.arange(differences.shape[0]), first]
    sign = np.where(lead > 0, 1.0, np.where(lead < 0, -1.0, 0.0))
    positive = np.where(sign == 0, coin, sign > 0)
    # zero rows stay 0.0 (sign 0), never -0.0 tricks: 0 * d == +-0.0 compares equal
    magnitudes = differences * sign[:, None]
    return positive, magnitudes


# -- statistics (exact integers) -------------------------------------------------------

def mann_whitney_u(ranks, first):
    """U of the first group: the number of (first, second) pairs with the first row
    ranked above the second, ``Σ_{first} R_i − n1 (n1 + 1) / 2`` (an exact int)."""
    n1 = int(np.count_nonzero(first))
    return int(ranks[first].sum()) - n1 * (n1 + 1) // 2


def kruskal_twice_statistic(ranks, codes, sizes):
    """2 T with T = Σ_j n_j |R̄_j − (N + 1)/2| = Σ_j |S_j − n_j (N + 1)/2| (S_j the rank
    sum of group j): ``Σ_j |2 S_j − n_j (N + 1)|``, an exact int."""
    n = int(np.sum(sizes))
    # float sums of integer ranks are exact below 2**53 (N <= MAX_ROWS)
    sums = np.bincount(codes, weights=ranks, minlength=len(sizes)).astype(np.int64)
    return int(np.abs(2 * sums - np.asarray(sizes, dtype=np.int64) * (n + 1)).sum())


def signed_rank_statistic(ranks, positive):
    """W+ = Σ of the ranks of the positive rows (an exact int)."""
    return int(ranks[positive].sum())


# -- sensitivities ---------------------------------------------------------------------

def mann_whitney_sensitivity(sizes):
    """Replace-one sensitivity of U with public group sizes: max(n1, n2).

    Changing the value of a row of the first group changes only its n2 pairs with the
    second group (U moves by at most n2); a row of the second group, its n1 pairs.
    Attained: move a row from below every row of the other group to above them.
    """
    return int(max(sizes))


def kruskal_sensitivity(sizes):
    """Replace-one sensitivity of T = Σ_j |S_j − n_j (N + 1)/2|: 2 (N − n_min).

    Moving one row of group g from rank r to rank r' > r shifts the d = r' − r rows in
    between down by one: S_g gains d − c_g and each other group j loses c_j (c_j its
    rows among the d), so Σ_j |ΔS_j| = 2 (d − c_g) <= 2 (N − n_g) (d − c_g counts rows of
    other groups), and |ΔT| <= Σ_j |ΔS_j| by the triangle inequality. For two groups
    T = 2 |U − n1 n2 / 2| and the bound is 2 max(n1, n2).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    return int(2 * (sizes.sum() - sizes.min()))


def signed_rank_sensitivity(n):
    """Replace-one sensitivity of W+ on n rows: n.

    W+ = #positive + #{(i, j): i positive, j ranked below i}. Replacing row k changes
    the first term by at most 1, and the pairs involving k: their number is, before and
    after, between 0 and n − 1 (each other row j counts at most once: below k if k is
    positive, above k if j is positive); the other pairs do not move. So |ΔW+| <= n,
    attained by a negative row at the bottom, every row negative, becoming positive at
    the top.
    """
    return int(n)


def noise_rate(epsilon, sensitivity, name="epsilon"):
    """Rate of the exact discrete Laplace noise on an integer statistic of the given
    integer sensitivity: ``quantise_rate(ε / Δ)`` (rounded down: more noise, never
    less). Refused (before the charge) when ε / Δ is below the sampler's grid."""
    try:
        return quantise_rate(epsilon / sensitivity)
    except ValueError as exc:
        raise InvalidParameterError(
            f"{name}={epsilon!r} is too small for the exact noise sampler at this number "
            f"of rows (ε / sensitivity = {epsilon / sensitivity:.3g}): {exc}"
        ) from exc


def check_null_work(n_resamples, n_samples, what):
    """Refuse (before the charge) a Monte Carlo null above MAX_NULL_ELEMENTS."""
    if n_samples > MAX_ROWS:
        raise InvalidParameterError(
            f"{what} accepts at most {MAX_ROWS} rows (exact integer statistics); "
            f"got {n_samples}."
        )
    work = int(n_resamples) * int(n_samples)
    if work > MAX_NULL_ELEMENTS:
        raise InvalidParameterError(
            f"{what}: n_resamples={n_resamples} with {n_samples} rows simulates "
            f"{work} random ranks, above the limit {MAX_NULL_ELEMENTS}; lower n_resamples."
        )


# -- Monte Carlo null ---------------------------------------------------------------------

def _chunks(n_resamples, n_samples):
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_samples))
    for start in range(0, n_resamples, rows):
        yield min(rows, n_resamples - start)


def null_rank_sums(rng, sizes, n_resamples):
    """Rank sums of the groups under random ranks, ``n_resamples`` draws.

    Each draw is a uniformly random permutation of 1..N (``Generator.permuted``); group
    j holds the next n_j positions. Simulated in chunks of at most ``_CHUNK_ELEMENTS``
    ranks (bounded memory).

    Returns
    -------
    ndarray of shape (n_resamples, n_groups) of int64
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.empty((n_resamples, sizes.size), dtype=np.int64)
    base = np.arange(1, n + 1, dtype=np.int32)
    done = 0
    for rows in _chunks(n_resamples, n):
        block = np.tile(base, (rows, 1))
        rng.permuted(block, axis=1, out=block)
        out[done:done + rows] = np.add.reduceat(block, starts, axis=1, dtype=np.int64)
        done += rows
    return out


def null_signed_rank(rng, n, n_resamples):
    """W+ under random signs: Σ_r r B_r with B_r independent fair bits, r = 1..n.

    The sums are exact: float64 dot products of 0/1 bits with the ranks 1..n stay
    integers below 2**53 (n <= MAX_ROWS).

    Returns
    -------
    ndarray of shape (n_resamples,) of int64
    """
    ranks = np.arange(1, n + 1, dtype=np.float64)
    out = np.empty(n_resamples, dtype=np.int64)
    n_bytes = (n + 7) // 8
    done = 0
    for rows in _chunks(n_resamples, n):
        packed = rng.integers(0, 256, size=(rows, n_bytes), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
        out[done:done + rows] = (bits @ ranks).astype(np.int64)
        done += rows
    return out


def noisy(rng, statistic, rate, size=None):
    """statistic + exact discrete Laplace noise at ``rate`` (integers)."""
    return statistic + discrete_laplace(rng, rate, size=size)


def monte_carlo_pvalue(observed, simulated, alternative, centre2=None):
    """The (B + 1) rank p-value of an integer release among B simulated ones.

    ``"greater"``: (1 + #{T_b >= T}) / (B + 1); ``"less"``: (1 + #{T_b <= T}) / (B + 1);
    ``"two-sided"``: (1 + #{|2 T_b − c| >= |2 T − c|}) / (B + 1) with ``c = centre2``
    (twice the centre of symmetry of the null, an int, so everything stays integer).
    Valid at every n: under H0 the release and the B draws are exchangeable (the same
    law, independent), so P(p <= u) <= u for every u; ties count against rejection.
    """
    simulated = np.asarray(simulated, dtype=np.int64)
    if alternative == "greater":
        count = np.count_nonzero(simulated >= observed)
    elif alternative == "less":
        count = np.count_nonzero(simulated <= observed)
    else:
        count = np.count_nonzero(np.abs(2 * simulated - centre2) >= abs(2 * observed - centre2))
    return (1.0 + count) / (simulated.size + 1.0)


# -- the estimators' shared parts ------------------------------------------------------------

def rank_constraints():
    """Constraints shared by the rank tests (every estimator adds its own)."""
    return {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "n_resamples": [Interval(Integral, 1, None)],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }


ALTERNATIVE = Options("two-sided", "greater", "less")


@dataclass(frozen=True)
class RankPlan:
    """Public plan of a rank release: group codes and sizes, the sensitivity of the
    statistic, that of the noised integer (2T for Kruskal–Wallis) and the noise rate."""

    classes: Any
    codes: Any
    sizes: Any
    sensitivity: int
    integer_sensitivity: int
    rate: float


def rank_plan(epsilon, sensitivity, integer_sensitivity, classes=None, codes=None,
              sizes=None):
    """The :class:`RankPlan` with the noise rate of the integer's sensitivity."""
    return RankPlan(classes=classes, codes=codes, sizes=sizes, sensitivity=int(sensitivity),
                    integer_sensitivity=int(integer_sensitivity),
                    rate=noise_rate(epsilon, integer_sensitivity))


def release_integer(rng, label, statistic, rate):
    """The release: the exact integer ``statistic`` plus discrete Laplace noise at
    ``rate`` (reported to the grey-box audit's recorder under ``label`` first)."""
    observe(label, int(statistic))
    return int(statistic) + discrete_laplace(rng, rate)


class RankTest(BasePrivateTest):
    """Shared parts of the rank tests: the audit declaration and the score."""

    _statistic_label = "rank statistic"

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the B
        draws of the simulated null (added to data-free statistics: sensitivity 0),
        then the one draw of the release (the integer statistic, its sensitivity)."""
        eps, plan = prep.params["epsilon"], prep.plan
        return NoisePlan((
            NoisedQuantity("simulated null (no data)", "discrete_laplace", 0.0, eps,
                           value=0),
            NoisedQuantity(self._statistic_label, "discrete_laplace",
                           float(plan.integer_sensitivity), eps),
        ))

    def _score_value(self, result):
        return -math.log(result.pvalue)


class GroupRankTest(RankTest):
    """Shared input handling of the k-sample rank tests (labels y, public sizes)."""

    _requires_y = True
    _min_groups = 2
    _max_groups = None

    def _validate_input(self, X, y, reset):
        X, y = validate_input(self, X, y, reset=reset, y_numeric=False)
        return X.astype(np.float64, copy=False), y

    def _groups(self, y):
        name = type(self).__name__
        kind = type_of_target(y)
        if kind == "unknown":
            raise ValueError(
                f"Unknown label type: {name} needs discrete group labels y (got an array "
                f"of dtype {np.asarray(y).dtype} that holds neither numbers nor strings)."
            )
        if kind not in ("binary", "multiclass"):
            raise ValueError(
                f"{name} needs discrete group labels y; got {kind} values (a second "
                "sample or a continuous variable is not a grouping)."
            )
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < self._min_groups or (
                self._max_groups is not None and classes.size > self._max_groups):
            wanted = (f"exactly {self._max_groups}" if self._max_groups == self._min_groups
                      else f"at least {self._min_groups}")
            raise ValueError(
                f"{name} needs {wanted} groups in y; got {classes.size} class"
                f"{'es' if classes.size != 1 else ''}."
            )
        codes = codes.ravel().astype(np.intp)
        return classes, codes, np.bincount(codes, minlength=classes.size)

    def _fitted_attributes(self, prep, result):
        return {"classes_": prep.plan.classes}
