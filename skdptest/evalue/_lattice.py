"""Exact likelihood-ratio post-processing for any law with an exact model.

The per-row statistic is the optimal log statistic log E*(x), quantised to a
lattice of ``steps`` cells over its actual range: g(x) ∈ {0, ..., steps}. The
batch releases Y = T + Z with T = Σ g(x_t) and Z two-sided geometric noise,
P(Z = z) ∝ exp(−r |z|), r = quantise_rate(ε / steps) <= ε / steps drawn by an exact
integer sampler: T moves by at most ``steps`` when one row is replaced, so the
release is ε-DP (and an integer: no floating-point leak). Every density below uses
the same r. The law of g(X) under P and Q is exact (sums
for discrete laws, cdfs of the log-likelihood ratio otherwise), the law of T is
its n-fold convolution under exponential tilting (direct convolutions of
non-negative arrays for small lattices; for large ones one FFT per tilt, used only
where its certified relative accuracy holds, with an upper bound elsewhere), and

    E(Y) = f_Q(Y) / f_P(Y)

is an e-value against P (E_P[E] = Σ_y f_Q(y) = 1), the most powerful
post-processing of this release; its reciprocal is an e-value against Q.
Any lattice, any clipping keeps validity exact; they only affect power.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sp_fft
from scipy import optimize

from .._memo import remember
from .._noise import (
    log_geometric_mixture,
    log_geometric_mixture_at,
    quantise_rate,
    two_sided_geometric,
)
from .._recorder import observe
from .._special import logsumexp
from ._cache import _cached
from ._laws import _DiscreteLaws
from ._optimal import optimal_statistic

__all__ = ["LatticeExact"]

# Size of the lattice of T (n * steps + 1) kept below this (the steps shrink for
# larger batches): one FFT of this length per tilt.
_MAX_LATTICE = 2**22
# Lattices up to this size use direct convolutions (sums of non-negative terms:
# full relative precision far into the tails); larger ones use FFTs.
_DIRECT_MAX = 4_001
# Floating-point guard of the null density: relative error of the direct
# convolutions (sums of non-negative terms) and mass lost below the float range.
_REL_GUARD = 1e-9
_TINY = 1e-300
_NORMAL = 1e-250  # values of a tilted law trusted to full relative precision
# FFT path: the n-fold power of the tilted cell law is irfft(rfft(w)^n). Its
# absolute error, relative to the peak, is taken as n * _FFT_ERR_PER_ROW (about
# 40x the largest error measured against direct convolutions, n = 500 to 2000;
# see the tests); a value is trusted where it is at least _FFT_REL times that,
# so its relative error is at most 1 / _FFT_REL, added to the guard.
_FFT_ERR_PER_ROW = 8 * np.finfo(float).eps
_FFT_REL = 1e8
# FFT path: trusted windows cover the bulks of both laws, the range between them
# and this many standard deviations beyond (probability below e^-72 under both
# laws); elsewhere the values are upper bounds (conservative, costing power only
# on releases that rare).
_COVER_SD = 12.0


class LatticeExact:
    """Quantised optimal statistic + geometric noise, exact likelihood ratio.

    Parameters
    ----------
    laws : exact laws model
    epsilon : float
        Privacy parameter of each release.
    steps : int, default=32
        Lattice cells over the range of log E* (reduced so that the lattice of T
        stays below 2^22 points for very large batches).
    """

    name = "exact"

    def __init__(self, laws, epsilon, steps=32):
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

    @staticmethod
    def _power(w, n):
        """n-fold convolution of a pmf ``w`` (max 1 after each product) and its log scale."""
        out, out_log = np.array([1.0]), 0.0
        base, base_log = w / w.max(), math.log(w.max())
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
        return out, out_log

    def _tilted(self, logm, j, target):
        """Tilt θ with cell mean ``target``, the tilted cell law and its log mgf."""
        theta = self._tilt(logm, j, target)
        logw = logm + theta * j
        log_mgf = logsumexp(logw)
        return theta, np.exp(logw - log_mgf), log_mgf

    def _log_law_of_sum_fft(self, masses, n, cover=None):
        """FFT version of :meth:`_log_law_of_sum` for large lattices.

        Tilts are placed adaptively so that the trusted windows (values at least
        ``_FFT_REL`` times the absolute error) of neighbours overlap across
        ``cover`` (a range of cell means per row; default the whole support).
        Values outside every trusted window get an upper bound from the nearest
        tilt. Returns (log law, log bound of untrusted values, relative error of
        the trusted ones).
        """
        j = np.arange(masses.size)
        with np.errstate(divide="ignore"):
            logm = np.log(masses)
        support = j[masses > 0]
        size_t = n * (masses.size - 1) + 1
        if support[0] == support[-1]:  # a point mass: T = n * support exactly
            best = np.full(size_t, -np.inf)
            best[n * support[0]] = 0.0
            return best, np.full(size_t, -np.inf), 0.0
        size = sp_fft.next_fast_len(size_t, real=True)
        err = n * _FFT_ERR_PER_ROW
        trust = min(err * _FFT_REL, 0.5)
        width = math.sqrt(2 * math.log(1 / trust))  # trusted half-width in s.d.
        best = np.full(size_t, -np.inf)
        dist = np.full(size_t, np.inf)
        margin = 0.5 / n
        lo, hi = support[0] + margin, support[-1] - margin
        if cover is not None:
            lo, hi = max(lo, min(cover[1], cover[0])), min(hi, max(cover[0], cover[1]))
        target, tilts = lo, []
        while True:
            theta, w, log_mgf = self._tilted(logm, j, target)
            law = sp_fft.irfft(sp_fft.rfft(w, size) ** n, size)[:size_t]
            log_peak = math.log(law.max())
            ok = np.flatnonzero(law >= trust * math.exp(log_peak))
            d = np.abs(ok - n * target)
            take = d < dist[ok]
            idx = ok[take]
            dist[idx] = d[take]
            best[idx] = np.log(law[idx]) + n * log_mgf - theta * idx
            tilts.append((theta, log_peak + n * log_mgf))
            if target >= hi:
                break
            sd = math.sqrt(max(float(np.dot(w, (j - np.dot(w, j)) ** 2)), 1e-300) / n)
            target = min(hi, target + max(1.2 * width * sd, margin))
        # untrusted by every tilt: below trust + err (relative to its peak) in each,
        # so each tilt gives a valid bound; the smallest is kept
        bound = np.full(size_t, -np.inf)
        out = np.flatnonzero(~np.isfinite(dist))
        low = np.full(out.size, np.inf)
        for theta, base in tilts:  # one pass per tilt: memory stays O(size)
            np.minimum(low, base - theta * out, out=low)
        bound[out] = math.log(trust + err) + low
        return best, bound, err / trust

    def _log_law_of_sum(self, masses, n, n_tilts=24):
        """log P(T = t), t = 0..n*steps, accurate far into the tails.

        Exponential tilting: P(T = t) = M(θ)^n e^{−θt} P_θ(T = t), where P_θ is the
        law of the sum under the tilted cell law p_θ(j) ∝ p(j) e^{θj}. Each t takes
        its value from the tilt whose mean is nearest, where the direct convolution
        of P_θ is accurate. Returns (log law, log bound of any value lost to
        underflow, or -inf).
        """
        j = np.arange(masses.size)
        with np.errstate(divide="ignore"):
            logm = np.log(masses)
        support = j[masses > 0]
        t = np.arange(n * (masses.size - 1) + 1)
        best = np.full(t.size, -np.inf)
        bound = np.full(t.size, np.inf)
        if support[0] == support[-1]:
            best[n * support[0]] = 0.0
            return best, np.full(t.size, -np.inf)
        dist = np.full(t.size, np.inf)
        margin = 0.5 / n
        for target in np.linspace(support[0] + margin, support[-1] - margin, n_tilts):
            theta = self._tilt(logm, j, target)
            logw = logm + theta * j
            log_mgf = logsumexp(logw)
            law, law_log = self._power(np.exp(logw - log_mgf), n)
            offset = law_log + n * log_mgf - theta * t
            # a tilt is trusted where its value is a normal float (full relative
            # precision); among trusted tilts the nearest one is kept
            d = np.where(law >= _NORMAL, np.abs(t - n * target), np.inf)
            take = d < dist
            dist[take] = d[take]
            best[take] = np.log(law[take]) + offset[take]
            # where this tilt is not trusted, the value is below _NORMAL relative to its
            # scale: a valid bound; the smallest over tilts is kept
            low = law < _NORMAL
            bound[low] = np.minimum(bound[low], math.log(_NORMAL) + offset[low])
        bound[np.isfinite(dist)] = -np.inf
        return best, bound

    @staticmethod
    def _tilt(logm, j, target):
        """θ with mean of p_θ equal to ``target`` (monotone in θ)."""
        def gap(theta):
            logw = logm + theta * j
            return float(np.dot(np.exp(logw - logsumexp(logw)), j)) - target

        gap = remember(gap)  # brentq starts by evaluating the bracket's ends again
        lo, hi = -1.0, 1.0
        while gap(lo) > 0 and lo > -1e4:
            lo *= 2
        while gap(hi) < 0 and hi < 1e4:
            hi *= 2
        return optimize.brentq(gap, lo, hi, xtol=1e-12)

    def log_laws(self, n):
        """Cached (log law of T under P, under Q, log bounds of P's and of Q's
        untrusted values, relative error of the trusted values: 0 for direct
        convolutions)."""
        def compute():
            p, q = self.cell_masses(n)
            if n * (p.size - 1) + 1 <= _DIRECT_MAX:
                log_p, bound_p = self._log_law_of_sum(p, n)
                log_q, bound_q = self._log_law_of_sum(q, n)
                return log_p, log_q, bound_p, bound_q, 0.0
            # trusted windows over the bulk of both laws and between them
            j = np.arange(p.size)
            means = [float(np.dot(p, j)), float(np.dot(q, j))]
            sds = [math.sqrt(float(np.dot(w, (j - m) ** 2)) / n)
                   for w, m in zip((p, q), means, strict=True)]
            cover = (min(means) - _COVER_SD * max(sds), max(means) + _COVER_SD * max(sds))
            log_p, bound_p, rel_p = self._log_law_of_sum_fft(p, n, cover)
            log_q, bound_q, rel_q = self._log_law_of_sum_fft(q, n, cover)
            return log_p, log_q, bound_p, bound_q, max(rel_p, rel_q)

        return _cached(("lattice", id(self), n), (self,), compute)

    def count(self, X, n=None):
        """The batch statistic T = Σ g(x_t)."""
        n = X.shape[0] if n is None else n
        return int(self.cells(self.laws.log_ratio(X), n).sum())

    def noise_rate(self, n):
        """quantise_rate(ε / sensitivity) <= ε / steps: the geometric noise has
        P(Z = z) ∝ exp(−rate |z|); the sampler and every density use this rate."""
        return float(quantise_rate(self.epsilon / self.steps(n)))

    def release(self, count, epsilon, rng, n):
        """Y = T + Z, Z two-sided geometric: ε-DP (T moves by at most ``steps``)."""
        if self._grid(n)[2] == 0:
            return float(count)  # constant statistic: nothing about the data
        observe("noisy count", count)  # for the grey-box audit (a no-op otherwise)
        return float(count + int(two_sided_geometric(rng, self.noise_rate(n))))

    def noise_scale(self, n, epsilon=None):
        """Scale 1/rate of the geometric noise, in lattice units (0: constant statistic,
        released without noise)."""
        return 0.0 if self._grid(n)[2] == 0 else 1.0 / self.noise_rate(n)

    def batch_log_e(self, X, epsilon, rng):
        """Release one batch and return its log e-value against P."""
        return self.batch_log_e_both(X, epsilon, rng)[0]

    def batch_log_e_both(self, X, epsilon, rng):
        """Release one batch; its log e-values against P and against Q."""
        n = X.shape[0]
        y = self.release(self.count(X, n), epsilon, rng, n)
        return float(self.log_lr(y, n)[0]), float(self.log_lr(y, n, against="Q")[0])

    def log_density(self, y, log_law, n):
        """log f(y) of the release, vectorised over y (in blocks, bounded memory)."""
        y = np.atleast_1d(np.asarray(y, dtype=float))
        return log_geometric_mixture_at(y, log_law, self.noise_rate(n))

    def _bracket(self, y, log_law, bound, rel, n):
        """(lower, upper) bounds of log f(y): the computed density deflated, resp.
        inflated by the relative guard, plus every untrusted term's bound."""
        f = self.log_density(y, log_law, n)
        lower = f + math.log1p(-_REL_GUARD) - math.log1p(rel)
        upper = f + math.log1p(_REL_GUARD) - math.log1p(-rel)
        if np.isfinite(bound).any():
            upper = np.logaddexp(upper, self.log_density(y, bound, n))
        return lower, upper

    def expected_log_e(self, n, epsilon=None):
        """E_Q[log E] of the release for n rows, in nats (public), with the guards of
        ``log_lr``: Σ_y f_Q(y) log E(y) over the y where f_Q > e^{-60} max f_Q, the
        densities from an O(size) recursion instead of ``log_density``."""
        if self._grid(n)[2] == 0:
            return 0.0
        log_p, log_q, bound_p, _, rel = self.log_laws(n)
        rate = self.noise_rate(n)
        pad = int(60 / rate) + 1
        _, lq = log_geometric_mixture(log_q, rate, pad)
        lp = log_geometric_mixture(log_p, rate, pad)[1]
        lp = lp + math.log1p(_REL_GUARD) - math.log1p(-rel)
        if np.isfinite(bound_p).any():
            lp = np.logaddexp(lp, log_geometric_mixture(bound_p, rate, pad)[1])
        keep = lq >= lq.max() - 60
        log_e = lq[keep] + math.log1p(-_REL_GUARD) - math.log1p(rel) - lp[keep]
        return float(np.sum(np.exp(lq[keep]) * log_e))

    def log_lr(self, y, n, epsilon=None, against="P"):
        """Log e-value of the release y: log f_Q(y) − log f_P(y) against P (default),
        its reciprocal against Q, each with a conservative guard.

        The denominator's density (P's against P, Q's against Q) is inflated by a
        relative 1e-9 (rounding of the direct convolutions) and the certified
        relative error of the FFT path (1e-8), plus the largest value any underflowed
        or untrusted term could have had, so it is never underestimated; the
        numerator is deflated by the same relative amounts.
        """
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if self._grid(n)[2] == 0:
            return np.zeros(y.shape)
        if against not in ("P", "Q"):
            raise ValueError(f"against must be 'P' or 'Q', got {against!r}.")
        log_p, log_q, bound_p, bound_q, rel = self.log_laws(n)
        lp_lo, lp_hi = self._bracket(y, log_p, bound_p, rel, n)
        lq_lo, lq_hi = self._bracket(y, log_q, bound_q, rel, n)
        return lq_lo - lp_hi if against == "P" else lp_lo - lq_hi
