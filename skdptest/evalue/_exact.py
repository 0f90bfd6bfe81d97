"""Exact likelihood-ratio post-processing of a noisy count (two-point laws).

For laws on two points {x0, x1} the batch statistic Λ_n of any bet is an affine
function of the count K = #{t : x_t = x1}, and its replace-one sensitivity is one
count. Releasing Y = K + Z with Z two-sided geometric (discrete Laplace),
P(Z = z) = tanh(r/2) e^{−r|z|} on the integers, drawn by an exact integer sampler at
the quantised rate r = quantise_rate(ε) <= ε (the largest multiple of 2^-20 not above
ε), is therefore ε-DP with no floating-point leak (the output is an integer), and the
likelihood ratio of the release itself,

    E(y) = f_Q(y) / f_P(y),   f(y) = Σ_k Binom(k; n, π) tanh(r/2) e^{−r|y − k|},

is an e-value (E_P[E] = Σ_y f_Q(y) = 1, every density at the same rate r as the
sampler) and, by Gibbs' inequality, the most powerful post-processing of that release.
With two-sided geometric noise it is more: for
two-point laws this release with its exact likelihood ratio is the most powerful
ε-DP e-value, certified by a linear-programming dual in every case checked
(``_bound.py``; doc/evalues.md, 'Finite-n optimality'). Its
reciprocal is an e-value against Q, so one release serves both directions of a
two-sided test at the full ε.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

from .._noise import (
    log_geometric_mixture,
    log_geometric_mixture_at,
    quantise_rate,
    two_sided_geometric,
)
from .._recorder import observe
from ._laws import _DiscreteLaws

__all__ = ["BinaryExact", "binary_exact", "exact_model"]


def exact_model(laws, epsilon):
    """The exact post-processing model of a pair of laws, or ``None``.

    Two-point laws: the noisy count (:class:`BinaryExact`). Other laws with an
    exact model: the quantised optimal statistic (:class:`LatticeExact`).
    """
    binary = binary_exact(laws)
    if binary is not None:
        return binary
    if laws.exact:
        from ._lattice import LatticeExact

        return LatticeExact(laws, epsilon)
    return None


def binary_exact(laws):
    """A :class:`BinaryExact` model for two-point laws, else ``None``."""
    if not isinstance(laws, _DiscreteLaws):
        return None
    support = laws.wP > 0
    if support.sum() != 2 or not np.all(laws.wQ[~support] == 0):
        return None
    xs, wq = laws.xs[support], laws.wQ[support]
    if np.any(wq == 0):
        return None
    return BinaryExact(float(xs[1]), float(laws.wP[support][1]), float(wq[1]))


@functools.lru_cache(maxsize=64)
def _binom_log_pmf(n, prob_hex):
    """log Binom(k; n, p), k = 0..n (read-only), kept per public batch size and law:
    an e-process evaluates it twice per batch (scipy's overhead per call dominates)."""
    out = stats.binom.logpmf(np.arange(n + 1), n, float.fromhex(prob_hex))
    out.flags.writeable = False
    return out


class BinaryExact:
    """Two-point laws with P(x1) = p1 and Q(x1) = q1, both in (0, 1).

    The batch count is released with two-sided geometric noise: for two-point
    laws this release with its exact likelihood ratio is the most powerful ε-DP
    e-value, certified in every case checked (doc/evalues.md, 'Finite-n optimality').
    """

    name = "exact"

    def __init__(self, x1, p1, q1):
        self.x1, self.p1, self.q1 = x1, p1, q1

    @staticmethod
    def noise_rate(epsilon):
        """The rate r = quantise_rate(ε) <= ε of the noise: the sampler draws at r and
        every density, likelihood ratio and planned e-power uses the same r."""
        return float(quantise_rate(epsilon))

    def count(self, X):
        """The sufficient statistic K of a batch (number of rows equal to x1)."""
        return int(np.count_nonzero(X[:, 0] == self.x1))

    def release(self, count, epsilon, rng):
        """Y = K + Z, Z two-sided geometric at rate r <= ε (exact integer sampler):
        ε-DP under replacing one row (pmf ratio at most e^r).

        Returns a float with an integer value.
        """
        observe("noisy count", count)  # for the grey-box audit (a no-op otherwise)
        return float(count + int(two_sided_geometric(rng, self.noise_rate(epsilon))))

    def log_density(self, y, n, prob, epsilon):
        """log P(Y = y) for Y = Binom(n, prob) + Z, Z two-sided geometric at the
        noise rate r = quantise_rate(ε) of :meth:`release`.

        Vectorised over integer-valued ``y`` (the only possible releases; other
        values raise ``ValueError``). Every term of the mixture is kept (dropping
        terms would underestimate the null probability and break validity); y is
        processed in blocks to bound memory.
        """
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if not np.all(np.isfinite(y) & (y == np.round(y))):
            raise ValueError(
                "y must be integer-valued: the release is a count plus integer noise."
            )
        if isinstance(n, int | np.integer) and isinstance(prob, float):
            log_pmf = _binom_log_pmf(int(n), prob.hex())
        else:
            log_pmf = stats.binom.logpmf(np.arange(n + 1), n, prob)
        return log_geometric_mixture_at(y, log_pmf, self.noise_rate(epsilon),
                                        block_terms=2_000_000)

    def noise_scale(self, n, epsilon):
        """Scale 1/r of the two-sided geometric noise (the reciprocal of its quantised
        rate), in counts."""
        return 1.0 / self.noise_rate(epsilon)

    def batch_log_e(self, X, epsilon, rng):
        """Release one batch and return its log e-value against P."""
        return self.batch_log_e_both(X, epsilon, rng)[0]

    def batch_log_e_both(self, X, epsilon, rng):
        """Release one batch; its log e-values against P and against Q (the
        reciprocal: both densities are exact mixtures, no guard to orient)."""
        y = self.release(self.count(X), epsilon, rng)
        ell = float(self.log_lr(y, X.shape[0], epsilon)[0])
        return ell, -ell

    def expected_log_e(self, n, epsilon):
        """E_Q[log E] of the release for n rows: KL(f_Q‖f_P), in nats (public).

        Summed over the integers where f_Q > e^{-60} max f_Q (the rest carries a
        negligible mass), with the laws from an O(n) recursion.
        """
        k = np.arange(n + 1)
        rate = self.noise_rate(epsilon)
        pad = int(60 / rate) + 1
        _, lq = log_geometric_mixture(stats.binom.logpmf(k, n, self.q1), rate, pad)
        _, lp = log_geometric_mixture(stats.binom.logpmf(k, n, self.p1), rate, pad)
        keep = lq >= lq.max() - 60
        return float(np.sum(np.exp(lq[keep]) * (lq[keep] - lp[keep])))

    def log_lr(self, y, n, epsilon):
        """log f_Q(y) − log f_P(y): the log e-value against P of the release y."""
        return self.log_density(y, n, self.q1, epsilon) - self.log_density(
            y, n, self.p1, epsilon
        )
