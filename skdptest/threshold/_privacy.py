"""Exact output law of GTM-R, for privacy audits.

For mechanisms with known p_t the law of the output of
:class:`~skdptest.threshold.GeneralizedThresholdMechanism` over
{1, …, T, never} is computed by numerical integration, in log space:

- given R and ν_t, N_t ~ Po(λ_t) and, by Poisson thinning, the count of +1
  outputs is Po(λ_t q_t) (q_t the purified probability), so the acceptance
  probability A_t(ν_t − R) is an exact Poisson tail;
- a_t(R) = E_ν[A_t(ν − R)] and r_t(R) = E_ν[1 − A_t(ν − R)] are integrated
  *separately* (acceptance and rejection, each in log space), as
  (1/b1) e^{−R/b1} ∫_{−R}^∞ e^{−z/b1} A_t(z) dz with one cumulative integral per step;
- Pr[output = t] = ∫ p(R) Π_{s<t} r_s(R) a_t(R) dR and
  Pr[never] = ∫ p(R) Π_{s≤T} r_s(R) dR.

In constant-work mode (``work="constant"``) a step whose N_t exceeds its
public number of evaluations M_t is forced like the rate cap; with the counts
C ~ Po(λ_t q_t) and D ~ Po(λ_t (1 − q_t)) independent, the counted event
{count < k_t, C + D ≤ M_t} is summed exactly over count < k_t.

Every parameter is taken from :func:`~skdptest.threshold.gtm_step_parameters`,
the function the search itself uses, including the rate-cap safeguard.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import special

from .._special import logsumexp
from ._params import gtm_step_parameters

__all__ = ["exact_output_log_probabilities", "log_poisson_sf", "log_poisson_cdf"]

_UNDERFLOW = -650.0


def log_poisson_sf(k, mu):
    """log Pr[Po(mu) ≥ k] for an integer k ≥ 1, accurate far into the tail.

    Parameters
    ----------
    k : int
        Threshold, ≥ 1.
    mu : array-like
        Poisson means, ≥ 0.

    Returns
    -------
    out : ndarray
        Same shape as ``mu``; −inf where mu = 0.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest.threshold import log_poisson_sf
    >>> bool(np.isclose(log_poisson_sf(3, 2.0), np.log(stats.poisson.sf(2, 2.0))))
    True
    >>> round(float(log_poisson_sf(200, 1.0)), 3)  # far below the smallest float
    -864.227
    """
    mu = np.asarray(mu, dtype=float)
    with np.errstate(divide="ignore"):
        out = np.asarray(np.log(special.gammainc(k, mu)))  # 0-d for a scalar mu
    bad = ~(out > _UNDERFLOW) & (mu > 0)
    if np.any(bad):
        m = mu[bad]
        # P(k, μ) = e^{−μ} μ^k / k! Σ_j μ^j / ((k+1)…(k+j)), here μ < k
        term = np.ones_like(m)
        total = np.ones_like(m)
        for j in range(1, 100000):
            term = term * m / (k + j)
            total += term
            if np.all(term < 1e-17 * total):
                break
        out[bad] = -m + k * np.log(m) - special.gammaln(k + 1.0) + np.log(total)
    return out


def log_poisson_cdf(k, mu):
    """log Pr[Po(mu) ≤ k − 1] (= log Pr[Po(mu) < k]) for an integer k ≥ 1.

    Parameters
    ----------
    k : int
        Threshold, ≥ 1.
    mu : array-like
        Poisson means, ≥ 0.

    Returns
    -------
    out : ndarray
        Same shape as ``mu``.

    Examples
    --------
    >>> from skdptest.threshold import log_poisson_cdf
    >>> float(log_poisson_cdf(1, 2.0))  # log Pr[Po(2) = 0]
    -2.0
    """
    mu = np.asarray(mu, dtype=float)
    with np.errstate(divide="ignore"):
        out = np.asarray(np.log(special.gammaincc(k, mu)))
    bad = ~(out > _UNDERFLOW)
    if np.any(bad):
        m = mu[bad]
        # Q(k, μ) = e^{−μ} μ^{k−1}/(k−1)! Σ_i (k−1)…(k−i) / μ^i, here μ > k
        term = np.ones_like(m)
        total = np.ones_like(m)
        for i in range(1, k):
            term = term * (k - i) / m
            total += term
            if np.all(term < 1e-17 * total):
                break
        out[bad] = -m + (k - 1) * np.log(m) - special.gammaln(float(k)) + np.log(total)
    return out


def _log_segments(z, f):
    """log ∫ e^{f} over each [z_i, z_{i+1}], exact when f is linear on the segment."""
    h = np.diff(z)
    a, b = f[:-1], f[1:]
    both = np.isfinite(a) & np.isfinite(b) & (h > 0)
    if both.all():  # the usual case: the same operations without the masked copies
        m = np.maximum(a, b)
        d = np.abs(a - b)
        with np.errstate(divide="ignore", invalid="ignore"):
            shape = np.where(d > 1e-10, np.log(-np.expm1(-d) / np.where(d > 0, d, 1.0)),
                             -d / 2)
        return np.log(h) + m + shape
    out = np.full(h.shape, -np.inf)
    m = np.maximum(a[both], b[both])
    d = np.abs(a[both] - b[both])
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(d > 1e-10, np.log(-np.expm1(-d) / np.where(d > 0, d, 1.0)), -d / 2)
    out[both] = np.log(h[both]) + m + shape
    one = (np.isfinite(a) ^ np.isfinite(b)) & (h > 0)
    out[one] = np.log(h[one] / 2.0) + np.where(np.isfinite(a[one]), a[one], b[one])
    return out


def _reverse_cumulative(seg, tail):
    """H_i = log(Σ_{j ≥ i} e^{seg_j} + e^{tail}) for every node i (last node: tail)."""
    vals = np.concatenate([seg, [tail]])
    return np.logaddexp.accumulate(vals[::-1])[::-1]


def _log_counted(k, m, mu_count, mu_other, chunk=2048):
    """log Pr[K < k, K + L ≤ m] and log Pr[K < k, K + L > m], K ~ Po(mu_count) and
    L ~ Po(mu_other) independent (constant-work mode: K is the count that decides,
    K + L the number N_t of runs, m the public number M_t of evaluations).

    The sum over K < k is exact. Where Pr[L > m − k] underflows (< 1e-308) the
    second term, at most Pr[K < k] Pr[L > m − k], is taken as 0 and the first as
    Pr[K < k]; where Pr[L ≤ m] underflows, the other way round: an absolute error
    below 1e-308 on each probability.
    """
    le = log_poisson_cdf(k, mu_count)
    gt = np.full(mu_count.shape, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        never = special.pdtrc(max(m - k, 0), mu_other) == 0.0  # L > m − k underflows
        always = special.pdtr(m, mu_other) == 0.0  # L ≤ m underflows
        gt[always] = le[always]
        le[always] = -np.inf
        full = np.flatnonzero(~never & ~always)
        c = np.arange(k, dtype=float)
        rest = m - c  # K + L ≤ m  ⟺  L ≤ m − K
        # Pr[L ≤ j] and Pr[L > j] for j = lo..m (the values of rest ≥ 0) from one
        # incomplete gamma each, then by adding the pmf terms in log space (sums of
        # positive terms: no cancellation, and no underflow where one term is tiny)
        lo = max(m - k + 1, 0)
        j = np.arange(lo, m + 1, dtype=float)
        col = np.where(rest >= 0, m - np.minimum(c, m) - lo, 0).astype(int)
        for a in range(0, full.size, chunk):
            idx = full[a:a + chunk]
            mk, ml = mu_count[idx, None], mu_other[idx, None]
            log_pmf = special.xlogy(c, mk) - mk - special.gammaln(c + 1.0)
            log_pmf_l = special.xlogy(j, ml) - ml - special.gammaln(j + 1.0)
            log_cdf = np.concatenate([np.log(special.pdtr(lo, ml)), log_pmf_l[:, 1:]], axis=1)
            log_cdf = np.logaddexp.accumulate(log_cdf, axis=1)
            log_sf = np.concatenate([log_pmf_l[:, 1:], np.log(special.pdtrc(m, ml))], axis=1)
            log_sf = np.logaddexp.accumulate(log_sf[:, ::-1], axis=1)[:, ::-1]
            log_le = np.where(rest >= 0, log_cdf[:, col], -np.inf)
            log_gt = np.where(rest >= 0, log_sf[:, col], 0.0)
            le[idx] = logsumexp(log_pmf + log_le, axis=1)
            gt[idx] = logsumexp(log_pmf + log_gt, axis=1)
    return le, gt


@functools.lru_cache(maxsize=32)
def _cached_step_logs(sp, eps_t, q, h, n_r, work):
    """:func:`_step_logs` on the nodes ``arange(n_r + 1) * h``, memoised.

    A pure function of hashable arguments (``sp`` is a NamedTuple of numbers), so an
    audit comparing neighbours computes each (step, q_t) once: in the neighbours of a
    corner check most steps keep their q_t. The arrays returned are read-only.
    """
    out = _step_logs(sp, eps_t, q, np.arange(n_r + 1) * h, h, work)
    for a in out:
        a.setflags(write=False)
    return out


def _step_logs(sp, eps_t, q, r_nodes, h, work="poisson"):
    """log a_t(R) and log r_t(R) at the R nodes for one step."""
    b1 = sp.b1
    log_ratio_cap = (sp.log_rate_cap - sp.log_rho) / eps_t  # |z| where the cap starts
    neg = -r_nodes[::-1]  # from −R_hi to 0, increasing
    if sp.direction == 1:
        log_base = sp.log_rho + math.log(q)
        z_cap = log_ratio_cap  # forced accept for z ≥ z_cap (> 0)
        n_pos = max(int(math.ceil(z_cap / h)), 1)
        pos = np.linspace(0.0, z_cap, n_pos + 1)[1:]
        z = np.concatenate([neg, pos])
        mu = np.exp(log_base + eps_t * z)
        if work == "constant":
            # reject iff #(+1) < k and N_t ≤ M_t; accept otherwise
            mu_other = np.exp(sp.log_rho + eps_t * z) * (1.0 - q)
            log_rej, log_gt = _log_counted(sp.k, sp.constant_work, mu, mu_other)
            f_acc = np.logaddexp(log_poisson_sf(sp.k, mu), log_gt) - z / b1
            f_rej = log_rej - z / b1
        else:
            f_acc = log_poisson_sf(sp.k, mu) - z / b1
            f_rej = log_poisson_cdf(sp.k, mu) - z / b1
        tail_acc = math.log(b1) - z_cap / b1  # ∫_{z_cap}^∞ e^{−z/b1} dz
        tail_rej = -np.inf
    else:
        log_base = sp.log_rho + math.log1p(-q)
        z_forced = -log_ratio_cap  # forced reject for z ≤ z_forced (< 0)
        # far end: μ ≤ 1e-3 k, where Pr[Po(μ) ≥ k] is negligible
        z_hi = max((log_base - math.log(1e-3 * sp.k)) / eps_t, 0.0) + 10.0 * b1
        n_pos = max(int(math.ceil(z_hi / h)), 1)
        pos = np.linspace(0.0, z_hi, n_pos + 1)[1:]
        z = np.concatenate([neg, pos])
        forced = z <= z_forced
        # duplicate the boundary: left limit forced, right limit not
        if neg[0] < z_forced < 0.0:
            j = int(np.searchsorted(z, z_forced))
            z = np.concatenate([z[:j], [z_forced, z_forced], z[j:]])
            forced = np.concatenate([forced[:j], [True, False], forced[j:]])
        mu = np.exp(log_base - eps_t * z)
        if work == "constant":
            # accept iff #(−1) < k and N_t ≤ M_t; reject otherwise
            mu_other = np.exp(sp.log_rho - eps_t * z) * q
            log_acc, log_gt = _log_counted(sp.k, sp.constant_work, mu, mu_other)
            log_rej = np.logaddexp(log_poisson_sf(sp.k, mu), log_gt)
        else:
            log_acc, log_rej = log_poisson_cdf(sp.k, mu), log_poisson_sf(sp.k, mu)
        f_acc = np.where(forced, -np.inf, log_acc) - z / b1
        f_rej = np.where(forced, 0.0, log_rej) - z / b1
        tail_acc = math.log(b1) - z_hi / b1
        tail_rej = f_rej[-1] + math.log(1.0 / (1.0 / b1 + sp.k * eps_t))
    H_acc = _reverse_cumulative(_log_segments(z, f_acc), tail_acc)
    H_rej = _reverse_cumulative(_log_segments(z, f_rej), tail_rej)
    # indices of the nodes −R_j (the last copy when duplicated does not matter:
    # the zero-length segment adds nothing)
    idx = np.searchsorted(z, -r_nodes, side="right") - 1
    pre = -r_nodes / b1 - math.log(b1)
    return pre + H_acc[idx], pre + H_rej[idx]


def exact_output_log_probabilities(p, epsilons, p_star=0.5, deltas=None, *, epsilon=1.0,
                                   failure_probability=0.1, approximation=1.5, theta=1.0,
                                   work="poisson", resolution=40, r_range=100.0):
    """Exact log-probabilities of GTM-R's outputs on mechanisms with known p_t.

    Parameters
    ----------
    p : sequence of float
        p_t = Pr[M_t(X) = +1] of each mechanism on the data (before
        purification), in [0, 1].
    epsilons : sequence of float
        ε_t of each mechanism.
    p_star : float or sequence of float, default=0.5
        Targets p*_t.
    deltas : sequence of float, default=None
        δ_t of each mechanism (None: all 0). Mechanisms with δ_t > 0 are purified.
    epsilon, failure_probability, approximation, theta : float
        Parameters of the search: ε, β, γ and θ.
    work : {"poisson", "constant"}, default="poisson"
        The search's ``work`` mode (see
        :class:`~skdptest.threshold.GeneralizedThresholdMechanism`).
    resolution : int, default=40
        Grid points per smallest length scale (min(b0, b1, 1/(ε_t √k_t))).
    r_range : float, default=100.0
        The threshold noise R is integrated over [0, r_range · b0]; the mass
        left out is at most e^{−r_range}, and a ``RuntimeWarning`` is issued
        when an output has a log-probability below 20 − r_range.

    Notes
    -----
    The quadrature (exponential trapezoid on a uniform grid) has an error of
    order h², about 2e-6 on the total mass at the default resolution; doubling
    ``resolution`` divides it by 4. Log-ratios between neighbouring data sets
    are much more accurate, the errors being correlated.

    Returns
    -------
    log_prob : ndarray of shape (T + 1,)
        log Pr[output = t] for t = 1..T (entries 0..T−1), then log Pr[never].
        They sum to 1 up to quadrature error.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest.threshold import exact_output_log_probabilities
    >>> lp = exact_output_log_probabilities([0.05, 0.6], [0.05, 0.05])
    >>> round(float(np.exp(lp).sum()), 6)
    1.0
    """
    if work not in ("poisson", "constant"):
        raise ValueError(f"work must be 'poisson' or 'constant', got {work!r}.")
    T = len(p)
    epsilons = [float(e) for e in epsilons]
    deltas = [0.0] * T if deltas is None else [float(d) for d in deltas]
    p_stars = [float(p_star)] * T if np.ndim(p_star) == 0 else [float(v) for v in p_star]
    sps = [
        gtm_step_parameters(t + 1, epsilons[t], deltas[t], p_stars[t], epsilon=epsilon,
                            failure_probability=failure_probability,
                            approximation=approximation, theta=theta)
        for t in range(T)
    ]
    b0, b1 = sps[0].b0, sps[0].b1
    scale = min([b0, b1] + [1.0 / (e * math.sqrt(sp.k)) for e, sp in zip(epsilons, sps,
                                                                          strict=True)])
    h = scale / resolution
    n_r = int(math.ceil(r_range * b0 / h))
    r_nodes = np.arange(n_r + 1) * h
    log_prior = -r_nodes / b0 - math.log(b0)
    running = log_prior.copy()  # log p(R) Π_{s<t} r_s(R)
    out = np.empty(T + 1)
    for t, sp in enumerate(sps):
        q = sp.phi + (1.0 - 2.0 * sp.phi) * float(p[t])
        log_a, log_r = _cached_step_logs(sp, epsilons[t], q, h, n_r, work)
        out[t] = logsumexp(_log_segments(r_nodes, running + log_a))
        running = running + log_r
    out[T] = logsumexp(_log_segments(r_nodes, running))
    if np.min(out) < 20.0 - r_range:
        warnings.warn(
            f"an output has log-probability {np.min(out):.1f}, too close to the "
            f"truncation of R at {r_range:g} b0; increase r_range.",
            RuntimeWarning,
            stacklevel=2,
        )
    return out
