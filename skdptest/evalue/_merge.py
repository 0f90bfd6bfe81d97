"""Merging per-row e-statistics and privatising the merged log e-value.

Λ_n = Σ_t log(1 − λ + λ E(x_t)) has replace-one sensitivity

    R_λ = log((1 − λ + λ E_max) / (1 − λ + λ E_min)) < log(E_max / E_min) <= ε.

Float-safe release (doc/evalues.md, 'Float-safe release'). A float release
Λ_n + Laplace would let the *set* of reachable floats differ between neighbours
(Mironov 2012); here everything data-dependent is an integer and the noise is an exact
integer sampler:

- per-row terms t_i, clipped to the computed extremes [t_lo, t_hi], are floored to a
  fine power-of-two grid h = g / 2^k and summed exactly as integers: S = Σ floor(t_i/h);
- the batch integer is M = floor(S / 2^k) (i.e. floor of Σ h·floor(t_i/h) on the grid
  g, a power of two); replacing one row moves S by at most Δ_h = floor(t_hi/h) −
  floor(t_lo/h), hence M by at most Δ_int = ceil(Δ_h / 2^k) (exact integer arithmetic:
  no rounding error of a float sum enters the sensitivity);
- J = M + K with K ~ discrete Laplace of rate r = quantise_rate(ε/Δ_int),
  P(K = k) ∝ e^{−r|k|}: the pmfs of J on neighbours differ by a shift of at most Δ_int,
  so their ratio is at most e^{r Δ_int} <= e^ε (pure ε-DP, exact);
- the release is the fixed public function g·J − c of the integer J, with
  c = log E[e^{gK}] the exact compensator (finite for g < r, i.e. g/r < 1).

Validity: g·M <= h·S <= Σ_i t_i (floors only lower), so
E_P[exp(release)] <= E_P[exp(Λ_n)] E[e^{gK}] e^{−c} = (1 − λ + λ E_P[E])^n <= 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .._noise import (
    RATE_BITS,
    discrete_laplace,
    discrete_laplace_log_mgf,
    floor_to_grid,
    power_of_two_grid,
    quantise_rate,
)
from .._recorder import observe

__all__ = [
    "GridNoise",
    "choose_bet",
    "choose_clip",
    "expected_log_release",
    "fused_integer_sum",
    "merged_integer",
    "merged_sensitivity",
    "noise_scale",
    "plan_release",
    "release",
    "release_noise",
    "row_integer_sum",
]

# The fine grid h = g / 2^k of the per-row floors: k is at most _FINE_BITS (the floors
# then cost at most n g 2^-30 in total) and small enough that every per-row integer
# has magnitude below 2^_ROW_BITS, so that chunks of 2^(62 - _ROW_BITS) rows sum
# exactly in int64 (their sums are added as Python integers).
_FINE_BITS = 30
_ROW_BITS = 40
_CHUNK = 2 ** (62 - _ROW_BITS)


def _log_merge(log_e, bet):
    """log(1 − λ + λ E) computed stably from log E (λ = 1: no merging)."""
    if bet == 1.0:
        return np.asarray(log_e, dtype=float)
    return np.log1p(bet * np.expm1(log_e))


def _term_range(stat, bet):
    """The computed extremes (t_lo, t_hi) of the per-row term log(1 − λ + λE)."""
    t = _log_merge(np.array([stat.log_lo, stat.log_hi]), bet)
    return float(t[0]), float(t[1])


def merged_sensitivity(stat, bet):
    """R_λ: the largest change of Λ_n when one row is replaced."""
    lo, hi = _term_range(stat, bet)
    return float(hi - lo)


def _grid_resolution(epsilon):
    """g / R_λ, a power of two: 2^-10 for ε >= 1, coarser for small ε.

    The grid costs a factor about (1 + g/R_λ) on the sensitivity, the rate's
    quantisation (to multiples of 2^-20) a relative ≈ 2^-20 Δ_int / ε; both are
    about 2^-10 at ε = 1, and Δ_int ≈ 2^10 √ε balances them below.
    """
    bits = min(10, max(0, math.floor(10 + 0.5 * math.log2(epsilon))))
    return 2.0 ** -bits


@dataclass(frozen=True)
class GridNoise:
    """Public parameters of one float-safe merged release (none depends on the data).

    Attributes
    ----------
    grid : float
        g, a power of two: the release is g·J − c for an integer J.
    fine_bits : int
        k: per-row terms are floored to h = g / 2^k.
    lo, hi : float
        Computed extremes of the per-row term; rows are clipped to [lo, hi].
    steps : int
        Δ_int, the replace-one sensitivity of the batch integer M.
    rate : float
        r <= ε / Δ_int, quantised: K ~ discrete Laplace, P(K = k) ∝ e^{−r|k|}.
    """

    grid: float
    fine_bits: int
    lo: float
    hi: float
    steps: int
    rate: float

    @property
    def fine(self):
        """h = g / 2^k, the grid of the per-row floors."""
        return math.ldexp(self.grid, -self.fine_bits)

    @property
    def scale(self):
        """g / r: the noise g·K in log-e units has variance ≈ 2 (g/r)² (the Laplace
        scale it replaces)."""
        return self.grid / self.rate

    @property
    def log_mgf(self):
        """c = log E[e^{gK}], +inf when g >= r (no finite compensator)."""
        if not self.grid < self.rate:
            return math.inf
        return float(discrete_laplace_log_mgf(self.rate, self.grid))

    def value(self, j):
        """The released float of the integer j: g·j − c (exact product, one rounding)."""
        return float(j) * self.grid - self.log_mgf  # g a power of two: the product is exact

    def integer(self, value):
        """The integer j with ``value(j) == value`` (ValueError if there is none)."""
        j = round((value + self.log_mgf) / self.grid)
        if self.value(j) != value:
            raise ValueError(f"value {value!r} is not g·j − c for any integer j.")
        return j


def release_noise(stat, bet, epsilon):
    """The :class:`GridNoise` of the merged release, or ``None`` for a constant
    statistic (R_λ = 0: Λ_n does not depend on the data and is released as is)."""
    lo, hi = _term_range(stat, bet)
    if not hi > lo:
        return None
    grid = float(power_of_two_grid(hi - lo, _grid_resolution(epsilon)))
    big = max(abs(lo), abs(hi))
    # k with big / h < 2^_ROW_BITS (h = g 2^-k), at most _FINE_BITS
    k = min(_FINE_BITS, _ROW_BITS - 1 - math.frexp(big / grid)[1])
    if k < 0:
        raise ValueError(
            f"the merged statistic's range {hi - lo:.3g} is too small relative to its "
            f"magnitude {big:.3g} for an exact integer release."
        )
    fine = math.ldexp(grid, -k)
    ends = floor_to_grid(np.array([lo, hi]), fine)
    span = int(ends[1]) - int(ends[0])  # Δ_h: a row's integer moves at most this much
    steps = -(-span // 2**k)  # ceil(Δ_h / 2^k)
    if not epsilon / steps >= 2.0**-RATE_BITS:
        raise ValueError(
            f"epsilon={epsilon} is too small for the exact sampler: the noise rate "
            f"ε / Δ_int = {epsilon / steps:.3g} is below 2**-{RATE_BITS}."
        )
    rate = float(quantise_rate(epsilon / steps))
    return GridNoise(grid, k, lo, hi, steps, rate)


def noise_scale(stat, bet, epsilon):
    """Scale g/r of the released noise g·K in log-e units (0: constant statistic).

    It is at least R_λ/ε (the continuous Laplace scale) and at most about
    R_λ/ε·(1 + 2^-9) for ε >= 1 (the grid and the rate's quantisation).
    """
    noise = release_noise(stat, bet, epsilon)
    return 0.0 if noise is None else noise.scale


def row_integer_sum(terms, noise):
    """S = Σ_i floor(t_i / h), exactly (a Python int). ``terms`` are the per-row
    log(1 − λ + λE); they are clipped to the computed extremes first, so each row's
    integer lies in [floor(lo/h), floor(hi/h)]. Sums of disjoint blocks add up to the
    sum of their union exactly (how dask chunks are merged)."""
    t = np.clip(np.asarray(terms, dtype=float), noise.lo, noise.hi)
    a = floor_to_grid(t, noise.fine).astype(np.int64)
    return sum(int(np.sum(a[i:i + _CHUNK])) for i in range(0, a.size, _CHUNK))


#: Rows per float sum of per-row integers (each of magnitude below 2^_ROW_BITS - 1):
#: every partial sum is an integer below 2^53, so the float sum is exact.
_EXACT_FLOAT_ROWS = 2 ** (53 - _ROW_BITS)


def fused_integer_sum(X, laws, stat, bet, noise):
    """S = Σ_i floor(clip(t_i) / h) of the rows of ``X``, t_i = log(1 − λ + λ E(L_i)),
    exactly (a Python int): the same float operations as
    ``row_integer_sum(_log_merge(stat.log_e(laws.log_ratio(X)), bet), noise)`` on the
    same values, hence the same integer, in one pass over ``X``.

    The rows go through in chunks of ``laws.chunk_rows`` (log-ratio, statistic, merge,
    clip and floor in place on the chunk, then exact float sums of 2^13 integers), so
    the temporaries are a few chunks whatever n is (doc/evalues.md, 'Cost per row').
    The work is the same for every chunk: no branch on the values.
    """
    lo, hi, fine = noise.lo, noise.hi, noise.fine
    # public: every clipped row's quotient is below 2^_ROW_BITS - 1 (release_noise's k)
    if not max(abs(lo), abs(hi)) / fine < 2.0 ** (_ROW_BITS - 1):
        raise ValueError(f"values / grid overflows the exact row sums (grid={fine}).")
    # a quotient v / h underflows to ±0 only for h > 1 (h a power of two)
    underflow = fine > 1.0
    merge = bet != 1.0
    step = max(_EXACT_FLOAT_ROWS, laws.chunk_rows // _EXACT_FLOAT_ROWS * _EXACT_FLOAT_ROWS)
    total, finite = 0, True
    n = X.shape[0]
    for start in range(0, n, step):
        t = laws.log_ratio(X[start:start + step])
        if not (type(t) is np.ndarray and t.dtype == np.float64 and t.flags.writeable
                and t.flags.owndata):
            t = np.array(t, dtype=np.float64)  # never write over the caller's data
        stat.log_e_inplace(t)
        if merge:  # _log_merge: log1p(λ expm1(log E))
            np.expm1(t, out=t)
            np.multiply(bet, t, out=t)
            np.log1p(t, out=t)
        np.clip(t, lo, hi, out=t)
        # floor_to_grid: floor(v / h), with floor(−0) of an underflowed negative → −1
        v = t.copy() if underflow else None
        np.divide(t, fine, out=t)
        np.floor(t, out=t)
        if underflow:
            t[(t == 0) & (v < 0)] = -1.0
        sums = np.add.reduceat(t, np.arange(0, t.size, _EXACT_FLOAT_ROWS))
        finite &= bool(np.isfinite(sums).all())
        if finite:
            total += int(sums.astype(np.int64).sum())
    if not finite:  # after every chunk: the running time does not say where
        raise ValueError("values must be finite to be floored onto the grid.")
    return total


def merged_integer(terms, noise):
    """M = floor(Σ_i floor(t_i / h) / 2^k), exactly (the rows' only trace in the
    release); see :func:`row_integer_sum`."""
    return row_integer_sum(terms, noise) >> noise.fine_bits  # floor division by 2^k


def expected_log_release(laws, stat, bet, n, epsilon):
    """E_Q of the released log e-value (E[K] = 0):

    n E_Q[log(1 − λ + λ E)] − n h/2 − g/2 − c.

    The floors lose h·frac(t_i/h) per row and g·frac(S h/g) on the batch; the planner
    counts each at its mean under a uniform fractional part (h/2, g/2), which is exact
    to within ± (n h + g)/2 <= g (≈ 2^-10 R_λ; doc/evalues.md, 'Float-safe release').
    """
    noise = release_noise(stat, bet, epsilon)
    per_row = laws.expect(lambda L: _log_merge(stat.log_e(L), bet), "Q",
                          breaks=getattr(stat, "breaks", ()))
    if noise is None:
        return n * per_row
    c = noise.log_mgf
    if not math.isfinite(c):
        return -math.inf
    return n * per_row - 0.5 * (n * noise.fine + noise.grid) - c


def choose_bet(laws, stat, n, epsilon):
    """The bet λ maximising the expected released log e-value under Q.

    A public computation (it uses n and the laws only). Searched over
    u = −log(1 − λ), since the optimum sits near 1 − 1/(n R_ε).
    """

    def neg(u):
        return -expected_log_release(laws, stat, -math.expm1(-u), n, epsilon)

    us = np.linspace(0.02, math.log(max(n, 2)) + 6.0, 40)
    vals = [neg(u) for u in us]
    i = int(np.argmin(vals))
    lo, hi = us[max(i - 1, 0)], us[min(i + 1, len(us) - 1)]
    with np.errstate(invalid="ignore"):  # +inf objective (no compensator) in Brent's step
        res = optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-6})
    u = res.x if res.fun <= vals[i] else us[i]
    return float(-math.expm1(-u))


def choose_clip(laws, n, epsilon, stat_at):
    """The clip range r < ε maximising the expected release of E*_r without merging.

    ``stat_at(r)`` is the optimal statistic clipped at log-range r. Without a bet
    (λ = 1) the release is the float-safe release of Σ log E*_r, r' <= r the actual
    range, with expectation n E_Q[log E*_r] − c (c ≈ −log(1 − (r'/ε)²), the discrete
    compensator at the slightly larger scale g/rate, and the floors' g/2). Merging with
    λ < 1 never beats this family: log(1 − λ + λE*) is a per-row log e-value of some
    range R' and E*_{R'} has the largest E_Q[log E] among those. Both terms are
    concave in r (R_r is an infimum of functions affine in r); a grid plus a bounded
    search finds the maximum. Returns (r, expected release).
    """

    def neg(r):
        return -expected_log_release(laws, stat_at(r), 1.0, n, epsilon)

    rs = np.linspace(0.02, 0.98, 25) * epsilon
    vals = [neg(r) for r in rs]
    i = int(np.argmin(vals))
    lo, hi = rs[max(i - 1, 0)], rs[min(i + 1, len(rs) - 1)]
    if i == len(rs) - 1:
        hi = epsilon * (1 - 1e-6)
    with np.errstate(invalid="ignore"):  # +inf objective (no compensator) in Brent's step
        res = optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-5 * epsilon})
    r, v = (float(res.x), -float(res.fun)) if res.fun <= vals[i] else (float(rs[i]), -vals[i])
    return r, v


def plan_release(laws, stat, n, epsilon, stat_at=None):
    """(statistic, bet, clip range or None) with the largest expected release.

    The bet of ``stat`` is planned by ``choose_bet``; when ``stat_at`` (E* at a given
    clip range) is given, the unmerged release of E*_r at the best r < ε is planned
    too and kept if its expected release is larger. Public: laws and n only.
    """
    bet = choose_bet(laws, stat, n, epsilon)
    if stat_at is None:
        return stat, bet, None
    merged = expected_log_release(laws, stat, bet, n, epsilon)
    r, value = choose_clip(laws, n, epsilon, stat_at)
    # The planner is exact only to within ± (n h + g)/2 (the floors' loss is counted at
    # its mean), so gains below g are not resolved: the merged plan is kept unless the
    # clip gains more. For two-point laws the two families coincide (log(1 − λ + λE*)
    # is E* clipped at R_λ): only small differences of the piecewise-smooth objective
    # (jumps of the integer sensitivity and quantised rate) occur there.
    noise = release_noise(stat, bet, epsilon)
    if value <= merged + (0.0 if noise is None else noise.grid):
        return stat, bet, None
    return stat_at(r), 1.0, r


def release_sum(total, noise, rng):
    """The release g·(M + K) − c of a row sum S = ``total`` (:func:`row_integer_sum`),
    M = floor(S / 2^k), K exact discrete Laplace at the quantised rate."""
    merged = total >> noise.fine_bits
    observe("merged integer", merged, noise.grid)  # grey-box audit (else a no-op)
    return noise.value(merged + int(discrete_laplace(rng, noise.rate)))


def release(log_e_rows, stat, bet, epsilon, rng):
    """The private log e-value of one batch and its noise scale (public).

    Returns (g·(M + K) − c, g/r) with M = :func:`merged_integer` of the rows and K the
    exact discrete Laplace draw: ε-DP under replacing one row, and every output is the
    same public function of an integer for every dataset. A constant statistic
    (R_λ = 0) is released as Λ_n without noise (nothing about the data is released).
    """
    terms = _log_merge(log_e_rows, bet)
    noise = release_noise(stat, bet, epsilon)
    if noise is None:
        return float(np.sum(terms)), 0.0
    merged = merged_integer(terms, noise)
    observe("merged integer", merged, noise.grid)  # grey-box audit (else a no-op)
    return noise.value(merged + int(discrete_laplace(rng, noise.rate))), noise.scale
