"""Noise primitives. Every function draws from the ``numpy.random.Generator``
passed to it, so one seed reproduces a whole fit."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ._recorder import record_draw
from ._special import logsumexp

__all__ = [
    "bernoulli",
    "choice_index",
    "gaussian",
    "laplace",
    "poisson",
    "exponential",
    "RATE_BITS",
    "quantise_rate",
    "discrete_laplace",
    "discrete_laplace_log_pmf",
    "discrete_laplace_log_mgf",
    "two_sided_geometric",
    "tulap",
    "power_of_two_grid",
    "floor_to_grid",
    "log_geometric_mixture",
    "log_geometric_mixture_at",
]


def laplace(rng, scale, size=None):
    """Laplace(0, ``scale``) noise: density exp(-|z|/scale) / (2 scale)."""
    if not scale > 0:
        raise ValueError(f"Laplace scale must be > 0, got {scale}.")
    record_draw("laplace", scale, size)
    return rng.laplace(0.0, scale, size=size)


def exponential(rng, mean, size=None):
    """Exponential noise with the given mean."""
    if not mean > 0:
        raise ValueError(f"exponential mean must be > 0, got {mean}.")
    record_draw("exponential", mean, size)
    return rng.exponential(mean, size=size)


def poisson(rng, lam, size=None):
    """Poisson(``lam``) counts (the run counts of Poisson thinning)."""
    record_draw("poisson", lam, size)
    return rng.poisson(lam, size=size)


def bernoulli(rng, prob, size=None):
    """Bernoulli(``prob``) draws as a boolean array (``rng.random(size) < prob``)."""
    record_draw("bernoulli", prob, size)
    return rng.random(size) < prob


def gaussian(rng, sigma, size=None):
    """N(0, ``sigma``²) noise (Gaussian threshold queries, (ε, δ) mechanisms)."""
    record_draw("gaussian", sigma, size)
    return rng.normal(0.0, sigma, size=size)


def choice_index(rng, probs):
    """An index drawn with the given probabilities (exponential-mechanism selection).

    The output is a grid index, so no float leaves the mechanism; the probabilities
    are computed in floating point (relative error ~1e-16 on each ratio).
    """
    index = int(rng.choice(len(probs), p=probs))
    record_draw("choice", probs, None, index)
    return index


def two_sided_geometric(rng, rate, size=None):
    """Exact discrete Laplace noise: P(Z = z) = tanh(rate/2) exp(−rate |z|) on the integers.

    Same law and same draws as :func:`discrete_laplace` (kept under this name for its
    callers). ε-DP for an integer statistic of sensitivity Δ when ``rate <= ε / Δ``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    rate : float
        Decay rate, exactly ``k / 2**RATE_BITS`` (pass it through :func:`quantise_rate`).
    size : int or tuple of int, default=None
        Output shape; ``None`` returns a Python int.

    Returns
    -------
    int or ndarray of int64
        The draws.
    """
    return discrete_laplace(rng, rate, size=size)


def log_geometric_mixture(log_law, rate, pad):
    """Law of T + Z, Z two-sided geometric of ``rate``, T on {0, ..., m − 1} with
    log-probabilities ``log_law``: returns (y, log P(T + Z = y)) for
    y = −pad, ..., m − 1 + pad, in O(m + pad) by forward and backward accumulation,
    P(T + Z = y) = tanh(rate/2) (Σ_{t<=y} π_t e^{−rate (y−t)} + Σ_{t>y} π_t e^{−rate (t−y)}).
    """
    law = np.concatenate([np.full(pad, -np.inf), log_law, np.full(pad, -np.inf)])
    y = np.arange(law.size) - pad
    with np.errstate(invalid="ignore"):
        fwd = np.logaddexp.accumulate(law + rate * y) - rate * y
        back = np.logaddexp.accumulate((law - rate * y)[::-1])[::-1]  # Σ_{t>=y}
    back = np.concatenate([back[1:], [-np.inf]]) + rate * y  # Σ_{t>y}
    return y, np.logaddexp(fwd, back) + math.log(math.tanh(rate / 2))


def log_geometric_mixture_at(y, log_law, rate, block_terms=4_000_000):
    """log P(T + Z = y) at the given integers y (same law as ``log_geometric_mixture``),
    every term of the mixture kept, y processed in blocks of about ``block_terms``
    terms to bound memory."""
    t = np.arange(log_law.size)
    out = np.empty(y.shape)
    block = max(1, block_terms // log_law.size)
    for start in range(0, y.size, block):
        yb = y[start:start + block]
        terms = log_law[None, :] - rate * np.abs(yb[:, None] - t[None, :])
        out[start:start + block] = logsumexp(terms, axis=1)
    return out + math.log(math.tanh(rate / 2))


# --------------------------------------------------------------------------------------
# Exact integer noise.
#
# A float release x + Laplace draw is not ε-DP as computed (Mironov 2012: the floats
# reachable from x and from a neighbour x' differ), and numpy's Laplace and geometric
# samplers invert a float uniform, so their tails are truncated. The functions below
# release integers: statistics are floored onto a power-of-two grid and discrete
# Laplace noise is drawn exactly, from integer uniforms only (Canonne, Kamath and
# Steinke 2020, Algorithms 1-2), at a rate that is a dyadic rational k / 2**RATE_BITS.
# --------------------------------------------------------------------------------------

RATE_BITS = 20
"""Rates of the exact discrete Laplace sampler are multiples of 2**-RATE_BITS."""

_RATE_DENOMINATOR = 1 << RATE_BITS
# Largest accepted rate: k < 2**52, so k / 2**RATE_BITS is an exact float and the integer
# products formed by the sampler (denominator * counter, uniform + t * count) fit in int64.
_MAX_RATE = 2.0**32
_INT64_LIMIT = 2.0**63


def _real(value, name):
    """``value`` as a Python float, TypeError naming ``name`` for non-real input."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    return float(value)


