"""DP-SPRT: Wald's SPRT made ε-DP with the OutsideInterval mechanism (Laplace).

Baseline for comparison with the private e-process; written from the formulas
of Michel, Basu and Kaufmann (AISTATS 2026), on the log-likelihood-ratio scale
so that it applies to any simple P vs Q with a bounded per-row log-likelihood
ratio L = log(q/p).

OutsideInterval mechanism (the paper's Algorithm 2). Δ = sup L − inf L over the
data domain (the null's support) bounds the change of every running sum
S_n = Σ_{t<=n} L(x_t) when one row is replaced. One threshold noise
Z ~ Laplace(2Δ/ε) is drawn per stream and shared by both boundaries; at each
step a fresh Y_n ~ Laplace(4Δ/ε) is added to S_n, and the test stops at the
first n with

    S_n + Y_n >= u_n + Z   (reject P)     or     S_n + Y_n <= l_n − Z   (accept P),

(reject wins a tie). The boundaries, with γ = max(1/2, 1 − 1/ε) (so
1/(1 − γ) = max(2, ε)), s = 1.134 and ζ the Riemann zeta function, are

    u_n = log(1/(γα)) + 6Δ log(max(2, ε) n^s ζ(s) / α) / ε,
    l_n = log(γβ)     − 6Δ log(max(2, ε) n^s ζ(s) / β) / ε.

Errors: {reject | P} ⊂ {sup_n S_n >= log(1/(γα))} ∪ {∃n: Y_n − Z >= c_n} with
c_n = 6Δ log(max(2, ε) n^s ζ(s)/α)/ε. The first has P-probability <= γα
(Ville); P(Y_n >= 4Δ x/ε) = P(−Z >= 2Δ x/ε) = e^{−x}/2 at x = ε c_n/(6Δ), so
the second is at most Σ_n (1 − γ) α / (n^s ζ(s)) = (1 − γ) α. Same for β.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .._noise import laplace
from .._validation import check_alpha, check_epsilon
from ._sprt import _LLRSequentialTest

__all__ = ["DPSPRT", "dpsprt_boundaries"]

ZETA_S = 1.134  # exponent of the union bound over time; any s > 1 is valid
_ZETA = float(special.zeta(ZETA_S))  # 8.049572 (the sum Σ_n n^{-s})


def _gamma(epsilon):
    """Share γ of each error level given to the SPRT part (the rest covers the noise)."""
    return max(0.5, 1.0 - 1.0 / epsilon)


def dpsprt_boundaries(n, alpha, beta, epsilon, sensitivity):
    """Lower and upper boundaries (l_n, u_n) of DP-SPRT, on the LLR scale.

    Parameters
    ----------
    n : int or array-like of int
        Time steps (number of rows read), ``n >= 1``.
    alpha, beta : float
        Target error levels in (0, 1).
    epsilon : float
        Privacy parameter ε > 0.
    sensitivity : float
        Δ, the largest change of the running log-likelihood ratio when one row
        is replaced (Bernoulli: ``|logit μ1 − logit μ0|``).

    Returns
    -------
    lower, upper : ndarray
        ``l_n = log(γβ) − 6Δ log(max(2, ε) n^s ζ(s)/β)/ε`` and
        ``u_n = log(1/(γα)) + 6Δ log(max(2, ε) n^s ζ(s)/α)/ε`` with
        γ = max(1/2, 1 − 1/ε), s = 1.134.

    References
    ----------
    .. [1] Michel, Basu, Kaufmann. "DP-SPRT: Differentially Private Sequential
       Probability Ratio Tests." AISTATS 2026, arXiv:2508.06377.

    Examples
    --------
    >>> from skdptest.baselines import dpsprt_boundaries
    >>> lower, upper = dpsprt_boundaries([1, 100], 0.05, 0.05, 1.0, 2.0)
    >>> bool((lower < 0).all() and (upper > 0).all() and upper[1] > upper[0])
    True
    """
    n = np.asarray(n, dtype=float)
    g = _gamma(epsilon)
    k = 6.0 * sensitivity / epsilon
    base = math.log(max(2.0, epsilon) * _ZETA) + ZETA_S * np.log(n)
    upper = -math.log(g * alpha) + k * (base - math.log(alpha))
    lower = math.log(g * beta) - k * (base - math.log(beta))
    return lower, upper


class DPSPRT(_LLRSequentialTest):
    """DP-SPRT with Laplace noise (OutsideInterval mechanism), ε-DP per stream.

    Wald's SPRT on the running log-likelihood ratio S_n of a simple null P
    against a simple alternative Q, privatised with the OutsideInterval
    (two-sided sparse vector) mechanism: one threshold noise Z ~ Laplace(2Δ/ε)
    per stream, shared by both boundaries, and a fresh Y_n ~ Laplace(4Δ/ε) on
    S_n at every step. Stops at the first n with S_n + Y_n >= u_n + Z (reject
    P) or S_n + Y_n <= l_n − Z (accept P); the boundaries are
    :func:`dpsprt_boundaries`.

    A comparison baseline: not a scikit-learn estimator, no budget. Use
    :meth:`run` (one stream), :meth:`run_many` (many streams) or
    :meth:`simulate` (streams drawn from P or Q).

    Parameters
    ----------
    null : frozen scipy.stats distribution
        The null P of one row (Bernoulli, any finite discrete law, or a
        continuous law with ``llr_clip``).
    alternative : frozen scipy.stats distribution
        The alternative Q of one row.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 for the whole stream.
    alpha : float, default=0.05
        Target P(reject P | P) in (0, 1).
    beta : float, default=0.05
        Target P(accept P | Q) in (0, 1).
    llr_clip : (float, float) or None, default=None
        Clip the per-row log-likelihood ratio to ``[low, high]``. Required when
        the ratio is unbounded on the null's support (e.g. Gaussian laws): the
        sensitivity is then ``Δ = min(high, sup L) − max(low, inf L)``. Privacy
        holds for any clip; the error bounds assume an unclipped ratio and may
        fail when clipping binds.
    random_state : int, RandomState instance, Generator or None, default=None
        Source of the noise. Fix it for reproducible experiments only.

    Attributes
    ----------
    result_ : SequentialTestResult
        Outcome of the last :meth:`fit`.
    sensitivity_ : float
        Δ used by the last run (public: a function of the laws and the clip).
    threshold_noise_scale_, query_noise_scale_ : float
        Laplace scales 2Δ/ε and 4Δ/ε used by the last run.

    Notes
    -----
    Privacy: ε-DP with respect to replacing one row of the stream, for the
    whole stream (however long it runs): the release is the pair (stopping
    time, decision), the output of one OutsideInterval mechanism whose queries
    S_n all move by at most Δ when one row is replaced (Theorem 1(i) of [1]:
    ε_Z + ε_Y = ε/2 + ε/2). The data domain is the null's support (rows
    outside it raise ``ValueError``); rows after the stopping time are not
    read. Each call of :meth:`run` (or each stream of :meth:`run_many` /
    :meth:`simulate`) is a fresh ε-DP release; running twice on the same data
    costs 2ε. The Bernoulli-subsampled variant of [1] is deliberately not
    offered: an exact computation on neighbouring streams found a privacy loss
    of about 3.5 at nominal ε = 1.

    Errors: P(reject | P) <= α and P(accept | Q) <= β for an unclipped ratio
    (see the module docstring). The boundaries are conservative, so stopping
    times are long: this is the price of the union bound over time.

    References
    ----------
    .. [1] Michel, Basu, Kaufmann. "DP-SPRT: Differentially Private Sequential
       Probability Ratio Tests." AISTATS 2026, arXiv:2508.06377.
    .. [2] Dwork, Roth. "The Algorithmic Foundations of Differential Privacy."
       Foundations and Trends in TCS 9(3-4), 2014 (sparse vector technique).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest.baselines import DPSPRT
    >>> x = np.random.default_rng(0).binomial(1, 0.7, size=5000)
    >>> test = DPSPRT(stats.bernoulli(0.3), stats.bernoulli(0.7), epsilon=1.0,
    ...               alpha=0.1, beta=0.1, random_state=0)
    >>> test.run(x).decision
    'reject'
    """

    _method = "DPSPRT"

    def __init__(self, null, alternative, *, epsilon=1.0, alpha=0.05, beta=0.05,
                 llr_clip=None, random_state=None):
        super().__init__(null, alternative, alpha=alpha, beta=beta, llr_clip=llr_clip,
                         random_state=random_state)
        self.epsilon = epsilon

    def _setup(self):
        epsilon = check_epsilon(self.epsilon)
        check_alpha(self.alpha, "alpha")
        check_alpha(self.beta, "beta")
        laws, clip, sensitivity = self._check_params()
        if clip is None and not math.isfinite(sensitivity):
            raise ValueError(
                "The per-row log-likelihood ratio is unbounded on the null's support "
                "(e.g. Gaussian laws), so DP-SPRT has infinite sensitivity: give "
                "llr_clip=(low, high) to bound it."
            )
        self.sensitivity_ = sensitivity
        self.threshold_noise_scale_, self.query_noise_scale_ = noise_scales(
            sensitivity, epsilon
        )
        return laws, clip, sensitivity

    def boundaries(self, n):
        """(l_n, u_n) at time steps ``n`` for these laws and parameters."""
        laws, clip, sensitivity = self._setup()
        return dpsprt_boundaries(n, float(self.alpha), float(self.beta),
                                 float(self.epsilon), sensitivity)

    def _boundaries(self, t, sensitivity):
        # Public functions of t; privacy holds for any such boundaries.
        return dpsprt_boundaries(t, float(self.alpha), float(self.beta),
                                 float(self.epsilon), sensitivity)

    def _start(self, n_runs, sensitivity, rng):
        b_z, b_y = noise_scales(sensitivity, float(self.epsilon))
        z = laplace(rng, b_z, size=n_runs)
        return z, b_y, sensitivity

    def _crossings(self, state, active, S, t):
        z, b_y, sensitivity = state
        lower, upper = self._boundaries(t, sensitivity)
        rng = self._noise_rng
        noisy = S + laplace(rng, b_y, size=S.shape)
        za = z[active, None]
        return noisy >= upper + za, noisy <= lower - za

    def _drive(self, llr_blocks, n_runs, sensitivity, rng):
        self._noise_rng = rng
        try:
            return super()._drive(llr_blocks, n_runs, sensitivity, rng)
        finally:
            del self._noise_rng

    def _privacy(self):
        return float(self.epsilon), 0.0


def noise_scales(sensitivity, epsilon):
    """Laplace scales (threshold b_Z = 2Δ/ε, query b_Y = 4Δ/ε) of OutsideInterval."""
    return 2.0 * sensitivity / epsilon, 4.0 * sensitivity / epsilon
