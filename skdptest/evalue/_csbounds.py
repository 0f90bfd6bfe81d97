"""Exact inversion of noisy batch counts into a time-uniform confidence set for a mean.

Released: Y_k = S_k + Z_k, k = 1..K, with S_k ~ Binomial(n_k, p) (the batch count) and
Z_k two-sided geometric (discrete Laplace) at rate r, P(Z = z) = tanh(r/2) e^{-r abs(z)}.
The likelihood of one release under a candidate mean p is the exact convolution

    f_k(y; p) = sum_s Binom(s; n_k, p) tanh(r/2) e^{-r abs(y - s)},

and L_K(p) = prod_k f_k(Y_k; p). For each candidate p, M_K(p) = N_K(p) / L_K(p) with
N_K(p) = sum_j w_j(p) L_K(q_j) (a mixture of alternatives q_j with weights w(p) fixed
in advance) is a nonnegative martingale under p with M_0 = 1, so by Ville's inequality
P_p(exists K: M_K(p) >= 1/alpha) <= alpha, and {p : M_K(p) < 1/alpha} is a
time-uniform confidence sequence.

Everything here is conservative by construction, never approximate in the unsafe
direction: N is bounded from below (dropping mixture terms and summands only lowers
it), L over a cell of candidates [a, b] is bounded from above (the binomial term
replaced by its maximum over the cell, the dropped summands bounded by a geometric
series: each summand sequence is log-concave in s), and a cell is excluded only when
its upper bound of L is at most alpha times the lower bound of N. The reported
interval is the hull of the cells that are not excluded, so it contains every p with
M_K(p) < 1/alpha, and in particular the maximum-likelihood mean.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["MassCache", "MixturePrior", "confidence_bounds", "leaf_excluded", "log_f_bounds",
           "log_lik_bounds"]

#: The smallest cell examined is the mixture grid's step / REFINE.
REFINE = 16


def _log_pq(p):
    """(log p, log(1 - p)) with log 0 = -inf."""
    with np.errstate(divide="ignore"):
        return np.log(p), np.log1p(-p)


def _log_binom(s, n, p, log_choose):
    """log Binom(s; n, p) with 0 log 0 = 0, broadcasting."""
    lp, lq = _log_pq(p)
    with np.errstate(invalid="ignore"):
        head = np.where(s == 0, 0.0, s * lp)
        tail = np.where(s == n, 0.0, (n - s) * lq)
    return log_choose + head + tail


def _log_binom_logs(s, n_minus_s, log_p, log_q, c, lens, log_choose, s_zero, s_full):
    """log Binom(s; n, p_c) from per-cell logs (0 log 0 = 0); ``lens`` summands per
    segment, ``s_zero``, ``s_full`` the indices where s == 0 and s == n."""
    # np.repeat of the per-segment values: the same values as a gather, cheaper
    with np.errstate(invalid="ignore"):
        head = np.multiply(s, np.repeat(log_p[c], lens))
        tail = np.multiply(n_minus_s, np.repeat(log_q[c], lens))
    head[s_zero] = 0.0
    tail[s_full] = 0.0
    head += log_choose  # (log_choose + head) + tail, as before
    head += tail
    return head


def _mode(y, n, p, rate):
    """A mode (up to one) of s -> Binom(s; n, p) e^{-r abs(y - s)}: the summand is
    Binom(s; n, p+) e^{...} below y and Binom(s; n, p-) above, p± the tilted means."""
    up, down = math.exp(rate), math.exp(-rate)
    p_plus = p * up / (1.0 - p + p * up)
    p_minus = p * down / (1.0 - p + p * down)
    m_plus = np.floor((n + 1) * p_plus)
    m_minus = np.floor((n + 1) * p_minus)
    return np.clip(np.clip(y, m_minus, m_plus), 0, n)


def log_f_bounds(y, n, a, b, rate):
    """Bounds on log f(y; p) over cells p in [a, b] (arrays; a == b for a point).

    Returns ``(low, high)``: ``low <= log f(y; p) <= high`` for every p in [a, b]
    (one release y of a batch of n rows). See :func:`log_lik_bounds`.
    """
    low, high = _bounds(np.array([float(y)]), np.array([int(n)]), a, b, rate)
    return low[0], high[0]


def log_lik_bounds(ys, ns, a, b, rate, high=True):
    """Bounds on log L_K(p) = sum_k log f_k(Y_k; p) over cells p in [a, b].

    ``low`` sums, over a window of s around the summand's mode, the termwise minimum
    min(Binom(s; n, a), Binom(s; n, b)) (the binomial pmf is unimodal in p): dropping
    terms only lowers it. ``high`` sums the termwise maximum Binom(s; n, clip(s/n, a,
    b)) over a window that also holds n [a, b], and bounds every summand outside it
    by a geometric series (beyond the window the termwise maximum is the binomial at
    the cell's nearer end times the noise pmf, a log-concave sequence in s: the ratio
    of consecutive summands is at most its value at the window's edge).
    """
    low, up = _bounds(np.asarray(ys, dtype=float), np.asarray(ns, dtype=np.int64),
                      a, b, rate, high)
    return low.sum(axis=0), (up.sum(axis=0) if high else None)


#: Most summands evaluated at once (memory bound: about 10 arrays of this length).
CHUNK = 1 << 21


def _bounds(ys, ns, a, b, rate, need_high=True):
    """Per-batch bounds, arrays of shape (K, C) for K releases and C cells
    (``need_high=False``: the lower bounds only; the upper ones are then None)."""
    a = np.atleast_1d(np.asarray(a, dtype=float))
    b = np.atleast_1d(np.asarray(b, dtype=float))
    points = bool(np.all(a == b))
    log_norm = math.log(-math.expm1(-rate)) - math.log1p(math.exp(-rate))  # log tanh(r/2)
    y = ys[:, None]
    n = ns[:, None].astype(float)
    # Width around the modes: the summands decay at least like the binomial (sd at most
    # sqrt(n)/2) or like e^{-r} past the kink; whatever lies outside is bounded exactly.
    width = np.ceil(np.minimum(4.0 * np.sqrt(n) + 8.0, 40.0 / rate + 8.0))
    mode_a = _mode(y, n, a[None, :], rate)
    if points or not need_high:  # no upper bound: the window need not reach n [a, b]
        lo = np.clip(mode_a - width, 0, n)
        hi = np.clip((mode_a if points else _mode(y, n, b[None, :], rate)) + width, 0, n)
    else:
        mode_b = _mode(y, n, b[None, :], rate)
        lo = np.clip(np.minimum(mode_a, np.floor(n * a[None, :])) - width, 0, n)
        hi = np.clip(np.maximum(mode_b, np.ceil(n * b[None, :])) + width, 0, n)
    shape = lo.shape
    low = np.empty(shape)
    high = np.empty(shape)
    lengths = (hi - lo + 1).astype(np.int64).ravel()
    ends = np.cumsum(lengths)
    seg = 0
    while seg < lengths.size:  # chunks of whole segments
        stop = int(np.searchsorted(ends, (ends[seg - 1] if seg else 0) + CHUNK, "right"))
        stop = max(stop, seg + 1)
        _segments(slice(seg, stop), lengths, lo, hi, ys, ns, a, b, rate, log_norm,
                  points or not need_high, low, high)
        seg = stop
    if not need_high:
        return low, None
    # geometric bounds on the summands beyond each window edge (upper bound only)
    tails = [high]
    for edge, step, p_end in ((lo, -1.0, a[None, :]), (hi, 1.0, b[None, :])):
        outside = (edge > 0) if step < 0 else (edge < n)
        e1 = np.clip(edge + step, 0, n)
        t0 = _log_term(edge, n, p_end, y, rate, log_norm)
        t1 = _log_term(e1, n, p_end, y, rate, log_norm)
        with np.errstate(invalid="ignore", divide="ignore"):
            log_ratio = t1 - t0
            bound = np.where(log_ratio < 0, t0 + log_ratio - np.log(-np.expm1(log_ratio)),
                             np.inf)
        bound = np.where(np.isnan(bound), np.inf, bound)
        tails.append(np.where(outside & (t0 > -np.inf), bound, -np.inf))
    high = np.logaddexp.reduce(np.stack(tails), axis=0)
    return low, high


def _log_term(s, n, p, y, rate, log_norm):
    """log Binom(s; n, p) + log of the noise pmf at y - s."""
    log_choose = special.gammaln(n + 1.0) - special.gammaln(s + 1.0) \
        - special.gammaln(n - s + 1.0)
    return _log_binom(s, n, p, log_choose) + log_norm - rate * np.abs(y - s)


def _segments(part, lengths, lo, hi, ys, ns, a, b, rate, log_norm, lower_only, low, high):
    """Window sums of the segments ``part`` (flat indices into the (K, C) grid)."""
    idx = np.arange(lengths.size)[part]
    lens = lengths[part]
    k, c = np.unravel_index(idx, lo.shape)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    # per-summand values of the segments by np.repeat (the values a gather through
    # the segment index of each summand gives, with less memory traffic)
    s = np.arange(int(lens.sum()), dtype=float)
    s -= np.repeat(starts, lens)
    s += np.repeat(lo.ravel()[idx], lens)  # lo + (i - start): exact small integers
    n_seg = ns[k]
    n = np.repeat(n_seg.astype(float), lens)
    s_zero, s_full = np.flatnonzero(s == 0), np.flatnonzero(s == n)  # few: the ends
    n_minus_s = n - s
    log_choose = _log_choose(s, n, n_seg, lens)
    log_g = np.subtract(np.repeat(ys[k], lens), s)
    np.abs(log_g, out=log_g)
    log_g *= rate
    np.subtract(log_norm, log_g, out=log_g)
    la = _log_binom_logs(s, n_minus_s, *_log_pq(a), c, lens, log_choose, s_zero, s_full)
    if lower_only:
        lmin = lmax = la if points_only(a, b) else np.minimum(
            la, _log_binom_logs(s, n_minus_s, *_log_pq(b), c, lens, log_choose, s_zero, s_full),
            out=la)
    else:
        lb = _log_binom_logs(s, n_minus_s, *_log_pq(b), c, lens, log_choose, s_zero, s_full)
        lmin = np.minimum(la, lb)
        lmax = np.maximum(la, lb, out=lb)
        mid = np.flatnonzero((s > n * np.repeat(a[c], lens))
                             & (s < n * np.repeat(b[c], lens)))  # s/n inside
        if mid.size:
            sm, nm = s[mid], n[mid]
            lmax[mid] = _log_binom(sm, nm, sm / nm, log_choose[mid])
    lmin += log_g
    out_low = _segment_lse(lmin, starts, lens)
    if not lower_only:
        lmax += log_g
    out_high = out_low if lower_only else _segment_lse(lmax, starts, lens)
    low.ravel()[idx] = out_low  # low, high are C-contiguous: ravel() is a view
    high.ravel()[idx] = out_high


#: log k! for k < len: a table shared by every stream (grown on demand, capped).
_LOG_FACTORIAL = special.gammaln(np.arange(1.0, 4097.0))
_TABLE_MAX = 1 << 22


def _log_choose(s, n, n_seg, lens):
    """log C(n, s) elementwise (s, n floats holding integers; n_seg per segment, of
    ``lens`` summands each)."""
    global _LOG_FACTORIAL
    top = int(n_seg.max()) if n_seg.size else 0
    if top >= _TABLE_MAX:
        return special.gammaln(n + 1.0) - special.gammaln(s + 1.0) \
            - special.gammaln(n - s + 1.0)
    if top >= _LOG_FACTORIAL.size:
        size = min(_TABLE_MAX, max(top + 1, 2 * _LOG_FACTORIAL.size))
        _LOG_FACTORIAL = special.gammaln(np.arange(1.0, size + 1.0))
    table = _LOG_FACTORIAL
    si = s.astype(np.int64)
    out = np.repeat(table[n_seg], lens)
    out -= table[si]
    out -= table[np.subtract(np.repeat(n_seg, lens), si, out=si)]
    return out


def points_only(a, b):
    return bool(np.all(a == b))


def _segment_lse(x, starts, lens):
    """log-sum-exp of each segment of x (segments start at ``starts``, of ``lens``
    values each); x is overwritten."""
    m = np.maximum.reduceat(x, starts)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        x -= np.repeat(safe, lens)
        np.exp(x, out=x)
        return np.log(np.add.reduceat(x, starts)) + safe


class MixturePrior:
    """The public mixing weights w_j(p) over the grid q_j = j / G, j = 0..G.

    ``scale=None``: uniform weights 1/(G+1), the same for every candidate p.
    ``scale=tau`` (or a sequence of scales tau_k): w_j(p) = eta/(G+1) +
    (1 - eta) sum_k c_k phi_kj(p) / Z_k(p) with phi_kj(p) = exp(-(q_j - p)^2 / (2 tau_k^2)),
    Z_k(p) = sum_m phi_km(p) and equal shares c_k: alternatives near p, at the distances
    tau_k that planned horizons call for, plus a uniform share eta (so that far
    candidates are still excluded by the uniform part). For each p the weights sum to
    1 and do not depend on the data: M(p) stays a test martingale.
    """

    def __init__(self, grid_size, scale=None, uniform_share=0.05):
        self.G = int(grid_size)
        self.q = np.arange(self.G + 1) / self.G
        self.scale = scale
        self.scales = () if scale is None else tuple(float(t) for t in np.atleast_1d(scale))
        self.eta = 1.0 if scale is None else float(uniform_share)

    def log_mass_lower(self, ell_low, blocks, a, b):
        """log of a lower bound, over each cell p in [a, b], of
        N(p) = sum_j w_j(p) exp(ell(q_j)), from lower bounds ``ell_low`` of ell over
        blocks of consecutive alternatives ``blocks = (qa, qb, count)`` (the other
        alternatives are dropped: a lower bound)."""
        qa, qb, count = blocks
        log_count = np.log(count)
        log_uniform = math.log(self.eta) + _lse1(ell_low + log_count) - math.log(self.G + 1)
        a = np.atleast_1d(a)
        if not self.scales:
            return np.full(a.shape, log_uniform)
        b = np.atleast_1d(b)
        # every alternative of the blocks; block k holds q[offs[k]:offs[k + 1]]
        i0, i1 = round(float(qa[0]) * self.G), round(float(qb[-1]) * self.G)
        q = self.q[i0:i1 + 1]
        offs = np.r_[0, np.cumsum(count)].astype(np.int64)
        # phi_j(p) over p in [a, b] is least at a or b (unimodal in p)
        held = []

        def far2():
            if not held:
                held.append(np.maximum(np.abs(q[None, :] - a[:, None]),
                                       np.abs(q[None, :] - b[:, None])) ** 2)
            return held[0]

        local = np.stack([self._log_local(ell_low, qa, qb, offs, far2, a, b, tau)
                          for tau in self.scales])
        local = _lse_rows(local.T) - math.log(len(self.scales))
        return np.logaddexp(log_uniform, math.log1p(-self.eta) + local)

    def _log_local(self, ell_low, qa, qb, offs, far2, a, b, tau):
        """log of a lower bound of sum_j phi_j(p) exp(ell(q_j)) / Z(p) over each cell:
        only the blocks within 40 tau of the cells (beyond, phi < e^-800: dropped)."""
        k0 = int(np.searchsorted(qb, a.min() - 40.0 * tau))
        k1 = int(np.searchsorted(qa, b.max() + 40.0 * tau, side="right"))
        if k0 >= k1:
            return np.full(a.shape, -np.inf)
        if float(np.max(qb - qa)) * 400.0 <= tau:
            # blocks narrow against tau: each block's phi bounded at its far end
            # (loses at most d w / tau^2 <= 0.1 nats at a distance d <= 40 tau)
            far = np.maximum(np.abs(qb[None, k0:k1] - a[:, None]),
                             np.abs(b[:, None] - qa[None, k0:k1]))
            sums = np.log(np.diff(offs[k0:k1 + 1]))[None, :] - far**2 * (0.5 / tau**2)
        else:
            part = far2()[:, offs[k0]:offs[k1]] * (-0.5 / tau**2)
            sums = _segment_lse_rows(part, offs[k0:k1] - offs[k0])
        return _lse_rows(ell_low[None, k0:k1] + sums) - self._log_z_upper(a, b, tau)

    def _log_z_upper(self, a, b, tau):
        """log of an upper bound, over each cell [a, b], of Z(p) = sum_m phi_m(p).

        g(q) = exp(-dist(q, [a, b])^2 / (2 tau^2)) bounds phi_m(p) for every p in the
        cell and is unimodal (a plateau on [a, b]), so its sum over the grid of step
        1/G is at most G times its integral over [0, 1] plus its maximum 1 (each point
        but one is below the mean of g over the step towards the plateau)."""
        c = tau * math.sqrt(2.0)
        integral = (b - a) + tau * math.sqrt(math.pi / 2.0) * (special.erf(a / c)
                                                               + special.erf((1.0 - b) / c))
        return np.log1p(self.G * integral)


def _segment_lse_rows(x, starts):
    """log sum exp of each row of ``x`` over the column segments beginning at
    ``starts`` (a term that underflows is dropped: the sums only get smaller); x is
    overwritten."""
    top = x.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        x -= top
        np.exp(x, out=x)
        return np.log(np.add.reduceat(x, starts, axis=1)) + top


def _lse_rows(x):
    """log sum exp of each row of ``x`` (rows of -inf give -inf)."""
    top = x.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x - safe[:, None]).sum(axis=1)) + safe


def _lse1(x):
    m = float(np.max(x))
    return m + math.log(float(np.sum(np.exp(x - m)))) if math.isfinite(m) else m


def _excluded(ys, ns, a, b, rate, log_alpha, prior, ell_low, blocks):
    """Whether every p in each cell [a, b] has M_K(p) >= 1/alpha (bounds above)."""
    high = log_lik_bounds(ys, ns, a, b, rate)[1]
    return high <= prior.log_mass_lower(ell_low, blocks, a, b) + log_alpha


#: Blocks of alternatives span at most the public standard error / BLOCK: the lower
#: bound of the likelihood over a block then loses little (about 0.1 nats).
BLOCK = 16.0
#: Tuned mixtures weigh the alternatives between a candidate and the data, where the
#: likelihood is steep (about 4 / se per unit of p at the interval's ends): their
#: blocks are BLOCK_TUNED times narrower than the standard error.
BLOCK_TUNED = 64.0


class MassCache:
    """Running lower bounds of log L over blocks of alternatives, kept between the
    releases of one stream (each block's sum over the batches already added)."""

    def __init__(self):
        self.levels = {}

    def get(self, width, G):
        if width not in self.levels:
            nb = G // width + 1
            self.levels[width] = (np.zeros(nb, dtype=np.int64), np.zeros(nb))
        return self.levels[width]


def _mass_points(ys, ns, rate, prior, cache):
    """Blocks of consecutive alternatives where the likelihood has its mass, and lower
    bounds of log L_K over each (the other alternatives are dropped: a lower bound of
    N). Blocks hold ``width`` grid points, a power of two at most the
    public standard error / BLOCK (a function of the batch sizes and ε), so that the lower
    bound over a block loses little; the range is data-driven (post-processing of the
    releases)."""
    G = prior.G
    total = float(ns.sum())
    K = ys.size
    centre = min(max(ys.sum() / total, 0.0), 1.0)
    se = math.sqrt(0.25 / total + 2.0 * K / (rate * total) ** 2)
    block = BLOCK_TUNED if prior.scales else BLOCK
    width = 1 << max(0, int(math.floor(math.log2(max(1.0, se * G / block)))))
    half = 8.0 * se + 2.0 * width / G
    b0 = max(0, int(math.floor((centre - half) * G)) // width)
    b1 = min(G // width, int(math.ceil((centre + half) * G)) // width)
    blk = np.arange(b0, b1 + 1)
    first = blk * width
    last = np.minimum(first + width - 1, G)
    qa, qb = prior.q[first], prior.q[last]
    blocks = (qa, qb, (last - first + 1).astype(float))
    if cache is None:
        return blocks, log_lik_bounds(ys, ns, qa, qb, rate, high=False)[0]
    done_all, value_all = cache.get(width, G)
    done, value = done_all[blk], value_all[blk].copy()
    for start in np.unique(done):
        if start >= K:
            continue
        sel = done == start
        value[sel] += log_lik_bounds(ys[start:], ns[start:], qa[sel], qb[sel], rate,
                                     high=False)[0]
    done_all[blk] = K
    value_all[blk] = value
    return blocks, value


def confidence_bounds(ys, ns, rate, alpha, prior, cache=None):
    """The confidence set {p : M_K(p) < 1/alpha} of released counts, as an interval.

    Parameters
    ----------
    ys : sequence of int
        Released noisy counts Y_k.
    ns : sequence of int
        Their batch sizes n_k (public).
    rate : float
        Rate r of the two-sided geometric noise (the sampler's quantised rate).
    alpha : float
        1 - confidence level.
    prior : MixturePrior
        The mixture of alternatives.
    cache : MassCache or None
        Running sums kept between calls on the same stream (releases appended, never
        changed).

    Returns
    -------
    lower, upper : float
        An interval that contains every p with M_K(p) < 1/alpha (never empty: it
        contains the maximum-likelihood mean), its ends on multiples of
        ``1 / (G * REFINE)``.
    """
    ys = np.asarray(ys, dtype=float)
    ns = np.asarray(ns, dtype=np.int64)
    if ys.size == 0:
        return 0.0, 1.0
    log_alpha = math.log(alpha)
    blocks, ell_low = _mass_points(ys, ns, rate, prior, cache)

    def excluded(a, b):
        return _excluded(ys, ns, a, b, rate, log_alpha, prior, ell_low, blocks)

    leaf = 1.0 / (prior.G * REFINE)
    return _extreme(excluded, leaf, side=0), _extreme(excluded, leaf, side=1)


def leaf_excluded(ys, ns, rate, alpha, prior, p, cache=None):
    """Whether the checks of :func:`confidence_bounds` exclude the leaf cell holding
    ``p`` (both leaves when p is on their common edge). A mean outside the interval
    that :func:`confidence_bounds` reports has its leaf excluded, so counting these
    exclusions over-counts the misses of the reported interval (coverage checks)."""
    ys = np.asarray(ys, dtype=float)
    ns = np.asarray(ns, dtype=np.int64)
    blocks, ell_low = _mass_points(ys, ns, rate, prior, cache)
    leaf = 1.0 / (prior.G * REFINE)
    k = math.floor(p / leaf)
    a = np.array([(k - 1) * leaf, k * leaf]) if p == k * leaf else np.array([k * leaf])
    a = a[(a >= 0.0) & (a < 1.0)]
    out = _excluded(ys, ns, a, np.minimum(a + leaf, 1.0), rate, math.log(alpha), prior,
                    ell_low, blocks)
    return bool(np.all(out))


#: Children per cell in the search of an endpoint.
BRANCH = 16


def _extreme(excluded, leaf, side):
    """Leftmost (side 0) or rightmost (side 1) point of the leaves of width ``leaf``
    that no check excludes, by depth-first search from [0, 1] (a cell excluded
    excludes all of its sub-cells: its bounds hold for every p in it)."""
    stack = [(0.0, 1.0)]
    while stack:
        a, b = stack.pop()
        if b - a <= leaf * (1 + 1e-9):
            return a if side == 0 else b
        edges = np.linspace(a, b, BRANCH + 1)
        if b - a < BRANCH * leaf:
            edges = np.linspace(a, b, int(round((b - a) / leaf)) + 1)
        out = excluded(edges[:-1], edges[1:])
        kids = [(edges[i], edges[i + 1]) for i in np.flatnonzero(~out)]
        # push so that the next pop is the extreme child on this side
        stack.extend(kids[::-1] if side == 0 else kids)
    return 0.0 if side == 0 else 1.0  # not reached: the maximum-likelihood cell stays