def quantise_rate(rate):
    """Round a noise rate down onto the grid of the exact sampler.

    Parameters
    ----------
    rate : float
        The rate wanted (for example ε / Δ), finite, > 0 and at most 2**32.

    Returns
    -------
    float
        The largest ``k / 2**RATE_BITS <= rate`` with integer ``k >= 1``. Rounding down
        only adds noise, so the privacy guarantee of ``rate`` still holds. Callers must
        use the returned value everywhere the rate appears (sampler, densities,
        compensators, likelihood ratios), never the unrounded one: a density that
        assumes another rate than the one sampled is wrong.

    Raises
    ------
    ValueError
        If ``rate`` is not finite and > 0, exceeds 2**32, or is below 2**-RATE_BITS
        (``k`` would be 0).
    """
    rate = _real(rate, "rate")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be finite and > 0, got {rate}.")
    if rate > _MAX_RATE:
        raise ValueError(f"rate must be at most 2**32, got {rate}.")
    k = math.floor(rate * _RATE_DENOMINATOR)  # exact: scaling by a power of two
    if k < 1:
        raise ValueError(
            f"rate {rate} is below 2**-{RATE_BITS}, the smallest rate of the exact sampler."
        )
    return k / _RATE_DENOMINATOR


def _rate_fraction(rate):
    """(s, t) coprime with rate == s / t exactly, t a power of two <= 2**RATE_BITS."""
    rate = _real(rate, "rate")
    if not (math.isfinite(rate) and 0 < rate <= _MAX_RATE):
        raise ValueError(f"rate must be finite, > 0 and at most 2**32, got {rate}.")
    scaled = rate * _RATE_DENOMINATOR
    if scaled != math.floor(scaled):
        raise ValueError(
            f"rate must be a multiple of 2**-{RATE_BITS} (pass it through quantise_rate "
            f"and use the returned value), got {rate!r}."
        )
    s, t = int(scaled), _RATE_DENOMINATOR
    g = math.gcd(s, t)
    return s // g, t // g


