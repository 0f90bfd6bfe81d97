"""DPBoundedMeanTest: ε-DP tests of the mean of data in declared bounds (a private bet).

The construction (one sample; pairs and two groups reduce to it below). Rows x_i lie in
public bounds [a, b]; with Y_i = x_i − μ0 ∈ [lo, hi] and a bet 0 < λ < 1/max(hi, −lo),
the wealth M = Π (1 + λ Y_i) satisfies E[M] = Π (1 + λ (E[x_i] − μ0)) <= 1 whenever the
rows are independent and the average of their means is <= μ0 (AM-GM), whatever their
laws on [a, b]. Two-sided: M = (Π (1 + λ Y_i) + Π (1 − λ Y_i)) / 2, E[M] <= 1 when the
average mean equals μ0. log M is a sum of per-row terms log(1 ± λ Y_i) of bounded range
(the two-sided log-sum-exp is 1-Lipschitz in the two sums), so it is released on a
power-of-two grid h with exact discrete Laplace noise: R = T + Z, T an integer with
h T <= log M.

The p-value is the largest P(R >= r) over every law of an integer T with E[e^{hT}] <= 1
(Markov's constraint, the only thing the null fixes): the least concave majorant at
w = 1 of the points (e^{hk}, P(Z >= r − k)), k ∈ Z (Jensen: E ψ(W) <= ψ̂(E W) <= ψ̂(1)
for ψ̂ concave, non-decreasing, above ψ). It is valid at every n for every law on the
bounds, and tight where the noise dominates (X ≡ μ0 attains P(Z >= r)).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.utils.multiclass import type_of_target

from .._base import BasePrivateTest, check_numeric, validate_input
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
from ._results import BoundedMeanResult

__all__ = ["DPBoundedMeanTest", "group_differences", "wealth_pvalue"]

#: Per-row log-factors are floored to multiples of 2**-FINE_BITS (exact int64 sums).
FINE_BITS = 30
_FINE = float(1 << FINE_BITS)
#: The release grid h makes the sensitivity at least this many grid steps, so rounding
#: the sensitivity up to whole steps adds at most 1/256 to the noise scale.
_MIN_STEPS = 256
#: The grid is never finer than 2**-10 nats, so the p-value's point set stays <= ~82k
#: points (bounded work); a sensitivity below 0.25 nats (one-sample bets below ~0.12 of the
#: largest one) then spans fewer than 256 steps (>= 20 at bet=0.01: <= 5 % more noise).
_MAX_GRID_BITS = 10
#: Wealth points above e^40 are bounded by (e^40, 1): p-values floor at ~e^-40 ≈ 4e-18.
_LOG_WEALTH_CAP = 40.0
#: Grid of bets (fractions of the largest admissible bet) searched by bet="auto".
BET_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
_MAX_RATE = 2.0**32  # largest rate of the exact sampler (more noise is always private)


# --------------------------------------------------------------------------------------
# The p-value: least concave majorant at w = 1 (public post-processing of the release).
# --------------------------------------------------------------------------------------

def _noise_sf(j, rate):
    """P(Z >= j) for Z discrete Laplace of ``rate``, j an integer array:
    e^{−rate j}/(1 + e^{−rate}) for j >= 1, 1 − e^{−rate (1 − j)}/(1 + e^{−rate}) else."""
    j = np.asarray(j, dtype=np.float64)
    upper = j >= 1
    tail = np.exp(-rate * np.where(upper, j, 1.0 - j)) / (1.0 + math.exp(-rate))
    return np.where(upper, tail, 1.0 - tail)


@functools.lru_cache(maxsize=64)
def _wealth_points(grid, log_cap):
    """Abscissae (0, e^{hk} for |hk| <= log_cap, e^{h K}) of the bound, cached per grid
    with the parts the majorant reads (:class:`_Abscissae`)."""
    k_cap = math.ceil(log_cap / grid)
    k = np.arange(-k_cap, k_cap + 1, dtype=np.int64)
    w = np.concatenate([[0.0], np.exp(k * grid), [math.exp(k_cap * grid)]])
    w.flags.writeable = False
    return k_cap, k, _Abscissae(w)


class _Abscissae:
    """The parts of the abscissae w that :func:`_majorant_at_one` reads for every y: the
    points left and right of 1 (index arrays, or slices when w is sorted, as the wealth
    points are) and 1 − w, w − 1 on them. Computed once per grid, they are the same
    floats the majorant would compute on each call."""

    def __init__(self, w):
        left, right = w < 1.0, w > 1.0
        self.w = w
        self.left, self.right = _as_slice(left), _as_slice(right)
        self.wl, self.wr = w[self.left], w[self.right]
        self.one_minus_wl, self.wr_minus_one = 1.0 - self.wl, self.wr - 1.0
        self.one_minus_w = 1.0 - w
        for part in (self.wl, self.wr, self.one_minus_wl, self.wr_minus_one, self.one_minus_w):
            part.flags.writeable = False  # shared by every call on the grid (cached)


def _as_slice(mask):
    """``mask`` as a slice when its True entries are contiguous (a view selects the same
    entries as the mask, without the copy), else as the mask."""
    idx = np.flatnonzero(mask)
    if idx.size and idx[-1] - idx[0] + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return mask


def _majorant_at_one(w, y):
    """Least concave majorant at 1 of the points (w, y): min over s >= 0 of
    max_k y_k + s (1 − w_k). Any s gives a valid upper bound; s is found by alternating
    the best right and left partners of a chord over 1 (which ends at the hull edge
    over 1), then the bound at that s is returned."""
    return _majorant_on(_Abscissae(w), y)


def _majorant_on(a, y):
    """:func:`_majorant_at_one` on abscissae prepared by :class:`_Abscissae`."""
    wl, yl, wr, yr = a.wl, y[a.left], a.wr, y[a.right]
    i, j = int(np.argmax(yl)), -1
    for _ in range(200):
        j_new = int(np.argmax((yl[i] * a.wr_minus_one + yr * (1.0 - wl[i])) / (wr - wl[i])))
        i_new = int(np.argmax((yl * a.wr_minus_one[j_new] + yr[j_new] * a.one_minus_wl)
                              / (wr[j_new] - wl)))
        if (i_new, j_new) == (i, j):
            break
        i, j = i_new, j_new
    s = max(0.0, (yr[j] - yl[i]) / (wr[j] - wl[i]))
    return float(np.max(y + s * a.one_minus_w))


def wealth_pvalue(release, grid, rate, *, log_cap=_LOG_WEALTH_CAP):
    """Valid p-value of an integer release R = T + Z with E[exp(grid T)] <= 1 under H0.

    Parameters
    ----------
    release : int
        The release r (grid steps).
    grid : float
        The grid h (a power of two): the released statistic is h T.
    rate : float
        Rate of the discrete Laplace noise Z (the quantised value that was sampled).
    log_cap : float, default=40
        Wealth points beyond e^{±log_cap} are bounded (see below).

    Returns
    -------
    pvalue : float
        An upper bound on sup P(T + Z >= r) over all laws of an integer T with
        E[e^{hT}] <= 1: the least concave majorant at 1 of (e^{hk}, P(Z >= r − k)).
        Points with hk < −log_cap are bounded by (0, P(Z >= r + K + 1)) and those with
        hk > log_cap by (e^{log_cap}, 1) (a chord's value at 1 grows with its left
        end's height and falls with its right end's abscissa), so the bound exceeds the
        majorant by at most ~e^{−log_cap} (4e-18 at the default).
    """
    k_cap, k, w = _wealth_points(float(grid), float(log_cap))
    r = int(release)
    y = np.concatenate([_noise_sf([r + k_cap + 1], rate), _noise_sf(r - k, rate), [1.0]])
    return min(1.0, _majorant_on(w, y))


def _noise_quantile(rate, level):
    """Smallest integer j with P(Z >= j) <= level (Z discrete Laplace of ``rate``)."""
    j = math.ceil((math.log(1.0 / level) - math.log1p(math.exp(-rate))) / rate)
    return max(j, 1)


@functools.lru_cache(maxsize=1024)
def rejection_threshold(grid, rate, alpha, log_cap=_LOG_WEALTH_CAP):
    """Smallest release r with ``wealth_pvalue(r) <= alpha`` (p is non-increasing in r).

    Bracket: p(r) >= P(Z >= r) (T ≡ 0 is allowed), and
    p(r) <= P(T >= r − j) + P(Z >= j) <= e^{−h(r − j)} + α/2 with j the α/2 noise
    quantile (Markov), so the threshold lies in [q_α, q_{α/2} + log(2/α)/h].
    """
    lo = _noise_quantile(rate, alpha) - 1  # p(lo) >= P(Z >= lo) > alpha
    hi = _noise_quantile(rate, alpha / 2) + math.ceil(math.log(2.0 / alpha) / grid)
    step = max(1, hi - lo)
    while wealth_pvalue(lo, grid, rate, log_cap=log_cap) <= alpha:  # large alpha only
        lo -= step
    while wealth_pvalue(hi, grid, rate, log_cap=log_cap) > alpha:  # never, by Markov
        hi += step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wealth_pvalue(mid, grid, rate, log_cap=log_cap) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


# --------------------------------------------------------------------------------------
# The release geometry: bet, per-row terms, sensitivity, grid (public).
# --------------------------------------------------------------------------------------

def _fine_units(y, lam):
    """floor(2^30 log(1 + lam y)) − 1: a lower bound of the exact term in 2^-30 units
    (log1p errs by a few ulps, far below one unit)."""
    return np.floor(_FINE * np.log1p(lam * np.asarray(y, dtype=np.float64))).astype(
        np.int64) - 1


def _mixture_correction(gap):
    """floor(2^30 log((1 + e^{-gap/2^30}) / 2)) − 2 <= the exact value (0 at gap 0, down to
    −2^30 log 2), elementwise on int64 gaps: with it, max(S+, S−) + c(|S+ − S−|) <=
    2^30 log((e^{S+/2^30} + e^{S−/2^30}) / 2). The float error (~1e-6 units) is far below
    the 2-unit margin."""
    gap = np.asarray(gap, dtype=np.float64)
    return np.floor(_FINE * (np.log1p(np.exp(-gap / _FINE)) - math.log(2.0))).astype(
        np.int64) - 2


@dataclass(frozen=True)
class BetPlan:
    """Public plan of one release (a function of parameters, bounds and sizes only).

    Attributes
    ----------
    lo, hi : float
        Range of the centred rows Y (x − μ0, a paired or a group difference).
    bet : float
        λ, the stake per unit of Y.
    grid : float
        h, the power-of-two grid of the release (nats per unit).
    shift : int
        FINE_BITS − log2(1/h): fine units per grid step is 2**shift.
    ranges : tuple of (int, int)
        Fine-unit range of log(1 + λY) and of log(1 − λY) over [lo, hi].
    sensitivity : int
        Replace-one sensitivity of the integer statistic T, in grid steps.
    rate : float
        Rate of the discrete Laplace noise (quantised), at most ε / sensitivity.
    """

    lo: float
    hi: float
    bet: float
    grid: float
    shift: int
    ranges: tuple
    sensitivity: int
    rate: float


def bet_plan(lo, hi, fraction, epsilon, alternative, row_span=None):
    """The release plan for a bet of ``fraction`` times the largest admissible one.

    ``row_span``: how far one replaced row can move one centred value (default the whole
    range hi − lo; two groups: b − a, half the range of a difference, since a row
    changes only its own side of D). The log-factor is concave, so its largest change
    over a window of that length is at the steep end: [lo, lo + span] for the bet on
    "greater", [hi − span, hi] for the bet on "less" (+2 fine units for the floors).
    """
    lam = fraction / max(hi, -lo)
    plus = (int(_fine_units(lo, lam)), int(_fine_units(hi, lam)))
    minus = (int(_fine_units(hi, -lam)), int(_fine_units(lo, -lam)))
    if row_span is None or row_span >= hi - lo:
        spans = {"greater": plus[1] - plus[0], "less": minus[1] - minus[0]}
    else:
        spans = {"greater": int(_fine_units(lo + row_span, lam)) - plus[0] + 2,
                 "less": int(_fine_units(hi - row_span, -lam)) - minus[0] + 2}
    # two-sided: the log-sum-exp moves by at most the larger span; its floored correction
    # by less than one more unit (+2 kept as margin)
    spans["two-sided"] = max(spans["greater"], spans["less"]) + 2
    fine_span = spans[alternative]
    exponent = min(_MAX_GRID_BITS,
                   max(0, math.ceil(math.log2(_MIN_STEPS * _FINE / fine_span))))
    shift = FINE_BITS - exponent
    steps = -(-fine_span // (1 << shift))  # ceil: |floor(A/2^s) − floor(B/2^s)| bound
    rate = quantise_rate(min(epsilon / steps, _MAX_RATE))
    return BetPlan(lo=float(lo), hi=float(hi), bet=lam, grid=2.0**-exponent, shift=shift,
                   ranges=(plus, minus), sensitivity=int(steps), rate=rate)


def wealth_statistic(y, plan, alternative):
    """The integer statistic T (grid steps) of centred rows y (summed over the last
    axis, so a batch of datasets gives an array): h T <= log M exactly."""
    (p_lo, p_hi), (m_lo, m_hi) = plan.ranges
    if alternative in ("greater", "two-sided"):
        s_plus = np.clip(_fine_units(y, plan.bet), p_lo, p_hi).sum(axis=-1)
    if alternative in ("less", "two-sided"):
        s_minus = np.clip(_fine_units(y, -plan.bet), m_lo, m_hi).sum(axis=-1)
    if alternative == "greater":
        total = s_plus
    elif alternative == "less":
        total = s_minus
    else:
        total = np.maximum(s_plus, s_minus) + _mixture_correction(np.abs(s_plus - s_minus))
    return total >> plan.shift  # floor division by 2**shift (int64, exact)


def group_differences(x, codes, sizes, bounds, rng):
    """D_i = x_i − (mean of block i), oriented as group 0 − group 1, for two groups.

    The smaller group's rows (group 0 on a tie) are paired with disjoint blocks of
    the larger group's rows, of sizes floor or ceil of the size ratio, assigned by a
    random permutation drawn from ``rng`` (data-independent). With rows independent and
    identically distributed within groups, the D_i are independent, lie in
    [a − b, b − a] and have mean E[X | 0] − E[X | 1]. Replacing one row's value changes
    exactly one D_i.
    """
    a, b = bounds
    small = 0 if sizes[0] <= sizes[1] else 1
    xs, xl = x[codes == small], x[codes != small]
    xl = xl[rng.permutation(xl.size)]
    blocks = np.array_split(np.arange(xl.size), xs.size)
    starts = np.array([blk[0] for blk in blocks])
    lengths = np.array([blk.size for blk in blocks], dtype=np.float64)
    means = np.clip(np.add.reduceat(xl, starts) / lengths, a, b)
    return xs - means if small == 0 else means - xs


# --------------------------------------------------------------------------------------
# Planning the bet from public inputs (n, bounds, ε, α, an assumed effect and spread).
# --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _normal_quantiles():
    """400 evenly spaced standard normal quantiles (the planning law's nodes)."""
    from scipy import stats

    nodes = stats.norm.ppf((np.arange(400) + 0.5) / 400)
    nodes.flags.writeable = False
    return nodes


@functools.lru_cache(maxsize=256)
def plan_fraction(lo, hi, n, epsilon, alpha, alternative, effect, spread, row_span=None):
    """The bet fraction of BET_GRID with the largest predicted power (public inputs only).

    Predicted power: rows Y = clip(±effect + spread·z, lo, hi), z standard normal (the
    planning law; it affects power only, never validity); T normal with the rows' mean
    and variance of log(1 ± λY) (two-sided: the '+' bet minus log 2), and the exact
    noise and rejection threshold of each candidate (on a coarser planning grid).
    """
    sign = -1.0 if alternative == "less" else 1.0
    ys = np.clip(sign * effect + spread * _normal_quantiles(), lo, hi)
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    best, best_power = BET_GRID[0], -1.0
    for fraction in BET_GRID:
        lam = sign * fraction / max(hi, -lo)
        g = np.log1p(lam * ys)
        mean, sd = n * g.mean(), math.sqrt(n * g.var())
        if alternative == "two-sided":
            mean -= math.log(2.0)
        width = hi - lo if row_span is None else min(row_span, hi - lo)
        span = abs(math.log1p(lam * (lo + width)) - math.log1p(lam * lo)) if sign > 0 else \
            abs(math.log1p(lam * hi) - math.log1p(lam * (hi - width)))
        if alternative == "two-sided":  # the mirror bet, at its own steep end
            span = max(span, abs(math.log1p(-lam * hi) - math.log1p(-lam * (hi - width))))
        grid = 2.0 ** -max(0, math.ceil(math.log2(32.0 / span)))
        steps = math.ceil(span / grid)
        rate = min(epsilon / steps, _MAX_RATE)
        r = rejection_threshold(grid, rate, alpha, 15.0)
        t = np.floor((mean + sd * nodes) / grid)
        power = float(np.dot(weights, _noise_sf(r - t, rate)))
        if power > best_power + 1e-9:
            best, best_power = fraction, power
    return best


# --------------------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------------------

class DPBoundedMeanTest(BasePrivateTest):
    r"""ε-DP test of a mean (one sample, pairs or two groups) for data in declared bounds,
    valid at every n for every law on the bounds.

    Each row's log-factor log(1 ± λ(x − μ0)) of a bet λ is summed; the sum (the
    log-wealth of betting on the alternative) is released on a power-of-two grid with
    exact discrete Laplace noise, and the p-value is the largest probability of so
    large a release over every law of the log-wealth that the null allows (its wealth
    has mean <= 1). No normal approximation is involved.

    Read more in the user guide page doc/classical.md (Everyday private tests).

    Parameters
    ----------
    bounds : tuple of (float, float), default=(-1.0, 1.0)
        Public bounds (a, b), a < b, that every value is known to satisfy. Declare them
        from knowledge of the measurement (a scale's range, a questionnaire's score
        range), never from the data.
    null_mean : float or None, default=0.0
        μ0. A number: one-sample test of E[X] (paired test of E[X − y] when ``y`` is
        given), with a < μ0 < b (pairs: a − b < μ0 < b − a). ``None``: two-sample test
        of E[X | group 1] − E[X | group 2] = 0, ``y`` holding two group labels.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        H1: mean ≠ μ0, > μ0, < μ0 (two groups: the first label's mean minus the
        second's ≠ 0, > 0, < 0; labels in sorted order, ``classes_``).
    out_of_bounds : {"refuse", "clip"}, default="refuse"
        ``"refuse"``: a value outside the bounds raises ``ValueError`` before the
        budget is charged (the message says which kind of problem, never how many rows
        or which values). ``"clip"``: values are clipped to [a, b] and the hypothesis
        is then about the mean of the clipped variable, min(max(X, a), b) — not E[X]
        (clipping moves the mean: E[X] = 0 does not imply E[clip(X)] = 0).
    bet : "auto" or float in [0.01, 0.99], default="auto"
        The stake as a fraction θ of the largest admissible one: λ = θ / max(b − μ0,
        μ0 − a) (pairs and groups: θ / (b − a)). ``"auto"`` picks θ from ``BET_GRID``
        maximising the power predicted from public inputs only (n, bounds, ε, α,
        ``effect``, ``spread``).
    effect : float > 0 or None, default=None
        Planning only: the mean difference the bet is tuned for (data units). ``None``:
        (b − a) / 20. Never affects validity.
    spread : float > 0 or None, default=None
        Planning only: the assumed standard deviation of a row. ``None``: (b − a) / 6.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 (pure ε-DP).
    alpha : float, default=0.05
        Level of the test.
    budget : PrivacyBudget or None, default=None
        Ledger charged ε once per ``fit`` / ``score``.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise and of the random pairing of two groups. For tests and reproducible
        examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the generator or a
        pickle of the estimator can replay the noise, and equal seeds correlate the noise of
        different fits). ``None`` draws fresh OS entropy and keeps nothing from which the noise
        could be regenerated.

    Attributes
    ----------
    result_ : BoundedMeanResult
        The private result of the last fit.
    classes_ : ndarray of shape (2,) or None
        The two group labels (two-sample test), else ``None``.
    n_features_in_ : int
        Number of columns of ``X`` seen during fit (always 1).
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Column names of ``X`` when it is a DataFrame with string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    See Also
    --------
    DPWilcoxonTest : location test under symmetry (no bounds needed).

    Notes
    -----
    **Neighbours and privacy.** Replace-one: two datasets differ in one row's value
    (``X`` and, for pairs, ``y``); n, and for two groups the labels and hence the group
    sizes, are public. The integer statistic T = floor(2^{-s} S) of the fine-grid sum
    S of floor(2^30 log(1 ± λ Y_i)) − 1 (each clipped to its range over the bounds)
    changes by at most ``result_.sensitivity / result_.grid`` steps (the range of one
    term; two-sided: the larger range plus 2 units for the floored log-sum-exp
    correction); discrete Laplace noise of rate <= ε / that sensitivity makes the
    release ε-DP. Two groups: a replaced row moves only its own side of
    D = x − (block mean), by at most b − a, so the range is that of the log-factor over
    the steepest window of length b − a, [a − b, 0] for the bet on "greater" and
    [0, b − a] for the bet on "less" (0.60 instead of 0.97 nats at λ = 0.45/6), plus 2
    fine units for the floors. Pairs: a replaced row is a pair, whole range. Every
    field of the result is the release, a function of it, or public.

    **Hypothesis and validity.** One sample: rows independent (identically distributed
    or not) with values in [a, b] and the average of their means = μ0 (two-sided),
    <= μ0 ("greater") or >= μ0 ("less"). Pairs: the same for x − y on
    [a − b, b − a]. Two groups: rows independent, identically distributed within each
    group, groups independent; H0: equal means (or one-sided). The smaller group's rows
    are paired at random (a data-independent permutation) with disjoint blocks of the
    larger group, D_i = x_i − (block mean) oriented as group 1 − group 2: independent,
    on [a − b, b − a], with mean the difference of the group means. Under H0 the
    wealth M has E[M] <= 1; the p-value bounds sup P(T + Z >= r) over all laws of T
    with E[e^{hT}] <= 1 (:func:`wealth_pvalue`): **valid at every n for every law on
    the bounds** — finite-sample over the nuisance (the unknown law), not exact.
    p-values below about 4e-18 are reported as that bound.

    **Confidence interval.** ``result_.confidence_interval(confidence_level)`` tests
    every candidate mean from the same release (an AM-GM bound on the upper tail of the
    log-wealth, a convex-chord bound on its lower tail): valid at every n for every law
    on the bounds, closed form, no extra budget; conservative, and wide around μ0 for
    the two-sided bet, which cannot tell the side (doc/user_guide/intervals.md).

    **Power.** At ε = 1, α = 0.05, rows N(0.4, 1) clipped to [−3, 3] against μ0 = 0
    (d = 0.4), 80 % power needs 96 rows two-sided and 79 one-sided (bet planned with
    ``effect=0.4, spread=1``; public t-test 51 / 40; a test of the plain sum valid for
    every law on [−3, 3] needs >= 284 / 210 even without noise):
    ``benchmarks/classical_power_mean.py``.

    References
    ----------
    .. [1] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables
       by betting", JRSS B 86(1), 2024.
    .. [2] W. Hoeffding, "Probability inequalities for sums of bounded random
       variables", JASA 58, 1963.
    .. [3] C. L. Canonne, G. Kamath and T. Steinke, "The Discrete Gaussian for
       Differential Privacy", NeurIPS 2020 (exact discrete Laplace sampling).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBoundedMeanTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.clip(rng.normal(0.4, 1.0, size=(400, 1)), -3, 3)
    >>> test = DPBoundedMeanTest(bounds=(-3, 3), null_mean=0.0, effect=0.4, spread=1.0)
    >>> result = test.fit(X).result_
    >>> result.alternative, result.n_samples
    ('two-sided', 400)
    >>> result.pvalue < 0.05  # doctest: +SKIP
    True
    >>> ci = DPBoundedMeanTest(bounds=(-3, 3), null_mean=0.0, alternative="greater",
    ...                        effect=0.4, spread=1.0).fit(X).result_.confidence_interval()
    >>> -3.0 <= ci.low <= ci.high <= 3.0, ci.parameter
    (True, 'mean')
    """

    _parameter_constraints = {
        "bounds": [InstanceOf(tuple, list, description="a pair (a, b) of reals, a < b")],
        "null_mean": [NoneValue(), Interval(Real, None, None)],
        "alternative": [Options("two-sided", "greater", "less")],
        "out_of_bounds": [Options("refuse", "clip")],
        "bet": [Options("auto"), Interval(Real, 0.01, 0.99)],
        "effect": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "spread": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, *, bounds=(-1.0, 1.0), null_mean=0.0, alternative="two-sided",
                 out_of_bounds="refuse", bet="auto", effect=None, spread=None, epsilon=1.0,
                 alpha=0.05, budget=None, random_state=None):
        self.bounds = bounds
        self.null_mean = null_mean
        self.alternative = alternative
        self.out_of_bounds = out_of_bounds
        self.bet = bet
        self.effect = effect
        self.spread = spread
        self.epsilon = epsilon
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    @property
    def _requires_y(self):
        return self.null_mean is None

    def _check_params(self, params):
        bounds = params["bounds"]
        try:
            a, b = (float(v) for v in bounds)
            ok = all(isinstance(v, Real) and not isinstance(v, (bool, np.bool_))
                     for v in bounds)
        except (TypeError, ValueError):
            ok = False
        if not ok or not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise InvalidParameterError(
                "bounds must be a pair (a, b) of finite reals with a < b; got "
                f"{bounds!r}." if ok else "bounds must be a pair (a, b) of finite reals "
                "with a < b.")
        out = dict(params)
        out["bounds"] = (a, b)
        return type(params)(out)

    def _validate_input(self, X, y, reset):
        # the library's one validation path (refusals name the kind of problem only)
        if self.null_mean is None:
            X, y = validate_input(self, X, y, reset=reset, y_numeric=False)
        elif y is None:
            X = validate_input(self, X, reset=reset)
        else:
            X, y = validate_input(self, X, y, reset=reset, y_numeric=True)
            y = check_numeric(np.asarray(y), "y").astype(np.float64, copy=False)
        X = check_numeric(X, "X")
        if X.shape[1] != 1:
            raise ValueError(
                f"DPBoundedMeanTest needs X with exactly one column (one value per row); "
                f"got {X.shape[1]} columns.")
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        a, b = params["bounds"]
        if params["out_of_bounds"] == "refuse":
            checked = [(X, "X")]
            if y is not None and params["null_mean"] is not None:  # pairs: y is data too
                checked.append((y, "y"))
            for arr, name in checked:
                if np.any((arr < a) | (arr > b)):  # the kind of problem only, no count
                    raise ValueError(
                        f"{name} has values outside bounds=({a:g}, {b:g}). Declare bounds "
                        "that every value satisfies, or set out_of_bounds='clip' (the test "
                        "is then about the mean of the clipped values).")
        classes = sizes = None
        if params["null_mean"] is None:
            kind = type_of_target(y)
            if kind not in ("binary", "multiclass"):
                raise ValueError(
                    "DPBoundedMeanTest with null_mean=None needs discrete group labels y; "
                    f"got {kind} values.")
            classes, codes = np.unique(y, return_inverse=True)
            if classes.size != 2:
                raise ValueError(
                    "DPBoundedMeanTest with null_mean=None needs exactly 2 groups in y; "
                    f"got {classes.size}.")
            sizes = np.bincount(codes.ravel(), minlength=2)
            # one row moves only its own side of D = x − (block mean): by at most b − a
            lo, hi, mu0, row_span = a - b, b - a, 0.0, b - a
            n_terms = int(sizes.min())
            ratio = float(sizes.max()) / float(sizes.min())
        elif y is None:
            mu0 = params["null_mean"]
            lo, hi, n_terms, ratio, row_span = a - mu0, b - mu0, X.shape[0], None, None
            if not a < mu0 < b:
                raise ValueError(f"null_mean must lie strictly inside bounds=({a:g}, {b:g}).")
        else:
            mu0 = params["null_mean"]
            # a row is a pair: both values may change, so x − y spans its whole range
            lo, hi, n_terms, ratio, row_span = a - b - mu0, b - a - mu0, X.shape[0], 1.0, None
            if not lo < 0 < hi:
                raise ValueError(
                    f"null_mean must lie strictly inside ({a - b:g}, {b - a:g}) for pairs "
                    "(the range of x − y).")
        fraction = params["bet"]
        if fraction == "auto":
            effect = params["effect"] if params["effect"] is not None else (b - a) / 20.0
            spread = params["spread"] if params["spread"] is not None else (b - a) / 6.0
            if ratio is not None:  # a difference: x − y or x − (block mean)
                spread = spread * math.sqrt(1.0 + 1.0 / math.floor(ratio))
            fraction = plan_fraction(float(lo), float(hi), int(n_terms),
                                     params["epsilon"], params["alpha"],
                                     params["alternative"], float(effect), float(spread),
                                     row_span)
        bet = bet_plan(lo, hi, fraction, params["epsilon"], params["alternative"], row_span)
        return _MeanPlan(bet=bet, fraction=float(fraction), mu0=float(mu0),
                         classes=classes, codes=None if classes is None else codes.ravel(),
                         sizes=None if sizes is None else tuple(int(s) for s in sizes))

    def _centred(self, prep, rng):
        """The centred rows Y (one-sample, pairs) or group differences D."""
        params, plan = prep.params, prep.plan
        a, b = params["bounds"]
        x = np.clip(prep.X[:, 0], a, b)  # a no-op after a refusal check
        if plan.classes is None:
            if prep.y is not None:
                x = x - np.clip(prep.y, a, b)
            return x - plan.mu0
        return group_differences(x, plan.codes, plan.sizes, (a, b), rng)

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        bet, alternative = plan.bet, params["alternative"]
        y = self._centred(prep, rng)
        stat = int(wealth_statistic(y, bet, alternative))
        observe("wealth statistic", stat, bet.grid)  # grey-box audit (else a no-op)
        release = stat + discrete_laplace(rng, bet.rate)
        pvalue = wealth_pvalue(release, bet.grid, bet.rate)
        return BoundedMeanResult(
            statistic=float(release * bet.grid), pvalue=float(pvalue),
            alternative=alternative, sensitivity=float(bet.sensitivity * bet.grid),
            reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=prep.n_samples,
            method="DP bounded mean (private bet)", bounds=params["bounds"],
            null_mean=params["null_mean"], bet=float(bet.bet), grid=float(bet.grid),
            group_sizes=plan.sizes,
            design=("two-sample" if plan.classes is not None
                    else "paired" if prep.y is not None else "one-sample"),
        )

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the integer
        statistic T, in steps of the grid h, sensitivity ``bet.sensitivity`` steps, by
        discrete Laplace noise at rate <= ε / sensitivity. The random pairing of two
        groups is not noise."""
        bet = prep.plan.bet
        return NoisePlan((NoisedQuantity("wealth statistic", "discrete_laplace",
                                         float(bet.sensitivity), prep.params["epsilon"],
                                         unit=bet.grid),))

    def _fitted_attributes(self, prep, result):
        return {"classes_": prep.plan.classes}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # One column of values inside declared bounds, not a numeric 2-D array:
        # scikit-learn's generic checks (multi-column float matrices of any range) do not
        # apply; tests/test_common.py runs the contract's checks on bounded data.
        tags.input_tags.two_d_array = False
        return tags

    def _score_value(self, result):
        return -math.log(result.pvalue)


@dataclass(frozen=True)
class _MeanPlan:
    bet: BetPlan
    fraction: float
    mu0: float
    classes: object
    codes: object
    sizes: object
