"""Noise primitives. Every function draws from the ``numpy.random.Generator``
passed to it, so one seed reproduces a whole fit."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = [
    "laplace",
    "laplace_log_mgf",
    "exponential",
    "poisson",
    "randomized_response",
    "two_sided_geometric",
    "log_geometric_mixture",
    "log_geometric_mixture_at",
]


def laplace(rng, scale, size=None):
    """Laplace(0, ``scale``) noise: density exp(-|z|/scale) / (2 scale)."""
    if not scale > 0:
        raise ValueError(f"Laplace scale must be > 0, got {scale}.")
    return rng.laplace(0.0, scale, size=size)


def laplace_log_mgf(scale):
    """log E[exp(Z)] for Z ~ Laplace(0, scale): -log(1 - scale^2), finite for scale < 1."""
    if not 0 <= scale < 1:
        raise ValueError(f"log E[exp(Z)] is infinite for a Laplace scale >= 1, got {scale}.")
    return -math.log1p(-scale * scale)


def exponential(rng, mean, size=None):
    """Exponential noise with the given mean."""
    if not mean > 0:
        raise ValueError(f"exponential mean must be > 0, got {mean}.")
    return rng.exponential(mean, size=size)


def two_sided_geometric(rng, rate, size=None):
    """Discrete Laplace noise: P(Z = z) = tanh(rate/2) exp(−rate |z|) on the integers.

    Drawn as the difference of two geometric variables. ε-DP for an integer
    statistic of sensitivity Δ when ``rate = ε / Δ``.
    """
    if not rate > 0:
        raise ValueError(f"two-sided geometric rate must be > 0, got {rate}.")
    p = -math.expm1(-rate)
    return rng.geometric(p, size=size) - rng.geometric(p, size=size)


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
        out[start:start + block] = special.logsumexp(terms, axis=1)
    return out + math.log(math.tanh(rate / 2))


def poisson(rng, lam, size=None):
    """Poisson counts with rate ``lam`` (Poisson thinning draws)."""
    return rng.poisson(lam, size=size)


def randomized_response(rng, bits, epsilon):
    """Keep each ±1 entry of ``bits`` with probability e^ε / (1 + e^ε), else flip it.

    ε-DP for one bit under changing that bit.
    """
    bits = np.asarray(bits)
    keep = rng.random(bits.shape) < 1.0 / (1.0 + math.exp(-epsilon))
    return np.where(keep, bits, -bits)