def _bernoulli_exp_fraction(rng, num, den):
    """Exact Bernoulli(exp(−num/den)) draws, integer ``0 <= num <= den`` (an array), ``den``
    an int.

    Alternating-series construction: with γ = num/den ∈ [0, 1], draw A_K ~ Bernoulli(γ/K)
    for K = 1, 2, ... until the first failure and return whether that K is odd;
    P(K >= j) = γ^(j−1)/(j−1)!, so P(K odd) = Σ_m (−γ)^m/m! = exp(−γ). Each Bernoulli(γ/K)
    is ``U < num`` for U uniform on {0, ..., den K − 1}: integers only.
    """
    k = np.ones(num.shape, dtype=np.int64)
    active = np.flatnonzero(num > 0)  # γ = 0 stops at K = 1: success, no draw needed
    trial = 1
    while active.size:
        # Every element still active is at the same K = trial: one scalar bound den·K.
        # numpy draws the same uniforms as with the per-element bounds den·k[active]
        # (tests/test_noise.py checks it), without the per-call checks of an array bound.
        go = rng.integers(0, den * trial, size=active.size) < num[active]
        active = active[go]
        trial += 1
        k[active] = trial
    return (k & 1) == 1


_TRIALS = 4


def _count_exp_minus_one(rng, n):
    """Number of successes before the first failure of Bernoulli(exp(−1)) trials, n times:
    P(V >= j) = exp(−j)."""
    # Trials are drawn _TRIALS at a time per element (one vectorised call instead of one per
    # trial); V counts the leading successes, and elements with no failure yet go on.
    # Large batches use one trial per element and round (fewer wasted trials).
    trials = _TRIALS if n < 1000 else 1
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ok = _bernoulli_exp_fraction(
            rng, np.ones(active.size * trials, dtype=np.int64), 1
        ).reshape(active.size, trials)
        leading = np.cumprod(ok, axis=1).sum(axis=1)
        v[active] += leading
        active = active[leading == trials]
    return v


def _bernoulli_exp_scalar(rng, num, den):
    """One exact Bernoulli(exp(−num/den)) draw, integers ``0 <= num <= den`` (the
    alternating-series construction of :func:`_bernoulli_exp_fraction`, one element)."""
    k = 1
    while num > 0 and rng.integers(0, den * k) < num:
        k += 1
    return k % 2 == 1


def _discrete_laplace_scalar(rng, s, t):
    """One exact draw with P(Z = z) ∝ exp(−(s/t)|z|): the construction of
    :func:`_discrete_laplace_round` for a single candidate at a time. Small requests
    (one batch's noise) take this path: ~10x fewer generator calls than a vector round."""
    while True:
        u = int(rng.integers(0, t)) if t > 1 else 0
        if not _bernoulli_exp_scalar(rng, u, t):
            continue
        v = 0
        while _bernoulli_exp_scalar(rng, 1, 1):
            v += 1
        y = (u + t * v) // s
        negative = rng.integers(0, 2) == 1
        if negative and y == 0:  # "−0": rejected so that 0 is not counted twice
            continue
        return -y if negative else y


_SCALAR_MAX = 16  # requests up to this size are drawn one by one


def _discrete_laplace_round(rng, s, t, m):
    """One rejection round of m candidates; returns the accepted draws (law exactly
    P(Z = z) ∝ exp(−(s/t)|z|)).

    X = U + t V with U uniform on {0, ..., t − 1} kept with probability exp(−U/t) and V
    counted by :func:`_count_exp_minus_one` has P(X = x) ∝ exp(−x/t) on x >= 0; then
    Y = floor(X/s) has P(Y = y) ∝ Σ_{x=ys}^{ys+s−1} exp(−x/t) ∝ exp(−(s/t) y). A fair sign is
    attached and "−0" is rejected, so 0 is not counted twice.
    """
    u = rng.integers(0, t, size=m, dtype=np.int64)
    u = u[_bernoulli_exp_fraction(rng, u, t)]
    x = u + t * _count_exp_minus_one(rng, u.size)
    y = x // s
    negative = rng.integers(0, 2, size=y.size, dtype=np.int64) == 1
    keep = ~(negative & (y == 0))
    return np.where(negative, -y, y)[keep]


