"""The Tulap law and the exact p-values of a binomial count released with Tulap noise.

Tulap(0, b, 0) with b = e^{−ε} (Awan and Slavković 2018) is N = G + U, G discrete
Laplace of rate ε (P(G = k) = (1 − b)/(1 + b) b^{|k|}, the difference of two iid
geometric variables) and U ~ Uniform(−1/2, 1/2) independent. Its density is the
step function f(t) = P(G = [t]), [t] the nearest integer, and its CDF is in closed
form: for t <= 0,

    F(t) = b^{−[t]} / (1 + b) · (b + (t − [t] + 1/2)(1 − b)),

and F(t) = 1 − F(−t) for t > 0 (the law is symmetric). Z = X + N with X a count of
sensitivity 1 is ε-DP: f(t)/f(t ± 1) <= e^ε everywhere.

p-values of H0 on θ for X ~ Binomial(n, θ), from the release z (all n + 1 terms):

- ``"greater"`` (H0: θ <= θ0, UMP among ε-DP tests): P_θ0(Z >= z) =
  Σ_{x=0}^{n} C(n, x) θ0^x (1 − θ0)^{n−x} F(x − z);
- ``"less"`` (H0: θ >= θ0): P_θ0(Z <= z) = Σ_x C(n, x) θ0^x (1 − θ0)^{n−x} F(z − x);
- ``"two-sided"`` (H0: θ = θ0): the unbiased two-sided test of the release, see
  :func:`binomial_log_pvalue`.

Everything is computed in log space (``scipy.stats.binom.logpmf`` and log-sum-exp), so
n of 10⁶ and more and p-values far below 1e-300 in log are handled.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special, stats

from .._memo import remember
from .._special import logsumexp

__all__ = [
    "binomial_log_pvalue",
    "binomial_pvalue",
    "tulap_cdf",
    "tulap_log_cdf",
    "tulap_log_pdf",
    "tulap_log_sf",
]

_LOG_TINY = -745.0  # log of the smallest subnormal float: below it a term is 0 as a float


def _log_b(rate):
    return -float(rate)


def tulap_log_cdf(t, rate):
    """log F(t) of Tulap(0, e^{−rate}, 0), closed form (see the module docstring).

    Parameters
    ----------
    t : float or array-like of float
        Points.
    rate : float
        ε > 0 (the rate of the discrete Laplace part; use the quantised value that was
        sampled).

    Returns
    -------
    float or ndarray
        log F(t), exact to rounding in both tails (log1p for the upper tail).
    """
    t = np.asarray(t, dtype=np.float64)
    rate = float(rate)
    b = math.exp(-rate)
    neg = -np.abs(t)  # F(−|t|) <= 1/2, computed from the formula for t <= 0
    k = np.floor(neg + 0.5)  # nearest integer ([t]); ties: F is continuous
    frac = neg - k  # in [−1/2, 1/2]
    with np.errstate(divide="ignore"):
        log_low = rate * k - math.log1p(b) + np.log(b + (frac + 0.5) * (1.0 - b))
        out = np.where(t <= 0, log_low, np.log1p(-np.exp(log_low)))
    return float(out) if out.ndim == 0 else out


def tulap_log_sf(t, rate):
    """log P(N >= t) = log F(−t) (symmetry)."""
    return tulap_log_cdf(-np.asarray(t, dtype=np.float64), rate)


def tulap_cdf(t, rate):
    """F(t) of Tulap(0, e^{−rate}, 0) (see :func:`tulap_log_cdf`)."""
    out = np.exp(tulap_log_cdf(t, rate))
    return float(out) if np.ndim(out) == 0 else out


def tulap_log_pdf(t, rate):
    """log f(t) = log P(G = [t]) = log((1 − b)/(1 + b)) − rate |[t]|: the density is a step
    function, constant on (k − 1/2, k + 1/2)."""
    t = np.asarray(t, dtype=np.float64)
    rate = float(rate)
    k = np.abs(np.floor(t + 0.5))
    out = math.log(-math.expm1(-rate)) - math.log1p(math.exp(-rate)) - rate * k
    return float(out) if np.ndim(out) == 0 else out


def _kl(q, theta):
    """KL(Bernoulli(q) ‖ Bernoulli(theta)), 0 < theta < 1."""
    return float(special.xlogy(q, q / theta) + special.xlogy(1 - q, (1 - q) / (1 - theta)))


def _first(far, start, end):
    """The last count from ``start`` towards ``end`` before ``far`` holds (``far`` is
    monotone along the way), by bisection; ``end`` if it never holds."""
    if not far(end):
        return end
    near, out = start, end  # far(near) is False, far(out) is True
    while abs(out - near) > 1:
        mid = (near + out) // 2
        if far(mid):
            out = mid
        else:
            near = mid
    return near


class _Binomial:
    """log-pmf of Binomial(n, θ0) on the counts that matter.

    Terms with log pmf below max − 745 − 2 log(n + 1) are left out: together (times
    a factor at most n, as in the score sum) they weigh less than e^{−745}, below the
    smallest positive float, so no p-value or sum computed here can change by them.
    For θ0 in {0, 1} the law is a point mass.
    """

    def __init__(self, n, theta0):
        self.n, self.theta0 = int(n), float(theta0)
        cut = _LOG_TINY - 2.0 * math.log(self.n + 1.0)
        lo, hi = 0, self.n
        if 0.0 < self.theta0 < 1.0:
            # Chernoff: log P(X = x) <= −n KL(x/n ‖ θ0), KL monotone on each side of
            # nθ0: bisect for the counts within -cut + 10 nats (10 to spare), so that
            # logpmf runs on O(√n) counts only.
            def far(x):
                return self.n * _kl(x / self.n, self.theta0) > -cut + 10.0

            centre = min(max(round(self.n * self.theta0), 0), self.n)
            lo, hi = _first(far, centre, 0), _first(far, centre, self.n)
        x = np.arange(lo, hi + 1, dtype=np.float64)
        with np.errstate(divide="ignore"):
            lp = stats.binom.logpmf(x, self.n, self.theta0)
        keep = lp >= lp.max() + cut
        self.x, self.lp = x[keep], lp[keep]
        self.d = self.x - self.n * self.theta0  # centred counts (score direction)
        self.pos, self.neg = self.d > 0, self.d < 0
        with np.errstate(divide="ignore"):
            self.log_abs_d = np.log(np.abs(self.d))

    def log_tail(self, z, rate, upper):
        """log P(X + N >= z) (upper) or log P(X + N <= z)."""
        arg = self.x - z if upper else z - self.x
        return float(logsumexp(self.lp + tulap_log_cdf(arg, rate)))

    def _log_signed(self, terms):
        """(log Σ_{d>0} |d| e^terms, log Σ_{d<0} |d| e^terms)."""
        w = terms + self.log_abs_d
        lpos = logsumexp(w[self.pos]) if self.pos.any() else -np.inf
        lneg = logsumexp(w[self.neg]) if self.neg.any() else -np.inf
        return float(lpos), float(lneg)

    def log_minus_h(self, c, rate):
        """log(−h(c)), h(c) = E[(X − nθ0) 1{X + N <= c}] <= 0 (a covariance of X with a
        decreasing function of X). Left of nθ0 it is summed as written; right of it as
        E[(X − nθ0) 1{X + N > c}] (equal, since E[X − nθ0] = 0), so that the dominant
        part is never a difference of two nearly equal sums."""
        if c <= self.n * self.theta0:
            lpos, lneg = self._log_signed(self.lp + tulap_log_cdf(c - self.x, rate))
            big, small = lneg, lpos
        else:
            lpos, lneg = self._log_signed(self.lp + tulap_log_cdf(self.x - c, rate))
            big, small = lpos, lneg
        if not small < big:
            return -np.inf  # h = 0 to rounding: only at the far tails
        return big + math.log1p(-math.exp(small - big))

    def slope_sign(self, j, rate):
        """Sign of h' on (j − 1/2, j + 1/2): E[(X − nθ0) P(G = j − X)], 0 when the two
        signed parts agree to 1e-10 (the symmetric flat case, e.g. θ0 = 1/2, n even)."""
        terms = self.lp + tulap_log_pdf(j - self.x, rate)
        lpos, lneg = self._log_signed(terms)
        if abs(lpos - lneg) <= 1e-10:
            return 0
        return 1 if lpos > lneg else -1


@functools.lru_cache(maxsize=64)
def _binomial(n, theta0):
    """The (memoised) null law: many p-values share n and θ0."""
    return _Binomial(n, theta0)


@functools.lru_cache(maxsize=64)
def _centre_of(n, theta0, rate):
    return _centre(_binomial(n, theta0), rate)


def _centre(law, rate):
    """The interval [a, b] (half-integers, a <= b) where h is smallest.

    h is linear on each (j − 1/2, j + 1/2) with slope E[(X − nθ0) P(G = j − X)]. The
    kernel P(G = j − x) = (1 − b)/(1 + b) b^{|j − x|} is totally positive of order 2 in
    (j, x) (discrete log-concave), so by variation diminishing the slope changes sign
    once, from − to +: h decreases, is flat on at most one segment, then increases.
    """
    # slope < 0 at the lowest count, > 0 at the highest (covariances of X with b^{±x})
    lo, hi = int(law.x[0]), int(law.x[-1])
    while lo < hi:  # smallest j with slope >= 0
        mid = (lo + hi) // 2
        if law.slope_sign(mid, rate) >= 0:
            hi = mid
        else:
            lo = mid + 1
    if law.slope_sign(lo, rate) == 0:
        return lo - 0.5, lo + 0.5
    return lo - 0.5, lo - 0.5


def _other_side(law, rate, z, target, a, b):
    """The point c' on the other side of the centre [a, b] with h(c') = h(z)
    (``target`` = log(−h(z))). h is monotone there and linear between half-integers:
    bracket by doubling, bisect over half-integers, interpolate exactly."""
    # each log(−h(c)) once per p-value: the final interpolation of _bisect reads the
    # ends of its last bracket, already evaluated on the way there
    log_minus_h = remember(lambda c: law.log_minus_h(c, rate))
    if z > b:  # c' <= a, where −h increases with c
        inner, sign = a, -1.0
    else:  # c' >= b, where −h decreases with c
        inner, sign = b, 1.0
    # start from the mirror image of z (c' is near it for a near-symmetric law)
    mirror = inner + sign * max(math.floor(abs(z - (a if z < a else b))), 0)
    if log_minus_h(mirror) > target:
        inner = mirror
    else:
        return _bisect(log_minus_h, target, inner, mirror, sign)
    step = 1.0
    outer = inner + sign * step
    while log_minus_h(outer) > target:
        inner, step = outer, step * 2.0
        outer = inner + sign * step
        if step > 4.0 * (law.n + 1) + 1e6:  # −h(z) is 0 to rounding: c' is at infinity
            return sign * np.inf
    return _bisect(log_minus_h, target, inner, outer, sign)


def _bisect(log_minus_h, target, inner, outer, sign):
    """c' in [inner, outer] (half-integers, −h(inner) > −h(z) >= −h(outer));
    ``log_minus_h(c)`` = log(−h(c))."""
    while abs(outer - inner) > 1.0:
        mid = inner + sign * math.floor(abs(outer - inner) / 2.0)
        if log_minus_h(mid) > target:
            inner = mid
        else:
            outer = mid
    l_in, l_out = log_minus_h(inner), log_minus_h(outer)
    # h linear on [inner, outer]: fraction of the way where −h falls to −h(z), as ratios
    frac = -math.expm1(target - l_in) / -math.expm1(l_out - l_in) if l_out < l_in else 0.0
    return inner + sign * min(max(frac, 0.0), 1.0)


def _two_sided_log_pvalue(law, z, rate):
    """log p of the unbiased two-sided test of the release (see binomial_log_pvalue)."""
    a, b = _centre_of(law.n, law.theta0, rate)
    if a <= z <= b:
        other = a + b - z  # flat segment: the symmetric (nested) continuation
    else:
        target = law.log_minus_h(z, rate)
        if target == -np.inf:
            other = -np.inf if z > b else np.inf
        else:
            other = _other_side(law, rate, z, target, a, b)
    lo, hi = min(z, other), max(z, other)
    parts = [law.log_tail(hi, rate, upper=True) if np.isfinite(hi) else -np.inf,
             law.log_tail(lo, rate, upper=False) if np.isfinite(lo) else -np.inf]
    return min(float(np.logaddexp(*parts)), 0.0)


def binomial_log_pvalue(z, n, theta0, rate, alternative="two-sided"):
    """log of the exact p-value of H0 on θ from z = X + Tulap(0, e^{−rate}, 0) noise,
    X ~ Binomial(n, θ).

    Parameters
    ----------
    z : float
        The release.
    n : int
        Number of trials (public).
    theta0 : float
        Null proportion θ0 in [0, 1].
    rate : float
        ε of the Tulap noise (the quantised value that was sampled).
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        ``"greater"``: H0: θ <= θ0, p = P_θ0(Z >= z), the ε-DP UMP test (Awan and
        Slavković 2018, Theorem 3.2 and the p-value of Section 4). ``"less"``: H0:
        θ >= θ0, p = P_θ0(Z <= z). ``"two-sided"``: H0: θ = θ0, p = P_θ0(Z >= max(z, c'))
        + P_θ0(Z <= min(z, c')) where c' is the point on the other side of the centre
        with h(c') = h(z), h(c) = E_θ0[(X − nθ0) 1{Z <= c}]: the level-α test that
        rejects when Z <= c1 or Z >= c2 with E_θ0 φ = α and E_θ0[(X − nθ0) φ] = 0 (the
        two conditions of a UMPU test: size α and zero derivative of the power at θ0).
        These regions are nested in α, so P_θ0(p <= α) = α exactly. For θ0 = 0 (or 1)
        every alternative lies on one side and the two-sided p-value is the one-sided
        one.

    Returns
    -------
    float
        log p (<= 0; ``-inf`` when p underflows even in log, which needs |z| beyond
        about 10³⁰⁸).
    """
    law = _binomial(int(n), float(theta0))
    z = float(z)
    if alternative == "two-sided":
        if law.theta0 == 0.0:
            alternative = "greater"
        elif law.theta0 == 1.0:
            alternative = "less"
        else:
            return _two_sided_log_pvalue(law, z, rate)
    if alternative == "greater":
        return min(law.log_tail(z, rate, upper=True), 0.0)
    if alternative == "less":
        return min(law.log_tail(z, rate, upper=False), 0.0)
    raise ValueError(
        f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}."
    )


def binomial_pvalue(z, n, theta0, rate, alternative="two-sided"):
    """The exact p-value ``exp(binomial_log_pvalue(...))`` (see there)."""
    return math.exp(binomial_log_pvalue(z, n, theta0, rate, alternative))
