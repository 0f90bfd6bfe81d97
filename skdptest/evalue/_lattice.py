"""Exact likelihood-ratio post-processing for any law with an exact model.

The per-row statistic is the optimal log statistic log E*(x), quantised to a
lattice of ``steps`` cells over its actual range: g(x) ∈ {0, ..., steps}. The
batch releases Y = T + Z with T = Σ g(x_t) and Z two-sided geometric noise,
P(Z = z) ∝ exp(−(ε / steps) |z|): T moves by at most ``steps`` when one row is
replaced, so the release is ε-DP. The law of g(X) under P and Q is exact (sums
for discrete laws, cdfs of the log-likelihood ratio otherwise), the law of T is
its n-fold convolution (direct convolutions of non-negative arrays: accurate in
relative terms even far in the tails, unlike an FFT), and

    E(Y) = f_Q(Y) / f_P(Y)

is an e-value against P (E_P[E] = Σ_y f_Q(y) = 1), the most powerful
post-processing of this release; its reciprocal is an e-value against Q.
Any lattice, any clipping keeps validity exact; they only affect power.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ._cache import _cached
from ._laws import _DiscreteLaws
from ._optimal import optimal_statistic

__all__ = ["LatticeExact"]

# Size of the lattice of T (n * steps + 1) kept below this: the last direct
# convolution then costs about (this / 2)^2 multiply-adds.
_MAX_LATTICE = 40_000
# Floating-point guard of the null density: relative error of the direct
# convolutions (sums of non-negative terms) and mass lost below the float range.
_REL_GUARD = 1e-9
_TINY = 1e-300


class LatticeExact:
    """Quantised optimal statistic + geometric noise, exact likelihood ratio.

    Parameters
    ----------
    laws : exact laws model
    epsilon : float
        Privacy parameter of each release.
    steps : int, default=16
        Lattice cells over the range of log E* (reduced so that the lattice of T
        stays below 40 000 points for large batches).
    """

    name = "exact"

    def __init__(self, laws, epsilon, steps=16):
        self.laws, self.epsilon, self.max_steps = laws, float(epsilon), int(steps)
        self.stat = optimal_statistic(laws, epsilon)[0]

    def steps(self, n):
        return max(1, min(self.max_steps, (_MAX_LATTICE - 1) // max(n, 1)))

    def _grid(self, n):
        steps = self.steps(n)
        lo, hi = self.stat.log_lo, self.stat.log_hi
        return steps, lo, (hi - lo) / steps

    def cells(self, L, n):
        """g(x) for rows with log-likelihood ratios L (integers in [0, steps])."""
        steps, lo, h = self._grid(n)
        if h == 0:
            return np.zeros(np.shape(L), dtype=np.int64)
        v = self.stat.log_e(L)
        return np.clip(np.floor((v - lo) / h + 0.5), 0, steps).astype(np.int64)

    def cell_masses(self, n):
        """(P(g = j), Q(g = j)) for j = 0..steps, exact."""
        steps, lo, h = self._grid(n)
        laws = self.laws
        if isinstance(laws, _DiscreteLaws):
            g = self.cells(laws.L, n)
            p, q = np.zeros(steps + 1), np.zeros(steps + 1)
            np.add.at(p, g, laws.wP)
            np.add.at(q, g, laws.wQ)
            return p / p.sum(), q / q.sum()
        # g(x) <= j  iff  log E*(x) < lo + (j + 1/2) h  iff  L < edge_j (log E* = clip(L) - shift)
        shift = float(-self.stat.log_e(np.array([0.0]))[0])  # clip(0) = 0 inside the clip
        edges = lo + (np.arange(steps) + 0.5) * h + shift
        cdf_p = np.array([laws.tails(e, e)[0] for e in edges])
        cdf_q = np.array([laws.tails(-math.inf, e)[1] for e in edges])
        p = np.diff(np.concatenate([[0.0], cdf_p, [1.0]]))
        q = np.diff(np.concatenate([[0.0], cdf_q, [1.0]]))
        return np.clip(p, 0, None), np.clip(q, 0, None)

    def _log_law_of_sum(self, masses, n):
        """log P(T = t), t = 0..n*steps, by repeated squaring with renormalisation."""
        out, out_log = np.array([1.0]), 0.0
        base, base_log = masses / masses.max(), math.log(masses.max())
        while n:
            if n & 1:
                out = np.convolve(out, base)
                out_log += base_log + math.log(out.max())
                out /= out.max()
            n >>= 1
            if n:
                base = np.convolve(base, base)
                base_log = 2 * base_log + math.log(base.max())
                base /= base.max()
        with np.errstate(divide="ignore"):
            return np.log(out) + out_log

    def log_laws(self, n):
        """Cached (log f_T under P, log f_T under Q) for batches of n rows."""
        def compute():
            p, q = self.cell_masses(n)
            return self._log_law_of_sum(p, n), self._log_law_of_sum(q, n)

        return _cached(("lattice", id(self), n), (self,), compute)

    def count(self, X, n=None):
        """The batch statistic T = Σ g(x_t)."""
        n = X.shape[0] if n is None else n
        return int(self.cells(self.laws.log_ratio(X), n).sum())

    def noise_rate(self, n):
        """ε / sensitivity: the geometric noise has P(Z = z) ∝ exp(−rate |z|)."""
        return self.epsilon / self.steps(n)

    def release(self, count, epsilon, rng, n):
        """Y = T + Z, Z two-sided geometric: ε-DP (T moves by at most ``steps``)."""
        if self._grid(n)[2] == 0:
            return float(count)  # constant statistic: nothing about the data
        p = -math.expm1(-self.noise_rate(n))
        return float(count + int(rng.geometric(p)) - int(rng.geometric(p)))

    def noise_scale(self, n, epsilon=None):
        """Scale 1/rate of the geometric noise, in lattice units."""
        return 1.0 / self.noise_rate(n)

    def batch_log_e(self, X, epsilon, rng):
        """Release one batch and return its log e-value against P."""
        n = X.shape[0]
        y = self.release(self.count(X, n), epsilon, rng, n)
        return float(self.log_lr(y, n)[0])

    def log_density(self, y, log_law, n):
        rate = self.noise_rate(n)
        t = np.arange(log_law.size)
        y = np.atleast_1d(np.asarray(y, dtype=float))
        terms = log_law[None, :] - rate * np.abs(y[:, None] - t[None, :])
        return special.logsumexp(terms, axis=1) + math.log(math.tanh(rate / 2))

    def log_lr(self, y, n, epsilon=None):
        """log f_Q(y) − log f_P(y), with a conservative guard on the null density."""
        if self._grid(n)[2] == 0:
            return np.zeros(np.shape(np.atleast_1d(y)))
        log_p, log_q = self.log_laws(n)
        lp = self.log_density(y, log_p, n)
        lq = self.log_density(y, log_q, n)
        guard = math.log(log_p.size * _TINY) + float(np.max(log_p))
        return (lq + math.log1p(-_REL_GUARD)) - np.logaddexp(lp + math.log1p(_REL_GUARD), guard)