def discrete_laplace(rng, rate, size=None):
    """Exact draws of the discrete Laplace law on the integers.

    P(K = k) = tanh(rate/2) exp(−rate |k|), k ∈ Z, drawn by the construction of Canonne,
    Kamath and Steinke (2020, Algorithms 1–2) from ``rng.integers`` uniforms only (no
    floating-point log or exp decides anything), so the law is exact, tails included.
    Vectorised: rounds of candidates are drawn and rejected with masks until ``size``
    draws are accepted (acceptance >= (1 − 1/e)/2 per candidate).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    rate : float
        Decay rate, exactly ``k / 2**RATE_BITS`` with integer k >= 1 and rate <= 2**32
        (pass it through :func:`quantise_rate`).
    size : int or tuple of int, default=None
        Output shape; ``None`` returns a single Python int.

    Returns
    -------
    int or ndarray of int64
        The draws.

    Raises
    ------
    ValueError
        If ``rate`` is not on the grid of :func:`quantise_rate` or out of range.

    Notes
    -----
    ε-DP for an integer statistic of integer sensitivity Δ when ``rate <= ε / Δ``:
    P(k)/P(k + d) <= exp(rate |d|) for every integer shift d.

    References
    ----------
    .. [1] C. L. Canonne, G. Kamath and T. Steinke, "The Discrete Gaussian for
       Differential Privacy", NeurIPS 2020.
    """
    s, t = _rate_fraction(rate)
    record_draw("discrete_laplace", rate, size)
    shape = () if size is None else size
    n = int(np.prod(shape, dtype=np.int64))
    if n <= _SCALAR_MAX:
        draws = [_discrete_laplace_scalar(rng, s, t) for _ in range(n)]
        return draws[0] if size is None else np.array(draws, dtype=np.int64).reshape(shape)
    out = np.empty(n, dtype=np.int64)
    # P(accept) = P(keep U) (1 − P(Y = 0)/2) >= (1 − 1/e)/2; aim a little above it.
    accept = (1.0 - math.exp(-1.0)) * (0.5 + 0.5 * math.exp(-s / t)) if t > 1 else (
        0.5 + 0.5 * math.exp(-s / t)
    )
    filled = 0
    while filled < n:
        need = n - filled
        draws = _discrete_laplace_round(rng, s, t, int(need / accept * 1.05) + 16)
        take = min(need, draws.size)
        out[filled:filled + take] = draws[:take]
        filled += take
    if size is None:
        return int(out[0])
    return out.reshape(shape)


_UNIFORM_BITS = 53


def tulap(rng, epsilon, size=None, *, shift=0):
    """Exact draws of Tulap(shift, b = e^−ε, q = 0): ``shift`` + G₁ − G₂ + U.

    G₁ − G₂ (G₁, G₂ iid geometric, P(G = k) = (1 − b) b^k) is the discrete Laplace law
    of rate ε, drawn exactly by :func:`discrete_laplace`; U is uniform on the odd
    multiples of 2**−54 in (−1/2, 1/2) (2**53 equally likely points, symmetric about 0),
    drawn from one integer uniform, so U is exact and independent of everything else.
    The integer part ``J = shift + G₁ − G₂`` is formed in integer arithmetic and U is
    added once: the float returned is a deterministic function of (J, U). With ``shift``
    an integer statistic of sensitivity 1, J is ε-DP and U is data-independent, so the
    release is ε-DP as computed (no floating-point leak, Mironov 2012). Its law is the
    continuous Tulap law of Awan and Slavković (2018) up to the grid of U and the
    rounding of J + U to a float: at any point the two CDFs differ by less than
    2**−53 + ulp(|J| + 1) (about 1e-10 for |J| up to 10⁶).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    epsilon : float
        The rate ε of G₁ − G₂, exactly ``k / 2**RATE_BITS`` (pass it through
        :func:`quantise_rate` and use the returned value in every density and CDF).
    size : int or tuple of int, default=None
        Output shape; ``None`` returns a Python float.
    shift : int or array-like of int, default=0
        Integer location (the statistic), added to G₁ − G₂ before U.

    Returns
    -------
    float or ndarray of float64
        The draws.

    References
    ----------
    .. [1] J. Awan and A. Slavković, "Differentially private uniformly most powerful
       tests for binomial data", NeurIPS 2018.
    """
    shift_arr = np.asarray(shift)
    if shift_arr.dtype.kind not in "iu":
        raise TypeError("shift must hold integers (the statistic is an integer).")
    g = discrete_laplace(rng, epsilon, size=size)
    k = rng.integers(0, 1 << _UNIFORM_BITS, size=size, dtype=np.int64)
    # 2k + 1 − 2**53 is odd with |.| < 2**53: exact in float64, and so is its scaling.
    u = np.ldexp((2 * k + 1 - (1 << _UNIFORM_BITS)).astype(np.float64), -_UNIFORM_BITS - 1)
    j = np.asarray(g, dtype=np.int64) + shift_arr.astype(np.int64)
    out = j.astype(np.float64) + u
    if size is None and out.ndim == 0:
        return float(out)
    return out


def discrete_laplace_log_pmf(k, rate):
    """log P(K = k) = log tanh(rate/2) − rate |k| of the discrete Laplace law.

    Parameters
    ----------
    k : int or array-like of int
        Integer points.
    rate : float
        Decay rate, finite and > 0.

    Returns
    -------
    float or ndarray
        The log-probabilities.
    """
    rate = _real(rate, "rate")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be finite and > 0, got {rate}.")
    arr = np.asarray(k)
    if arr.dtype.kind not in "iu" and not (
        arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))
    ):
        raise ValueError("k must hold integers.")
    # log tanh(r/2) = log(1 − e^−r) − log(1 + e^−r), stable for tiny and large r.
    log_norm = math.log(-math.expm1(-rate)) - math.log1p(math.exp(-rate))
    out = log_norm - rate * np.abs(arr.astype(np.float64))
    return float(out) if out.ndim == 0 else out


def _log_sinh(x):
    """log sinh(x) for x > 0 without overflow: x − log 2 + log(1 − e^{−2x})."""
    return x - math.log(2.0) + math.log(-math.expm1(-2.0 * x))


def discrete_laplace_log_mgf(rate, grid):
    """log E[exp(g K)] for K discrete Laplace of ``rate`` and ``g = grid``.

    Equals log((1 − p)^2 / ((1 − p e^g)(1 − p e^{−g}))) with p = e^{−rate}. The
    denominator is (1 − p)^2 − 4 p sinh^2(g/2) and p/(1 − p)^2 = 1/(4 sinh^2(rate/2)), so
    the value is −log(1 − q^2) with q = sinh(g/2)/sinh(rate/2), computed from log sinh
    (no overflow) and log1p/expm1 (no cancellation).

    Parameters
    ----------
    rate : float
        Decay rate, finite and > ``grid``.
    grid : float
        The grid step g, finite and > 0.

    Returns
    -------
    float
        The log moment generating function at g (finite only for rate > g).
    """
    rate, grid = _real(rate, "rate"), _real(grid, "grid")
    if not (math.isfinite(grid) and grid > 0):
        raise ValueError(f"grid must be finite and > 0, got {grid}.")
    if not (math.isfinite(rate) and rate > grid):
        raise ValueError(
            f"E[exp(g K)] is infinite unless rate > grid; got rate={rate}, grid={grid}."
        )
    log_q2 = 2.0 * (_log_sinh(grid / 2.0) - _log_sinh(rate / 2.0))
    if log_q2 < -math.log(2.0):
        return -math.log1p(-math.exp(log_q2))
    return -math.log(-math.expm1(log_q2))


def power_of_two_grid(sensitivity, resolution=2.0**-10):
    """The largest power of two g <= ``sensitivity * resolution``.

    Statistics are floored onto multiples of g before integer noise is added; a power of
    two makes ``T / g`` exact in floating point, so the floor is the floor of the real
    quotient.

    Parameters
    ----------
    sensitivity : float
        Sensitivity Δ of the statistic, finite and > 0.
    resolution : float, default=2**-10
        Grid step relative to Δ, finite and > 0. The integer sensitivity ceil(Δ/g) is
        then about 1/resolution.

    Returns
    -------
    float
        The grid step g.
    """
    sensitivity = _real(sensitivity, "sensitivity")
    resolution = _real(resolution, "resolution")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity}.")
    if not (math.isfinite(resolution) and resolution > 0):
        raise ValueError(f"resolution must be finite and > 0, got {resolution}.")
    x = sensitivity * resolution
    if not (math.isfinite(x) and x > 0):
        raise ValueError(
            f"sensitivity * resolution = {x} is not a positive finite float "
            f"(sensitivity={sensitivity}, resolution={resolution})."
        )
    _, exponent = math.frexp(x)  # x = m 2^e with 0.5 <= m < 1
    return math.ldexp(1.0, exponent - 1)


def floor_to_grid(values, grid):
    """floor(values / grid) as int64.

    Floor, not round, for two reasons. (1) g floor(S/g) <= S, so releases built on it keep
    E_P[exp(g floor(S/g))] <= E_P[exp(S)] (an e-value stays an e-value). (2) If two reals
    differ by at most Δ their floors on the grid differ by at most ceil(Δ/g): the
    integer sensitivity.

    Parameters
    ----------
    values : float or array-like of float
        Finite values.
    grid : float
        A power of two (see :func:`power_of_two_grid`), so the division is exact.

    Returns
    -------
    ndarray of int64
        Same shape as ``values``.

    Raises
    ------
    ValueError
        If ``values`` holds a non-finite value or a quotient outside the int64 range, or
        ``grid`` is not a positive finite power of two.
    """
    grid = _real(grid, "grid")
    if not (math.isfinite(grid) and grid > 0 and math.frexp(grid)[0] == 0.5):
        raise ValueError(f"grid must be a positive finite power of two, got {grid}.")
    values = np.asarray(values, dtype=np.float64)
    if values.size <= _FLOOR_SCALAR_MAX:
        # a few values (the planner's two ends, a scalar statistic): the same IEEE
        # divisions and floors in Python floats, without numpy's per-call overhead
        return _floor_few(values, grid)
    if not np.isfinite(values).all():
        raise ValueError("values must be finite to be floored onto the grid.")
    with np.errstate(over="ignore", under="ignore"):
        q = np.floor(values / grid)
    if grid > 1.0:
        # The quotient is exact except on underflow, where it rounds to ±0: the floor
        # of a tiny negative quotient is −1, not 0 (no underflow to 0 for grid <= 1).
        q = np.where((q == 0) & (values < 0), -1.0, q)
    if (q >= _INT64_LIMIT).any() or (q < -_INT64_LIMIT).any():
        raise ValueError(f"values / grid overflows int64 (grid={grid}).")
    return q.astype(np.int64)


#: Inputs of at most this many values are floored by :func:`_floor_few`.
_FLOOR_SCALAR_MAX = 8


def _floor_few(values, grid):
    """:func:`floor_to_grid` of a small array, elementwise in Python floats (the same
    correctly rounded quotient, the same floor; every check runs on every value)."""
    vals = values.ravel().tolist()
    if not all([math.isfinite(v) for v in vals]):
        raise ValueError("values must be finite to be floored onto the grid.")
    quotients = [v / grid for v in vals]  # ±inf on overflow, as numpy's
    if not all([-_INT64_LIMIT <= q < _INT64_LIMIT for q in quotients]):
        raise ValueError(f"values / grid overflows int64 (grid={grid}).")
    # a tiny negative quotient underflows to ±0, whose floor is −1; the same operations
    # for every value (no branch on a private value: bitwise & of both comparisons)
    floors = [math.floor(q) - ((q == 0) & (v < 0))
              for q, v in zip(quotients, vals, strict=True)]
    return np.array(floors, dtype=np.int64).reshape(values.shape)
